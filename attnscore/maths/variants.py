"""Reference implementation of the attention variants that real kernels implement (torch).

Shape legend: ``...`` batch dims, ``H_q`` query heads, ``H_kv`` key/value heads, ``n_q`` queries,
``n_k`` keys, ``d_k`` query/key width, ``d_v`` value width; packed (varlen) inputs use ``total_q``
and ``total_k`` rows and ``B`` sequences.

One function, :func:`general_attention_parts`, computes every stage of

    scores  = scale · Q Kᵀ                                  (..., H_q, n_q, n_k)
    capped  = cap · tanh(scores / cap)                     softcap; = scores without a cap
    biased  = capped + float attn_mask + ALiBi bias        kept entries; masked-out entries -inf
    weights = softmax(biased) over the keys                a fully masked row is all zeros
    output  = weights @ V                                  (..., H_q, n_q, d_v)
    lse     = logsumexp(biased) over the keys              (..., H_q, n_q); -inf for a fully masked row

and :func:`general_attention` returns ``output``; :func:`varlen_attention` runs packed batches
(``flash_attn_varlen_func``'s layout) sequence by sequence.

Whose convention each option follows (sources):

- ``attn_mask``, ``is_causal``, ``scale``, grouped-query heads: PyTorch's
  ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) documentation: a bool mask is True
  where the element takes part, a float mask is added to the scores, the mask broadcasts from the
  right; ``scale`` defaults to ``1/√d_k``; with ``enable_gqa`` query head ``h`` uses key/value head
  ``h // (H_q / H_kv)`` (``repeat_interleave``: ``h0 h0 h1 h1``). Unlike SDPA, ``is_causal`` may be
  combined with ``attn_mask`` (as ONNX allows) and ``is_causal`` follows ``alignment``.
- ``alignment``: ``"top_left"`` (SDPA's ``is_causal``, ``torch.ones(n_q, n_k).tril()``),
  ``"bottom_right"`` (FlashAttention 2.1+, README "causal"), or an int offset, the KV-cache length
  (ONNX ``Attention``, opset 23: with ``past_key`` query ``i`` sees keys ``j <= i + past``).
- ``window``, ``softcap``, ``alibi_slopes``: FlashAttention (README and ``flash_attn_interface``,
  ``flash_attn_func(window_size, softcap, alibi_slopes)``). FlashAttention always aligns these
  bottom-right (offset ``n_k - n_q``); here they use the same ``alignment`` offset as the causal
  mask. Softcap (Gemma 2, ``attn_logit_softcapping``) is applied to the scaled scores before any
  bias or mask, as FlashAttention and ONNX do. ALiBi: Press, Smith and Lewis (2022), "Train
  Short, Test Long", with FlashAttention's symmetric distance ``-slope · |i + offset - j|``.
- ``key_lengths`` (key padding) and ``cu_seqlens`` (packed batches): FlashAttention's
  ``flash_attn_varlen_func`` and ONNX's key-padding masks.
- ``lse``: the natural-log logsumexp FlashAttention saves for its backward (``softmax_lse``).
- Fully masked rows give zero weights and zero output (this package's convention, and ONNX's).

Precision: float32 and float64 inputs are computed in their own dtype. float16 and bfloat16
inputs are computed in float32 throughout (products, scale, softcap, bias, softmax and the
weighted sum of values; as cuBLAS and PyTorch's math backend accumulate) and each returned stage
is rounded once to the input dtype; ``lse`` stays float32 for half inputs, as FlashAttention's
``softmax_lse``. (:func:`attnscore.maths.reference.attention` instead rounds the scaled scores to
the half dtype before its softmax; the two differ by about one half-precision rounding.)

Input rule: as :mod:`attnscore.maths.reference` (tensors used as they are and never modified;
numpy arrays keep their dtype; lists take the default float dtype; ``query``, ``key``, ``value``
and a float ``attn_mask`` share one floating dtype and one device). Every bad argument raises one
:class:`~attnscore.maths.reference.ScoreInputError` naming the argument, what was expected and
what was found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.attention_options import AttentionOptions, within_window
from attnscore.maths.reference import _HALF, ScoreInputError, _as_tensor
from attnscore.maths.variant_arguments import (
    VARIANT_ALIGNMENTS,
    checked_alibi,
    checked_alignment,
    checked_bool,
    checked_cu_seqlens,
    checked_key_lengths,
    checked_mask,
    checked_qkv,
    checked_scale,
    checked_softcap,
    checked_window,
)

__all__ = [
    "AttentionParts",
    "general_attention_parts",
    "general_attention",
    "varlen_attention",
    "VARIANT_ALIGNMENTS",
]


@dataclass(frozen=True)
class AttentionParts:
    """Every stage of one attention call (see :func:`general_attention_parts`).

    Attributes:
        scores: ``(..., H_q, n_q, n_k)``, ``scale · Q Kᵀ`` before softcap, bias and mask.
        capped: ``(..., H_q, n_q, n_k)``, ``cap · tanh(scores / cap)``; equal to ``scores`` when
            ``softcap`` is None.
        biased: ``(..., H_q, n_q, n_k)``, ``capped`` + float ``attn_mask`` + ALiBi bias, with every
            masked-out entry ``-inf`` (bool mask False, a ``-inf`` float-mask entry whatever the score there,
            causal, window, key padding).
        weights: ``(..., H_q, n_q, n_k)``, softmax of ``biased`` over the keys; masked-out entries
            exactly 0; a fully masked row is all zeros.
        output: ``(..., H_q, n_q, d_v)``, ``weights @ V``; a fully masked row gives zeros.
        lse: ``(..., H_q, n_q)``, natural-log logsumexp of ``biased`` over the keys; ``-inf`` for a
            fully masked row.

    ``scores``, ``capped``, ``biased``, ``weights`` and ``output`` have the input dtype; ``lse`` has
    the input dtype for float32/float64 and float32 for float16/bfloat16 inputs. For 2-D inputs
    (no head axis) the ``H_q`` axis is absent from every field.
    """

    scores: torch.Tensor
    capped: torch.Tensor
    biased: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor
    lse: torch.Tensor


def general_attention_parts(
    query: Any,
    key: Any,
    value: Any,
    options: AttentionOptions | None = None,
    *,
    change: AttentionChange | None = None,
    **keywords: Any,
) -> AttentionParts:
    """Attention with every variant option, returning every stage (:class:`AttentionParts`).

    The options come whole (``options``, an :class:`~attnscore.maths.attention_options.AttentionOptions`)
    or by name (``keywords``: ``attn_mask``, ``is_causal``, ``alignment``, ``window``, ``scale``,
    ``softcap``, ``alibi_slopes``, ``key_lengths``, each described below), never both; an unknown
    keyword raises ``TypeError``.

    Args:
        query: ``(..., H_q, n_q, d_k)``, or ``(n_q, d_k)`` for one head without batch.
        key: ``(..., H_kv, n_k, d_k)`` (``(n_k, d_k)`` with a 2-D query). ``H_q % H_kv == 0``: query
            head ``h`` uses key/value head ``h // (H_q // H_kv)`` (grouped-query and multi-query
            attention, SDPA ``enable_gqa``, FlashAttention, ONNX ``kv_num_heads``). The batch dims
            ``...`` of query, key and value broadcast against each other (torch.matmul rules).
        value: ``(..., H_kv, n_k, d_v)`` (``(n_k, d_v)`` with a 2-D query).
        attn_mask: optional, as SDPA: bool (True = takes part) or float of the query's dtype (added
            to the capped scores; ``-inf`` entries mask). It broadcasts from the right to the
            scores' shape ``(..., H_q, n_q, n_k)`` (it may not enlarge it).
        is_causal: keep key ``j`` for query ``i`` only when ``j <= i + offset``.
        alignment: the offset that aligns query ``i`` with key ``i + offset``: ``"top_left"``
            (0, SDPA), ``"bottom_right"`` (``n_k - n_q``, FlashAttention), an int (the KV-cache
            length, ONNX with ``past_key``), or integers of the batch shape ``...`` (``(B,)`` for 4-D
            inputs), one offset per batch item (ONNX with ``nonpad_kv_seqlen`` and no ``past_key``:
            ``offset[b] = nonpad_kv_seqlen[b] - n_q``; FlashAttention's ``flash_attn_with_kvcache``
            with ``cache_seqlens``). It applies to ``is_causal``, ``window`` and ``alibi_slopes``;
            ``"bottom_right"`` always uses the padded ``n_k``, whatever ``key_lengths`` says.
        window: ``(left, right)`` sliding window, ``-1`` = unbounded on that side: keep keys
            ``j`` in ``[i + offset - left, i + offset + right]`` (FlashAttention ``window_size``).
            With ``is_causal`` the right side is 0, whatever ``right`` says (FlashAttention).
        scale: the factor on ``Q Kᵀ``; default ``1/√d_k``. Any finite real number.
        softcap: ``cap > 0``: ``cap · tanh(s / cap)`` on the scaled scores before bias and mask
            (FlashAttention ``softcap``, Gemma 2, ONNX ``softcap``); None = no cap.
        alibi_slopes: optional ``(H_q,)`` or ``(*batch, H_q)`` (``(B, H_q)`` for 4-D inputs); adds
            ``-slope · |i + offset - j|`` to the scores of head ``h`` (Press et al. 2022,
            FlashAttention's form). Computed in the compute dtype (float32 for half inputs).
        key_lengths: optional integers of the batch shape ``...`` (``(B,)`` for 4-D inputs), each in
            ``[0, n_k]``: keys ``j >= key_lengths[b]`` are masked for batch item ``b`` (key padding).
            Needs at least one batch dim (query of rank 4 or more).
        change: optional :class:`~attnscore.maths.attention_changes.AttentionChange`, one step done
            another way (a known mistake, :mod:`attnscore.catalogue.mistakes`); None is the reference.

    Returns:
        :class:`AttentionParts`; dtypes as documented there (float16/bfloat16 computed in float32,
        each stage rounded once; ``lse`` float32). Same device as the inputs.

    Raises:
        ScoreInputError: wrong ranks, mismatched ``d_k``, ``n_k`` or ``H_kv`` between key and
            value, batch dims that do not broadcast, ``H_q % H_kv != 0``, a mask that is neither
            bool nor the query's float dtype or does not broadcast, an unknown ``alignment``,
            a window entry below -1, ``softcap <= 0`` or not finite, a non-finite ``scale``,
            ``alibi_slopes`` of the wrong shape, ``key_lengths`` of the wrong shape, dtype or range,
            or the dtype/device rule broken; the error names the argument.

    Source: Vaswani et al. (2017), eq. (1); PyTorch SDPA docs; FlashAttention README and
    ``flash_attn_interface.flash_attn_func``; ONNX ``Attention`` (opset 23); Press et al. (2022);
    Gemma 2 (Gemma Team, 2024) for the softcap.

    Example:
        >>> p = general_attention_parts([[1.0], [1.0]], [[0.0], [0.0]], [[2.0], [4.0]], is_causal=True, scale=1.0)
        >>> p.output.tolist(), p.weights.tolist()
        ([[2.0], [3.0]], [[1.0, 0.0], [0.5, 0.5]])
    """
    change = change or AttentionChange()
    o = change.applied(AttentionOptions.of(options, keywords, "general_attention_parts"))
    q, k, v = checked_qkv(query, key, value)
    two_d = q.ndim == 2
    batch = torch.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])  # the dims `...` (checked)
    heads = () if two_d else (q.shape[-3],)
    mask = checked_mask(o.attn_mask, "attn_mask", q, torch.Size([*batch, *heads, q.shape[-2], k.shape[-2]]))
    if two_d:  # one head, no batch: give it a head axis and take it away at the end
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)  # (1, n, d)
    lengths = checked_key_lengths(o.key_lengths, batch, k.shape[-2], q)
    slopes = checked_alibi(o.alibi_slopes, batch, q.shape[-3], q, two_d)
    parts = _attention_parts(
        q,
        k,
        v,
        attn_mask=mask,
        is_causal=checked_bool(o.is_causal, "is_causal"),
        alignment=checked_alignment(o.alignment, batch, q),
        window=checked_window(o.window),
        scale=checked_scale(o.scale, q.shape[-1]),
        softcap=checked_softcap(o.softcap),
        slopes=slopes,
        lengths=lengths,
        change=change,
    )
    if not two_d:
        return parts
    return AttentionParts(*(getattr(parts, f).squeeze(0) for f in _FIELDS))


def general_attention(
    query: Any,
    key: Any,
    value: Any,
    options: AttentionOptions | None = None,
    *,
    change: AttentionChange | None = None,
    **keywords: Any,
) -> torch.Tensor:
    """Attention with every variant option: ``general_attention_parts(...).output``.

    Args:
        query, key, value: as :func:`general_attention_parts`.
        options, **keywords: the options of :func:`general_attention_parts`, whole or by name
            (``attn_mask``, ``is_causal``, ``alignment``, ``window``, ``scale``, ``softcap``,
            ``alibi_slopes``, ``key_lengths``); an unknown keyword raises ``TypeError``.
        change: as :func:`general_attention_parts` (None: the reference).

    Returns:
        ``(..., H_q, n_q, d_v)`` (``(n_q, d_v)`` for 2-D inputs), the input dtype and device; a fully
        masked query gets the zero vector.

    Raises:
        ScoreInputError: as :func:`general_attention_parts`.

    Source: as :func:`general_attention_parts`.

    Example:
        >>> general_attention([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [3.0]], scale=0.0).tolist()
        [[2.0]]
    """
    return general_attention_parts(query, key, value, options, change=change, **keywords).output


def varlen_attention(
    query: Any,
    key: Any,
    value: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    options: AttentionOptions | None = None,
    *,
    change: AttentionChange | None = None,
    **keywords: Any,
) -> torch.Tensor:
    """Attention over a packed batch of variable-length sequences (``flash_attn_varlen_func``).

    Sequence ``b`` is rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` of ``query`` and rows
    ``cu_seqlens_k[b]:cu_seqlens_k[b+1]`` of ``key``/``value``; it attends only inside itself, and
    ``alignment`` (hence ``is_causal``, ``window``, ALiBi) applies per sequence with that sequence's
    own ``n_q`` and ``n_k`` (``"bottom_right"``: offset ``n_k_b - n_q_b``; an int: the same offset
    for every sequence).

    Args:
        query: ``(total_q, H_q, d_k)``.
        key: ``(total_k, H_kv, d_k)``; ``H_q % H_kv == 0`` (grouped as in
            :func:`general_attention_parts`).
        value: ``(total_k, H_kv, d_v)``.
        cu_seqlens_q: integer ``(B + 1,)``, starting at 0, non-decreasing, last entry ``total_q``.
        cu_seqlens_k: integer ``(B + 1,)``, the same rules with ``total_k``.
        options, **keywords: the options, whole or by name, as :func:`general_attention_parts`
            takes them, without ``key_lengths`` (``cu_seqlens_k`` sets the lengths; a ``TypeError``):
        attn_mask: optional bool or float (query dtype) mask over the packed layout, broadcasting
            from the right to ``(H_q, total_q, total_k)``; sequence ``b`` uses its diagonal block.
        is_causal, window, scale, softcap: as :func:`general_attention_parts`.
        alignment: ``"top_left"``, ``"bottom_right"`` (per sequence: ``n_k_b - n_q_b``), an int (the
            same offset for every sequence) or ``B`` integers (one offset per sequence).
        alibi_slopes: optional ``(H_q,)`` or ``(B, H_q)``.
        change: as :func:`general_attention_parts`, in each sequence (None: the reference).

    Returns:
        ``(total_q, H_q, d_v)``, the input dtype and device; a query of a sequence without keys (or
        fully masked) gets the zero vector.

    Raises:
        ScoreInputError: as :func:`general_attention_parts`, or ``cu_seqlens_*`` not 1-D integers,
            not starting at 0, decreasing, not ending at the total, or of different lengths.

    Source: FlashAttention ``flash_attn_interface.flash_attn_varlen_func``; the options as
    :func:`general_attention_parts`.

    Example:
        >>> q = torch.ones(3, 1, 1); k = torch.zeros(3, 1, 1); v = torch.tensor([[[2.0]], [[4.0]], [[6.0]]])
        >>> cu = torch.tensor([0, 2, 3])
        >>> varlen_attention(q, k, v, cu, cu).flatten().tolist()
        [3.0, 3.0, 6.0]
    """
    change = change or AttentionChange()
    o = change.applied(AttentionOptions.of(options, keywords, "varlen_attention"))
    if o.key_lengths is not None:
        raise TypeError("varlen_attention() got an unexpected keyword argument 'key_lengths'")
    q, k, v = (_as_tensor(t, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
    for t, name, shape in (
        (q, "query", "(total_q, H_q, d_k)"),
        (k, "key", "(total_k, H_kv, d_k)"),
        (v, "value", "(total_k, H_kv, d_v)"),
    ):
        if t.ndim != 3:
            raise ScoreInputError(name, f"expected the packed shape {shape} (3-D), found shape {tuple(t.shape)}")
    # (total, H, d) -> (H, total, d): the SDPA layout the checks and the core use
    q, k, v = checked_qkv(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
    h_q, total_q, total_k = q.shape[0], q.shape[1], k.shape[1]
    cu_q = checked_cu_seqlens(cu_seqlens_q, "cu_seqlens_q", total_q, "total_q, query's first dim", None)
    cu_k = checked_cu_seqlens(cu_seqlens_k, "cu_seqlens_k", total_k, "total_k, key's first dim", len(cu_q))
    n_seq = len(cu_q) - 1
    slopes = checked_alibi(o.alibi_slopes, torch.Size([n_seq]), h_q, q, False)  # (H_q,) or (B, H_q)
    mask = checked_mask(o.attn_mask, "attn_mask", q, torch.Size([h_q, total_q, total_k]))
    if mask is not None:
        mask = mask.expand(h_q, total_q, total_k)  # (H_q, total_q, total_k)
    causal = checked_bool(o.is_causal, "is_causal")
    aligned = checked_alignment(o.alignment, torch.Size([n_seq]), q)
    bounds = checked_window(o.window)
    factor = checked_scale(o.scale, q.shape[-1])
    cap = checked_softcap(o.softcap)
    out = q.new_zeros(total_q, h_q, v.shape[-1])  # (total_q, H_q, d_v); rows of empty sequences stay 0
    for b in range(n_seq):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        seq_slopes = None if slopes is None else (slopes if slopes.ndim == 1 else slopes[b])  # (H_q,)
        parts = _attention_parts(
            q[:, q0:q1],  # (H_q, n_q_b, d_k)
            k[:, k0:k1],  # (H_kv, n_k_b, d_k)
            v[:, k0:k1],  # (H_kv, n_k_b, d_v)
            attn_mask=None if mask is None else mask[:, q0:q1, k0:k1],  # (H_q, n_q_b, n_k_b)
            is_causal=causal,
            alignment=aligned if not is_tensor(aligned) else int(aligned[b]),
            window=bounds,
            scale=factor,
            softcap=cap,
            slopes=seq_slopes,
            lengths=None,
            change=change,
        )
        out[q0:q1] = parts.output.transpose(0, 1)  # (H_q, n_q_b, d_v) -> (n_q_b, H_q, d_v)
    return out


_FIELDS = ("scores", "capped", "biased", "weights", "output", "lse")


def _attention_parts(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    alignment: str | int | torch.Tensor,
    window: tuple[int, int],
    scale: float,
    softcap: float | None,
    slopes: torch.Tensor | None,
    lengths: torch.Tensor | None,
    change: AttentionChange,
) -> AttentionParts:
    """The maths on checked inputs: q (..., H_q, n_q, d_k), k (..., H_kv, n_k, d_k), v (..., H_kv, n_k, d_v);
    ``change`` does one step another way (the reference: ``AttentionChange()``)."""
    dtype = q.dtype
    compute = torch.float32 if str(dtype) in _HALF else dtype  # half inputs: float32 throughout, rounded once
    n_q, n_k = q.shape[-2], k.shape[-2]
    k_heads = change.heads(k.to(compute), q.shape[-3])  # (..., H_q, n_k, d_k): h0 h0 h1 h1, not h0 h1 h0 h1
    v_heads = change.heads(v.to(compute), q.shape[-3])  # (..., H_kv, n_k, d_v) -> (..., H_q, n_k, d_v)
    scores = (q.to(compute) @ k_heads.transpose(-2, -1)) * scale  # (..., H_q, n_q, d_k) @ (..., H_q, d_k, n_k)
    capped = scores if softcap is None else softcap * torch.tanh(scores / softcap)  # (..., H_q, n_q, n_k)

    offset: int | torch.Tensor
    if is_tensor(alignment):
        offset = alignment[..., None, None, None]  # (*batch, 1, 1, 1): one offset per batch item
    elif alignment == "top_left":
        offset = 0
    elif alignment == "bottom_right":
        offset = n_k - n_q
    else:
        offset = int(alignment)  # the KV-cache length: query i sits at key position i + offset
    i = torch.arange(n_q, device=q.device).unsqueeze(-1)  # (n_q, 1)
    j = torch.arange(n_k, device=q.device).unsqueeze(0)  # (1, n_k)
    rel = j - (i + offset)  # (n_q, n_k), or (*batch, 1, n_q, n_k): key j's position relative to query i's own

    keep = torch.ones(rel.shape, dtype=torch.bool, device=q.device)  # like rel, True = takes part
    left, right = window
    if change.causal_kept(is_causal, n_q, n_k):
        right = 0  # FlashAttention: causal means window_size[1] = 0
    keep = within_window(keep, rel, (left, right))

    biased = capped
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        biased = biased + attn_mask.to(compute)  # float mask, broadcast from the right
        keep = keep & ~torch.isneginf(attn_mask)  # its -inf entries mask whatever the score is (+inf, NaN)
    if slopes is not None:
        distance = rel.abs().to(compute)  # like rel: |i + offset - j|
        biased = biased - slopes.to(compute)[..., None, None] * distance  # (..., H_q, 1, 1) * (n_q, n_k)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = keep & attn_mask  # broadcasts to at most the scores' shape
    if lengths is not None:
        keep = keep & (j.squeeze(0) < lengths[..., None, None, None])  # (*batch, 1, 1, n_k): key padding
    biased = change.masked_scores(biased, keep)  # (..., H_q, n_q, n_k): masked-out entries -inf

    masked = torch.isneginf(biased)  # masked out by a bool mask, causal, window, padding or a -inf float entry
    weights = torch.softmax(biased, dim=change.softmax_axis)  # a fully masked row is NaN here
    if change.zero_masked:
        weights = torch.where(masked, torch.zeros((), dtype=compute, device=q.device), weights)  # masked -> exactly 0
    output = weights @ v_heads  # (..., H_q, n_q, n_k) @ (..., H_q, n_k, d_v) -> (..., H_q, n_q, d_v)
    lse = torch.logsumexp(biased, dim=-1)  # (..., H_q, n_q); -inf for a fully masked row
    return AttentionParts(
        scores=scores.to(dtype),
        capped=capped.to(dtype),
        biased=biased.to(dtype),
        weights=weights.to(dtype),
        output=output.to(dtype),
        lse=lse,
    )
