"""``hypothesis``, imported on first use.

Importing hypothesis costs about 0.15 s, and decorating a strategy with ``st.composite`` reads and
parses the decorated function's source (a few milliseconds each, about twenty at import time).
A student's cold ``attnscore check`` and a grade whose cases come from the case cache
(:mod:`attnscore.check.case_cache`) of a correct submission draw nothing and shrink nothing, so
they need neither; with these stand-ins they pay for hypothesis only where it is used.

Usage, in a module that uses hypothesis only inside functions::

    from attnscore.maths.lazy_hypothesis import composite, hnp, hypothesis, st

    @composite  # st.composite, applied on the strategy's first call
    def pairs(draw, n):
        return draw(st.integers(0, n)), draw(hnp.arrays(...))

    try:
        ...
    except hypothesis_exceptions():  # hypothesis.errors.HypothesisException, once loaded
        ...

``st``, ``hnp`` and ``hypothesis`` stand for ``hypothesis.strategies``, ``hypothesis.extra.numpy``
and ``hypothesis``: the first attribute read imports the real module, and every read is the real
module's attribute (``st.integers``, ``hypothesis.settings``, ``hypothesis.given``). Type checkers
see the real modules under these names (as :mod:`attnscore.boundary.lazy_torch` does for torch).
A module-level ``@st.composite`` would import hypothesis when its module is imported: use
:func:`composite` there (``tests/test_selfcheck_imports.py`` fails when a cold check imports
hypothesis again).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["composite", "hnp", "hypothesis", "hypothesis_exceptions", "loaded", "st", "version"]


class _LazyModule(types.ModuleType):
    """A module that imports ``target`` on its first attribute read and reads every attribute there."""

    def __init__(self, target: str) -> None:
        super().__init__(target, f"{target}, imported on first use (attnscore.maths.lazy_hypothesis)")
        self._target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self._target), name)


if TYPE_CHECKING:
    import hypothesis
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
    from hypothesis.strategies import composite
else:
    hypothesis = _LazyModule("hypothesis")
    st = _LazyModule("hypothesis.strategies")
    hnp = _LazyModule("hypothesis.extra.numpy")

    def composite(function: Callable[..., Any]) -> Callable[..., Any]:
        """``hypothesis.strategies.composite(function)``, applied when the strategy is first asked
        for: the function it returns builds the same strategies (same draws, same repr), and
        hypothesis is imported (and ``function``'s source read) only then."""
        built: list[Callable[..., Any]] = []

        def strategy(*args: Any, **kwargs: Any) -> Any:
            if not built:
                built.append(st.composite(function))
            return built[0](*args, **kwargs)

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(strategy, attribute, getattr(function, attribute))
        return strategy


def loaded() -> bool:
    """Whether hypothesis has been imported in this process (by anyone)."""
    return "hypothesis" in sys.modules


def hypothesis_exceptions() -> tuple[type[Exception], ...]:
    """For an ``except`` clause: ``(hypothesis.errors.HypothesisException,)`` once hypothesis is
    loaded, else ``()`` (nothing can have raised one then, and ``except ()`` catches nothing).
    The clause is evaluated only when an exception reaches it, after the ``try`` body ran."""
    if not loaded():
        return ()
    from hypothesis.errors import HypothesisException

    return (HypothesisException,)


def version() -> str:
    """hypothesis's version: the loaded module's ``__version__``, else the installed one's, read from
    its metadata (the same text) without importing it (for reports and the case cache's key)."""
    if loaded():
        return str(sys.modules["hypothesis"].__version__)
    return _installed_version()


@functools.cache
def _installed_version() -> str:
    """The installed hypothesis's version, read from its metadata once per process (a read costs a
    scan of every ``sys.path`` entry's distributions: milliseconds, which a class run paid per
    submission)."""
    return importlib.metadata.version("hypothesis")
