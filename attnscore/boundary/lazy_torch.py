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

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeGuard

__all__ = ["torch", "bind", "is_tensor", "loaded", "on_bind", "one_thread", "one_thread_in_this_process"]

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


def is_tensor(value: object) -> TypeGuard[torch.Tensor]:
    """Whether ``value`` is a torch tensor, without importing torch to find out: while torch is not
    imported, nothing is one. For code that takes numpy arrays and tensors alike (a spec's worked
    examples are numpy, and loading a spec must not import torch: ``attnscore verify`` forks its
    workers only while torch is not loaded)."""
    if _LazyTorch._real is None and not loaded():
        return False
    return isinstance(value, _proxy.Tensor)  # the proxy's torch, as ``isinstance(value, torch.Tensor)``


def on_bind(hook: Callable[[types.ModuleType], None] | None) -> None:
    """Call ``hook(torch)`` once, when the proxy is bound (the first use of torch through it), before
    that use; None removes the hook set before. One hook at a time: the thread rule
    (:func:`one_thread`) is its one user."""
    global _on_bind
    _on_bind = hook


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread in this process while the block runs (grading a submission or a class,
    verifying specs), then the count it had.

    The grader's own tensors are small (golden values, references, diagnosis, shrinking), and
    torch's idle OpenMP threads spin for a while after each parallel region, on cores that a
    worker, a neighbouring process or the other threads' next region need: on a busy machine one
    small op then waits for a descheduled thread. Measured on 2 cores: a class lost a sixth of the
    machine's CPU time to that spin; a cold grade of one wrong FlashAttention-2 file took 6.35 s of
    CPU with the default threads and 5.22 s with one on a quiet machine, 11.1 s and 5.3 s beside
    another process's work; ``attnscore verify --jobs 1 specs/kv_cache.yaml`` took 24.9 s of CPU
    with the default threads and 7.6 s with one at load 6 (``benchmarks/bench_cold.py``).
    Where torch is first used inside the block (a cold grade loads it only for a diagnosis), it
    is set to one thread as the proxy is bound, and gets its own count back afterwards.
    """
    if loaded():
        real = sys.modules["torch"]
        before = [real.get_num_threads()]
        real.set_num_threads(1)
    else:
        before = []

        def first_use(real: Any) -> None:
            before.append(real.get_num_threads())
            real.set_num_threads(1)

        on_bind(first_use)
    try:
        yield
    finally:
        on_bind(None)
        if before:
            sys.modules["torch"].set_num_threads(before[0])


def one_thread_in_this_process() -> None:
    """One torch thread for the rest of this process (a forked grader or verifier process). A
    forked process must never enter the OpenMP thread pool its parent may have started (GNU OpenMP
    waits forever for threads that were not forked), and N such processes want one thread each
    anyway. A process that has not imported torch does not import it for this (1.5–3 s): torch
    takes its thread count from ``OMP_NUM_THREADS`` when it is first imported."""
    if loaded():
        sys.modules["torch"].set_num_threads(1)
    else:
        os.environ["OMP_NUM_THREADS"] = "1"
