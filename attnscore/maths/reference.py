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

from attnscore.boundary.lazy_torch import is_tensor, torch

_HALF = ("torch.float16", "torch.bfloat16")  # by name: comparing names needs no torch at import

__all__ = [
    "ScoreInputError",
    "score",
    "scores",
    "score_matrix",
    "scaled_score_matrix",
    "bilinear_scores",
    "additive_scores",
    "causal_mask",
    "masked_scores",
    "attention_weights",
    "attention",
    "causal_attention",
]

_FLOATING = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")  # by name, as _HALF


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
    if is_tensor(x):
        t = x
    else:
        if isinstance(x, (str, bytes)) or x is None:
            raise ScoreInputError(argument, f"expected a tensor, array or list of numbers, found {type(x).__name__}")
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
    if str(t.dtype) not in _FLOATING:
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
        The worked example: aligned, perpendicular and partly aligned keys (float64, so 0.7 is
        printed as written; in float32 it is 0.699999988...):

        >>> f64 = torch.float64
        >>> q = torch.tensor([1.0, 0.0], dtype=f64)
        >>> keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]], dtype=f64)
        >>> scores(q, keys).tolist()
        [1.0, 0.0, 0.7]
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


def _check_at_least_2d(t: torch.Tensor, name: str, shape: str) -> None:
    if t.ndim < 2:
        raise ScoreInputError(name, f"expected shape {shape} (at least 2-D), found shape {tuple(t.shape)}")


def _as_mask(mask: Any, argument: str, like: torch.Tensor) -> torch.Tensor:
    """Return ``mask`` as a bool tensor on ``like``'s device (True = keep).

    Accepted mask ranks: at most 2 (``(n_q, n_k)``, ``(n_k,)``: the same for every batch and head),
    or the scores' full rank with 1 for broadcast dims. A rank in between is refused: with
    ``B == H``, a ``(B, n_q, n_k)`` mask would silently align with the head axis of
    ``(B, H, n_q, n_k)`` scores (numpy broadcasting aligns from the right).
    """
    m = mask if is_tensor(mask) else torch.as_tensor(np.asarray(mask))
    if m.dtype != torch.bool:
        raise ScoreInputError(argument, f"expected a bool mask (True = keep), found dtype {m.dtype}")
    if m.device != like.device:
        raise ScoreInputError(argument, f"device {m.device} differs from the scores' {like.device}")
    if 2 < m.ndim < like.ndim:
        # (B, n_q, n_k) against (B, H, n_q, n_k) scores would align B with the head axis: refuse to guess.
        raise ScoreInputError(
            argument,
            f"shape {tuple(m.shape)} is ambiguous for scores of shape {tuple(like.shape)}: expected a mask of "
            f"shape (n_q, n_k) or of the scores' full rank {like.ndim} with 1 for broadcast dims "
            f"(e.g. mask[:, None] for a (batch, n_q, n_k) mask over heads)",
        )
    try:
        torch.broadcast_shapes(m.shape, like.shape)
    except RuntimeError:
        raise ScoreInputError(
            argument, f"shape {tuple(m.shape)} does not broadcast with the scores' {tuple(like.shape)}"
        ) from None
    return m


def scaled_score_matrix(Q: Any, K: Any) -> torch.Tensor:
    """Scaled dot-product scores: ``Q Kᵀ / √d_k``.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``; with heads, ``(..., heads, n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``; batch/head dims broadcast as in :func:`score_matrix`.

    ``d_k`` is the per-head key width (the last dimension), never ``d_model = heads · d_k``.

    Returns:
        Tensor of shape ``(..., n_q, n_k)``, the inputs' dtype and device.

    Raises:
        ScoreInputError: as :func:`score_matrix`.

    Source: Vaswani et al. (2017), equation (1) and section 3.2.1 (the ``1/√d_k`` factor).

    Example:
        >>> scaled_score_matrix([[1.0, 1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0, 1.0]]).tolist()
        [[2.0]]
    """
    S = score_matrix(Q, K)  # (..., n_q, n_k); also checks shapes, dtypes and devices
    if str(S.dtype) in _HALF:  # fp32 accumulation, as cuBLAS and SDPA do: q·k may overflow before scaling
        S = score_matrix(_as_tensor(Q, "Q").float(), _as_tensor(K, "K").float())
    d_k = S.new_tensor(_as_tensor(Q, "Q").shape[-1])
    out = S / torch.sqrt(d_k)  # (..., n_q, n_k) / () -> (..., n_q, n_k)
    return out.to(_as_tensor(Q, "Q").dtype)


def bilinear_scores(Q: Any, K: Any, W: Any) -> torch.Tensor:
    """Bilinear ("general") scores: ``Q W Kᵀ``, entry ``[..., i, j] = q_iᵀ W k_j``.

    Args:
        Q: queries, shape ``(..., n_q, d_q)``.
        K: keys, shape ``(..., n_k, d_k)``.
        W: weights, shape ``(d_q, d_k)``.

    Returns:
        Tensor of shape ``(..., n_q, n_k)``, the inputs' dtype and device.

    Raises:
        ScoreInputError: wrong ranks, ``W`` not ``(d_q, d_k)``, or the dtype/device rule is broken.

    Source: Luong, Pham and Manning (2015), "Effective Approaches to Attention-based NMT", the
    "general" score ``h_tᵀ W_a h_s``.

    Example:
        >>> bilinear_scores([[1.0, 0.0]], [[0.0, 1.0]], [[0.0, 2.0], [0.0, 0.0]]).tolist()
        [[2.0]]
    """
    Q, K, W = _as_tensor(Q, "Q"), _as_tensor(K, "K"), _as_tensor(W, "W")
    _check_at_least_2d(Q, "Q", "(..., n_q, d_q)")
    _check_at_least_2d(K, "K", "(..., n_k, d_k)")
    _check_rank(W, "W", 2, "(d_q, d_k)")
    _same_dtype_and_device(Q=Q, K=K, W=W)
    if W.shape != (Q.shape[-1], K.shape[-1]):
        raise ScoreInputError(
            "W", f"expected shape (d_q, d_k) = ({Q.shape[-1]}, {K.shape[-1]}), found {tuple(W.shape)}"
        )
    return (Q @ W) @ K.transpose(-2, -1)  # (..., n_q, d_q) @ (d_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)


def additive_scores(Q: Any, K: Any, W_q: Any, W_k: Any, v: Any) -> torch.Tensor:
    """Additive (Bahdanau) scores: ``vᵀ tanh(W_q q_i + W_k k_j)`` for every query/key pair.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        W_q: query projection, shape ``(d_a, d_k)``.
        W_k: key projection, shape ``(d_a, d_k)``.
        v: output vector, shape ``(d_a,)``.

    Returns:
        Tensor of shape ``(..., n_q, n_k)``, the inputs' dtype and device.

    Raises:
        ScoreInputError: wrong ranks or widths, or the dtype/device rule is broken.

    Source: Bahdanau, Cho and Bengio (2015), "Neural Machine Translation by Jointly Learning to
    Align and Translate", appendix A.1.2, ``e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)``.

    Example:
        >>> additive_scores([[0.0]], [[0.0]], [[1.0]], [[1.0]], [2.0]).tolist()
        [[0.0]]
    """
    Q, K = _as_tensor(Q, "Q"), _as_tensor(K, "K")
    W_q, W_k, v = _as_tensor(W_q, "W_q"), _as_tensor(W_k, "W_k"), _as_tensor(v, "v")
    _check_at_least_2d(Q, "Q", "(..., n_q, d_k)")
    _check_at_least_2d(K, "K", "(..., n_k, d_k)")
    _check_rank(W_q, "W_q", 2, "(d_a, d_k)")
    _check_rank(W_k, "W_k", 2, "(d_a, d_k)")
    _check_rank(v, "v", 1, "(d_a,)")
    _check_width(Q, "Q", W_q, "W_q")
    _check_width(K, "K", W_k, "W_k")
    if not (W_q.shape[0] == W_k.shape[0] == v.shape[0]):
        raise ScoreInputError("v", f"d_a differs: W_q {W_q.shape[0]}, W_k {W_k.shape[0]}, v {v.shape[0]}")
    _same_dtype_and_device(Q=Q, K=K, W_q=W_q, W_k=W_k, v=v)
    q_proj = Q @ W_q.T  # (..., n_q, d_k) @ (d_k, d_a) -> (..., n_q, d_a)
    k_proj = K @ W_k.T  # (..., n_k, d_k) @ (d_k, d_a) -> (..., n_k, d_a)
    hidden = torch.tanh(q_proj.unsqueeze(-2) + k_proj.unsqueeze(-3))  # (..., n_q, 1, d_a) + (..., 1, n_k, d_a)
    return hidden @ v  # (..., n_q, n_k, d_a) @ (d_a,) -> (..., n_q, n_k)


def causal_mask(n_q: int, n_k: int, device: Any = None) -> torch.Tensor:
    """The causal mask (True = keep), bottom-right aligned.

    Query ``i`` may attend to key ``j`` when ``j <= i + (n_k - n_q)``: the last query sees every
    key, as when ``n_q`` new tokens follow ``n_k - n_q`` cached ones. For ``n_q == n_k`` this is the
    usual lower triangle. (PyTorch's ``scaled_dot_product_attention(is_causal=True)`` aligns top-left
    instead, ``j <= i``; with ``n_q > n_k`` the first ``n_q - n_k`` rows here keep nothing.)

    Args:
        n_q, n_k: the number of queries and keys (non-negative ints).

    Returns:
        Bool tensor of shape ``(n_q, n_k)``.

    Example:
        >>> causal_mask(2, 3).tolist()
        [[True, True, False], [True, True, True]]
    """
    for name, n in (("n_q", n_q), ("n_k", n_k)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ScoreInputError(name, f"expected a non-negative int, found {n!r}")
    i = torch.arange(n_q, device=device).unsqueeze(-1)  # (n_q, 1)
    j = torch.arange(n_k, device=device).unsqueeze(0)  # (1, n_k)
    return j <= i + (n_k - n_q)  # (n_q, n_k)


def masked_scores(S: Any, mask: Any) -> torch.Tensor:
    """Masked scores: ``S`` where ``mask`` is True (keep), ``-inf`` where it is False.

    Args:
        S: scores, shape ``(..., n_q, n_k)``.
        mask: bool, True = keep; shape ``(n_q, n_k)`` or ``S``'s full rank, each dim equal or 1.

    Returns:
        A new tensor of ``S``'s shape, dtype and device; whatever a masked entry held (NaN, inf)
        is replaced by ``-inf``.

    Raises:
        ScoreInputError: ``mask`` is not bool, does not broadcast, has an ambiguous rank (more than
            2 dims but fewer than ``S``), or is on another device.

    Source: Vaswani et al. (2017), section 3.2.3 ("masking out (setting to −∞) all values").

    Example:
        >>> masked_scores([[1.0, 2.0]], [[True, False]]).tolist()
        [[1.0, -inf]]
    """
    S = _as_tensor(S, "S")
    m = _as_mask(mask, "mask", S)
    return S.masked_fill(~m, float("-inf"))  # (..., n_q, n_k)


def attention_weights(S: Any, mask: Any = None) -> torch.Tensor:
    """Attention weights: softmax of the scores over the keys (the last axis).

    Args:
        S: scores (logits), shape ``(..., n_q, n_k)``.
        mask: optional bool mask, True = keep: ``(n_q, n_k)`` or ``S``'s full rank (dims equal or 1).

    Returns:
        Tensor of ``S``'s shape, dtype and device. Each row sums to 1 over its kept keys; masked
        entries are exactly 0 whatever ``S`` holds there (NaN and inf included); a fully masked row
        is all zeros (convention); a NaN in a kept entry makes that row's kept weights NaN.
        The max is subtracted first, so logits around 1000 do not overflow.

    Raises:
        ScoreInputError: as :func:`masked_scores`.

    Source: Vaswani et al. (2017), equation (1), ``softmax(·)`` applied row-wise.

    Example:
        >>> attention_weights([[0.0, 0.0], [1.0, 2.0]], [[True, True], [False, False]]).tolist()
        [[0.5, 0.5], [0.0, 0.0]]
    """
    S = _as_tensor(S, "S")
    if mask is None:
        return torch.softmax(S, dim=-1)  # (..., n_q, n_k)
    m = _as_mask(mask, "mask", S)
    logits = S.masked_fill(~m, float("-inf"))  # (..., n_q, n_k)
    weights = torch.softmax(logits, dim=-1)  # fully masked rows: NaN here
    return torch.where(m, weights, torch.zeros((), dtype=S.dtype, device=S.device))  # masked -> 0


def attention(Q: Any, K: Any, V: Any, mask: Any = None, scale: float | None = None) -> torch.Tensor:
    """Scaled dot-product attention: ``softmax(Q Kᵀ · scale, masked) V``.

    Args:
        Q: queries ``(..., n_q, d_k)``; K: keys ``(..., n_k, d_k)``; V: values ``(..., n_k, d_v)``.
        mask: optional bool mask, True = keep: ``(n_q, n_k)`` or the scores' full rank
            ``(..., n_q, n_k)`` with 1 for broadcast dims (a rank in between is refused as ambiguous).
        scale: the factor applied to the scores; default ``1/√d_k``.

    Returns:
        Tensor of shape ``(..., n_q, d_v)``; a fully masked query gets the zero vector.

    Raises:
        ScoreInputError: as :func:`score_matrix`, or ``V`` has a different number of keys.

    Source: Vaswani et al. (2017), equation (1).

    Example:
        >>> attention([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [3.0]], scale=0.0).tolist()
        [[2.0]]
    """
    Q, K, V = _as_tensor(Q, "Q"), _as_tensor(K, "K"), _as_tensor(V, "V")
    _check_at_least_2d(V, "V", "(..., n_k, d_v)")
    _same_dtype_and_device(Q=Q, K=K, V=V)
    if V.shape[-2] != K.shape[-2]:
        raise ScoreInputError("V", f"expected n_k={K.shape[-2]} rows as in K, found {V.shape[-2]}")
    factor = 1.0 / float(np.sqrt(Q.shape[-1])) if scale is None else float(scale)
    if str(Q.dtype) in _HALF:  # scale in float32 before rounding: q·k may overflow float16 before scaling
        logits = (score_matrix(Q.float(), K.float()) * factor).to(Q.dtype)  # (..., n_q, n_k)
    else:
        logits = score_matrix(Q, K) * factor  # (..., n_q, n_k)
    weights = attention_weights(logits, mask)  # (..., n_q, n_k)
    return weights @ V  # (..., n_q, n_k) @ (..., n_k, d_v) -> (..., n_q, d_v)


ALIGNMENTS = ("top_left", "bottom_right")


def causal_attention(Q: Any, K: Any, V: Any, alignment: str = "bottom_right") -> torch.Tensor:
    """Causal scaled dot-product attention, the flag form: no mask argument, query ``i`` sees the
    keys up to its own position.

    Args:
        Q: queries ``(..., n_q, d_k)``; K: keys ``(..., n_k, d_k)``; V: values ``(..., n_k, d_v)``.
        alignment: which key is query ``i``'s own position when ``n_q != n_k``:

            - ``"top_left"``: key ``j`` is kept when ``j <= i`` (PyTorch's
              ``scaled_dot_product_attention(is_causal=True)``, ``torch.ones(n_q, n_k).tril()``);
            - ``"bottom_right"``: ``j <= i + (n_k - n_q)`` (:func:`causal_mask`; the last query sees
              every key, as when ``n_q`` new tokens follow ``n_k - n_q`` cached ones;
              FlashAttention 2.1+). A query that keeps no key gets the zero vector.

    Returns:
        Tensor of shape ``(..., n_q, d_v)``, the inputs' dtype and device.

    Raises:
        ScoreInputError: as :func:`attention`, or an unknown ``alignment``.

    Source: Vaswani et al. (2017), section 3.2.3 (decoder self-attention masks the subsequent
    positions); alignments as documented by PyTorch and FlashAttention.

    Example:
        >>> causal_attention([[1.0], [1.0]], [[0.0], [0.0], [0.0]], [[3.0], [5.0], [7.0]], "top_left").tolist()
        [[3.0], [4.0]]
    """
    if alignment not in ALIGNMENTS:
        raise ScoreInputError("alignment", f"expected one of {', '.join(ALIGNMENTS)}, found {alignment!r}")
    Q, K = _as_tensor(Q, "Q"), _as_tensor(K, "K")
    _check_at_least_2d(Q, "Q", "(..., n_q, d_k)")
    _check_at_least_2d(K, "K", "(..., n_k, d_k)")
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device)
    mask = keep.tril() if alignment == "top_left" else keep.tril(n_k - n_q)  # (n_q, n_k), True = keep
    return attention(Q, K, V, mask)  # (..., n_q, d_v)
