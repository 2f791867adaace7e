"""Backend kinds: which installed module opens backends of which URL scheme
(``anet_backend_kinds``). Apart from the service, so that ``anet doctor`` names them without
loading the forwarder."""

from __future__ import annotations

from anet_backends.config import Backend
from anet_core.api import AnetError, BackendKind, Plugins


def installed_kinds(plugins: Plugins) -> dict[str, BackendKind]:
    """The backend kinds the installed modules declare (``anet_backend_kinds``), by scheme; a
    scheme two modules claim is an error that names both."""
    kinds = plugins.collect("anet_backend_kinds", unique=lambda kind: [
        f"the backend scheme {scheme!r}" for scheme in kind.schemes])
    return {scheme: kind for kind in kinds for scheme in kind.schemes}


def kind_for(index: int, backend: Backend, kinds: dict[str, BackendKind]) -> BackendKind:
    scheme = backend.target().scheme
    if scheme not in kinds:
        raise AnetError("backends-kind-unknown",
                        f"modules.backends.backends[{index}].url {backend.url!r} (match "
                        f"{backend.match!r}): no installed backend kind takes {scheme}:",
                        hint="kinds installed: " + (", ".join(
                            f"{kind.name} ({', '.join(kind.schemes)})"
                            for kind in {k.name: k for k in kinds.values()}.values()) or "none"))
    return kinds[scheme]
