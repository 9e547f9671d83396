"""ONNX's own ``Attention`` conformance cases, run through the golden twin and the torch reference.

Every case of ``onnx.backend.test.case.node.collect_testcases("Attention")`` (the ``_expanded``
twins left out: they check ONNX's function body, not new semantics) is mapped onto our parameters
and every output ONNX checks (``Y``, ``present_key``, ``present_value``, ``qk_matmul_output``) must
agree with ONNX's expected value within the case dtype's ``close`` tolerance
(:data:`attnscore.maths.tolerance.CLOSE_DEFAULTS`). The mapping (see docs/specs.md, "Attention
variants: whose convention is whose") follows ONNX's reference, ``onnx/reference/ops/op_attention.py``:

- 3-D ``[B, S, H·D]`` inputs are split into heads with ``q_num_heads`` / ``kv_num_heads`` and
  moved to ``[B, H, S, D]`` (the output goes back the same way);
- ``past_key`` / ``past_value`` are concatenated in front of K / V along the sequence axis
  (that is ``present_key`` / ``present_value``) and the causal and window offset is the cache length;
  with ``nonpad_kv_seqlen`` instead (an external cache) the offset is ``nonpad_kv_seqlen[b] − S_q``
  *per batch item* (``alignment`` as ``(B,)`` integers);
- a mask shorter than the total key length is padded with False / ``-inf``; ``nonpad_kv_seqlen`` is
  ``key_lengths``; ``scale`` is the product's scale (ONNX multiplies Q and K by ``√scale`` each);
  ``softcap = 0`` means none; ``softmax_precision`` only changes rounding and has no parameter;
- ``qk_matmul_output_mode`` 0 / 1 / 2 / 3 expose ``scores`` / ``capped`` / ``biased`` / ``weights``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnx_numpy_helper = pytest.importorskip("onnx.numpy_helper")

from attnscore.maths import golden_variants  # noqa: E402
from attnscore.maths.tolerance import CLOSE_DEFAULTS, Tolerance, allowed_error, entries_close  # noqa: E402

STAGE_OF_MODE = {0: "scores", 1: "capped", 2: "biased", 3: "weights"}
DTYPE_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


@functools.lru_cache(maxsize=1)
def _cases() -> tuple[Any, ...]:
    """ONNX's Attention node cases without the ``_expanded`` twins.

    Only ONNX's ``attention`` case module is imported (about 1.5 s): importing it runs its exports,
    which append the cases. ``collect_testcases("Attention")`` gives the same 93 cases but imports
    and runs every operator's exports (about 10 s); it is the fallback where ONNX's layout differs.
    """
    import importlib

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the other operators' exports warn about overflowing casts
        if hasattr(node, "_TargetOpType") and hasattr(node, "_NodeTestCases"):
            node._TargetOpType = "Attention"
            importlib.import_module("onnx.backend.test.case.node.attention")
            cases = [c for c in node._NodeTestCases if c.model.graph.node[0].op_type == "Attention"]
        else:  # pragma: no cover - another ONNX layout
            cases = node.collect_testcases("Attention")
    return tuple(c for c in cases if not c.name.endswith("_expanded"))


def _case_names() -> list[str]:
    return [c.name for c in _cases()]


def _case(name: str) -> Any:
    return next(c for c in _cases() if c.name == name)


@dataclass(frozen=True)
class OnnxCase:
    """One conformance case unpacked: named inputs and expected outputs (numpy), and the node's attributes."""

    name: str
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    attrs: dict[str, Any]

    @property
    def dtype(self) -> str:
        """The case's floating dtype name (``"float32"``, ``"float16"``, ``"bfloat16"``)."""
        return str(self.inputs["Q"].dtype)


def _unpack(case: Any) -> OnnxCase:
    """Inputs and outputs by the graph's names (the node's own list holds ``""`` for skipped optionals)."""
    graph = case.model.graph
    (node,) = graph.node
    assert node.op_type == "Attention"
    (data,) = case.data_sets
    inputs, outputs = data
    in_names = [i.name for i in graph.input]
    out_names = [o.name for o in graph.output]
    assert len(in_names) == len(inputs) and len(out_names) == len(outputs), case.name
    # the graph's names are the node's operator slots (Q, K, V, attn_mask, past_key, past_value,
    # nonpad_kv_seqlen; Y, present_key, present_value, qk_matmul_output): check it.
    schema = onnx.defs.get_schema("Attention")
    slot_in = [s.name for s in schema.inputs]
    slot_out = [s.name for s in schema.outputs]
    for name, slot in zip(node.input, slot_in, strict=False):
        assert name in ("", slot), (case.name, name, slot)
    for name, slot in zip(node.output, slot_out, strict=False):
        assert name in ("", slot), (case.name, name, slot)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return OnnxCase(
        case.name, dict(zip(in_names, inputs, strict=True)), dict(zip(out_names, outputs, strict=True)), attrs
    )


@dataclass(frozen=True)
class Mapped:
    """A case in our parameters: 4-D SDPA-layout arrays (the case dtype) and keyword options."""

    query: np.ndarray  # (B, H_q, n_q, d_k)
    key: np.ndarray  # (B, H_kv, n_k, d_k), the cache in front
    value: np.ndarray  # (B, H_kv, n_k, d_v)
    options: dict[str, Any]
    three_d: bool


def _to_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """``[B, S, H·D]`` -> ``[B, H, S, D]``, as ONNX splits the hidden axis (head-major)."""
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def map_case(c: OnnxCase) -> Mapped:
    """ONNX's inputs and attributes onto :func:`golden_variants.general_attention_parts`'s parameters."""
    a, x = c.attrs, c.inputs
    Q, K, V = x["Q"], x["K"], x["V"]
    three_d = Q.ndim == 3
    if three_d:
        Q, K, V = _to_heads(Q, a["q_num_heads"]), _to_heads(K, a["kv_num_heads"]), _to_heads(V, a["kv_num_heads"])
    past = 0
    if "past_key" in x:
        past = x["past_key"].shape[2]
        K = np.concatenate([x["past_key"], K], axis=2)  # present_key
        V = np.concatenate([x["past_value"], V], axis=2)  # present_value
    n_q, n_k = Q.shape[2], K.shape[2]
    options: dict[str, Any] = {"is_causal": bool(a.get("is_causal", 0))}
    window = (int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1)))
    if window != (-1, -1):
        options["window"] = window
    if "scale" in a:
        options["scale"] = float(a["scale"])
    if float(a.get("softcap", 0.0)) > 0:
        options["softcap"] = float(a["softcap"])
    mask = x.get("attn_mask")
    if mask is not None:
        pad = n_k - mask.shape[-1]
        if pad > 0:  # ONNX pads a short mask's key axis with False / -inf
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
        options["attn_mask"] = mask
    if "nonpad_kv_seqlen" in x:
        lengths = x["nonpad_kv_seqlen"].astype(np.int64)
        options["key_lengths"] = lengths
        options["alignment"] = lengths - n_q  # the external cache: one bottom-right offset per batch item
    else:
        options["alignment"] = past  # the internal cache's offset; 0 (top-left) without one
    return Mapped(Q, K, V, options, three_d)


Parts = dict[str, np.ndarray]  # AttentionParts' fields as float64 arrays


def run_mapped(m: Mapped, parts_fn: Callable[..., Parts]) -> Parts:
    """All stages for the mapped case."""
    return parts_fn(m.query, m.key, m.value, **m.options)


def onnx_outputs(c: OnnxCase, m: Mapped, parts: Parts) -> dict[str, np.ndarray]:
    """Our stages in ONNX's output layout, for the outputs the case checks."""
    out: dict[str, np.ndarray] = {}
    y = parts["output"]  # (B, H_q, n_q, d_v)
    if m.three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)  # (B, n_q, H_q·d_v)
    out["Y"] = y
    out["present_key"] = np.asarray(m.key, dtype=np.float64)
    out["present_value"] = np.asarray(m.value, dtype=np.float64)
    out["qk_matmul_output"] = parts[STAGE_OF_MODE[int(c.attrs.get("qk_matmul_output_mode", 0))]]
    return {k: v for k, v in out.items() if k in c.expected}


def golden_parts(query: np.ndarray, key: np.ndarray, value: np.ndarray, **options: Any) -> Parts:
    """The float64 golden twin's stages."""
    p = golden_variants.general_attention_parts(query, key, value, **options)
    return {f: getattr(p, f) for f in ("scores", "capped", "biased", "weights", "output", "lse")}


def assert_agrees(c: OnnxCase, ours: dict[str, np.ndarray], factor: float = 1.0) -> None:
    """Every checked output within ``factor`` × the dtype's ``close`` tolerance of ONNX's expected value."""
    assert set(ours) == set(c.expected), (c.name, sorted(ours), sorted(c.expected))
    for name, want_raw in c.expected.items():
        want = np.asarray(want_raw, dtype=np.float64)
        got = np.asarray(ours[name], dtype=np.float64)
        assert got.shape == want.shape, f"{c.name} {name}: shape {got.shape}, ONNX expects {want.shape}"
        allowed = factor * allowed_error(Tolerance("close"), want, c.dtype, d_k=1, scale=np.zeros_like(want))
        ok = entries_close(got, want, allowed)
        if not ok.all():
            idx = tuple(int(i) for i in np.argwhere(~ok)[0])
            with np.errstate(invalid="ignore"):
                worst = float(np.nanmax(np.abs(np.where(ok, 0.0, got - want))))
            raise AssertionError(
                f"{c.name} {name}: {int((~ok).sum())} of {ok.size} entries differ (worst {worst:.3g}); "
                f"at {idx} ours={got[idx]!r}, ONNX={want[idx]!r}, allowed {float(allowed[idx]):.3g} ({c.dtype})"
            )


# ---------------------------------------------------------------------------------------------------------------------
# The collection itself


def test_every_attention_case_is_collected() -> None:
    """ONNX ships at least 90 Attention cases (93 in onnx 1.23) and every one is in the float dtypes we test."""
    names = _case_names()
    assert len(names) >= 90, f"only {len(names)} ONNX Attention cases collected"
    assert len(set(names)) == len(names)
    dtypes = {_unpack(_case(n)).dtype for n in names}
    assert dtypes <= set(CLOSE_DEFAULTS), dtypes
    assert {"float32", "float16", "bfloat16"} <= dtypes


def test_mapping_covers_every_attribute_and_input() -> None:
    """No case uses an attribute or input the mapping does not read (a new ONNX one must not pass silently)."""
    known_attrs = {
        "is_causal",
        "scale",
        "softcap",
        "q_num_heads",
        "kv_num_heads",
        "qk_matmul_output_mode",
        "softmax_precision",
        "left_window_size",
        "right_window_size",
    }
    known_inputs = {"Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"}
    for name in _case_names():
        c = _unpack(_case(name))
        assert set(c.attrs) <= known_attrs, (name, set(c.attrs) - known_attrs)
        assert set(c.inputs) <= known_inputs, (name, set(c.inputs) - known_inputs)


@pytest.mark.parametrize("name", _case_names())
def test_onnx_case_through_golden(name: str) -> None:
    """The golden twin (float64) agrees with ONNX's expected outputs within the case dtype's tolerance."""
    c = _unpack(_case(name))
    m = map_case(c)
    assert_agrees(c, onnx_outputs(c, m, run_mapped(m, golden_parts)))


def _torch_tensor(x: np.ndarray, dtype: str) -> Any:
    """A numpy array (``ml_dtypes.bfloat16`` too) as a torch tensor of ``dtype``, values unchanged."""
    import torch

    from attnscore.boundary.dtypes import TORCH_DTYPES

    if x.dtype == np.bool_:
        return torch.from_numpy(np.ascontiguousarray(x))
    if x.dtype.kind in "iu":
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.int64)))
    return torch.from_numpy(np.ascontiguousarray(x.astype(np.float64))).to(TORCH_DTYPES[dtype])  # exact: x is in dtype


def torch_parts(query: np.ndarray, key: np.ndarray, value: np.ndarray, **options: Any) -> Parts:
    """The torch reference's stages, run in the case dtype, as float64 arrays."""
    variants = pytest.importorskip("attnscore.maths.variants")
    dtype = str(query.dtype)
    opts = {k: (_torch_tensor(np.asarray(v), dtype) if isinstance(v, np.ndarray) else v) for k, v in options.items()}
    p = variants.general_attention_parts(
        _torch_tensor(query, dtype), _torch_tensor(key, dtype), _torch_tensor(value, dtype), **opts
    )
    return {f: getattr(p, f).double().numpy() for f in ("scores", "capped", "biased", "weights", "output", "lse")}


@pytest.mark.parametrize("name", _case_names())
def test_onnx_case_through_torch_reference(name: str) -> None:
    """The torch reference, run in the case dtype, agrees with ONNX's expected outputs within that dtype's tolerance."""
    c = _unpack(_case(name))
    m = map_case(c)
    assert_agrees(c, onnx_outputs(c, m, run_mapped(m, torch_parts)))


# ---------------------------------------------------------------------------------------------------------------------
# The cases catch each convention mistake: a mapping or a maths that gets one convention wrong fails named cases.


def _agrees(c: OnnxCase, ours: dict[str, np.ndarray]) -> bool:
    try:
        assert_agrees(c, ours)
    except AssertionError:
        return False
    return True


def _mapped_top_left(c: OnnxCase) -> Mapped:
    """The cache aligned top-left (offset 0), internal or external."""
    m = map_case(c)
    return Mapped(m.query, m.key, m.value, {**m.options, "alignment": 0}, m.three_d)


def _mapped_padded_bottom_right(c: OnnxCase) -> Mapped:
    """The external cache aligned bottom-right of the padded buffer (``n_k - n_q``), not of each item's length."""
    m = map_case(c)
    return Mapped(m.query, m.key, m.value, {**m.options, "alignment": "bottom_right"}, m.three_d)


def _mapped_scale_root(c: OnnxCase) -> Mapped:
    """ONNX's ``√scale`` (applied to Q and to K) taken for the product's scale."""
    m = map_case(c)
    opts = {**m.options, "scale": float(np.sqrt(m.options["scale"]))} if "scale" in m.options else m.options
    return Mapped(m.query, m.key, m.value, opts, m.three_d)


def _mapped_hidden_d_major(c: OnnxCase) -> Mapped:
    """3-D hidden axis split as ``[D, H]`` instead of ONNX's ``[H, D]``."""
    if c.inputs["Q"].ndim != 3:
        return map_case(c)

    def split(x: np.ndarray, heads: int) -> np.ndarray:
        b, s, hidden = x.shape
        return x.reshape(b, s, hidden // heads, heads).transpose(0, 3, 1, 2)

    inputs = dict(c.inputs)
    for name, heads in (("Q", "q_num_heads"), ("K", "kv_num_heads"), ("V", "kv_num_heads")):
        h = split(inputs[name], c.attrs[heads])  # the wrong split, then back to ONNX's 3-D layout
        inputs[name] = h.transpose(0, 2, 1, 3).reshape(inputs[name].shape)
    return map_case(OnnxCase(c.name, inputs, c.expected, c.attrs))


def _parts_kv_tiled(query: np.ndarray, key: np.ndarray, value: np.ndarray, **options: Any) -> Parts:
    """KV heads tiled ``h0 h1 h0 h1`` instead of grouped ``h0 h0 h1 h1``."""
    group = query.shape[-3] // key.shape[-3]
    return golden_parts(query, np.tile(key, (1, group, 1, 1)), np.tile(value, (1, group, 1, 1)), **options)


def _parts_softcap_after_mask(query: np.ndarray, key: np.ndarray, value: np.ndarray, **options: Any) -> Parts:
    """The softcap applied to the masked scores (a masked ``-inf`` becomes ``-cap``)."""
    cap = options.pop("softcap", None)
    p = golden_parts(query, key, value, **options)
    if cap is None:
        return p
    capped = cap * np.tanh(p["biased"] / cap)
    w = np.exp(capped - capped.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    v = np.repeat(np.asarray(value, dtype=np.float64), query.shape[-3] // value.shape[-3], axis=-3)
    return {**p, "capped": capped, "biased": capped, "weights": w, "output": w @ v}


def _parts_stage_shift(query: np.ndarray, key: np.ndarray, value: np.ndarray, **options: Any) -> Parts:
    """``qk_matmul_output_mode`` 2 read as the capped scores (the bias left out)."""
    p = golden_parts(query, key, value, **options)
    return {**p, "biased": p["capped"]}


MISTAKES = [
    pytest.param(_mapped_top_left, golden_parts, "test_attention_4d_causal_with_past_and_present", id="cache top-left"),
    pytest.param(
        _mapped_top_left, golden_parts, "test_attention_4d_gqa_causal_nonpad_decode", id="external cache top-left"
    ),
    pytest.param(
        _mapped_padded_bottom_right,
        golden_parts,
        "test_attention_4d_causal_nonpad_batch_prefill",
        id="external cache bottom-right of the buffer",
    ),
    pytest.param(_mapped_scale_root, golden_parts, "test_attention_4d_scaled", id="scale read as sqrt(scale)"),
    pytest.param(_mapped_hidden_d_major, golden_parts, "test_attention_3d", id="3-D split [D, H]"),
    pytest.param(map_case, _parts_kv_tiled, "test_attention_4d_gqa", id="KV heads tiled"),
    pytest.param(map_case, _parts_softcap_after_mask, "test_attention_4d_softcap_neginf_mask", id="softcap after mask"),
    pytest.param(map_case, _parts_stage_shift, "test_attention_4d_with_qk_matmul_bias", id="mode 2 without bias"),
]


@pytest.mark.parametrize(("mapper", "parts_fn", "case_name"), MISTAKES)
def test_cases_catch_a_convention_mistake(
    mapper: Callable[[OnnxCase], Mapped], parts_fn: Callable[..., Parts], case_name: str
) -> None:
    """A mapping or maths with one convention wrong disagrees with the named ONNX case (which the right one passes)."""
    c = _unpack(_case(case_name))
    right = map_case(c)
    assert _agrees(c, onnx_outputs(c, right, run_mapped(right, golden_parts)))
    wrong = mapper(c)
    assert not _agrees(c, onnx_outputs(c, wrong, run_mapped(wrong, parts_fn)))
