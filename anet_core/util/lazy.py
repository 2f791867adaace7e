"""A function named by ``"package.module:name"`` and imported when it is first called.

A hook returns records naming the code that runs them; naming that code this way keeps it
unloaded until it runs, so ``anet --help`` or an idle node does not import what it never calls
(docs/performance.md, "Start-up and idle memory")."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class Lazy:
    """Calls ``reference`` (``"package.module:name"``), importing it on the first call."""

    __slots__ = ("_target", "reference")

    def __init__(self, reference: str) -> None:
        module, _, name = reference.partition(":")
        if not module or not name.isidentifier():
            raise ValueError(f"a lazy reference is \"package.module:name\", got {reference!r}")
        self.reference = reference
        self._target: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        """The function itself, its module imported; an ImportError or AttributeError names
        what is wrong with the reference."""
        if self._target is None:
            module, _, name = self.reference.partition(":")
            self._target = getattr(importlib.import_module(module), name)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lazy({self.reference!r})"


def lazy(reference: str) -> Callable[..., Any]:
    """``lazy("anet_a2a.cli:run_wire")``: that function, imported when first called."""
    return Lazy(reference)
