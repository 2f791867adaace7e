"""Field types that the protocol's pydantic models share.

They live here, beside the models, rather than in ``anet_core.identity``: identity (keys, AIDs,
histories) loads no pydantic, so a command that only reads the node's identity (``anet status``
of a stopped node) does not pay for it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from anet_core.identity.aid import AID_REGEX

Aid = Annotated[str, StringConstraints(pattern=rf"^{AID_REGEX}$")]
"""An AID as a pydantic field type (frames and signed documents)."""
