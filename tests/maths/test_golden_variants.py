"""The float64 numpy twin of the attention variants (attnscore.maths.golden_variants).

Worked examples with hand-checkable numbers for each variant, properties, and a cross-check of
every stage against the torch reference (attnscore.maths.variants) in float64 on drawn inputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.maths import golden
from attnscore.maths import golden_variants as gv
from attnscore.maths.attention_options import AttentionOptions

FIELDS = ("scores", "capped", "biased", "weights", "output", "lse")


def parts(*args: Any, **kwargs: Any) -> gv.AttentionParts:
    return gv.general_attention_parts(*args, **kwargs)


def keep_of(p: gv.AttentionParts) -> list[list[int]]:
    """Which keys take part in the first head's rows, as 0/1."""
    return np.isfinite(p.biased.reshape(-1, *p.biased.shape[-2:])[0]).astype(int).tolist()


# ---------------------------------------------------------------------------------------------------------------------
# Worked examples


def test_gqa_groups_heads_h0_h0_h1_h1() -> None:
    """Four query heads over two KV heads: heads 0, 1 read KV head 0 and heads 2, 3 read KV head 1."""
    q = np.ones((1, 4, 1, 1))
    k = np.array([1.0, 2.0]).reshape(1, 2, 1, 1)  # KV head h has key value h + 1
    v = np.array([10.0, 20.0]).reshape(1, 2, 1, 1)
    p = parts(q, k, v, scale=1.0)
    assert p.scores.ravel().tolist() == [1.0, 1.0, 2.0, 2.0]
    assert p.output.ravel().tolist() == [10.0, 10.0, 20.0, 20.0]


def test_scale_default_is_inverse_sqrt_dk() -> None:
    """q = k = ones(4): default score 4/√4 = 2; scale 0.5 gives 2 too, scale 1 gives 4."""
    q = np.ones((1, 1, 1, 4))
    assert parts(q, q, q).scores.item() == 2.0
    assert parts(q, q, q, scale=1.0).scores.item() == 4.0


def test_softcap_on_scaled_scores_before_mask() -> None:
    """Score 10 with cap 5 is 5·tanh(2) = 4.820137900379085; a masked key stays -inf (weight 0), not -cap."""
    q = np.array([[[[10.0]]]])
    k = np.array([[[[1.0], [1.0]]]])
    v = np.array([[[[1.0], [1000.0]]]])
    p = parts(q, k, v, scale=1.0, softcap=5.0, attn_mask=np.array([True, False]))
    assert p.scores.ravel().tolist() == [10.0, 10.0]
    assert p.capped.ravel().tolist() == pytest.approx([5 * math.tanh(2.0)] * 2, abs=1e-15)
    assert p.biased.ravel()[1] == -np.inf
    assert p.weights.ravel().tolist() == [1.0, 0.0]
    assert p.output.item() == 1.0


def test_float_mask_is_added_and_bool_mask_keeps_true() -> None:
    """Equal scores, float mask [0, -ln 3]: weights [3/4, 1/4]; bool mask [True, False]: weights [1, 0]."""
    q = np.zeros((1, 1, 1, 1))
    k = np.zeros((1, 1, 2, 1))
    v = np.array([[[[2.0], [4.0]]]])
    p = parts(q, k, v, attn_mask=np.array([0.0, -math.log(3.0)]))
    assert p.weights.ravel() == pytest.approx([0.75, 0.25], abs=1e-15)
    assert p.output.item() == pytest.approx(2.5, abs=1e-15)
    assert parts(q, k, v, attn_mask=np.array([True, False])).output.item() == 2.0


@pytest.mark.parametrize(
    ("alignment", "expected"),
    [
        pytest.param("top_left", [[1, 0, 0, 0], [1, 1, 0, 0]], id="top-left"),
        pytest.param("bottom_right", [[1, 1, 1, 0], [1, 1, 1, 1]], id="bottom-right"),
        pytest.param(1, [[1, 1, 0, 0], [1, 1, 1, 0]], id="offset 1"),
    ],
)
def test_causal_alignment(alignment: str | int, expected: list[list[int]]) -> None:
    """Two queries, four keys: causal keeps j <= i + offset with offset 0, n_k - n_q = 2, or 1."""
    q = np.zeros((1, 1, 2, 1))
    k = np.zeros((1, 1, 4, 1))
    assert keep_of(parts(q, k, k, is_causal=True, alignment=alignment)) == expected


@pytest.mark.parametrize(
    ("window", "causal", "expected"),
    [
        pytest.param((1, 0), False, [[1, 0, 0], [1, 1, 0], [0, 1, 1]], id="left 1 right 0"),
        pytest.param((-1, 1), False, [[1, 1, 0], [1, 1, 1], [1, 1, 1]], id="right 1 only"),
        pytest.param((0, 0), False, [[1, 0, 0], [0, 1, 0], [0, 0, 1]], id="diagonal"),
        pytest.param((1, 1), True, [[1, 0, 0], [1, 1, 0], [0, 1, 1]], id="causal caps the right side"),
    ],
)
def test_window(window: tuple[int, int], causal: bool, expected: list[list[int]]) -> None:
    """Three queries and keys, top-left: the window keeps j in [i - left, i + right] (-1 unbounded)."""
    q = np.zeros((1, 1, 3, 1))
    assert keep_of(parts(q, q, q, window=window, is_causal=causal)) == expected


def test_one_offset_per_batch_item() -> None:
    """Offsets [0, 2] (ONNX's external cache, nonpad_kv_seqlen - n_q): item 0 is top-left, item 1 bottom-right."""
    q = np.zeros((2, 1, 2, 1))
    k = np.zeros((2, 1, 4, 1))
    p = parts(q, k, k, is_causal=True, alignment=np.array([0, 2]))
    assert np.isfinite(p.biased[:, 0]).astype(int).tolist() == [
        [[1, 0, 0, 0], [1, 1, 0, 0]],
        [[1, 1, 1, 0], [1, 1, 1, 1]],
    ]


def test_neg_inf_float_mask_entry_masks_an_infinite_score() -> None:
    """A -inf mask entry masks a +inf score too (ONNX decides masking on the bias): weight 0, not NaN."""
    q = np.array([[[[np.inf]]]])
    k = np.array([[[[1.0], [0.0]]]])
    v = np.array([[[[1.0], [2.0]]]])
    with np.errstate(invalid="ignore"):
        p = parts(q, k, v, scale=1.0, attn_mask=np.array([-np.inf, 0.0]))
    assert p.biased.ravel()[0] == -np.inf
    assert np.isnan(p.biased.ravel()[1])  # inf · 0 is NaN: a kept NaN score stays NaN
    assert p.weights.ravel()[0] == 0.0
    want = _torch_parts(np.array([[[[np.inf]]]]), k, v, {"scale": 1.0, "attn_mask": np.array([-np.inf, 0.0])})
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(p, f), want[f], err_msg=f)


def test_negative_offset_masks_rows_fully() -> None:
    """Offset -1 with causal: query 0 sees no key (zero output, zero weights, lse -inf); query 1 sees key 0."""
    q = np.zeros((1, 1, 2, 1))
    v = np.array([[[[5.0], [7.0]]]])
    p = parts(q, q, v, is_causal=True, alignment=-1)
    assert p.output.ravel().tolist() == [0.0, 5.0]
    assert p.weights[0, 0, 0].tolist() == [0.0, 0.0]
    assert p.lse.ravel().tolist() == [-np.inf, 0.0]


def test_alibi_distance_from_aligned_position() -> None:
    """One query, three keys, bottom-right (offset 2), slope 0.5: bias -0.5·|2 - j| = [-1, -0.5, 0]."""
    q = np.zeros((1, 1, 1, 1))
    k = np.zeros((1, 1, 3, 1))
    p = parts(q, k, k, alibi_slopes=np.array([0.5]), alignment="bottom_right")
    assert p.biased.ravel().tolist() == [-1.0, -0.5, 0.0]
    per_batch = parts(
        np.zeros((2, 1, 1, 1)), np.zeros((2, 1, 3, 1)), np.zeros((2, 1, 3, 1)), alibi_slopes=[[1.0], [2.0]]
    )
    assert per_batch.biased[:, 0, 0].tolist() == [[0.0, -1.0, -2.0], [0.0, -2.0, -4.0]]


def test_key_lengths_mask_keys_per_batch_item() -> None:
    """Lengths [1, 2]: item 0 sees key 0 only (output 2), item 1 both keys (output 3)."""
    q = np.zeros((2, 1, 1, 1))
    k = np.zeros((2, 1, 2, 1))
    v = np.array([2.0, 4.0] * 2).reshape(2, 1, 2, 1)
    assert parts(q, k, v, key_lengths=[1, 2]).output.ravel().tolist() == [2.0, 3.0]


def test_lse_natural_log_and_fully_masked_row() -> None:
    """Scores [0, ln 3]: lse = ln 4; a fully masked row: lse -inf, zero weights and output."""
    q = np.array([[[[1.0], [1.0]]]])
    k = np.array([[[[0.0], [math.log(3.0)]]]])
    v = np.array([[[[1.0], [2.0]]]])
    p = parts(q, k, v, scale=1.0, attn_mask=np.array([[True, True], [False, False]]))
    assert p.lse.ravel()[0] == pytest.approx(math.log(4.0), abs=1e-15)
    assert p.lse.ravel()[1] == -np.inf
    assert p.weights[0, 0, 1].tolist() == [0.0, 0.0] and p.output[0, 0, 1].tolist() == [0.0]


def test_two_d_inputs_have_no_head_axis() -> None:
    """(n_q, d_k) inputs: every stage without the head axis; the torch reference's example, 2 then 3."""
    p = parts([[1.0], [1.0]], [[0.0], [0.0]], [[2.0], [4.0]], is_causal=True, scale=1.0)
    assert p.output.tolist() == [[2.0], [3.0]] and p.weights.tolist() == [[1.0, 0.0], [0.5, 0.5]]
    assert p.lse.shape == (2,)


def test_varlen_sequences_do_not_attend_across() -> None:
    """Packed [2 | 1] rows with equal scores: sequence 0 averages 2, 4 (3, 3); sequence 1 sees only 6."""
    q = np.ones((3, 1, 1))
    k = np.zeros((3, 1, 1))
    v = np.array([2.0, 4.0, 6.0]).reshape(3, 1, 1)
    cu = np.array([0, 2, 3])
    assert gv.varlen_attention(q, k, v, cu, cu).ravel().tolist() == [3.0, 3.0, 6.0]


def test_varlen_sequence_without_keys_gives_zeros() -> None:
    """A sequence with one query and no keys gets the zero vector."""
    out = gv.varlen_attention(np.ones((2, 1, 1)), np.zeros((1, 1, 1)), np.full((1, 1, 1), 5.0), [0, 1, 2], [0, 1, 1])
    assert out.ravel().tolist() == [5.0, 0.0]


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        pytest.param(
            lambda: parts(np.ones((1, 3, 1, 2)), np.ones((1, 2, 1, 2)), np.ones((1, 2, 1, 2))), "key", id="heads"
        ),
        pytest.param(
            lambda: parts(np.ones((1, 1, 1, 2)), np.ones((1, 1, 1, 3)), np.ones((1, 1, 1, 2))), "key", id="d_k"
        ),
        pytest.param(
            lambda: parts(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 2)), np.ones((1, 1, 3, 2)), attn_mask=np.ones(2)),
            "attn_mask",
            id="mask",
        ),
        pytest.param(
            lambda: parts(np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), alignment="x"),
            "alignment",
            id="alignment",
        ),
        pytest.param(
            lambda: gv.varlen_attention(np.ones((2, 1, 1)), np.ones((2, 1, 1)), np.ones((2, 1, 1)), [0, 3], [0, 2]),
            "cu_seqlens_q",
            id="cu",
        ),
    ],
)
def test_shape_errors_name_the_argument(call: Any, argument: str) -> None:
    """Shapes that do not fit raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=f"^{argument}: "):
        call()


# ---------------------------------------------------------------------------------------------------------------------
# Properties


@st.composite
def variant_inputs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """Random Q, K, V (B, H, n, d) and every option drawn (bool or float mask, offset, window, cap, ALiBi, lengths)."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    B, H_kv, group = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    H_q, n_q, n_k, d_k, d_v = H_kv * group, draw(st.integers(1, 4)), draw(st.integers(1, 5)), 3, 2
    q = rng.normal(size=(B, H_q, n_q, d_k))
    k = rng.normal(size=(B, H_kv, n_k, d_k))
    v = rng.normal(size=(B, H_kv, n_k, d_v))
    opts: dict[str, Any] = {}
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    mask_shape = draw(st.sampled_from([(n_k,), (n_q, n_k), (B, 1, n_q, n_k), (H_q, n_q, n_k)]))
    if mask_kind == "bool":
        opts["attn_mask"] = rng.random(mask_shape) < 0.7
    elif mask_kind == "float":
        m = rng.normal(size=mask_shape)
        opts["attn_mask"] = np.where(rng.random(mask_shape) < 0.2, -np.inf, m)
    opts["is_causal"] = draw(st.booleans())
    opts["alignment"] = draw(st.sampled_from(["top_left", "bottom_right", 0, 1, 3, -1, "per item"]))
    if opts["alignment"] == "per item":
        opts["alignment"] = rng.integers(-2, n_k + 1, size=B)
    opts["window"] = (draw(st.integers(-1, 3)), draw(st.integers(-1, 3)))
    opts["scale"] = draw(st.sampled_from([None, 0.5, 2.0, -1.0]))
    opts["softcap"] = draw(st.sampled_from([None, 0.5, 3.0]))
    if draw(st.booleans()):
        opts["alibi_slopes"] = rng.random((H_q,) if draw(st.booleans()) else (B, H_q))
    if draw(st.booleans()):
        opts["key_lengths"] = rng.integers(0, n_k + 1, size=B)
    return q, k, v, opts


@settings(max_examples=60, deadline=None)
@given(variant_inputs())
def test_gqa_equals_repeated_kv_heads(inputs: tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]) -> None:
    """Grouped-query attention equals attention with each KV head repeated H_q / H_kv times in place."""
    q, k, v, opts = inputs
    group = q.shape[1] // k.shape[1]
    a = parts(q, k, v, **opts)
    b = parts(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1), **opts)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


@settings(max_examples=60, deadline=None)
@given(variant_inputs())
def test_weights_rows_sum_to_one_or_zero_and_lse_matches(
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]],
) -> None:
    """Each weight row sums to 1 (0 when fully masked); lse = log Σ exp(biased); output = weights V per head."""
    q, k, v, opts = inputs
    p = parts(q, k, v, **opts)
    sums = p.weights.sum(-1)
    empty = np.isneginf(p.biased).all(-1)
    np.testing.assert_allclose(sums, np.where(empty, 0.0, 1.0), atol=1e-12)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(p.lse, np.log(np.exp(p.biased).sum(-1)), atol=1e-9)
    assert np.all(p.weights[np.isneginf(p.biased)] == 0.0)


@settings(max_examples=40, deadline=None)
@given(variant_inputs())
def test_keys_outside_window_or_length_never_change_output(
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]],
) -> None:
    """Replacing every masked-out key and value by huge numbers changes no finite stage after the mask."""
    q, k, v, opts = inputs
    if "attn_mask" in opts or k.shape[1] != q.shape[1]:
        return  # per-head masks (and shared KV heads) would mix kept and masked entries of one key
    p = parts(q, k, v, **opts)
    dropped = np.isneginf(p.biased).all(axis=(1, 2))  # (B, n_k): keys no query of any head uses
    k2 = np.where(dropped[:, None, :, None], 1e6, k)
    v2 = np.where(dropped[:, None, :, None], 1e6, v)
    p2 = parts(q, k2, v2, **opts)
    np.testing.assert_array_equal(p.weights, p2.weights)
    np.testing.assert_array_equal(p.output, p2.output)


def test_plain_case_equals_existing_golden_attention() -> None:
    """Without options the twin equals golden.attention (softmax(QKᵀ/√d_k) V) and golden.causal_attention."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 2))
    np.testing.assert_allclose(gv.general_attention(q, k, v), golden.attention(q, k, v), rtol=1e-13, atol=1e-14)
    for alignment in ("top_left", "bottom_right"):
        np.testing.assert_allclose(
            gv.general_attention(q, k, v, is_causal=True, alignment=alignment),
            golden.causal_attention(q, k, v, alignment),
            rtol=1e-13,
            atol=1e-14,
        )


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=4))
def test_varlen_equals_sequences_one_by_one(seed: int, lengths: list[tuple[int, int]]) -> None:
    """A packed batch equals each sequence run alone (bottom-right causal, per-sequence ALiBi)."""
    rng = np.random.default_rng(seed)
    nq = [a for a, _ in lengths]
    nk = [b for _, b in lengths]
    q, k, v = rng.normal(size=(sum(nq), 2, 3)), rng.normal(size=(sum(nk), 1, 3)), rng.normal(size=(sum(nk), 1, 2))
    slopes = rng.random((len(lengths), 2))
    cq, ck = np.concatenate([[0], np.cumsum(nq)]), np.concatenate([[0], np.cumsum(nk)])
    packed = gv.varlen_attention(
        q, k, v, cq, ck, AttentionOptions(is_causal=True, alignment="bottom_right", alibi_slopes=slopes)
    )
    for b in range(len(lengths)):
        alone = gv.general_attention(
            q[cq[b] : cq[b + 1]].transpose(1, 0, 2),
            k[ck[b] : ck[b + 1]].transpose(1, 0, 2),
            v[ck[b] : ck[b + 1]].transpose(1, 0, 2),
            is_causal=True,
            alignment="bottom_right",
            alibi_slopes=slopes[b],
        )
        np.testing.assert_array_equal(packed[cq[b] : cq[b + 1]], alone.transpose(1, 0, 2))


# ---------------------------------------------------------------------------------------------------------------------
# The twin against the torch reference (float64): two independent codes, every stage


def _torch_parts(q: np.ndarray, k: np.ndarray, v: np.ndarray, opts: dict[str, Any]) -> dict[str, np.ndarray]:
    torch = pytest.importorskip("torch")
    variants = pytest.importorskip("attnscore.maths.variants")
    t_opts = {
        name: (torch.from_numpy(np.asarray(val)) if name in ("attn_mask", "alibi_slopes", "key_lengths") else val)
        for name, val in opts.items()
    }
    p = variants.general_attention_parts(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), **t_opts)
    return {f: getattr(p, f).numpy() for f in FIELDS}


@settings(max_examples=150, deadline=None)
@given(variant_inputs())
def test_twin_agrees_with_torch_reference_float64(
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]],
) -> None:
    """Every stage of the twin equals the torch reference's in float64 (1e-12), masks and infinities included."""
    q, k, v, opts = inputs
    want = _torch_parts(q, k, v, opts)
    got = parts(q, k, v, **opts)
    for f in FIELDS:
        np.testing.assert_allclose(getattr(got, f), want[f], rtol=1e-12, atol=1e-12, err_msg=f"{f} with {opts}")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=3))
def test_varlen_twin_agrees_with_torch_reference(seed: int, lengths: list[tuple[int, int]]) -> None:
    """varlen_attention: the twin equals the torch reference (packed mask, causal bottom-right, window, cap)."""
    torch = pytest.importorskip("torch")
    variants = pytest.importorskip("attnscore.maths.variants")
    rng = np.random.default_rng(seed)
    nq, nk = [a for a, _ in lengths], [b for _, b in lengths]
    q, k, v = rng.normal(size=(sum(nq), 2, 3)), rng.normal(size=(sum(nk), 2, 3)), rng.normal(size=(sum(nk), 2, 2))
    cq, ck = np.concatenate([[0], np.cumsum(nq)]), np.concatenate([[0], np.cumsum(nk)])
    mask = rng.random((2, sum(nq), sum(nk))) < 0.8
    alignment = rng.integers(-1, 4, size=len(lengths)) if seed % 2 else "bottom_right"
    opts = {"is_causal": True, "alignment": alignment, "window": (2, -1), "softcap": 2.0}
    got = gv.varlen_attention(q, k, v, cq, ck, AttentionOptions(attn_mask=mask, **opts))
    t = [torch.from_numpy(x) for x in (q, k, v, cq, ck, mask)]
    t_opts = {**opts, "alignment": torch.from_numpy(alignment) if isinstance(alignment, np.ndarray) else alignment}
    want = variants.varlen_attention(*t[:5], attn_mask=t[5], **t_opts).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_twin_never_imports_torch() -> None:
    """The twin's source imports numpy only (no torch, no attnscore module that uses it): independence.
    Its one attnscore import, the options value (:mod:`attnscore.maths.attention_options`), imports
    the standard library only."""
    import ast
    import inspect
    import types

    from attnscore.maths import attention_options

    def imports(module: types.ModuleType) -> set[str]:
        tree = ast.parse(inspect.getsource(module))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        return names | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    imported = {name.split(".")[0] for name in imports(gv) - {"attnscore.maths.attention_options"}}
    assert imported <= {"__future__", "dataclasses", "typing", "numpy"}, imported
    assert imports(attention_options) <= {"__future__", "collections.abc", "dataclasses", "typing"}
