"""The properties' shared helpers (:mod:`attnscore.catalogue.properties.registry`): the first flagged
entry, and the first entry a change moved by more than twice its allowed error."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnscore.catalogue.properties.registry import first_index, first_moved


@given(arrays(bool, st.tuples(st.integers(1, 4), st.integers(1, 4))))
def test_first_index_is_the_first_true_entry_in_c_order(flags: np.ndarray) -> None:
    found = first_index(flags)
    if not flags.any():
        assert found is None
    else:
        assert found == np.unravel_index(int(np.argmax(flags.reshape(-1))), flags.shape)
        assert all(isinstance(i, int) for i in found)


def test_first_moved_counts_only_moves_beyond_twice_the_allowed_error_among_the_selected() -> None:
    before = np.array([[1.0, 2.0], [3.0, 4.0]])
    allowed = np.full((2, 2), 0.5)
    after = before + np.array([[1.0, 0.0], [0.0, 1.5]])  # 1.0 is not beyond 2 * 0.5; 1.5 is
    assert first_moved(before, after, allowed) == (1, 1)
    assert first_moved(before, after, allowed, np.array([True, False])) is None  # column 1 set aside
    assert first_moved(before, after, allowed, np.array([[False], [True]])) == (1, 1)


def test_first_moved_takes_no_nan_for_a_move() -> None:
    before = np.array([1.0, np.nan, 3.0])
    after = np.array([np.nan, 2.0, 3.0])
    assert first_moved(before, after, np.zeros(3)) is None
