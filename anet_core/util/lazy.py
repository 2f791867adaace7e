"""A function named by ``"package.module:name"`` and imported when it is first called.

A hook returns records naming the code that runs them; naming that code this way keeps it
unloaded until it runs, so ``anet --help`` or an idle node does not import what it never calls
(docs/performance.md, "Start-up and idle memory")."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Lazy:
    """Calls ``reference`` (``"package.module:name"``), importing it on the first call."""

    reference: str
    _target: list[Callable[..., Any]] = field(default_factory=list, init=False, repr=False,
                                              compare=False)

    def __post_init__(self) -> None:
        module, _, name = self.reference.partition(":")
        if not module or not name.isidentifier():
            raise ValueError(f"a lazy reference is \"package.module:name\", got "
                             f"{self.reference!r}")

    def resolve(self) -> Callable[..., Any]:
        """The function itself (importing its module); an ImportError or AttributeError names
        the reference that is wrong."""
        if not self._target:
            module, _, name = self.reference.partition(":")
            self._target.append(getattr(importlib.import_module(module), name))
        return self._target[0]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


def lazy(reference: str) -> Callable[..., Any]:
    """``lazy("anet_a2a.cli:run_wire")``: that function, imported when first called."""
    return Lazy(reference)
