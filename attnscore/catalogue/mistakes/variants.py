"""Mistakes of the attention variants real kernels implement: SDPA's scale, bool and float masks, KV heads,
causal alignment; a kernel's grouped-query heads, softcap, ALiBi bias and causal alignment (the
``kernel_attention`` contract)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import (
    kernel,
    kv_heads_grouped,
    sdpa_bool_mask,
    sdpa_causal,
    sdpa_float_mask,
    sdpa_grouped_heads,
    sdpa_scale_given,
)
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import changing
from attnscore.maths import variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# which contracts (by features; the kernel ones are this section's own)


def kernel_grouped_heads(c: Contract) -> bool:
    """A kernel whose key/value heads are their own symbol (``h_kv``, not tied to ``h_q``)."""
    return kernel(c) and dict(c.parameters)["key"][-3] == "h_kv"


def grouped_heads(c: Contract) -> bool:
    """Grouped-query heads in SDPA's layout: SDPA with ``enable_gqa``, or a kernel with its own ``h_kv``
    (the property ``gqa_equals_repeated_kv``'s contracts; the KV-head mistakes below apply to every
    variant with grouped heads, :func:`attnscore.catalogue.families.kv_heads_grouped`)."""
    return sdpa_grouped_heads(c) or kernel_grouped_heads(c)


def kernel_softcap(c: Contract) -> bool:
    """A kernel with ``softcap`` set."""
    return kernel(c) and c.option("softcap") is not None


def kernel_softcap_masked(c: Contract) -> bool:
    """A kernel with ``softcap`` and something that masks or biases the capped scores (causal, ALiBi)."""
    return kernel_softcap(c) and (bool(c.option("is_causal")) or "alibi_slopes" in c.parameter_names)


def kernel_alibi(c: Contract) -> bool:
    """A kernel that takes ``alibi_slopes``."""
    return kernel(c) and "alibi_slopes" in c.parameter_names


def kernel_alibi_unmasked(c: Contract) -> bool:
    """A kernel with ALiBi and no causal mask: the keys after the query take part too (under ``is_causal``
    the signed distance ``j - i - (n_k - n_q)`` is ``-|i + n_k - n_q - j|`` on every kept key)."""
    return kernel_alibi(c) and not c.option("is_causal")


def _kernel_with(c: Contract, args: tuple[torch.Tensor, ...], **changed: Any) -> torch.Tensor:
    """``kernel_attention`` on the contract's arguments with its configured keywords, some ``changed``."""
    named = dict(zip(c.parameter_names, args, strict=True))
    options = {
        "is_causal": bool(c.option("is_causal")),
        "alignment": "bottom_right",
        "scale": c.option("scale"),
        "softcap": c.option("softcap"),
        "alibi_slopes": named.get("alibi_slopes"),
        **changed,
    }
    return variants.general_attention(named["query"], named["key"], named["value"], **options)


def _grouped(Q: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """K or V with each KV head repeated for its query heads (``h0 h0 h1 h1``)."""
    return X.repeat_interleave(Q.shape[-3] // X.shape[-3], dim=-3)


def _manual(
    c: Contract,
    args: tuple[torch.Tensor, ...],
    scores_fn: Any = None,
    bias_sign: float = -1.0,
    distance: str = "absolute",
    mask_before_cap: bool = False,
    causal_offset: str = "bottom_right",
) -> torch.Tensor:
    """The kernel's attention written out step by step, with one step changed (the mistakes below):
    ``scores_fn(raw Q Kᵀ, scale, cap) -> capped scores``; the ALiBi bias ``bias_sign · slope · dist``
    with ``dist`` ``|i + n_k - n_q - j|`` (``"absolute"``), ``j - i - (n_k - n_q)`` (``"signed"``)
    or ``|i - j|`` (``"top_left"``); the causal mask before the cap (``mask_before_cap``); the causal
    mask aligned ``"bottom_right"`` (``j <= i + n_k - n_q``) or ``"top_left"`` (``j <= i``, ``causal_offset``)."""
    named = dict(zip(c.parameter_names, args, strict=True))
    Q = named["query"].double()
    K, V = _grouped(Q, named["key"].double()), _grouped(Q, named["value"].double())
    n_q, n_k = Q.shape[-2], K.shape[-2]
    scale = _scale(c, Q)
    cap = c.option("softcap")
    raw = Q @ K.transpose(-2, -1)  # (..., H_q, n_q, n_k)
    i = torch.arange(n_q, dtype=torch.float64).unsqueeze(-1)
    j = torch.arange(n_k, dtype=torch.float64).unsqueeze(0)
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if c.option("is_causal"):
        keep = j <= i + ((n_k - n_q) if causal_offset == "bottom_right" else 0)
    bias = torch.zeros(n_q, n_k, dtype=torch.float64)
    if "alibi_slopes" in named:
        dist = {
            "absolute": (i + (n_k - n_q) - j).abs(),
            "signed": j - i - (n_k - n_q),
            "top_left": (i - j).abs(),
        }[distance]
        slopes = named["alibi_slopes"].double()[..., None, None]  # (H_q, 1, 1)
        sign = bias_sign if distance != "signed" else 1.0
        bias = sign * slopes * dist
    if mask_before_cap:  # masked to -inf first, then capped: cap · tanh(-inf) = -cap, the key leaks in
        s = (raw * scale).masked_fill(~keep, float("-inf")) + bias
        s = cap * torch.tanh(s / cap)
    else:
        s = scores_fn(raw, scale, cap) if scores_fn is not None else raw * scale
        s = (s + bias).masked_fill(~keep, float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)
    return (w @ V).to(named["query"].dtype)


def _scale(c: Contract, query: torch.Tensor) -> float:
    """The contract's ``scale`` keyword, or ``1/√d_k`` when it is None (SDPA's and the kernel's default)."""
    scale = c.option("scale")
    return 1.0 / query.shape[-1] ** 0.5 if scale is None else float(scale)


def _changed(attention: Callable[..., torch.Tensor], **changed: Any) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: ``attention(contract, args, **changed)`` (:func:`_sdpa_with`,
    :func:`_kernel_with` or :func:`_manual`), the contract's attention with one thing ``changed``."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return attention(c, args, **changed)

    return wrong


def _sdpa_mask(mask: Callable[[Contract, dict[str, torch.Tensor]], torch.Tensor]) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: SDPA with its ``attn_mask`` replaced by ``mask(contract, arguments by name)``."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return _sdpa_with(c, args, attn_mask=mask(c, dict(zip(c.parameter_names, args, strict=True))))

    return wrong


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention (the ``sdpa`` contract; keywords in ``contract.options``)


def _sdpa_with(c: Contract, args: tuple[torch.Tensor, ...], **changed: Any) -> torch.Tensor:
    """SDPA on the contract's arguments with its configured keywords, some ``changed``."""
    named = dict(zip(c.parameter_names, args, strict=True))
    options = {
        "attn_mask": named.get("attn_mask"),
        "is_causal": bool(c.option("is_causal")),
        "scale": c.option("scale"),
        **changed,
    }
    return variants.general_attention(named["query"], named["key"], named["value"], **options)


add(
    "sdpa_scale_ignored",
    "scale keyword ignored",
    sdpa_scale_given,
    "the scores are divided by √d_k whatever scale says: multiply Q Kᵀ by the scale you are given "
    "(SDPA's default 1/√d_k applies only when scale is None)",
)(_changed(_sdpa_with, scale=None))


add(
    "sdpa_bool_mask_inverted",
    "bool attn_mask read as True = masked out",
    sdpa_bool_mask,
    "in SDPA a bool attn_mask is True where the key takes part (the opposite of nn.MultiheadAttention's "
    "key_padding_mask): keep the keys where the mask is True",
)(_sdpa_mask(lambda c, a: ~a["attn_mask"]))


# SDPA's float attn_mask: added to the scaled scores, -inf masks, a row of -inf gives zeros


add(
    "sdpa_float_mask_before_scale",
    "float attn_mask added before the scale",
    sdpa_float_mask,
    "a float attn_mask is added to the scaled scores, scale · Q Kᵀ + attn_mask (SDPA); you added it to Q Kᵀ "
    "and scaled the sum, so every bias was multiplied by the scale too",
)(_sdpa_mask(lambda c, a: a["attn_mask"] * _scale(c, a["query"])))  # (Q Kᵀ + m) · scale; -inf stays -inf


add(
    "sdpa_float_mask_as_bool",
    "float attn_mask read as bool (non-zero = takes part)",
    sdpa_float_mask,
    "a float attn_mask is added to the scores, not read as keep/drop: a 0 entry keeps its key unchanged "
    "and -inf masks it out; you kept the keys with a non-zero entry (-inf among them) and dropped the 0 ones",
)(_sdpa_mask(lambda c, a: a["attn_mask"] != 0))


def _subtracted_nan_zeroed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """The float mask subtracted, written step by step with the NaN weights set to 0 (``nan_to_num``,
    code that gives a query with no kept key zeros): every row with a ``-inf`` entry (``+inf`` after
    the subtraction) gives the zero vector."""
    named = dict(zip(c.parameter_names, args, strict=True))
    Q = named["query"]
    K, V = named["key"], named["value"]
    if c.option("enable_gqa"):
        K, V = _grouped(Q, K), _grouped(Q, V)
    s = Q @ K.transpose(-2, -1) * _scale(c, Q) - named["attn_mask"]  # (..., n_q, n_k)
    return torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0) @ V


add(
    "sdpa_float_mask_subtracted",
    "float attn_mask subtracted from the scores",
    sdpa_float_mask,
    "add the float attn_mask to the scaled scores (scores + attn_mask); you subtracted it, so a negative "
    "bias raised the score and a -inf entry became +inf (a NaN row after softmax)",
    forms=(_subtracted_nan_zeroed,),
)(_sdpa_mask(lambda c, a: -a["attn_mask"]))


add(
    "sdpa_float_mask_ignored",
    "float attn_mask ignored",
    sdpa_float_mask,
    "the float attn_mask was not used: add it to the scaled scores before the softmax "
    "(scale · Q Kᵀ + attn_mask; its -inf entries mask their keys)",
)(_changed(_sdpa_with, attn_mask=None))


@add(
    "sdpa_float_mask_nan_rows",
    "a query whose float mask is all -inf gives NaN",
    sdpa_float_mask,
    "a query whose attn_mask entries are all -inf has no key left: softmax over all -inf is 0/0 = NaN, but "
    "SDPA (PyTorch 2.5+) gives the zero vector there; set the weights of such a row to 0 (e.g. "
    "torch.nan_to_num on the weights, or where(row has a finite entry, weights, 0))",
)
def _float_mask_nan_rows(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    named = dict(zip(c.parameter_names, args, strict=True))
    out = _sdpa_with(c, args)  # (..., n_q, d_v): zeros where a row is all -inf
    empty = torch.isneginf(named["attn_mask"]).all(dim=-1, keepdim=True)  # (..., n_q, 1), broadcast like the mask
    empty = torch.broadcast_to(empty, (*torch.broadcast_shapes(empty.shape[:-1], out.shape[:-1]), 1))
    return torch.where(empty, torch.full((), float("nan"), dtype=out.dtype), out)


add(
    "kv_heads_tiled",
    "KV heads tiled (h0 h1 h0 h1) instead of grouped",
    kv_heads_grouped,
    "query head h uses key/value head h // (H_q / H_kv) (h0 h0 h1 h1, repeat_interleave), "
    "not h % H_kv (h0 h1 h0 h1, repeat or tile)",
)(changing(AttentionChange(kv_heads="tiled"), __name__))


add(
    "kv_head_zero_for_all",
    "every query head uses KV head 0 (multi-query code on grouped heads)",
    kv_heads_grouped,
    "query head h uses key/value head h // (H_q / H_kv); you used key/value head 0 for every query head, "
    "as multi-query attention (H_kv = 1) would: repeat each KV head for its group (repeat_interleave)",
)(changing(AttentionChange(kv_heads="first"), __name__))


# ---------------------------------------------------------------------------------------------
# softcap (cap · tanh(s / cap) on the scaled scores, before the mask and the bias)


add(
    "softcap_ignored",
    "softcap ignored",
    kernel_softcap,
    "the scores were not capped: apply cap · tanh(s / cap) to the scaled scores before the softmax",
)(_changed(_kernel_with, softcap=None))


add(
    "softcap_after_mask",
    "softcap applied after the mask",
    kernel_softcap_masked,
    "cap the scaled scores before masking and biasing them: capping a masked -inf gives -cap, so a masked "
    "key gets weight again (FlashAttention and ONNX cap first, then add the bias and mask)",
)(_changed(_manual, mask_before_cap=True))


add(
    "softcap_scale_twice",
    "scale applied before and after the softcap",
    kernel_softcap,
    "scale once, before the cap: cap · tanh(scale · s / cap); you multiplied by the scale again afterwards",
)(_changed(_manual, scores_fn=lambda raw, scale, cap: scale * cap * torch.tanh(raw * scale / cap)))


add(
    "softcap_scale_after",
    "scale applied after the softcap only",
    kernel_softcap,
    "the cap applies to the scaled scores: cap · tanh(scale · s / cap), not scale · cap · tanh(s / cap)",
)(_changed(_manual, scores_fn=lambda raw, scale, cap: scale * cap * torch.tanh(raw / cap)))


# ---------------------------------------------------------------------------------------------
# ALiBi (-slope · |i + n_k - n_q - j| added to the scores, FlashAttention's form)


add(
    "alibi_wrong_sign",
    "ALiBi bias with the wrong sign",
    kernel_alibi,
    "the ALiBi bias penalises distance: add -slope · |i + n_k - n_q - j|; you added +slope · distance: far keys win",
)(_changed(_manual, bias_sign=1.0))


add(
    "alibi_signed_distance",
    "ALiBi distance signed (j - i), not absolute",
    kernel_alibi_unmasked,
    "the ALiBi distance is absolute in FlashAttention, -slope · |i + n_k - n_q - j|; the causal paper's "
    "slope · (j - i) rewards keys after the query when nothing masks them",
)(_changed(_manual, distance="signed"))


add(
    "alibi_top_left",
    "ALiBi distance aligned top-left (|i - j|)",
    kernel_alibi,
    "the ALiBi distance is aligned bottom-right, |i + n_k - n_q - j| (the last query sits at the last key); "
    "you used |i - j|, which differs when n_q != n_k",
)(_changed(_manual, distance="top_left"))


@add(
    "alibi_bias_scaled",
    "ALiBi bias scaled with the scores",
    kernel_alibi,
    "add the ALiBi bias to the scaled scores: scale · Q Kᵀ - slope · distance; you added it before scaling, "
    "so the bias was multiplied by the scale too",
)
def _alibi_bias_scaled(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    named = dict(zip(c.parameter_names, args, strict=True))
    return _kernel_with(c, args, alibi_slopes=named["alibi_slopes"] * _scale(c, named["query"]))


def kernel_causal(c: Contract) -> bool:
    """A kernel with ``is_causal`` (aligned bottom-right, FlashAttention's causal)."""
    return kernel(c) and bool(c.option("is_causal"))


@add(
    "kernel_causal_top_left",
    "causal mask aligned top-left",
    kernel_causal,
    "the causal mask is aligned bottom-right (FlashAttention): query i sits at key i + n_k - n_q and keeps keys "
    "j <= i + n_k - n_q (the last query sees every key); you kept j <= i (top-left, torch.ones(n_q, n_k).tril(), "
    "SDPA's is_causal), which differs whenever n_q != n_k",
)
def _kernel_causal_top_left(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def capped(raw: torch.Tensor, scale: float, cap: float | None) -> torch.Tensor:
        return raw * scale if cap is None else cap * torch.tanh(raw * scale / cap)

    return _manual(c, args, scores_fn=capped, causal_offset="top_left")


def _bottom_right_nan(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """SDPA's causal mask aligned bottom-right, written with ``masked_fill(-inf)`` and a plain softmax:
    with more queries than keys, the first ``n_q - n_k`` queries keep no key and give NaN (0/0)."""
    named = dict(zip(c.parameter_names, args, strict=True))
    out = _sdpa_with(c, args, alignment="bottom_right")  # (..., n_q, d_v)
    n_q, n_k = named["query"].shape[-2], named["key"].shape[-2]
    empty = (torch.arange(n_q) < n_q - n_k).unsqueeze(-1)  # (n_q, 1): rows with no key j <= i + n_k - n_q
    return torch.where(empty, torch.full((), float("nan"), dtype=out.dtype), out)


add(
    "sdpa_causal_bottom_right",
    "is_causal aligned bottom-right",
    sdpa_causal,
    "is_causal in SDPA is top-left (torch.ones(n_q, n_k).tril(): query i keeps keys j <= i); you aligned "
    "the last query with the last key (j <= i + n_k - n_q), FlashAttention's KV-cache convention",
    forms=(_bottom_right_nan,),
)(_changed(_sdpa_with, alignment="bottom_right"))


add(
    "sdpa_is_causal_ignored",
    "is_causal ignored",
    sdpa_causal,
    "every query attends to every key: with is_causal=True query i keeps only keys j <= i",
)(_changed(_sdpa_with, is_causal=False))
