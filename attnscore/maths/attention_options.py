"""The options of general attention as one frozen value, :class:`AttentionOptions`: what the shared
engines take whole (the torch reference :func:`attnscore.maths.variants.general_attention_parts`, its
float64 twin :func:`attnscore.maths.golden_variants.general_attention_parts`, their gradients
:func:`attnscore.maths.gradient_formulas.general_attention`, :mod:`attnscore.maths.keyword_gradients`
and the error bound :func:`attnscore.maths.error_scales.general_attention_error`), and what a keyword
family's ``attention_options`` gives for a call (:mod:`attnscore.maths.families`).

The engines also take the same options by name (``general_attention(q, k, v, is_causal=True)``), as
readers and tests write them; :meth:`AttentionOptions.of` turns either form into the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

__all__ = ["AttentionOptions", "within_window"]

_Keep = TypeVar("_Keep")


@dataclass(frozen=True)
class AttentionOptions:
    """Every variant option of general attention, with the defaults of plain softmax attention.

    Attributes:
        attn_mask: None, or a bool mask (True = the key takes part) or a float mask (added to the
            capped scores, ``-inf`` masks) broadcasting to the scores ``(..., H_q, n_q, n_k)``.
        is_causal: keep key ``j`` for query ``i`` only when ``j <= i + offset``.
        alignment: the offset of causal, the window and ALiBi: ``"top_left"`` (0), ``"bottom_right"``
            (``n_k - n_q``), an int, or one int per batch item.
        window: ``(left, right)``, keys ``j`` in ``[i + offset - left, i + offset + right]``; -1 unbounded.
        scale: the factor of ``Q Kᵀ``; None means ``1/√d_k``.
        softcap: None, or ``cap > 0``: ``cap · tanh(s / cap)`` on the scaled scores.
        alibi_slopes: None, or ``(H_q,)`` / ``(..., H_q)`` slopes: ``-slope · |i + offset - j|`` added.
        key_lengths: None, or the valid key count per batch item (key padding).

    The engines check each value and say which is wrong (:mod:`attnscore.maths.variant_arguments`).

    Example:
        >>> AttentionOptions.of(None, {"is_causal": True}, "general_attention").is_causal
        True
    """

    attn_mask: Any = None
    is_causal: bool = False
    alignment: Any = "top_left"
    window: tuple[int, int] = (-1, -1)
    scale: float | None = None
    softcap: float | None = None
    alibi_slopes: Any = None
    key_lengths: Any = None

    @classmethod
    def of(cls, options: AttentionOptions | None, keywords: Mapping[str, Any], function: str) -> AttentionOptions:
        """The options of a call of ``function``: ``options`` whole, or built from ``keywords`` (the
        fields by name, the others at their defaults); never both.

        Raises:
            TypeError: a keyword that is not a field (as Python says it for a function's keyword),
                ``options`` that is not an :class:`AttentionOptions`, or both forms at once.
        """
        if options is None:
            names = {f.name for f in fields(cls)}
            unknown = sorted(set(keywords) - names)
            if unknown:
                raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
            return cls(**keywords)
        if not isinstance(options, AttentionOptions):
            raise TypeError(f"{function}(): expected options to be AttentionOptions, found {type(options).__name__}")
        if keywords:
            raise TypeError(
                f"{function}(): expected the options whole or by name, found both (options and {sorted(keywords)[0]!r})"
            )
        return options


def within_window(keep: _Keep, rel: Any, window: tuple[int, int]) -> _Keep:
    """``keep`` (a bool numpy array or torch tensor), narrowed in place to the keys within ``window =
    (left, right)`` and returned: key ``j`` stays where ``-left <= rel <= right``, ``rel = j - (i +
    offset)`` its position relative to query ``i``'s own (same shape or broadcasting), ``-1``
    unbounded on that side (FlashAttention's ``window_size``; with ``causal`` the right side is 0).

    Example:
        >>> import numpy as np
        >>> within_window(np.ones(5, dtype=bool), np.arange(-2, 3), (1, 0)).tolist()
        [False, True, True, False, False]
    """
    left, right = window
    if left != -1:
        keep &= rel >= -left
    if right != -1:
        keep &= rel <= right
    return keep
