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

import torch

from attnscore.maths.reference import ScoreInputError

__all__ = [
    "AttentionParts",
    "general_attention_parts",
    "general_attention",
    "varlen_attention",
    "VARIANT_ALIGNMENTS",
]

VARIANT_ALIGNMENTS = ("top_left", "bottom_right")  # or an int offset


@dataclass(frozen=True)
class AttentionParts:
    """Every stage of one attention call (see :func:`general_attention_parts`).

    Attributes:
        scores: ``(..., H_q, n_q, n_k)``, ``scale · Q Kᵀ`` before softcap, bias and mask.
        capped: ``(..., H_q, n_q, n_k)``, ``cap · tanh(scores / cap)``; equal to ``scores`` when
            ``softcap`` is None.
        biased: ``(..., H_q, n_q, n_k)``, ``capped`` + float ``attn_mask`` + ALiBi bias, with every
            masked-out entry ``-inf`` (bool mask False, causal, window, key padding).
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
    *,
    attn_mask: Any = None,
    is_causal: bool = False,
    alignment: str | int = "top_left",
    window: tuple[int, int] = (-1, -1),
    scale: float | None = None,
    softcap: float | None = None,
    alibi_slopes: Any = None,
    key_lengths: Any = None,
) -> AttentionParts:
    """Attention with every variant option, returning every stage (:class:`AttentionParts`).

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
            (0, SDPA), ``"bottom_right"`` (``n_k - n_q``, FlashAttention), or an int (the KV-cache
            length, ONNX ``past_sequence_length``). It applies to ``is_causal``, ``window`` and
            ``alibi_slopes``.
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
    raise NotImplementedError


def general_attention(query: Any, key: Any, value: Any, **options: Any) -> torch.Tensor:
    """Attention with every variant option: ``general_attention_parts(...).output``.

    Args:
        query, key, value: as :func:`general_attention_parts`.
        **options: the keyword-only options of :func:`general_attention_parts` (``attn_mask``,
            ``is_causal``, ``alignment``, ``window``, ``scale``, ``softcap``, ``alibi_slopes``,
            ``key_lengths``); an unknown keyword raises ``TypeError``.

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
    raise NotImplementedError


def varlen_attention(
    query: Any,
    key: Any,
    value: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    *,
    attn_mask: Any = None,
    is_causal: bool = False,
    alignment: str | int = "top_left",
    window: tuple[int, int] = (-1, -1),
    scale: float | None = None,
    softcap: float | None = None,
    alibi_slopes: Any = None,
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
        attn_mask: optional bool or float (query dtype) mask over the packed layout, broadcasting
            from the right to ``(H_q, total_q, total_k)``; sequence ``b`` uses its diagonal block.
        is_causal, alignment, window, scale, softcap: as :func:`general_attention_parts`.
        alibi_slopes: optional ``(H_q,)`` or ``(B, H_q)``.

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
    raise NotImplementedError
