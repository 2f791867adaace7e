"""The event loop a daemon runs on: uvloop when it is installed (the ``fast`` extra), else
asyncio's own. ``ANET_LOOP`` chooses for a node (docs/configuration.md), ``--loop`` for a hub.

uvloop runs the loop's own work (reading sockets, scheduling callbacks) in compiled code. For
the hub that is most of what it does per envelope; for a node it is a smaller share, about a
twentieth of its instructions per task (docs/performance.md, "The twelfth pass"). It costs
about 2.5 MiB of a node's idle memory (ANET_LOOP=asyncio gives it back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from anet_core.errors import AnetError
from anet_core.settings import EVENT_LOOPS

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str, *, refusal: AnetError) -> LoopFactory | None:
    """A factory of the loop ``choice`` names, for :class:`asyncio.Runner`; None for asyncio's
    own. ``refusal`` is raised when uvloop is asked for and not installed: it names the setting
    and the extra of the command that asked."""
    if choice not in EVENT_LOOPS:
        raise ValueError(f"{choice!r} is not an event loop; choose one of "
                         f"{', '.join(EVENT_LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise refusal from None
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def event_loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``, as the start-up lines say."""
    return type(loop).__module__.partition(".")[0]


def run_event_loop(main: Callable[[], Coroutine[Any, Any, T]], choice: str, *,
                   refusal: AnetError) -> T:
    """Run ``main()`` to its end on the loop ``choice`` names (the coroutine is made only once
    the loop is known, so a refused choice leaves none unawaited)."""
    with asyncio.Runner(loop_factory=loop_factory(choice, refusal=refusal)) as runner:
        return runner.run(main())


def run_node_event_loop(main: Callable[[], Coroutine[Any, Any, T]], choice: str) -> T:
    """:func:`run_event_loop` on the loop ``ANET_LOOP`` (``choice``) names for a node: the
    daemon's, and the nodes ``make bench`` runs in its own process."""
    return run_event_loop(main, choice, refusal=AnetError(
        "daemon-no-uvloop", "ANET_LOOP=uvloop: uvloop is not installed",
        hint="pip install 'anet[fast]', or set ANET_LOOP=asyncio (or auto)"))
