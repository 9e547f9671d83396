"""Mistakes of rotary position embeddings (RoPE, :mod:`attnscore.maths.families.rope`): the other
pairing, the wrong frequencies, positions counted from 1 or ignored, and a theta other than the call's
(ignored, or a table of cosines and sines kept from an earlier call).

Each wrong rotation is first a plain torch function ``(x (..., seq, d_k), positions (seq,), theta,
pairing) -> (..., seq, d_k)`` (:data:`WRONG_ROTATIONS`), so that a contract that rotates queries and
keys inside attention can apply the same mistakes there; the catalogue entries call them with the
spec's pairing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.catalogue.families import rotary
from attnscore.catalogue.mistakes.registry import add
from attnscore.maths.contract import Contract
from attnscore.maths.families.rope import THETAS, theta_value
from attnscore.maths.rotary import PAIRINGS, pair_indices, rotate

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = [
    "WRONG_ROTATIONS",
    "other_pairing",
    "rotate_at_frequencies",
    "rotate_frequencies_per_coordinate",
    "rotate_other_pairing",
    "rotate_positions_from_one",
    "rotate_positions_ignored",
    "rotate_stale_theta",
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
    computed in ``x``'s dtype (float64 angles for float64, float32 otherwise)."""
    d = x.shape[-1]
    a, b = (torch.as_tensor(i, device=x.device) for i in pair_indices(d, pairing))
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    angle = torch.as_tensor(positions, device=x.device).to(work).unsqueeze(-1) * torch.as_tensor(
        freqs, dtype=work, device=x.device
    )  # (seq, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    xa, xb = x[..., a], x[..., b]
    out = torch.empty(torch.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)), dtype=x.dtype, device=x.device)
    out[..., a] = xa * cos - xb * sin
    out[..., b] = xa * sin + xb * cos
    return out


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


def _on_contract(rotation: Rotation) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: ``rotation`` on ``(x, token_positions, theta)`` with the spec's pairing."""

    def wrong(c: Contract, spec: Any, x: torch.Tensor, positions: torch.Tensor, theta: Any) -> torch.Tensor:
        return rotation(x, positions, theta, str(c.option("pairing")))

    return wrong


add(
    "rope_pairing_swapped",
    "RoPE pairs the other coordinates (interleaved vs rotate-half)",
    rotary,
    "your rotation pairs the coordinates the other way: this spec pairs them as its pairing states (interleaved: "
    "(x[2i], x[2i+1]), as the RoFormer paper and CS336; rotate_half: (x[i], x[i + d_k/2]), as GPT-NeoX and Hugging "
    "Face's rotate_half); both are RoPE, but the rotated vectors differ",
)(_on_contract(rotate_other_pairing))


add(
    "rope_frequencies_per_coordinate",
    "RoPE frequencies theta^(−i/d_k) instead of theta^(−2i/d_k)",
    rotary,
    "pair i turns at the frequency theta^(−2i/d_k), i = 0 .. d_k/2 − 1 (the exponents 0, 2/d_k, 4/d_k, ...); your "
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
    rotary,
    "rotate each token by its own position token_positions[t]; your rotation used the token's index t "
    "(arange(seq)), which is right only when the positions are 0, 1, 2, ... (a test with positions arange(seq) + c "
    "cannot see it either, as scores depend only on offsets)",
)(_on_contract(rotate_positions_ignored))


_FIT_GRID = np.exp(np.linspace(np.log(1.5), np.log(2.0e6), 1201))
"""The frequency bases a stale theta is first looked for at (log-spaced, 1.2% apart), before a
golden-section search between the best one's neighbours and the nearest whole numbers."""


def _fit_stale_theta(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> list[dict[str, float]] | None:
    """The whole frequency bases other than the call's whose rotation is nearest ``got``: each of
    :data:`~attnscore.maths.families.rope.THETAS`, and the best of a log-spaced grid rounded to a whole
    number; the diagnosis keeps the ones that match."""
    x, positions, theta = args
    given = theta_value(theta)
    if not np.isfinite(got).all() or tuple(got.shape) != tuple(x.shape):
        return None
    pairing = str(c.option("pairing"))
    x64 = x.double()
    target = torch.as_tensor(got, dtype=torch.float64)

    def error(t: float) -> float:
        return float(((rotate(x64, positions, t, pairing) - target) ** 2).sum())

    k = int(np.argmin([error(t) for t in _FIT_GRID]))
    lo, hi = np.log(_FIT_GRID[max(k - 1, 0)]), np.log(_FIT_GRID[min(k + 1, len(_FIT_GRID) - 1)])
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):  # golden-section search on log theta between the best point's neighbours
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        lo, hi = (lo, b) if error(float(np.exp(a))) <= error(float(np.exp(b))) else (a, hi)
    best = float(np.exp((lo + hi) / 2.0))
    near = sorted({max(2, int(np.floor(best))), int(np.ceil(best))} | set(THETAS), key=error)
    return [{"stale": float(t)} for t in near if t != given][:4] or None


@add(
    "rope_stale_theta",
    "RoPE with another theta (ignored, or a table cached from an earlier call)",
    rotary,
    "your rotation used the frequency base theta = {stale}, not the theta of this call: theta ignored (a default "
    "of 10000), or a table of cosines and sines kept from an earlier call (on the class or in a module global) and "
    "reused for another theta or d_k; build the table for each call's theta and d_k, or key the cache by them",
    fit=_fit_stale_theta,
    defaults=(("stale", 10000.0),),
)
def _stale_theta(
    c: Contract, spec: Any, x: torch.Tensor, positions: torch.Tensor, theta: Any, stale: float = 10000.0
) -> torch.Tensor:
    return rotate_stale_theta(x, positions, theta, str(c.option("pairing")), stale)
