"""RoPE's positions with leading dims of size 1 ((1, seq), as CS336 passes them) rotate as (seq,) does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.maths.rotary import rotate, rotate_golden, seq_positions


@pytest.mark.parametrize("x_shape", [(5, 4), (2, 5, 4), (2, 3, 5, 4)])
@pytest.mark.parametrize("pairing", ["interleaved", "rotate_half"])
def test_one_by_seq_positions_rotate_as_seq_positions(x_shape: tuple[int, ...], pairing: str) -> None:
    x = np.random.default_rng(3).normal(size=x_shape)
    flat, unit = np.array([0, 3, 4, 9, 20]), np.array([[0, 3, 4, 9, 20]])
    want = rotate_golden(x, flat, 100.0, pairing)
    got = rotate_golden(x, unit, 100.0, pairing)
    assert got.shape == x_shape and np.array_equal(got, want)
    t = rotate(torch.tensor(x), torch.tensor(unit), 100.0, pairing)
    assert tuple(t.shape) == x_shape
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-12, atol=1e-12)


def test_seq_positions_drops_only_leading_ones() -> None:
    assert seq_positions(np.zeros((1, 1, 4))).shape == (4,)
    assert seq_positions(np.zeros((2, 4))).shape == (2, 4)
    assert seq_positions(torch.zeros(1, 4)).shape == (4,)
    assert seq_positions(np.zeros((1,))).shape == (1,)
