"""``torch``, imported on first use.

The grader's modules name torch at the top but need it only inside functions; with this proxy,
a grading run that needs no tensor in the grader process (its cases read from the case cache
(:mod:`attnscore.check.case_cache`), a correct submission, an unchanged class) never pays for
``import torch`` there (1.5–3 s), while the worker template loads it in its own process.

Usage, in a module that uses torch only inside functions::

    from attnscore.boundary.lazy_torch import torch

Type checkers see the real module under that name (annotations such as ``torch.Tensor`` check as
with ``import torch``); at run time it is the proxy. Attribute access goes to the real module
(``torch.float64``, ``torch.Tensor``, ``torch.nn``); the first one imports it, and the proxy keeps
that module object for good. The sandboxed worker binds the proxy (:func:`bind`) while it loads its
runtime, before any submission code runs, so that a submission replacing ``sys.modules["torch"]``
later can never become the worker's torch. A module that needs torch at import time (a subclass of
a torch class) imports it normally.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["torch", "bind", "loaded", "on_bind"]

_on_bind: Callable[[types.ModuleType], None] | None = None


class _LazyTorch(types.ModuleType):
    _real: types.ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bound(), name)

    def _bound(self) -> types.ModuleType:
        real = type(self)._real
        if real is None:
            real = importlib.import_module("torch")
            type(self)._real = real
            # later lookups are plain attribute reads of this module (the real one's names, copied once)
            self.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
            if _on_bind is not None:
                _on_bind(real)
        return real


_proxy = _LazyTorch("torch", "torch, imported on first use (attnscore.boundary.lazy_torch)")

if TYPE_CHECKING:
    import torch
else:
    torch = _proxy


def bind() -> types.ModuleType:
    """Import torch now and bind the proxy to it (the worker calls this before any submission runs)."""
    return _proxy._bound()


def loaded() -> bool:
    """Whether torch has been imported in this process (by anyone)."""
    return "torch" in sys.modules


def on_bind(hook: Callable[[types.ModuleType], None] | None) -> None:
    """Call ``hook(torch)`` once, when the proxy is bound (the first use of torch through it), before
    that use; None removes the hook set before. One hook at a time: the grader's thread rule
    (:mod:`attnscore.grade.grading`) is its one user."""
    global _on_bind
    _on_bind = hook
