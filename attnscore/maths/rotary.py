"""Rotary position embeddings (RoPE): the rotation itself, as a torch reference and its float64
numpy twin, shared by the RoPE family and multi-head attention with RoPE.

RoPE (Su et al., *RoFormer*, 2021, eq. 34) splits a query or key vector ``x`` of even width ``d``
into ``d/2`` pairs and rotates pair ``i`` of the token at position ``m`` by the angle
``m · θ_i``, ``θ_i = theta^(−2i/d)``::

    y_a = x_a cos(m θ_i) − x_b sin(m θ_i)
    y_b = x_a sin(m θ_i) + x_b cos(m θ_i)

so that ``rope(q, m) · rope(k, n)`` depends on the positions only through ``m − n``. Real code pairs
the coordinates in one of two ways (:data:`PAIRINGS`):

- ``"interleaved"``: ``(a, b) = (2i, 2i + 1)``, adjacent coordinates (the RoFormer paper, Stanford
  CS336 assignment 1, GPT-J, Meta's original LLaMA code with complex numbers);
- ``"rotate_half"``: ``(a, b) = (i, i + d/2)``, the first half against the second (GPT-NeoX, Llama
  and most models in Hugging Face ``transformers``, whose ``rotate_half`` gives it its name).

Shapes: ``x (..., seq, d)`` with ``d`` even; ``positions (seq,)`` or any shape that broadcasts
against ``x``'s ``(..., seq)``, whole numbers (any int or float dtype); leading dims of size 1
(``(1, seq)``, as CS336 passes them to multi-head attention) are dropped first
(:func:`seq_positions`). The torch reference :func:`rotate` keeps ``x``'s dtype and device: it
computes the angles, cosines and sines in float32 (float64 for a float64 ``x``) and rounds them to
``x``'s dtype before the products, as Hugging Face's ``apply_rotary_pos_emb`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch

__all__ = ["PAIRINGS", "frequencies", "pair_indices", "rotate", "rotate_at", "rotate_golden", "seq_positions"]

PAIRINGS = ("interleaved", "rotate_half")
"""The two ways real code pairs a vector's coordinates for RoPE (see the module's text)."""


def _check(d: int, pairing: str) -> None:
    if pairing not in PAIRINGS:
        raise ValueError(f"expected a RoPE pairing among {PAIRINGS!r}, found {pairing!r}")
    if d % 2:
        raise ValueError(f"expected an even RoPE width d, found d = {d}")


def seq_positions(positions: Any) -> Any:
    """``positions`` (a numpy array or torch tensor) without its leading dims of size 1:
    ``(1, seq)`` -> ``(seq,)``; any other shape as it is.

    >>> seq_positions(np.array([[0, 3, 7]])).tolist()
    [0, 3, 7]
    """
    while len(positions.shape) > 1 and positions.shape[0] == 1:
        positions = positions[0]
    return positions


def pair_indices(d: int, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """The coordinates ``(a, b)`` of each of the ``d/2`` pairs, in frequency order ``i = 0 .. d/2 − 1``.

    Raises:
        ValueError: an odd ``d`` or an unknown pairing.

    >>> [p.tolist() for p in pair_indices(6, "interleaved")], [p.tolist() for p in pair_indices(6, "rotate_half")]
    ([[0, 2, 4], [1, 3, 5]], [[0, 1, 2], [3, 4, 5]])
    """
    _check(d, pairing)
    i = np.arange(d // 2)
    return (2 * i, 2 * i + 1) if pairing == "interleaved" else (i, i + d // 2)


def frequencies(d: int, theta: float) -> np.ndarray:
    """``θ_i = theta^(−2i/d)`` for ``i = 0 .. d/2 − 1``, float64, shape ``(d/2,)``.

    >>> frequencies(4, 100.0).tolist()
    [1.0, 0.1]
    """
    return np.power(float(theta), -2.0 * np.arange(d // 2, dtype=np.float64) / d)


def rotate_golden(x: np.ndarray, positions: np.ndarray, theta: float, pairing: str) -> np.ndarray:
    """RoPE in float64 numpy: ``x (..., seq, d)`` rotated at ``positions`` (broadcasting against
    ``(..., seq)``), ``theta`` the base, ``pairing`` one of :data:`PAIRINGS`.

    Raises:
        ValueError: an odd last dim or an unknown pairing.

    >>> rotate_golden(np.array([[1.0, 0.0]]), np.array([0]), 10000.0, "interleaved").tolist()
    [[1.0, 0.0]]
    """
    x = np.asarray(x, dtype=np.float64)
    a, b = pair_indices(x.shape[-1], pairing)
    angle = seq_positions(np.asarray(positions, dtype=np.float64))[..., None] * frequencies(x.shape[-1], theta)
    cos, sin = np.cos(angle), np.sin(angle)
    y = np.empty(np.broadcast_shapes(x.shape, angle.shape[:-1] + (x.shape[-1],)), dtype=np.float64)
    y[..., a] = x[..., a] * cos - x[..., b] * sin
    y[..., b] = x[..., a] * sin + x[..., b] * cos
    return y


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float, pairing: str) -> torch.Tensor:
    """RoPE in torch, the reference: ``x (..., seq, d)`` rotated at ``positions`` (broadcasting
    against ``(..., seq)``), in ``x``'s dtype and on its device (the cosines and sines computed in
    float32, float64 for a float64 ``x``, then rounded to ``x``'s dtype).

    Raises:
        ValueError: an odd last dim or an unknown pairing.
    """
    return rotate_at(x, positions, frequencies(x.shape[-1], theta), pairing)


def rotate_at(x: torch.Tensor, positions: torch.Tensor, freqs: np.ndarray, pairing: str) -> torch.Tensor:
    """:func:`rotate` with pair ``i`` turning at ``freqs[..., i]`` instead of ``theta^(−2i/d)``
    (``freqs`` float64, its last dim ``d/2``, broadcasting against the angles ``(..., seq, d/2)``):
    what the catalogue's wrong frequencies and fitted bases are made of.

    Raises:
        ValueError: an odd last dim or an unknown pairing.
    """
    d = x.shape[-1]
    a, b = (torch.as_tensor(i, device=x.device) for i in pair_indices(d, pairing))
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    rates = torch.as_tensor(freqs, dtype=work, device=x.device)
    angle = seq_positions(torch.as_tensor(positions, device=x.device)).to(work).unsqueeze(-1) * rates  # (.., seq, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    xa, xb = x[..., a], x[..., b]
    ya, yb = xa * cos - xb * sin, xa * sin + xb * cos
    out = torch.empty(torch.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)), dtype=x.dtype, device=x.device)
    out[..., a] = ya
    out[..., b] = yb
    return out
