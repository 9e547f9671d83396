"""Tests for call inspection (attnscore.boundary.calls): in-place changes of values or metadata are mutation."""

from __future__ import annotations

import numpy as np
import pytest

from attnscore.check.runner import InProcessRunner

# K is symmetric and square: K.transpose_() and K.t_() change only its strides, never a value.
ARGS = {"Q": np.array([[1.0, 2.0]]), "K": np.array([[1.0, 2.0], [2.0, 1.0]])}


def _transposes(Q, K):
    K.transpose_(-2, -1)
    return Q @ K


def _t(Q, K):
    K.t_()
    return Q @ K.t()


def _unsqueezes(Q, K):
    Q.unsqueeze_(0)
    return (Q @ K.transpose(-2, -1)).squeeze(0)


def _as_strided(Q, K):
    K.as_strided_(K.shape, K.stride())  # the same view again: no change at all
    return Q @ K.transpose(-2, -1)


def _values(Q, K):
    Q.mul_(2.0)
    return Q @ K.transpose(-2, -1) / 2


@pytest.mark.parametrize(
    "function, mutated",
    [
        pytest.param(_transposes, ["K"], id="K.transpose_ (strides only)"),
        pytest.param(_t, ["K"], id="K.t_ (strides only)"),
        pytest.param(_unsqueezes, ["Q"], id="Q.unsqueeze_ (shape)"),
        pytest.param(_values, ["Q"], id="values"),
        pytest.param(_as_strided, [], id="the same view again"),
    ],
)
def test_metadata_changes_in_place_are_mutation(function, mutated):
    """The in-process runner names an input whose shape or strides changed, even with the same values."""
    runner = InProcessRunner(function)
    outcome = runner.call(ARGS, "float64")
    assert outcome.array.tolist() == [[5.0, 4.0]]
    assert runner.last_inspection == {"mutated": mutated, "aliased": []}
