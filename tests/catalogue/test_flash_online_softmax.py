"""The FlashAttention-2 mistakes' online softmax: all tiles at once equals the tile-by-tile loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue.mistakes.flash_attention import TILES, _online_softmax_loop, flash_function, online_softmax


@st.composite
def _scores(draw):
    """Scaled scores ``(batch, n_q, n_k)`` with some entries masked (``-inf``), whole rows included,
    and values ``(batch, n_k, d_v)``."""
    batch, n_q, n_k, d_v = (draw(st.integers(lo, hi)) for lo, hi in ((1, 3), (1, 6), (1, 40), (1, 4)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    S = rng.normal(scale=draw(st.sampled_from([0.5, 4.0, 30.0])), size=(batch, n_q, n_k))
    masked = rng.random(S.shape) < draw(st.sampled_from([0.0, 0.3, 0.9]))
    if draw(st.booleans()):
        masked[:, 0, :] = True  # a query with no key
    S[masked] = -np.inf
    return torch.tensor(S), torch.tensor(rng.normal(size=(batch, n_k, d_v)))


@settings(max_examples=150, deadline=None)
@given(_scores(), st.sampled_from(TILES), st.integers(0, 3))
def test_all_tiles_at_once_equal_the_loop(scores, tile, rescale):
    S, V = scores
    got = online_softmax(S, V, tile, rescale)
    want = _online_softmax_loop(S, V, tile, rescale)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-300)


def test_a_missing_rescale_differs_only_past_the_first_tile():
    """With one tile the rescale never runs (exact); with a growing max over two tiles, leaving it
    out gives another sum than the rescaled one, by the factor the running max moved."""
    S = torch.tensor([[[0.0, 2.0]]], dtype=torch.float64)
    V = torch.tensor([[[1.0], [3.0]]], dtype=torch.float64)
    m, right, _ = online_softmax(S, V, 2, 0)
    assert online_softmax(S, V, 2, 1)[1].item() == pytest.approx(right.item())
    m, right, acc = online_softmax(S, V, 1, 0)
    assert m.item() == 2.0
    assert right.item() == pytest.approx(math.exp(-2.0) + 1.0)
    assert acc.item() == pytest.approx(math.exp(-2.0) * 1.0 + 3.0)
    _, unscaled, unscaled_acc = online_softmax(S, V, 1, 1)
    assert unscaled.item() == pytest.approx(2.0)  # exp(0 − 0) + exp(2 − 2)
    assert unscaled_acc.item() == pytest.approx(4.0)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_nan_or_infinite_score_runs_the_loop(value):
    S = torch.tensor([[[0.5, value, 1.0]]], dtype=torch.float64)
    V = torch.ones(1, 3, 2, dtype=torch.float64)
    for a, b in zip(online_softmax(S, V, 2, 0), _online_softmax_loop(S, V, 2, 0), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_mistaken_function_is_right_without_its_mistake():
    """The Function with no switch is FlashAttention-2: its O and L are softmax attention and the
    logsumexp, for every tile size, causal or not."""
    rng = np.random.default_rng(3)
    Q, K, V = (torch.tensor(rng.normal(size=(2, n, 4))) for n in (5, 7, 7))
    for is_causal in (False, True):
        S = Q @ K.transpose(-2, -1) / 2.0
        if is_causal:
            S = S.masked_fill(~torch.ones(5, 7, dtype=torch.bool).tril(), float("-inf"))
        for tile in TILES:
            fn = flash_function(is_causal=is_causal, tile=tile)
            out, lse, _ = fn.forward_tiles(Q, K, V, is_causal)
            np.testing.assert_allclose(out.numpy(), (torch.softmax(S, dim=-1) @ V).numpy(), rtol=1e-12)
            np.testing.assert_allclose(lse.numpy(), torch.logsumexp(S, dim=-1).numpy(), rtol=1e-12)


@pytest.mark.parametrize("tile, rescale", [(1, 0), (3, 1), (4, 2), (8, 3)])
def test_many_tiles_with_a_masked_first_tile(tile, rescale):
    """Many tiles (computed all at once), the first tile of every row masked out (its running max
    -inf) and one row masked whole: the loop's values, NaN-free but for the whole-masked row's 0/0."""
    rng = np.random.default_rng(tile)
    S = torch.tensor(rng.normal(scale=5.0, size=(2, 3, 40)))
    S[..., :tile] = float("-inf")
    S[:, 2, :] = float("-inf")
    V = torch.tensor(rng.normal(size=(2, 40, 3)))
    got, want = online_softmax(S, V, tile, rescale), _online_softmax_loop(S, V, tile, rescale)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    m, total, acc = got
    assert torch.isfinite(m[:, :2]).all() and (m[:, 2] == float("-inf")).all()
    assert (total[:, 2] == 0).all() and (acc[:, 2] == 0).all()
