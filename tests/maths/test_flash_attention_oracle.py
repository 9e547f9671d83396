"""attnscore's reference against FlashAttention's own test oracle, over a grid like FlashAttention's.

FlashAttention checks its kernels against ``attention_ref`` (``tests/test_flash_attn.py`` and
``tests/test_util.py`` of Dao-AILab/flash-attention). :func:`attention_ref` below is that oracle's
semantics written again here, in float64 numpy, from its documented conventions (not copied):

- layout ``(batch, seqlen, nheads, headdim)``; K and V heads repeated for their group of query
  heads (``h0 h0 h1 h1``, so query head ``h`` uses KV head ``h // (h_q / h_kv)``);
- scores ``(q / √d) · kᵀ``, then ``softcap · tanh(s / softcap)`` when ``softcap > 0``, before every
  mask and bias;
- padding masks ``(batch, seqlen)``, True where the token is real, padding on the right; the
  causal mask and the local window are aligned bottom-right **at each item's valid lengths**:
  query ``i`` of item ``b`` sits at key ``i + sk_b - sq_b``;
- ``causal`` makes the window ``(left, 0)``; the window keeps keys ``j`` in
  ``[i + sk_b - sq_b - left, i + sk_b - sq_b + right]``, ``-1`` unbounded on that side;
- ALiBi: ``attn_bias = -slope · |i + sk_b - sq_b - j|`` without causal and ``slope · (j - sk + 1)``
  with causal (the same weights: on the kept keys the two differ by a constant per row), slopes
  ``(batch, nheads)``, added after the masks;
- softmax in float64 (FlashAttention's ``upcast``); a query with no key left gets zero weights,
  and a padded query gets the zero vector.

The grid is FlashAttention's ``test_flash_attn_output`` one made small: causal × local window ×
softcap × ALiBi × query heads per KV head (1, 2, 4) × ``(seqlen_q, seqlen_k)`` pairs with
``seqlen_q > seqlen_k`` and ``<``, the head dim turning through 1, 5 and 8. Each point is compared
in float64, to 1e-12, with
:func:`attnscore.maths.variants.general_attention` (torch), its numpy twin
:func:`attnscore.maths.golden_variants.general_attention`, and the references and golden twins of
the contracts that state the configuration (``flash_attn``: causal and window; ``kernel_attention``:
causal, softcap and ALiBi in SDPA's layout). Padded batches are compared with ``general_attention``
given one offset per item (``alignment = sk_b - sq_b``) and ``key_lengths``, with the packed
``varlen_attention`` (FlashAttention's unpadded kernels) and, where it states the configuration
(no causal, no window), the ``key_padding_attention`` contract.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attnscore.maths import golden_variants, variants
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contracts import get_contract

ATOL = 1e-12

# FlashAttention's grid, made small: its windows are random in [0, seqlen_k); its softcap is 0 or 15
# on randn inputs (our inputs are randn too; a cap of 2.5 changes every score visibly).
CAUSAL = (False, True)
WINDOWS = ((-1, -1), (0, 0), (2, 1), (3, 0), (1, 4), (-1, 2), (2, -1))
SOFTCAPS = (0.0, 2.5)
ALIBI = (False, True)
HEADS = ((4, 4), (4, 2), (4, 1))  # (h_q, h_kv): 1, 2 and 4 query heads per KV head
SEQLENS = ((1, 1), (1, 6), (6, 1), (3, 7), (7, 3), (5, 5), (8, 13), (13, 8))
HEAD_DIMS = (1, 5, 8)


def attention_ref(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    query_padding: np.ndarray | None = None,
    key_padding: np.ndarray | None = None,
    causal: bool = False,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: np.ndarray | None = None,
) -> np.ndarray:
    """FlashAttention's ``attention_ref`` semantics in float64 (see the module docstring):
    ``q (b, sq, h_q, d)``, ``k (b, sk, h_kv, d)``, ``v (b, sk, h_kv, d_v)`` -> ``(b, sq, h_q, d_v)``;
    ``query_padding (b, sq)`` / ``key_padding (b, sk)`` True where the token is real; ``alibi_slopes (b, h_q)``."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, sq, h_q, d = q.shape
    sk, h_kv = k.shape[1], k.shape[2]
    k, v = np.repeat(k, h_q // h_kv, axis=2), np.repeat(v, h_q // h_kv, axis=2)  # h0 h0 h1 h1
    q_real = np.ones((b, sq), dtype=bool) if query_padding is None else np.asarray(query_padding, dtype=bool)
    k_real = np.ones((b, sk), dtype=bool) if key_padding is None else np.asarray(key_padding, dtype=bool)
    left, right = (window[0], 0) if causal else window

    scores = np.einsum("bthd,bshd->bhts", q / math.sqrt(d), k)  # (b, h, sq, sk)
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    row = np.arange(sq)[:, None]
    col = np.arange(sk)[None, :]
    at = row + (k_real.sum(-1) - q_real.sum(-1))[:, None, None, None]  # (b, 1, sq, 1): query i's key position
    dropped = np.broadcast_to(~k_real[:, None, None, :], scores.shape)
    if left >= 0:
        dropped = dropped | (col < at - left)
    if right >= 0:
        dropped = dropped | (col > at + right)
    scores = np.where(dropped, -np.inf, scores)
    if alibi_slopes is not None:
        slopes = np.asarray(alibi_slopes, dtype=np.float64)[:, :, None, None]  # (b, h, 1, 1)
        scores = scores + (slopes * (col - sk + 1) if causal else -slopes * np.abs(at - col))

    peak = scores.max(axis=-1, keepdims=True)
    empty = np.isneginf(peak)  # a query with no key left
    e = np.exp(scores - np.where(empty, 0.0, peak))
    weights = np.where(empty, 0.0, e / np.where(empty, 1.0, e.sum(axis=-1, keepdims=True)))
    weights = np.where(q_real[:, None, :, None], weights, 0.0)
    return np.einsum("bhts,bshd->bthd", weights, v)


def heads_first(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(x, 1, 2))


def draw(seed: int, b: int, sq: int, sk: int, heads: tuple[int, int], d: int) -> tuple[np.ndarray, ...]:
    """randn q, k, v in FlashAttention's layout and ALiBi slopes ``rand(b, h_q) · 0.3`` (its test's)."""
    rng = np.random.default_rng(seed)
    h_q, h_kv = heads
    q = rng.standard_normal((b, sq, h_q, d))
    k = rng.standard_normal((b, sk, h_kv, d))
    v = rng.standard_normal((b, sk, h_kv, d + 1))
    return q, k, v, rng.random((b, h_q)) * 0.3


def ours(q, k, v, *, causal, window, softcap, slopes, **more) -> tuple[np.ndarray, np.ndarray]:
    """attnscore's general_attention (torch) and its numpy twin, back in FlashAttention's layout."""
    options = {
        "is_causal": causal,
        "window": window,
        "softcap": softcap or None,
        "alignment": more.pop("alignment", "bottom_right"),
        **more,
    }
    t = variants.general_attention(
        *(torch.from_numpy(heads_first(x)) for x in (q, k, v)),
        alibi_slopes=None if slopes is None else torch.from_numpy(slopes),
        **options,
    )
    g = golden_variants.general_attention(*(heads_first(x) for x in (q, k, v)), alibi_slopes=slopes, **options)
    return np.swapaxes(t.numpy(), 1, 2), np.swapaxes(g, 1, 2)


def contract_outputs(q, k, v, *, causal, window, softcap, slopes) -> dict[str, np.ndarray]:
    """The references and golden twins of the contracts that state this configuration, in FlashAttention's layout."""
    found: dict[str, np.ndarray] = {}
    if softcap == 0.0 and slopes is None:
        flash = get_contract("flash_attn").configured({"causal": causal, "window_size": list(window)})
        found["flash_attn reference"] = flash.reference(*(torch.from_numpy(x) for x in (q, k, v))).numpy()
        found["flash_attn golden"] = flash.golden_fn({"q": q, "k": k, "v": v})
    if window == (-1, -1) or (causal and window[0] == -1):
        options = {"is_causal": causal, "softcap": softcap or None}
        kept = ("query", "key", "value") if slopes is None else ("query", "key", "value", "alibi_slopes")
        kernel = get_contract("kernel_attention").configured(options, kept)
        args = {"query": heads_first(q), "key": heads_first(k), "value": heads_first(v)}
        tensors = [torch.from_numpy(a) for a in args.values()]
        if slopes is not None:
            args["alibi_slopes"] = slopes
            tensors.append(torch.from_numpy(slopes))
        found["kernel_attention reference"] = np.swapaxes(kernel.reference(*tensors).numpy(), 1, 2)
        found["kernel_attention golden"] = np.swapaxes(kernel.golden_fn(args), 1, 2)
    return found


def grid_points(heads_and_shapes: bool) -> list[tuple]:
    """(causal, window, softcap, alibi) points, each with every head ratio and shape (``heads_and_shapes``)
    or with one of them, turning through them (the fast run); the head dim turns through its values."""
    options = list(itertools.product(CAUSAL, WINDOWS, SOFTCAPS, ALIBI))
    shapes = list(itertools.product(HEADS, SEQLENS))
    if heads_and_shapes:
        points = [(*o, *r) for o in options for r in shapes]
    else:
        points = [(*o, *shapes[n % len(shapes)]) for n, o in enumerate(options)]
    return [(*p, HEAD_DIMS[n % len(HEAD_DIMS)]) for n, p in enumerate(points)]


def check_point(seed: int, causal, window, softcap, alibi, heads, seqlens, d) -> int:
    """Every attnscore path agrees with the oracle on one grid point; returns how many paths were compared."""
    q, k, v, slopes = draw(seed, 2, *seqlens, heads, d)
    slopes = slopes if alibi else None
    want = attention_ref(q, k, v, causal=causal, window=window, softcap=softcap, alibi_slopes=slopes)
    config = {"causal": causal, "window": window, "softcap": softcap, "slopes": slopes}
    torch_out, numpy_out = ours(q, k, v, **config)
    found = {
        "general_attention": torch_out,
        "golden general_attention": numpy_out,
        **contract_outputs(q, k, v, **config),
    }
    point = f"causal={causal} window={window} softcap={softcap} alibi={alibi} heads={heads} seqlens={seqlens} d={d}"
    for name, got in found.items():
        assert got.shape == want.shape, (name, point)
        assert np.abs(got - want).max(initial=0.0) <= ATOL, (name, point, np.abs(got - want).max())
    return len(found)


def test_oracle_by_hand():
    """The oracle itself, on values worked by hand: window (1, 0) aligned bottom-right, causal ALiBi,
    softcap before the causal mask, grouped heads and a padded query."""
    zeros = np.zeros((1, 2, 1, 1))
    four = np.zeros((1, 4, 1, 1))
    v = np.array([1.0, 2.0, 4.0, 8.0]).reshape(1, 4, 1, 1)
    # two queries against four keys, window (1, 0): query 0 at key 2 keeps keys 1, 2; query 1 keeps 2, 3
    assert attention_ref(zeros, four, v, window=(1, 0)).ravel().tolist() == [3.0, 6.0]
    # causal with ALiBi slope ln 2: weights 2^-distance on the kept keys; query 0 (at key 2) keeps 0..2
    out = attention_ref(zeros, four, v, causal=True, alibi_slopes=np.array([[math.log(2.0)]]))
    assert out.ravel() == pytest.approx(
        [(1 / 4 + 2 / 2 + 4) / (1 / 4 + 1 / 2 + 1), (1 / 8 + 2 / 4 + 4 / 2 + 8) / 1.875]
    )
    # softcap before the mask: a masked key stays masked however low the capped scores are
    q = np.array([-40.0, 0.0]).reshape(1, 2, 1, 1)
    k = np.array([1.0, 0.0]).reshape(1, 2, 1, 1)
    assert attention_ref(q, k, v[:, :2], causal=True, softcap=1.0).ravel().tolist() == [1.0, 1.5]
    # grouped heads: query heads 0, 1 read KV head 0, heads 2, 3 KV head 1
    kv = np.array([[1.0], [10.0]]).reshape(1, 1, 2, 1)
    assert attention_ref(np.zeros((1, 1, 4, 1)), kv, kv).ravel().tolist() == [1.0, 1.0, 10.0, 10.0]
    # a padded query is zero, and the valid one sits at the last valid key
    padded = attention_ref(zeros, four, v, causal=True, query_padding=np.array([[True, False]]))
    assert padded.ravel().tolist() == [15 / 4, 0.0]
    # a query whose window holds no key gets zeros
    assert attention_ref(four, zeros[:, :1], v[:, :1], causal=True).ravel().tolist() == [0.0, 0.0, 0.0, 1.0]


def test_causal_alibi_forms_agree():
    """FlashAttention's causal ALiBi bias slope · (j - sk + 1) and attnscore's -slope · |i + sk - sq - j| give
    the same weights: they differ by a constant per row on the kept keys."""
    q, k, v, slopes = draw(7, 2, 5, 9, (2, 2), 3)
    fa = attention_ref(q, k, v, causal=True, alibi_slopes=slopes)
    at = np.arange(5)[:, None] + 4
    bias = -slopes[:, :, None, None] * np.abs(at - np.arange(9)[None, :])  # (b, h, sq, sk)
    scores = np.einsum("bthd,bshd->bhts", q / math.sqrt(3), k) + bias
    scores = np.where(np.arange(9)[None, :] > at, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    assert np.abs(np.einsum("bhts,bshd->bthd", weights, v) - fa).max() <= ATOL


def test_fast_grid_agrees_with_the_oracle():
    """Every (causal, window, softcap, ALiBi) point of the grid, each with one head ratio, shape and head dim."""
    compared = sum(check_point(n, *point) for n, point in enumerate(grid_points(False)))
    assert compared >= 2 * len(grid_points(False))


@pytest.mark.slow
def test_whole_grid_agrees_with_the_oracle():
    """The whole grid: causal × 7 windows × softcap × ALiBi × 3 head ratios × 8 (seqlen_q, seqlen_k), the head
    dim turning through 1, 5, 8."""
    points = grid_points(True)
    assert len(points) == 2 * 7 * 2 * 2 * 3 * 8
    assert {p[-1] for p in points} == set(HEAD_DIMS)
    for n, point in enumerate(points):
        check_point(n, *point)


def padding(lengths: list[int], n: int) -> np.ndarray:
    """``(b, n)`` bool, True at the first ``lengths[b]`` positions (FlashAttention's right padding)."""
    return np.arange(n)[None, :] < np.asarray(lengths)[:, None]


PADDED = [
    # (sq, sk), valid query lengths, valid key lengths (zero keys included, as FlashAttention draws them)
    ((4, 6), [4, 2, 3], [6, 3, 0]),
    ((6, 4), [6, 1, 5], [2, 4, 4]),
    ((5, 5), [5, 3, 0], [5, 1, 4]),
]


@pytest.mark.parametrize(("seqlens", "q_lengths", "k_lengths"), PADDED)
@pytest.mark.parametrize(("causal", "window"), [(False, (-1, -1)), (True, (-1, -1)), (False, (1, 2)), (True, (2, 0))])
@pytest.mark.parametrize("alibi", [False, True])
def test_padded_batches_agree_with_the_oracle(seqlens, q_lengths, k_lengths, causal, window, alibi):
    """Query and key padding, causal and window aligned at each item's valid lengths: general_attention with one
    offset per item (sk_b - sq_b) and key_lengths, and the packed varlen_attention, agree with the oracle on every
    real query; the padded queries are the oracle's zeros."""
    sq, sk = seqlens
    q, k, v, slopes = draw(sum(q_lengths) + 7 * sum(k_lengths), 3, sq, sk, (4, 2), 3)
    slopes = slopes if alibi else None
    q_real, k_real = padding(q_lengths, sq), padding(k_lengths, sk)
    want = attention_ref(
        q, k, v, query_padding=q_real, key_padding=k_real, causal=causal, window=window, alibi_slopes=slopes
    )
    assert not want[~q_real].any()
    offsets = np.asarray(k_lengths) - np.asarray(q_lengths)
    torch_out, numpy_out = ours(
        q,
        k,
        v,
        causal=causal,
        window=window,
        softcap=0.0,
        slopes=slopes,
        alignment=offsets,
        key_lengths=np.asarray(k_lengths),
    )
    for got in (torch_out, numpy_out):
        assert np.abs(got[q_real] - want[q_real]).max() <= ATOL

    # FlashAttention's unpadded (varlen) kernels: the real rows packed, every mask bottom-right per sequence
    cu_q = np.concatenate([[0], np.cumsum(q_lengths)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(k_lengths)]).astype(np.int32)
    options = {"is_causal": causal, "window": window, "alignment": "bottom_right", "alibi_slopes": slopes}
    packed_t = variants.varlen_attention(
        torch.from_numpy(q[q_real]),
        torch.from_numpy(k[k_real]),
        torch.from_numpy(v[k_real]),
        torch.from_numpy(cu_q),
        torch.from_numpy(cu_k),
        **{**options, "alibi_slopes": None if slopes is None else torch.from_numpy(slopes)},
    )
    packed_g = golden_variants.varlen_attention(
        q[q_real], k[k_real], v[k_real], cu_q, cu_k, AttentionOptions(**options)
    )
    for got in (packed_t.numpy(), packed_g):
        assert np.abs(got - want[q_real]).max(initial=0.0) <= ATOL


@pytest.mark.parametrize(("seqlens", "q_lengths", "k_lengths"), PADDED)
def test_key_padding_contract_agrees_where_it_states_the_configuration(seqlens, q_lengths, k_lengths):
    """The key_padding_attention contract (no causal, no window: it states no alignment) agrees with the oracle
    on every real query, reference and golden."""
    sq, sk = seqlens
    q, k, v, _ = draw(sum(k_lengths), 3, sq, sk, (4, 2), 3)
    q_real = padding(q_lengths, sq)
    want = attention_ref(q, k, v, query_padding=q_real, key_padding=padding(k_lengths, sk))
    contract = get_contract("key_padding_attention")
    lengths = np.asarray(k_lengths, dtype=np.int32)
    args = {"query": heads_first(q), "key": heads_first(k), "value": heads_first(v), "key_lengths": lengths}
    reference = contract.reference(*(torch.from_numpy(a) for a in args.values())).numpy()
    for got in (reference, contract.golden_fn(args)):
        assert np.abs(np.swapaxes(got, 1, 2)[q_real] - want[q_real]).max() <= ATOL
