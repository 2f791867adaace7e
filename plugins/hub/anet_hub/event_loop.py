"""The event loop ``anet hub serve`` runs on: uvloop when it is installed (the ``fast`` extra,
``pip install 'anet-hub[fast]'``), else asyncio's own; ``--loop`` chooses.

The hub is where uvloop pays: it relays frames and does little else per envelope, so the loop's
own work (reading sockets, scheduling callbacks) is a large share of its CPU. On the project's
2-core machine it relays about a quarter more envelopes per second on uvloop, for about 2 MiB
more idle memory (docs/performance.md, "The eighth pass: the hub on uvloop"). The nodes stay on
asyncio's loop: there it saved a few per cent of CPU and nothing of a task's latency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from anet_core.api import AnetError

LOOPS = ("auto", "uvloop", "asyncio")
"""``auto``: uvloop when it can be imported, else asyncio."""

T = TypeVar("T")


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory of the loop ``choice`` names, for :class:`asyncio.Runner`; None for asyncio's
    own."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise AnetError("hub-no-uvloop", "--loop uvloop: uvloop is not installed",
                            hint="pip install 'anet-hub[fast]', or run with --loop asyncio "
                                 "(or auto)") from None
        return None
    return uvloop.new_event_loop


def run(main: Callable[[], Coroutine[Any, Any, T]], choice: str) -> T:
    """Run ``main()`` to its end on the loop ``choice`` names (the coroutine is made only once
    the loop is known, so a refused choice leaves none unawaited)."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main())
