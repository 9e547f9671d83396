"""Mistakes of rotary position embeddings (RoPE, :mod:`attnscore.maths.families.rope`): the other
pairing, the wrong frequencies, positions counted from 1 or ignored, and a theta other than the call's
(ignored, or a table of cosines and sines kept from an earlier call).

Each wrong rotation is first a plain torch function ``(x (..., seq, d_k), positions (seq,), theta,
pairing) -> (..., seq, d_k)`` (:data:`WRONG_ROTATIONS`); the catalogue entries call them with the
spec's pairing, on the ``rope`` contract itself and, for multi-head attention with RoPE
(:func:`~attnscore.catalogue.families.multihead_rotary`), on each head's queries and keys inside
attention (:func:`~attnscore.catalogue.mistakes.heads.attend_with_hooks`'s ``rotation``). Positions
counted from 1 apply to ``rope`` only: inside attention every query and key turns by one more step,
which leaves each score, a function of the offset ``m − n`` alone, and so the output unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import multihead_rotary, rotary
from attnscore.catalogue.mistakes.heads import attend_with_hooks
from attnscore.catalogue.mistakes.registry import add
from attnscore.maths.contract import Contract
from attnscore.maths.families.multihead import parts_of
from attnscore.maths.families.rope import THETAS, theta_value
from attnscore.maths.rotary import PAIRINGS, rotate, rotate_at

__all__ = [
    "WRONG_ROTATIONS",
    "other_pairing",
    "rotate_at_frequencies",
    "rotate_frequencies_per_coordinate",
    "rotate_other_pairing",
    "rotate_positions_from_one",
    "rotate_positions_ignored",
    "rotate_stale_theta",
    "rotary_anywhere",
    "rotated",
]

Rotation = Callable[["torch.Tensor", "torch.Tensor", Any, str], "torch.Tensor"]
"""``(x, positions, theta, pairing) -> rotated x``: one way of rotating (a string-typed alias, so that
importing the catalogue leaves torch unloaded)."""


def other_pairing(pairing: str) -> str:
    """The pairing a spec does not state: ``"rotate_half"`` for ``"interleaved"`` and back.

    >>> other_pairing("interleaved"), other_pairing("rotate_half")
    ('rotate_half', 'interleaved')
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"expected a RoPE pairing among {PAIRINGS!r}, found {pairing!r}")
    return PAIRINGS[1 - PAIRINGS.index(pairing)]


def rotate_at_frequencies(x: torch.Tensor, positions: torch.Tensor, freqs: np.ndarray, pairing: str) -> torch.Tensor:
    """``x (..., seq, d)`` with pair ``i`` (as ``pairing`` forms them) turned by ``positions · freqs[i]``,
    computed as the reference computes (:func:`attnscore.maths.rotary.rotate_at`)."""
    return rotate_at(x, positions, freqs, pairing)


def rotate_other_pairing(x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str) -> torch.Tensor:
    """RoPE with the pairing ``pairing`` is not: interleaved pairs where the halves were meant, or back."""
    return rotate(x, positions, theta_value(theta), other_pairing(pairing))


def rotate_frequencies_per_coordinate(
    x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str
) -> torch.Tensor:
    """RoPE with pair ``i`` at ``theta^(−i/d)`` instead of ``theta^(−2i/d)`` (``arange(d // 2) / d``
    where ``arange(0, d, 2) / d`` was meant)."""
    d = x.shape[-1]
    freqs = np.power(theta_value(theta), -np.arange(d // 2, dtype=np.float64) / d)
    return rotate_at_frequencies(x, positions, freqs, pairing)


def rotate_positions_from_one(x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str) -> torch.Tensor:
    """RoPE with every position one too far (``m + 1``: positions counted from 1)."""
    return rotate(x, torch.as_tensor(positions).to(torch.int64) + 1, theta_value(theta), pairing)


def rotate_positions_ignored(x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str) -> torch.Tensor:
    """RoPE at positions ``0 .. seq − 1`` whatever ``positions`` says (``arange(seq)``)."""
    return rotate(x, torch.arange(x.shape[-2], device=x.device), theta_value(theta), pairing)


def rotate_stale_theta(
    x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str, stale: float = 10000.0
) -> torch.Tensor:
    """RoPE with the frequency base ``stale`` whatever ``theta`` says (a default of 10000, or a table
    of cosines and sines made for an earlier call's theta)."""
    return rotate(x, positions, float(stale), pairing)


WRONG_ROTATIONS: dict[str, Rotation] = {
    "rope_pairing_swapped": rotate_other_pairing,
    "rope_frequencies_per_coordinate": rotate_frequencies_per_coordinate,
    "rope_positions_from_one": rotate_positions_from_one,
    "rope_positions_ignored": rotate_positions_ignored,
    "rope_stale_theta": rotate_stale_theta,
}
"""The wrong rotations by the id of the mistake that applies them to the ``rope`` contract."""


def rotary_anywhere(c: Contract) -> bool:
    """RoPE itself (:func:`~attnscore.catalogue.families.rotary`) or multi-head attention with RoPE on
    each head's queries and keys (:func:`~attnscore.catalogue.families.multihead_rotary`)."""
    return rotary(c) or multihead_rotary(c)


def rotated(c: Contract, args: tuple[Any, ...], rotation: Callable[..., torch.Tensor], **params: float) -> torch.Tensor:
    """``rotation`` (with ``params``) applied as the contract ``c`` applies RoPE, on ``args`` in its
    parameter order: on ``x`` for ``rope`` (``(x, token_positions, theta)``), on each head's queries
    and keys ``(..., heads, seq, d_head)`` inside attention for a multi-head contract with RoPE
    (the output ``(..., seq, d_model)``), at the call's positions and theta, in the spec's pairing."""
    pairing = str(c.option("pairing"))
    if not multihead_rotary(c):
        x, positions, theta = args
        return rotation(x, positions, theta, pairing, **params)
    p = parts_of(c, *args)
    positions = torch.as_tensor(p.token_positions, device=p.x.device)

    def per_head(t: torch.Tensor) -> torch.Tensor:
        return rotation(t, positions, p.theta, pairing, **params)

    return attend_with_hooks(c, args, rotation=per_head)


def _on_contract(rotation: Rotation) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: ``rotation`` where the contract applies RoPE (:func:`rotated`)."""

    def wrong(c: Contract, spec: Any, *args: Any) -> torch.Tensor:
        return rotated(c, args, rotation)

    return wrong


add(
    "rope_pairing_swapped",
    "RoPE pairs the other coordinates (interleaved vs rotate-half)",
    rotary_anywhere,
    "your rotation pairs the coordinates the other way: this spec pairs them as its pairing states (interleaved: "
    "(x[2i], x[2i+1]), as the RoFormer paper and CS336; rotate_half: (x[i], x[i + d_k/2]), as GPT-NeoX and Hugging "
    "Face's rotate_half); both are RoPE, but the rotated vectors differ",
)(_on_contract(rotate_other_pairing))


add(
    "rope_frequencies_per_coordinate",
    "RoPE frequencies theta^(−i/d_k) instead of theta^(−2i/d_k)",
    rotary_anywhere,
    "pair i turns at the frequency theta^(−2i/d_k), i = 0 .. d_k/2 − 1 (the exponents 0, 2/d_k, 4/d_k, ...; d_k "
    "is the rotated width, each head's d_head in multi-head attention); your "
    "frequencies are theta^(−i/d_k) (arange(d_k // 2) / d_k where arange(0, d_k, 2) / d_k was meant), so every "
    "pair after the first turns too fast",
)(_on_contract(rotate_frequencies_per_coordinate))


add(
    "rope_positions_from_one",
    "RoPE positions counted from 1",
    rotary,
    "token position m turns pair i by m · θ_i, and the token at position 0 is left as it is; your rotation "
    "used m + 1 (positions counted from 1)",
)(_on_contract(rotate_positions_from_one))


add(
    "rope_positions_ignored",
    "RoPE token positions ignored (arange(seq) used)",
    rotary_anywhere,
    "rotate each token by its own position token_positions[t]; your rotation used the token's index t "
    "(arange(seq)), which is right only when the positions are 0, 1, 2, ... (a test with positions arange(seq) + c "
    "cannot see it either, as scores depend only on offsets)",
)(_on_contract(rotate_positions_ignored))


_FIT_GRID = np.exp(np.linspace(np.log(1.5), np.log(2.0e6), 1201))
"""The frequency bases a stale theta is first looked for at (log-spaced, 1.2% apart), before finer
grids between the best one's neighbours and the nearest whole numbers."""

_FIT_BLOCK = 128
"""How many frequency bases one batched evaluation of the fit turns at once."""


def _at_bases(thetas: np.ndarray) -> Rotation:
    """A rotation with the bases ``thetas (T,)`` as a leading axis: ``x (T, ..., seq, d)`` item ``j``
    turned at the frequencies ``thetas[j]^(−2i/d)``, whatever theta the call gives."""

    def rotation(x: torch.Tensor, positions: torch.Tensor, theta: Any, pairing: str) -> torch.Tensor:
        d = x.shape[-1]
        freqs = np.power(thetas[:, None], -2.0 * np.arange(d // 2, dtype=np.float64) / d)  # (T, d/2)
        return rotate_at_frequencies(x, positions, freqs.reshape(len(thetas), *[1] * (x.ndim - 2), d // 2), pairing)

    return rotation


def _stale_errors(c: Contract, wide: tuple[torch.Tensor, ...], target: torch.Tensor, thetas: np.ndarray) -> np.ndarray:
    """``Σ (output − target)²`` of the contract's output (``wide`` its float64 arguments, ``x`` first)
    with RoPE at each base of ``thetas``, in blocks of :data:`_FIT_BLOCK` bases along a leading axis."""
    x, rest = wide[0], wide[1:]
    errors = []
    for start in range(0, len(thetas), _FIT_BLOCK):
        block = np.asarray(thetas[start : start + _FIT_BLOCK], dtype=np.float64)
        out = rotated(c, (x.expand(len(block), *x.shape), *rest), _at_bases(block))  # (T, ...)
        errors.append(((out - target) ** 2).flatten(1).sum(1).numpy())
    return np.concatenate(errors)


def _fit_stale_theta(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> list[dict[str, float]] | None:
    """The whole frequency bases other than the call's whose output (:func:`rotated` with
    :func:`rotate_stale_theta`, in float64) is nearest ``got``: each of
    :data:`~attnscore.maths.families.rope.THETAS`, and the best of a log-spaced grid, refined five
    times between the best point's neighbours, rounded down and up to whole numbers; the diagnosis
    keeps the ones that match."""
    wide = tuple(a.double() if a.is_floating_point() else a for a in args)
    given = theta_value(wide[c.parameter_names.index("theta")])
    if not np.isfinite(got).all() or tuple(got.shape) != tuple(wide[0].shape):
        return None
    target = torch.as_tensor(got, dtype=torch.float64)
    grid = _FIT_GRID
    for _ in range(5):  # each round: 64 steps between the best point's neighbours (32 times finer)
        k = int(np.argmin(_stale_errors(c, wide, target, grid)))
        lo, hi = np.log(grid[max(k - 1, 0)]), np.log(grid[min(k + 1, len(grid) - 1)])
        grid = np.exp(np.linspace(lo, hi, 65))
    best = float(grid[int(np.argmin(_stale_errors(c, wide, target, grid)))])
    near = np.array(sorted({max(2, int(np.floor(best))), int(np.ceil(best))} | set(THETAS)), dtype=np.float64)
    ranked = near[np.argsort(_stale_errors(c, wide, target, near), kind="stable")]
    return [{"stale": float(t)} for t in ranked if t != given][:4] or None


@add(
    "rope_stale_theta",
    "RoPE with another theta (ignored, or a table cached from an earlier call)",
    rotary_anywhere,
    "your rotation used the frequency base theta = {stale}, not the theta of this call: theta ignored (a default "
    "of 10000), or a table of cosines and sines kept from an earlier call (on the class or in a module global) and "
    "reused for another theta or d_k; build the table for each call's theta and d_k, or key the cache by them",
    fit=_fit_stale_theta,
    defaults=(("stale", 10000.0),),
)
def _stale_theta(c: Contract, spec: Any, *args: Any, stale: float = 10000.0) -> torch.Tensor:
    return rotated(c, args, rotate_stale_theta, stale=stale)
