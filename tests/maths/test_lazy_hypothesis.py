"""hypothesis imported on first use (attnscore.maths.lazy_hypothesis): the stand-ins are the real thing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from typing import Any

import hypothesis as real_hypothesis
import numpy as np
import pytest
from hypothesis import strategies as real_st
from hypothesis.errors import HypothesisException, Unsatisfiable
from hypothesis.extra import numpy as real_hnp

from attnscore.maths import lazy_hypothesis
from attnscore.maths.lazy_hypothesis import composite, hnp, hypothesis, hypothesis_exceptions, st, version
from attnscore.maths.strategies import draw_examples
from tests.guards import HANG_GUARD_S


def _pair(draw: Any, n: int) -> tuple[int, np.ndarray]:
    """A size and an array of that many readable floats."""
    size = draw(st.integers(1, n))
    return size, draw(hnp.arrays(np.float64, (size,), elements=st.floats(-4, 4, width=32)))


@pytest.mark.parametrize(
    ("lazy", "real", "name"),
    [
        pytest.param(st, real_st, "integers", id="st is hypothesis.strategies"),
        pytest.param(hnp, real_hnp, "arrays", id="hnp is hypothesis.extra.numpy"),
        pytest.param(hypothesis, real_hypothesis, "given", id="hypothesis is hypothesis"),
        pytest.param(hypothesis, real_hypothesis, "HealthCheck", id="a class of hypothesis"),
    ],
)
def test_a_stand_in_reads_the_real_modules_attributes(lazy, real, name):
    """Every attribute read is the real module's own object."""
    assert getattr(lazy, name) is getattr(real, name)


def test_composite_draws_what_st_composite_draws():
    """The same function under ``composite`` and ``st.composite``: the same examples for a seed, the
    same repr (hypothesis's own strategy, built on the first call)."""
    lazy, eager = composite(_pair), real_st.composite(_pair)
    assert lazy.__name__ == "_pair" and lazy.__doc__ == _pair.__doc__
    assert repr(lazy(5)) == repr(eager(5)) == "_pair(5)"
    got, expected = _plain(draw_examples(lazy(5), 12, seed=7)), _plain(draw_examples(eager(5), 12, seed=7))
    assert len(got) == 12 and got == expected
    assert max(n for n, _ in got) > 2 >= max(n for n, _ in _plain(draw_examples(lazy(2), 12, seed=7)))


def _plain(drawn: list[tuple[int, np.ndarray]]) -> list[tuple[int, list[float]]]:
    return [(n, a.tolist()) for n, a in drawn]


def test_hypothesis_exceptions_catch_hypothesis_errors_only():
    """Once hypothesis is loaded (it is, in this process), the clause catches its errors and no other."""
    assert hypothesis_exceptions() == (HypothesisException,)
    try:
        raise Unsatisfiable("no input")
    except hypothesis_exceptions() as exc:
        assert isinstance(exc, Unsatisfiable)
    with pytest.raises(ValueError, match="not hypothesis's"):
        try:
            raise ValueError("not hypothesis's")
        except hypothesis_exceptions():  # pragma: no cover - must not catch it
            pytest.fail("caught an error that is not hypothesis's")


def test_version_is_the_installed_hypothesis():
    """The loaded module's version, which is its metadata's."""
    assert version() == real_hypothesis.__version__ == importlib.metadata.version("hypothesis")


def test_the_installed_version_is_read_from_the_metadata_once_per_process(monkeypatch):
    """Before hypothesis is loaded, the version comes from its metadata: read once, not per
    submission graded (a read scans every ``sys.path`` entry's distributions)."""
    reads: list[str] = []

    def reading(name: str) -> str:
        reads.append(name)
        return "6.0.0-from-metadata"

    monkeypatch.setattr(lazy_hypothesis, "loaded", lambda: False)
    monkeypatch.setattr(importlib.metadata, "version", reading)
    lazy_hypothesis._installed_version.cache_clear()
    try:
        assert [version() for _ in range(3)] == ["6.0.0-from-metadata"] * 3
        assert reads == ["hypothesis"]
    finally:
        lazy_hypothesis._installed_version.cache_clear()  # the next reader gets the real metadata


_UNLOADED = """
import sys
from attnscore.maths.lazy_hypothesis import composite, hypothesis_exceptions, st, version

@composite
def sizes(draw, n):
    return draw(st.integers(0, n))

print("loaded after defining a strategy:", "hypothesis" in sys.modules)
print("exceptions:", hypothesis_exceptions())
print("version:", version())
print("loaded after the version:", "hypothesis" in sys.modules)
print("strategy:", sizes(3))
print("loaded after the first call:", "hypothesis" in sys.modules)
print("exceptions:", [e.__name__ for e in hypothesis_exceptions()])
"""


def test_nothing_imports_hypothesis_before_a_strategy_is_asked_for():
    """In a fresh interpreter: defining a strategy, the except clause and the version leave
    hypothesis unloaded (nothing can have raised its errors: the clause is empty); the strategy's
    first call imports it."""
    done = subprocess.run(
        [sys.executable, "-c", _UNLOADED], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "loaded after defining a strategy: False",
        "exceptions: ()",
        f"version: {real_hypothesis.__version__}",
        "loaded after the version: False",
        "strategy: sizes(3)",
        "loaded after the first call: True",
        "exceptions: ['HypothesisException']",
    ]
