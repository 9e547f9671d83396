"""Reference functions and golden paths of the contracts beyond Q Kᵀ."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnscore.maths import golden, reference
from attnscore.maths.contracts import CONTRACTS
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.strategies import random_args

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "n_q, n_k, expected",
    [
        pytest.param(3, 3, [[1, 0, 0], [1, 1, 0], [1, 1, 1]], id="square lower triangle"),
        pytest.param(2, 3, [[1, 1, 0], [1, 1, 1]], id="fewer queries: bottom-right aligned"),
        pytest.param(3, 2, [[0, 0], [1, 0], [1, 1]], id="more queries: first row keeps nothing"),
        pytest.param(1, 4, [[1, 1, 1, 1]], id="one new token sees every cached key"),
        pytest.param(0, 2, np.zeros((0, 2)), id="no queries"),
    ],
)
def test_causal_mask(n_q, n_k, expected):
    """causal_mask keeps key j for query i when j <= i + n_k - n_q, in torch and numpy alike."""
    want = np.asarray(expected, dtype=bool).reshape(n_q, n_k)
    assert reference.causal_mask(n_q, n_k).numpy().tolist() == want.tolist()
    assert golden.causal_mask(n_q, n_k).tolist() == want.tolist()
    assert reference.causal_mask(n_q, n_k).dtype == torch.bool


@pytest.mark.parametrize(
    "n_q, n_k", [pytest.param(-1, 2, id="negative"), pytest.param(2.0, 2, id="float"), pytest.param(True, 2, id="bool")]
)
def test_causal_mask_rejects_bad_sizes(n_q, n_k):
    """A size that is not a non-negative int raises ScoreInputError naming n_q."""
    with pytest.raises(ScoreInputError, match="n_q: expected a non-negative int"):
        reference.causal_mask(n_q, n_k)


def test_scaled_uses_per_head_width():
    """Two heads of width 4: each score is divided by √4 = 2, not by √8."""
    Q = torch.ones(2, 1, 4)
    assert reference.scaled_score_matrix(Q, Q).tolist() == [[[2.0]], [[2.0]]]


def test_bilinear_and_additive_worked_values():
    """Bilinear q W k and additive vᵀ tanh(W_q q + W_k k) give the hand-computed numbers."""
    assert reference.bilinear_scores(
        [[1.0, 0.0, 2.0]], [[1.0, 2.0], [-1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    ).tolist() == [[7.0, -3.0]]
    out = reference.additive_scores([[0.0]], [[0.0], [1.0]], [[1.0]], [[1.0]], [2.0])
    np.testing.assert_allclose(out.numpy(), [[0.0, 2 * math.tanh(1.0)]], rtol=1e-6)


@pytest.mark.parametrize(
    "call, match",
    [
        pytest.param(
            lambda: reference.bilinear_scores([[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 0.0]]),
            "W: expected shape",
            id="W has the wrong shape",
        ),
        pytest.param(
            lambda: reference.additive_scores([[1.0]], [[1.0]], [[1.0]], [[1.0], [2.0]], [1.0]),
            "d_a differs",
            id="additive d_a mismatch",
        ),
        pytest.param(lambda: reference.masked_scores([[1.0]], [[1.0]]), "mask: expected a bool mask", id="float mask"),
        pytest.param(
            lambda: reference.masked_scores([[1.0, 2.0]], [[True, False, True]]), "does not broadcast", id="mask shape"
        ),
        pytest.param(
            lambda: reference.attention([[1.0]], [[1.0]], [[1.0], [2.0]]), "V: expected n_k=1", id="V has too many rows"
        ),
    ],
)
def test_reference_errors(call, match):
    """Bad arguments raise ScoreInputError naming the argument."""
    with pytest.raises(ScoreInputError, match=match):
        call()


def test_masked_scores_replace_whatever_was_there():
    """Masked entries become -inf even when they hold NaN or inf; kept NaN stays NaN."""
    out = reference.masked_scores(torch.tensor([[NAN, INF, NAN, 1.0]]), torch.tensor([[False, False, True, True]]))
    assert out[0, :2].tolist() == [-INF, -INF] and math.isnan(out[0, 2]) and out[0, 3] == 1.0


@pytest.mark.parametrize(
    "S, mask, expected",
    [
        pytest.param([[0.0, 0.0]], [[True, True]], [[0.5, 0.5]], id="equal logits"),
        pytest.param([[2.0, 0.0]], [[True, False]], [[1.0, 0.0]], id="masked key gets zero"),
        pytest.param([[1.0, 1.0]], [[False, False]], [[0.0, 0.0]], id="fully masked row is zeros"),
        pytest.param([[1000.0, 1000.0]], [[True, True]], [[0.5, 0.5]], id="large logits are stable"),
        pytest.param([[NAN, 5.0]], [[False, True]], [[0.0, 1.0]], id="NaN at a masked key is ignored"),
    ],
)
def test_attention_weights_conventions(S, mask, expected):
    """Softmax over keys with the stated mask conventions, in the reference and the golden path."""
    got = reference.attention_weights(torch.tensor(S, dtype=torch.float64), torch.tensor(mask))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(golden.softmax_weights(np.array(S), np.array(mask)), expected, rtol=1e-12)


def test_nan_in_kept_position_makes_row_nan():
    """A NaN logit at a kept key makes that row's kept weights NaN; masked weights stay 0."""
    w = golden.softmax_weights(np.array([[NAN, 1.0, 2.0]]), np.array([[True, True, False]]))
    assert np.isnan(w[0, :2]).all() and w[0, 2] == 0.0
    r = reference.attention_weights(torch.tensor([[NAN, 1.0, 2.0]]), torch.tensor([[True, True, False]]))
    assert torch.isnan(r[0, :2]).all() and r[0, 2] == 0.0


def test_attention_fully_masked_query_is_zero():
    """A query whose keys are all masked gets the zero vector, the other the mean of V."""
    out = reference.attention(
        [[1.0, 0.0], [0.0, 0.0]],
        [[1.0, 0.0], [0.0, 1.0]],
        [[1.0, 5.0], [3.0, 7.0]],
        torch.tensor([[False, False], [True, True]]),
    )
    assert out.tolist() == [[0.0, 0.0], [2.0, 6.0]]


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_reference_matches_golden_on_random_inputs(name):
    """Every contract's torch reference agrees with its float64 numpy golden path."""
    from attnscore.maths.strategies import draw_examples

    contract = CONTRACTS[name]
    for args in draw_examples(random_args(contract, 5.0), 10, seed=7):
        tensors = [torch.tensor(a) for a in args.values()]
        got = contract.reference(*tensors).numpy()
        want = contract.golden(args)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reference_on_cuda_keeps_device():
    """On CUDA the result stays on the inputs' device."""
    Q = torch.ones(2, 3, device="cuda")
    assert reference.scaled_score_matrix(Q, Q).device.type == "cuda"


def test_attention_error_bound_ignores_masked_keys():
    """NaN and inf at masked keys leave the allowed error finite and small: a wrong finite answer fails."""
    from attnscore.maths.contracts import CONTRACTS

    args = {
        "Q": np.array([[1.0, 0.0]]),
        "K": np.array([[1.0, 0.0], [np.nan, 0.0], [np.inf, 0.0]]),
        "V": np.array([[2.0], [5.0], [np.inf]]),
        "mask": np.array([[True, False, False]]),
    }
    _, scale = CONTRACTS["attention"].error_scale(args)
    assert np.isfinite(scale).all() and scale.max() < 100
