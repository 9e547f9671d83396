"""RoPE's rotation (attnscore/maths/rotary.py): the torch reference and its float64 twin against a
loop written from RoFormer's eq. 34, its identities (position 0, norms, offsets), and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnscore.maths.rotary import PAIRINGS, frequencies, pair_indices, rotate, rotate_golden


def loop_rope(x: list[list[float]], positions: list[int], theta: float, pairing: str) -> list[list[float]]:
    """RoPE of ``x`` (seq, d) one coordinate pair at a time, in plain Python floats."""
    out = []
    for row, m in zip(x, positions, strict=True):
        d = len(row)
        y = list(row)
        for i in range(d // 2):
            a, b = (2 * i, 2 * i + 1) if pairing == "interleaved" else (i, i + d // 2)
            angle = m * theta ** (-2.0 * i / d)
            y[a] = row[a] * math.cos(angle) - row[b] * math.sin(angle)
            y[b] = row[a] * math.sin(angle) + row[b] * math.cos(angle)
        out.append(y)
    return out


@st.composite
def rope_inputs(draw) -> tuple[np.ndarray, np.ndarray, float, str]:
    seq = draw(st.integers(1, 4))
    d = 2 * draw(st.integers(1, 4))
    x = draw(hnp.arrays(np.float64, (seq, d), elements=st.floats(-10, 10, allow_nan=False, width=32)))
    positions = np.asarray(draw(st.lists(st.integers(0, 200), min_size=seq, max_size=seq)), dtype=np.int32)
    theta = float(draw(st.sampled_from([10000, 500, 100, 10, 2])))
    return x, positions, theta, draw(st.sampled_from(PAIRINGS))


@settings(max_examples=60, deadline=None)
@given(rope_inputs())
def test_golden_and_reference_match_a_loop(inputs) -> None:
    """rotate_golden and rotate (float64) agree with the pair-by-pair loop on random inputs."""
    x, positions, theta, pairing = inputs
    want = np.array(loop_rope(x.tolist(), positions.tolist(), theta, pairing))
    np.testing.assert_allclose(rotate_golden(x, positions, theta, pairing), want, rtol=1e-12, atol=1e-12)
    got = rotate(torch.tensor(x), torch.tensor(positions), theta, pairing).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(rope_inputs(), st.integers(1, 50))
def test_norms_kept_and_scores_depend_on_offsets(inputs, shift) -> None:
    """Each rotated vector keeps its norm; q_m · k_n is unchanged when every position moves by ``shift``."""
    x, positions, theta, pairing = inputs
    y = rotate_golden(x, positions, theta, pairing)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12, atol=1e-12)
    k = x[::-1].copy()
    before = y @ rotate_golden(k, positions, theta, pairing).T
    after = rotate_golden(x, positions + shift, theta, pairing) @ rotate_golden(k, positions + shift, theta, pairing).T
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-9)


def test_position_zero_is_the_identity_and_one_turns_pair_zero_by_a_radian() -> None:
    """Position 0 leaves x as it is; position 1 turns pair 0 (frequency theta^0 = 1) by 1 radian."""
    x = np.array([[3.0, -1.0, 2.0, 5.0], [1.0, 0.0, 0.0, 0.0]])
    y = rotate_golden(x, np.array([0, 1]), 10000.0, "interleaved")
    assert y[0].tolist() == [3.0, -1.0, 2.0, 5.0]
    np.testing.assert_allclose(y[1], [math.cos(1), math.sin(1), 0.0, 0.0], atol=1e-15)
    half = rotate_golden(x, np.array([0, 1]), 10000.0, "rotate_half")
    np.testing.assert_allclose(half[1], [math.cos(1), 0.0, math.sin(1), 0.0], atol=1e-15)


def test_frequencies_and_pairs() -> None:
    """theta^(−2i/d): d = 4, theta = 10000 gives 1 and 0.01; pairs as each pairing forms them."""
    assert frequencies(4, 10000).tolist() == [1.0, 0.01]
    assert [p.tolist() for p in pair_indices(4, "interleaved")] == [[0, 2], [1, 3]]
    assert [p.tolist() for p in pair_indices(4, "rotate_half")] == [[0, 1], [2, 3]]


def test_reference_keeps_dtype_and_broadcasts_positions_over_the_batch() -> None:
    """A (2, 3, 4) float32 input with positions (3,): float32 out, each batch item rotated alike."""
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    y = rotate(x, torch.tensor([4, 0, 9], dtype=torch.int32), 500, "interleaved")
    assert y.dtype == torch.float32 and y.shape == (2, 3, 4)
    want = rotate_golden(x.double().numpy(), np.array([4, 0, 9]), 500.0, "interleaved")
    np.testing.assert_allclose(y.double().numpy(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(y[:, 1], x[:, 1])  # position 0


def test_half_precision_rounds_the_cosines_in_the_tested_dtype() -> None:
    """float16: the result is float16 and within a few float16 ulps of the float64 rotation."""
    x = torch.tensor([[1.0, 2.0, -3.0, 0.5]], dtype=torch.float16)
    y = rotate(x, torch.tensor([17]), 100, "rotate_half")
    assert y.dtype == torch.float16
    want = rotate_golden(x.double().numpy(), np.array([17]), 100.0, "rotate_half")
    assert np.max(np.abs(y.double().numpy() - want)) < 4 * 2**-11 * 4


@pytest.mark.parametrize(
    ("d", "pairing", "message"),
    [
        pytest.param(3, "interleaved", "expected an even RoPE width d, found d = 3", id="odd width"),
        pytest.param(
            4,
            "halves",
            "expected a RoPE pairing among ('interleaved', 'rotate_half'), found 'halves'",
            id="unknown pairing",
        ),
    ],
)
def test_bad_width_or_pairing_is_refused(d: int, pairing: str, message: str) -> None:
    """An odd d or an unknown pairing raises a ValueError naming what was expected and found, in each path."""
    with pytest.raises(ValueError) as golden_error:
        rotate_golden(np.zeros((1, d)), np.array([1]), 100.0, pairing)
    with pytest.raises(ValueError) as torch_error:
        rotate(torch.zeros(1, d), torch.tensor([1]), 100.0, pairing)
    assert str(golden_error.value) == str(torch_error.value) == message
