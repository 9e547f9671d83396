"""Reference implementation of dot-product attention scores.

Shape legend: ``...`` batch/head dims, ``n_q`` queries, ``n_k`` keys, ``d_k`` query/key width.

The score of a query ``q`` against a key ``k`` is their dot product ``q · k`` (Vaswani et al.,
"Attention Is All You Need", 2017, section 3.2.1; Luong et al., 2015, the "dot" score). It is a
raw, unnormalised number: it can be negative and a row of scores need not sum to one.

Input rule shared by every function here:

- ``torch.Tensor`` inputs are used as they are (no copy, never modified);
- ``numpy.ndarray`` inputs are converted with ``torch.as_tensor`` (keeping their dtype); nested
  Python lists and numbers take torch's default float dtype (float32 unless changed);
- floating dtypes (float16, bfloat16, float32, float64) are kept; integer tensors and arrays are
  converted to the default float dtype; bool, complex and non-numeric inputs raise
  :class:`ScoreInputError`;
- every argument must have the same dtype and live on the same device; the result has that
  dtype and device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["ScoreInputError", "score", "scores", "score_matrix"]

_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class ScoreInputError(ValueError):
    """An argument of a score function has the wrong type, dtype, rank or width.

    Attributes:
        argument: the parameter's name (``"q"``, ``"keys"``, ...).
    """

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


def _as_tensor(x: Any, argument: str) -> torch.Tensor:
    """Return ``x`` as a floating tensor, or raise ScoreInputError saying what was found."""
    if isinstance(x, torch.Tensor):
        t = x
    else:
        if isinstance(x, (str, bytes)) or x is None:
            raise ScoreInputError(
                argument, f"expected a tensor, array or list of numbers, found {type(x).__name__}"
            )
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as exc:  # ragged lists and the like
            raise ScoreInputError(
                argument, f"expected a rectangular array of numbers, found {type(x).__name__} ({exc})"
            ) from None
        if arr.dtype.kind not in "iuf":
            kind = {"b": "bool", "c": "complex", "O": "object", "U": "str"}.get(arr.dtype.kind, str(arr.dtype))
            raise ScoreInputError(argument, f"expected real numbers, found {kind} values")
        t = torch.as_tensor(arr)
        if not isinstance(x, np.ndarray):  # Python numbers and lists take the default float dtype
            t = t.to(torch.get_default_dtype())
    if t.dtype in (torch.bool,) or t.is_complex():
        raise ScoreInputError(argument, f"expected a real floating or integer tensor, found {t.dtype}")
    if t.dtype not in _FLOATING:
        t = t.to(torch.get_default_dtype())
    return t


def _same_dtype_and_device(**tensors: torch.Tensor) -> None:
    items = list(tensors.items())
    (first_name, first), rest = items[0], items[1:]
    for name, t in rest:
        if t.dtype != first.dtype:
            raise ScoreInputError(
                name, f"dtype {t.dtype} differs from {first_name}'s {first.dtype}; cast both to one dtype"
            )
        if t.device != first.device:
            raise ScoreInputError(
                name, f"device {t.device} differs from {first_name}'s {first.device}; move both to one device"
            )


def _check_rank(t: torch.Tensor, argument: str, rank: int, shape: str) -> None:
    if t.ndim != rank:
        raise ScoreInputError(argument, f"expected shape {shape} ({rank}-D), found shape {tuple(t.shape)}")


def _check_width(a: torch.Tensor, a_name: str, b: torch.Tensor, b_name: str) -> None:
    if a.shape[-1] != b.shape[-1]:
        raise ScoreInputError(
            b_name,
            f"last dimension d_k={b.shape[-1]} does not match {a_name}'s d_k={a.shape[-1]}; "
            "queries and keys must have the same width",
        )


def score(q: Any, k: Any) -> torch.Tensor:
    """Score one query against one key: ``q · k``.

    Args:
        q: the query, shape ``(d_k,)``.
        k: the key, shape ``(d_k,)``.

    Returns:
        A 0-d tensor (a scalar) with the inputs' dtype and device.

    Raises:
        ScoreInputError: an argument is not 1-D, the widths differ, or the dtype/device rule
            in the module docstring is broken.

    Source: Vaswani et al. (2017), section 3.2.1, the dot product of a query and a key.

    Example:
        >>> float(score([1.0, 0.0], [0.7, 0.7]))
        0.699999988079071
    """
    q, k = _as_tensor(q, "q"), _as_tensor(k, "k")
    _check_rank(q, "q", 1, "(d_k,)")
    _check_rank(k, "k", 1, "(d_k,)")
    _check_width(q, "q", k, "k")
    _same_dtype_and_device(q=q, k=k)
    return (q * k).sum()  # (d_k,) * (d_k,) -> (d_k,) -> ()


def scores(q: Any, keys: Any) -> torch.Tensor:
    """Score one query against ``n_k`` keys: ``keys @ q``.

    Args:
        q: the query, shape ``(d_k,)``.
        keys: one key per row, shape ``(n_k, d_k)``.

    Returns:
        Tensor of shape ``(n_k,)``; entry ``j`` is ``q · keys[j]``. Same dtype and device as
        the inputs.

    Raises:
        ScoreInputError: wrong rank, mismatched ``d_k``, or the dtype/device rule is broken.

    Source: Vaswani et al. (2017), section 3.2.1 (one row of ``Q Kᵀ``).

    Example:
        >>> scores([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [0.0, -2.0]]).tolist()
        [1.0, 0.0, 0.0]
    """
    q, keys = _as_tensor(q, "q"), _as_tensor(keys, "keys")
    _check_rank(q, "q", 1, "(d_k,)")
    _check_rank(keys, "keys", 2, "(n_k, d_k)")
    _check_width(q, "q", keys, "keys")
    _same_dtype_and_device(q=q, keys=keys)
    return keys @ q  # (n_k, d_k) @ (d_k,) -> (n_k,)


def score_matrix(Q: Any, K: Any) -> torch.Tensor:
    """Score every query against every key: ``Q Kᵀ``.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``. The batch dims ``...`` of ``Q`` and ``K``
            broadcast against each other (torch.matmul rules).

    Returns:
        Tensor of shape ``(..., n_q, n_k)``; entry ``[..., i, j]`` is ``Q[..., i, :] · K[..., j, :]``.
        Same dtype and device as the inputs.

    Raises:
        ScoreInputError: an input has fewer than 2 dims, ``d_k`` differs, the batch dims do not
            broadcast, or the dtype/device rule is broken.

    Source: Vaswani et al. (2017), equation (1), the ``Q Kᵀ`` inside
    ``softmax(Q Kᵀ / √d_k) V``.

    Example:
        >>> score_matrix([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]).tolist()
        [[17.0, 23.0], [39.0, 53.0]]
    """
    Q, K = _as_tensor(Q, "Q"), _as_tensor(K, "K")
    for t, name, shape in ((Q, "Q", "(..., n_q, d_k)"), (K, "K", "(..., n_k, d_k)")):
        if t.ndim < 2:
            raise ScoreInputError(name, f"expected shape {shape} (at least 2-D), found shape {tuple(t.shape)}")
    _check_width(Q, "Q", K, "K")
    _same_dtype_and_device(Q=Q, K=K)
    try:
        torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    except RuntimeError:
        raise ScoreInputError(
            "K", f"batch dims {tuple(K.shape[:-2])} do not broadcast with Q's {tuple(Q.shape[:-2])}"
        ) from None
    return Q @ K.transpose(-2, -1)  # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)
