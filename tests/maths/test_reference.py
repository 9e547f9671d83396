"""Tests for the reference implementation (attnscore.maths.reference)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore import ScoreInputError, score, score_matrix, scores


@pytest.mark.parametrize(
    ("q", "keys", "expected"),
    [
        pytest.param([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]], [1.0, 0.0, 0.7], id="worked example"),
        pytest.param([0.0, 1.0], [[0.0, -1.0]], [-1.0], id="anti-aligned"),
        pytest.param([2.0, -1.0, 0.5], [[1, 1, 1], [-2, 0, 4]], [1.5, -2.0], id="3-D mixed signs"),
    ],
)
def test_scores_worked_examples(q, keys, expected):
    """scores gives the dot product of the query with every key."""
    out = scores(torch.tensor(q, dtype=torch.float64), torch.tensor(keys, dtype=torch.float64))
    assert out.shape == (len(expected),)
    assert out.tolist() == pytest.approx(expected, abs=1e-15)


def test_score_matrix_non_square_example():
    """Q Kᵀ for the field-notes example is [[17, 23], [39, 53]], not Q K = [[19, 22], [43, 50]]."""
    out = score_matrix(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[5.0, 6.0], [7.0, 8.0]]))
    assert out.tolist() == [[17.0, 23.0], [39.0, 53.0]]


def test_score_matrix_all_sizes_different():
    """n_q=2, n_k=4, d_k=3 gives a 2×4 matrix of the right dot products."""
    Q = torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])
    K = torch.tensor([[1.0, 1.0, 1.0], [0.0, 2.0, 0.0], [-1.0, 0.0, 1.0], [3.0, -1.0, 2.0]])
    assert score_matrix(Q, K).tolist() == [[0.0, 0.0, -2.0, 1.0], [3.0, 2.0, -2.0, 5.0]]


def test_score_matrix_batch_broadcasts():
    """Batch dims broadcast: Q (2, 1, 2) against K (1, 2, 2) gives (2, 1, 2)."""
    Q = torch.tensor([[[1.0, 2.0]], [[-1.0, 0.0]]])
    K = torch.tensor([[[1.0, 1.0], [2.0, -1.0]]])
    assert score_matrix(Q, K).tolist() == [[[3.0, 0.0]], [[-1.0, -2.0]]]


def test_score_is_scalar_and_keeps_dtype():
    """score returns a 0-d tensor with the inputs' dtype."""
    out = score(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.shape == () and out.dtype == torch.float64 and out.item() == 11.0


def test_numpy_and_lists_accepted():
    """numpy arrays keep their dtype; Python lists take the default float dtype."""
    out = scores(np.array([1.0, 0.0]), np.array([[0.5, 2.0]]))
    assert out.dtype == torch.float64 and out.tolist() == [0.5]
    assert scores([1, 0], [[0.7, 0.7]]).dtype == torch.float32


def test_inputs_not_mutated():
    """The reference never writes to its inputs."""
    Q, K = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0]])
    score_matrix(Q, K)
    assert Q.tolist() == [[1.0, 2.0]] and K.tolist() == [[3.0, 4.0]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda: scores([1.0, 2.0], [[1.0, 2.0, 3.0]]),
            "keys: last dimension d_k=3 does not match q's d_k=2",
            id="mismatched d_k",
        ),
        pytest.param(
            lambda: scores([[1.0, 2.0]], [[1.0, 2.0]]),
            "q: expected shape (d_k,) (1-D), found shape (1, 2)",
            id="q has wrong rank",
        ),
        pytest.param(
            lambda: scores([1.0, 2.0], [1.0, 2.0]),
            "keys: expected shape (n_k, d_k) (2-D), found shape (2,)",
            id="keys has wrong rank",
        ),
        pytest.param(
            lambda: score([1j, 2.0], [1.0, 2.0]), "q: expected real numbers, found complex values", id="complex"
        ),
        pytest.param(
            lambda: score("ab", [1.0]), "q: expected a tensor, array or list of numbers, found str", id="string"
        ),
        pytest.param(
            lambda: score([True, False], [1.0, 2.0]), "q: expected real numbers, found bool values", id="bool"
        ),
        pytest.param(lambda: scores([1.0], [[1.0], [2.0, 3.0]]), "keys: expected a rectangular array", id="ragged"),
        pytest.param(
            lambda: score_matrix([1.0, 2.0], [[1.0, 2.0]]),
            "Q: expected shape (..., n_q, d_k) (at least 2-D)",
            id="Q is 1-D",
        ),
        pytest.param(
            lambda: score_matrix(torch.ones(2, 1, 2), torch.ones(3, 1, 2)),
            "K: batch dims (3,) do not broadcast with Q's (2,)",
            id="batch dims do not broadcast",
        ),
        pytest.param(
            lambda: score(torch.ones(2), torch.ones(2, dtype=torch.float64)),
            "k: dtype torch.float64 differs from q's torch.float32",
            id="mixed dtypes",
        ),
    ],
)
def test_bad_inputs_raise_clear_errors(call, message):
    """Bad input raises ScoreInputError (a ValueError) saying what was expected and found."""
    with pytest.raises(ScoreInputError) as info:
        call()
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(1, 6),
    st.lists(st.integers(-8, 8), min_size=4 * 6, max_size=4 * 6),
    st.lists(st.integers(-8, 8), min_size=5 * 6, max_size=5 * 6),
)
def test_score_matrix_matches_loops_on_integers(n_q, n_k, d_k, q_vals, k_vals):
    """On small integers (exact in float32), every entry equals the hand-written double loop."""
    Q = np.array(q_vals[: n_q * d_k], dtype=np.float32).reshape(n_q, d_k)
    K = np.array(k_vals[: n_k * d_k], dtype=np.float32).reshape(n_k, d_k)
    S = score_matrix(torch.from_numpy(Q), torch.from_numpy(K))
    expected = [[sum(float(Q[i, d]) * float(K[j, d]) for d in range(d_k)) for j in range(n_k)] for i in range(n_q)]
    assert S.tolist() == expected
    assert scores(torch.from_numpy(Q[0]), torch.from_numpy(K)).tolist() == expected[0]


def test_half_precision_scores_do_not_overflow_before_scaling():
    """q = k = 70·ones(16) in float16: q·k = 78400 overflows float16, the scaled score 19600 does not."""
    from attnscore.maths.reference import attention, scaled_score_matrix

    q = torch.full((1, 16), 70.0, dtype=torch.float16)
    assert scaled_score_matrix(q, q).item() == 19600.0
    out = attention(q, q, torch.tensor([[2.0]], dtype=torch.float16))
    assert out.dtype == torch.float16 and out.item() == 2.0


def test_bfloat16_scores_accumulate_in_float32():
    """q = [256, 1, 1, 1, 1], k = ones: the sum is 260 (a bfloat16 running sum would stop at 256)."""
    from attnscore.maths.reference import scaled_score_matrix

    q = torch.tensor([[256.0, 1, 1, 1, 1]], dtype=torch.bfloat16)
    got = scaled_score_matrix(q, torch.ones(1, 5, dtype=torch.bfloat16))
    assert got.dtype == torch.bfloat16
    assert got.item() == torch.tensor(260 / 5**0.5, dtype=torch.bfloat16).item()


def test_mask_ranks_between_two_and_full_are_refused_as_ambiguous():
    """(B, n_q, n_k) against (B, H, n_q, n_k) scores with B == H would align B with the heads: refused."""
    from attnscore.maths.reference import attention_weights, masked_scores

    S = torch.arange(16.0).reshape(2, 2, 2, 2)  # (batch, heads, n_q, n_k)
    per_batch = torch.tensor([[[True, True], [True, True]], [[True, False], [True, False]]])  # (B, n_q, n_k)
    with pytest.raises(ScoreInputError) as err:
        masked_scores(S, per_batch)
    assert str(err.value) == (
        "mask: shape (2, 2, 2) is ambiguous for scores of shape (2, 2, 2, 2): expected a mask of shape "
        "(n_q, n_k) or of the scores' full rank 4 with 1 for broadcast dims (e.g. mask[:, None] for a "
        "(batch, n_q, n_k) mask over heads)"
    )
    with pytest.raises(ScoreInputError, match="ambiguous"):
        attention_weights(S, per_batch)
    # the full-rank form is the batch mask, broadcast over the heads
    out = masked_scores(S, per_batch[:, None])
    assert out[1, 0, 0].tolist() == [8.0, float("-inf")]
    assert out[1, 1, 1].tolist() == [14.0, float("-inf")]
    assert out[0, 1, 0].tolist() == [4.0, 5.0]
    # (n_q, n_k) and (n_k,) apply to every batch and head
    assert masked_scores(S, torch.tensor([[True, False], [True, True]]))[1, 1].tolist() == [
        [12.0, float("-inf")],
        [14.0, 15.0],
    ]
    assert masked_scores(S, torch.tensor([False, True]))[0, 0, 0].tolist() == [float("-inf"), 1.0]


def test_attention_per_batch_padding_mask_is_not_aligned_with_heads():
    from attnscore.maths.reference import attention

    Q = torch.tensor([1.0, 0.0]).expand(2, 2, 1, 2)
    K = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).expand(2, 2, 2, 2)
    V = torch.tensor([[1.0], [3.0]]).expand(2, 2, 2, 1)
    mask = torch.tensor([[True, True], [True, False]])[:, None, None, :]  # (batch, 1, 1, n_k)
    out = attention(Q, K, V, mask)[..., 0, 0]
    assert out.flatten().tolist() == pytest.approx([1.6604769, 1.6604769, 1.0, 1.0])
