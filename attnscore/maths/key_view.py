"""Which keys each query row of an attention output keeps, and which of them hold non-finite values.

Every contract whose output is made of softmax weights over keys (attention weights, attention and
each of its variants) can answer one question about a call, whatever its layout: for each row of
its output (all dims but the last) and each key, is the key kept (not masked by a mask, a causal or
window rule, a padding length or a sequence boundary), and does the key hold a non-finite value (an
``inf`` or ``NaN`` in its key or value vector, or in its logit for weights)? The convention corners
(:mod:`attnscore.catalogue.conventions`) are read off this :class:`KeyView`; each contract family
supplies it (:attr:`attnscore.maths.contract.Contract.key_view_fn`) from the attention arguments it
already computes for its error bound (``Q``, ``K``, ``V``, ``mask`` heads first, K and V grouped).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["KeyView", "key_view", "weights_key_view", "heads_after_rows", "packed_rows"]


@dataclass(frozen=True)
class KeyView:
    """One call's keys as its output rows see them.

    Attributes:
        keep: bool ``(*rows, n_k)``: key ``j`` takes part in row ``r``'s softmax; ``rows`` are the
            output's dims but the last, in the output's own layout (``(..., H_q, n_q)`` heads
            first, ``(b, n_q, H_q)`` in FlashAttention's layout, ``(total_q, H_q)`` packed).
        nonfinite: bool ``(*rows, n_k)``: key ``j`` (its key or value vector, or its logit) holds an
            ``inf`` or ``NaN`` for row ``r``.
    """

    keep: np.ndarray
    nonfinite: np.ndarray

    def rows_without_keys(self) -> np.ndarray:
        """bool ``(*rows, 1)``: the rows that keep no key."""
        return np.asarray(~self.keep.any(axis=-1, keepdims=True), dtype=bool)

    def rows_masking_nonfinite_keys(self) -> np.ndarray:
        """bool ``(*rows, 1)``: the rows that mask a key holding a non-finite value."""
        return np.asarray((~self.keep & self.nonfinite).any(axis=-1, keepdims=True), dtype=bool)


def _bad_vectors(x: np.ndarray) -> np.ndarray:
    """bool ``(..., n_k)``: which vectors (along the last axis) hold a non-finite entry."""
    with np.errstate(invalid="ignore"):
        return np.asarray(~np.isfinite(np.asarray(x, dtype=np.float64)).all(axis=-1), dtype=bool)


def key_view(
    attention_args: Mapping[str, np.ndarray], to_rows: Callable[[np.ndarray], np.ndarray] | None = None
) -> KeyView:
    """The :class:`KeyView` of plain attention arguments.

    Args:
        attention_args: ``Q`` ``(..., n_q, d_k)``, ``K`` ``(..., n_k, d_k)``, ``V`` ``(..., n_k, d_v)``
            (heads first, K and V already grouped to the query heads) and ``mask`` bool, broadcasting
            to ``(..., n_q, n_k)`` (True = kept), as each family's error bound uses them.
        to_rows: moves a ``(..., n_q, n_k)`` array of that layout into the output's row layout
            (e.g. ``np.swapaxes(x, -3, -2)`` for FlashAttention's ``(b, n_q, H, d)``); None when
            the layouts agree.

    Example (the second key is masked and holds NaN in its key vector):
        >>> view = key_view({"Q": np.ones((1, 2)), "K": np.array([[1.0, 0.0], [np.nan, 0.0]]),
        ...                  "V": np.ones((2, 1)), "mask": np.array([[True, False]])})
        >>> view.rows_without_keys().tolist(), view.rows_masking_nonfinite_keys().tolist()
        ([[False]], [[True]])
    """
    Q, K, V = attention_args["Q"], attention_args["K"], attention_args["V"]
    n_k = np.shape(K)[-2]
    bad = _bad_vectors(K) | _bad_vectors(V)  # (..., n_k)
    shape = np.broadcast_shapes(np.shape(Q)[:-1] + (1,), bad.shape[:-1] + (1, n_k), np.shape(attention_args["mask"]))
    keep = np.broadcast_to(np.asarray(attention_args["mask"], dtype=bool), shape)
    nonfinite = np.broadcast_to(bad[..., None, :], shape)
    move = to_rows or (lambda x: x)
    return KeyView(np.ascontiguousarray(move(keep)), np.ascontiguousarray(move(nonfinite)))


def weights_key_view(S: np.ndarray, mask: np.ndarray) -> KeyView:
    """The :class:`KeyView` of softmax weights over logits ``S`` ``(..., n_q, n_k)`` with a bool
    ``mask`` broadcasting to it: the output's rows are ``S``'s, a key's value is its logit."""
    with np.errstate(invalid="ignore"):
        nonfinite = ~np.isfinite(np.asarray(S, dtype=np.float64))
    shape = np.broadcast_shapes(np.shape(S), np.shape(mask))
    return KeyView(np.broadcast_to(np.asarray(mask, dtype=bool), shape), np.broadcast_to(nonfinite, shape))


def heads_after_rows(x: np.ndarray) -> np.ndarray:
    """``(..., H, n_q, n_k)`` heads first -> ``(..., n_q, H, n_k)``: FlashAttention's row layout."""
    return np.swapaxes(x, -3, -2)


def packed_rows(x: np.ndarray) -> np.ndarray:
    """``(H, total_q, total_k)`` -> ``(total_q, H, total_k)``: a packed batch's row layout."""
    return np.swapaxes(x, 0, 1)
