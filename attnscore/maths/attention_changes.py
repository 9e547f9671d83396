"""One step of general attention done another way, as one frozen value, :class:`AttentionChange`:
what a known mistake changes in :func:`attnscore.maths.variants.general_attention_parts` (and its
packed form :func:`~attnscore.maths.variants.varlen_attention`), whatever family's layout and
keywords the call came in. The catalogue (:mod:`attnscore.catalogue.mistakes`) builds each such
mistake once as a change, and each keyword family maps its own arguments onto the changed general
attention (its module's ``attention_changed``), so a family added later shows the same mistakes.

The default value changes nothing: ``general_attention_parts(q, k, v, change=AttentionChange())``
is the reference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.maths.attention_options import AttentionOptions

__all__ = ["AttentionChange", "KV_HEADS"]

KV_HEADS = ("grouped", "tiled", "first")
"""How the key/value heads are given to the query heads: ``"grouped"`` (query head ``h`` uses KV head
``h // (H_q / H_kv)``, ``h0 h0 h1 h1``, ``repeat_interleave``: right), ``"tiled"`` (``h % H_kv``,
``h0 h1 h0 h1``, ``repeat``), ``"first"`` (KV head 0 for every query head, multi-query code)."""


@dataclass(frozen=True)
class AttentionChange:
    """A change of general attention's steps; the defaults are the reference's.

    Attributes:
        options: ``(field, value)`` pairs of :class:`~attnscore.maths.attention_options.AttentionOptions`
            replaced in the call's options (``("scale", 1.0)``: no scale; ``("attn_mask", None)``:
            the mask ignored; ``("is_causal", False)``: the causal mask dropped).
        fill: the value a masked-out score becomes (the reference: ``-inf``; a large finite negative
            number such as ``-1e9`` gives a query with no kept key weights from the fill).
        fill_added: add ``fill`` to each masked-out score (``S + where(keep, 0, fill)``) instead of
            replacing it.
        zero_masked: give masked-out entries weight exactly 0 after the softmax (the reference); False
            leaves softmax's own result, NaN for a line of the softmax axis with no kept entry.
        softmax_axis: the axis of the softmax over the ``(..., n_q, n_k)`` scores: ``-1`` over the
            keys (the reference), ``-2`` over the queries.
        kv_heads: how the key/value heads are given to the query heads (:data:`KV_HEADS`).
        causal_only_without_cache: apply ``is_causal`` only when there is no cache (``n_k <= n_q``):
            the causal mask dropped when a cache is present (``n_k > n_q``), code that masks only a
            prefill and lets a continued prefill's queries see each other's future.

    Example:
        >>> AttentionChange(options=(("scale", 1.0),)).applied(AttentionOptions(scale=0.5)).scale
        1.0
    """

    options: tuple[tuple[str, Any], ...] = ()
    fill: float = float("-inf")
    fill_added: bool = False
    zero_masked: bool = True
    softmax_axis: int = -1
    kv_heads: str = "grouped"
    causal_only_without_cache: bool = False

    def __post_init__(self) -> None:
        names = {f.name for f in dataclasses.fields(AttentionOptions)}
        unknown = [name for name, _ in self.options if name not in names]
        if unknown:
            raise ValueError(f"AttentionChange.options: expected fields of AttentionOptions, found {unknown[0]!r}")
        if self.kv_heads not in KV_HEADS:
            raise ValueError(
                f"AttentionChange.kv_heads: expected one of {', '.join(KV_HEADS)}, found {self.kv_heads!r}"
            )
        if self.softmax_axis not in (-1, -2):
            raise ValueError(f"AttentionChange.softmax_axis: expected -1 or -2, found {self.softmax_axis!r}")

    def applied(self, options: AttentionOptions) -> AttentionOptions:
        """``options`` with this change's :attr:`options` replaced."""
        return dataclasses.replace(options, **dict(self.options)) if self.options else options

    def heads(self, x: torch.Tensor, h_q: int) -> torch.Tensor:
        """``x`` ``(..., H_kv, n, d)`` given to ``h_q`` query heads as :attr:`kv_heads` says: ``(..., h_q, n, d)``."""
        group = h_q // x.shape[-3]
        if self.kv_heads == "tiled":
            return x.repeat(*(1,) * (x.ndim - 3), group, 1, 1)
        if self.kv_heads == "first":
            return x[..., :1, :, :].expand(*x.shape[:-3], h_q, *x.shape[-2:])
        return x.repeat_interleave(group, dim=-3)

    def masked_scores(self, biased: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``biased`` with the entries ``keep`` leaves out set to (or, :attr:`fill_added`, added)
        :attr:`fill`."""
        if self.fill_added:
            zero = torch.zeros((), dtype=biased.dtype, device=biased.device)
            return biased + torch.where(keep, zero, torch.full((), self.fill, dtype=biased.dtype, device=biased.device))
        return biased.masked_fill(~keep, self.fill)

    def causal_kept(self, is_causal: bool, n_q: int, n_k: int) -> bool:
        """Whether the causal mask is applied on a call with ``n_q`` queries and ``n_k`` keys."""
        return is_causal and not (self.causal_only_without_cache and n_k > n_q)
