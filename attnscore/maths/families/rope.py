"""Rotary position embeddings (:attr:`ContractFamily.ROPE`), the pairing convention in :class:`RopeOptions`.

``rope`` is ``f(x (..., seq, d_k), token_positions (seq,), theta) -> (..., seq, d_k)``: pair ``i`` of
the token at position ``m = token_positions[t]`` rotated by the angle ``m · theta^(−2i/d_k)``
(:mod:`attnscore.maths.rotary`), ``d_k`` even, ``token_positions`` int32 shared by every batch item
(Stanford CS336 passes ``(seq,)``), ``theta`` a Python int (the frequency base, 10000 in most models).
Which coordinates form pair ``i`` is a convention the spec states (``pairing``, never passed to the
implementation): ``"interleaved"`` ``(2i, 2i + 1)`` (RoFormer eq. 34, CS336, GPT-J) or
``"rotate_half"`` ``(i, i + d_k/2)`` (GPT-NeoX, Hugging Face Llama).

Reference :func:`attnscore.maths.rotary.rotate`, golden twin :func:`attnscore.maths.rotary.rotate_golden`.
The error bound of output entry ``y_a`` (and ``y_b``) of pair ``(x_a, x_b)`` at angle ``φ = m θ_i``
is ``u·(|x_a| + |x_b|)·(3 + (3 + ln theta)·|φ|)``: the angle rounded (the frequency, ``theta``'s power
``−2i/d_k`` rounded first, and the product with ``m``: ``(3 + ln theta)·u·|φ|`` in all), the cosine and
sine rounded (``u`` each) and the two products (``u`` each); the output's own rounding is the
tolerance's ``u·|y|``. In float16/bfloat16 the cosines, sines and products round in the tested dtype
and the angle in float32 (:func:`low_terms`), as the reference and Hugging Face's
``apply_rotary_pos_emb`` do. RoPE is linear in ``x``: ``dx = R(−m) dO``, the inverse rotation of the
upstream gradient.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import as_float64
from attnscore.maths.families.base import (
    Gradients,
    Scales,
    absolute_args,
    no_unused_keys,
    not_general_attention,
    options_of,
)
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import f64
from attnscore.maths.options import Options, convention
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.rotary import PAIRINGS, frequencies, pair_indices, rotate, rotate_golden, seq_positions
from attnscore.maths.tolerance import ErrorTerms

MEMBER = ContractFamily.ROPE
SHARED_MASKS = False

THETAS = (10000, 500, 100, 1000, 50, 10)
"""The frequency bases drawn inputs use, one per call: they change between the calls of one worker,
so that a table of cosines and sines kept from an earlier call (on the class, in a module global)
shows."""


@dataclass(frozen=True)
class RopeOptions(Options):
    """RoPE's one convention: which coordinates of ``x`` form each rotated pair."""

    pairing: str = convention(
        "interleaved",
        "which coordinates form pair i: interleaved (2i, 2i+1) (RoFormer, CS336, GPT-J) or rotate_half "
        "(i, i + d_k/2) (GPT-NeoX, Hugging Face Llama)",
        PAIRINGS,
    )


def theta_value(theta: Any) -> float:
    """``theta`` as a float: a Python int or float, a numpy scalar, or a 0-d tensor (how a mistake
    receives an integer parameter), > 0.

    Raises:
        ScoreInputError: a bool, a tensor that is not 0-d, anything else, or a value <= 0.
    """
    if is_tensor(theta):
        if theta.ndim != 0 or theta.dtype == torch.bool:
            raise ScoreInputError("theta", f"expected an int, found a tensor of shape {tuple(theta.shape)}")
        theta = theta.item()
    if isinstance(theta, np.ndarray) and theta.ndim == 0:
        theta = theta.item()
    if isinstance(theta, bool) or not isinstance(theta, int | float | np.integer | np.floating):
        raise ScoreInputError("theta", f"expected an int, found {type(theta).__name__}")
    if not float(theta) > 0:
        raise ScoreInputError("theta", f"expected a frequency base > 0, found {theta}")
    return float(theta)


def _parts(a: Args, pairing: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``(pair indices a, b, |x_a| + |x_b| (..., seq, d_k/2), |φ| (seq, d_k/2), theta)`` of a call."""
    x = as_float64(a, "x")
    theta = theta_value(np.asarray(a["theta"]))
    d = int(x.shape[-1])
    ia, ib = pair_indices(d, pairing)
    angle = np.abs(seq_positions(np.asarray(a["token_positions"], dtype=np.float64))[..., None] * frequencies(d, theta))
    pair = np.abs(x[..., ia]) + np.abs(x[..., ib])
    return ia, ib, pair, angle, theta


def _spread(ia: np.ndarray, ib: np.ndarray, per_pair: np.ndarray, d: int) -> np.ndarray:
    """A value per pair ``(..., d/2)`` written at both of its coordinates ``(..., d)``."""
    out = np.empty((*per_pair.shape[:-1], d), dtype=np.float64)
    out[..., ia] = per_pair
    out[..., ib] = per_pair
    return out


def _angle_units(angle: np.ndarray, theta: float) -> np.ndarray:
    """``3 + (3 + ln theta)·|φ|``: the cosine's or sine's error in units of ``u``, per pair."""
    return 3.0 + (3.0 + max(float(np.log(theta)), 0.0)) * angle


def rope_error(a: Args, pairing: str) -> tuple[int, np.ndarray]:
    """``(1, u-units per entry)``: ``(|x_a| + |x_b|)·(3 + (3 + ln theta)·|m θ_i|)`` at both coordinates
    of each pair (see the module's text)."""
    ia, ib, pair, angle, theta = _parts(a, pairing)
    return 1, _spread(ia, ib, pair * _angle_units(angle, theta), 2 * len(ia))


def low_terms(a: Args, pairing: str) -> ErrorTerms:
    """The float16/bfloat16 budget: the cosine, sine and both products rounded in the tested dtype
    (``2·(|x_a| + |x_b|)``), the angle and its cosine and sine in float32
    (``(|x_a| + |x_b|)·(3 + (3 + ln theta)·|φ|)``), four subnormals as the floor."""
    ia, ib, pair, angle, theta = _parts(a, pairing)
    d = 2 * len(ia)
    return ErrorTerms(_spread(ia, ib, 2.0 * pair, d), _spread(ia, ib, pair * _angle_units(angle, theta), d), 4.0)


def _positions_problem(positions: Any, x_shape: tuple[int, ...]) -> str | None:
    shape = tuple(np.shape(positions))
    seq = x_shape[-2] if len(x_shape) >= 2 else None
    if not shape or shape[-1] != seq or any(n != 1 for n in shape[:-1]):
        return f"expected token positions of shape (seq,) = ({seq},) as x (..., seq, d_k) has, found shape {shape}"
    return None


def _rope_check(a: Args) -> list[tuple[str, str]]:
    """The worked example's ``x``, ``token_positions`` and ``theta`` against each other."""
    problems = []
    x_shape = tuple(np.shape(a["x"]))
    if len(x_shape) < 2 or x_shape[-1] % 2:
        problems.append(("x", f"expected x of shape (..., seq, d_k) with d_k even, found shape {x_shape}"))
    problem = _positions_problem(a["token_positions"], x_shape)
    if problem:
        problems.append(("token_positions", problem))
    theta = np.asarray(a["theta"])
    if theta.shape != () or not float(theta) > 0:
        problems.append(("theta", f"expected one frequency base > 0 (shape ()), found {theta.tolist()!r}"))
    return problems


def _rope_integers(pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``d_k`` made even; ``seq`` distinct token positions from a random start with random gaps, not
    all equal (never ``arange(seq) + c`` from 3 tokens on, and two tokens never adjacent); one theta of
    :data:`THETAS`."""
    d_k = int(sizes["d_k"])
    sizes = {**sizes, "d_k": d_k + d_k % 2}
    seq = int(sizes["seq"])
    gaps = [pick(1, 6) for _ in range(max(seq - 1, 0))]
    if gaps and len(set(gaps)) == 1:
        gaps[-1] += pick(1, 4)  # uneven: a forward that ignores the positions cannot pass on offsets
    positions = np.cumsum([pick(0, 24), *gaps])
    theta = THETAS[pick(0, len(THETAS) - 1)]
    return sizes, {"token_positions": positions, "theta": np.asarray(theta)}


def _configure(base: Contract, options: RopeOptions, kept: tuple[str, ...]) -> Contract:
    """The ``rope`` contract for a stated ``pairing``."""
    pairing = options.pairing

    def ref(x: Any, token_positions: Any, theta: Any) -> torch.Tensor:
        if not is_tensor(x) or not x.is_floating_point():
            raise ScoreInputError("x", f"expected a floating tensor (..., seq, d_k), found {type(x).__name__}")
        if x.ndim < 2 or x.shape[-1] % 2:
            raise ScoreInputError("x", f"expected shape (..., seq, d_k) with d_k even, found {tuple(x.shape)}")
        problem = _positions_problem(token_positions, tuple(x.shape))
        if problem:
            raise ScoreInputError("token_positions", problem)
        return rotate(x, token_positions, theta_value(theta), pairing)  # (..., seq, d_k)

    def gold(a: Args) -> np.ndarray:
        theta = theta_value(np.asarray(a["theta"]))
        return rotate_golden(as_float64(a, "x"), np.asarray(a["token_positions"]), theta, pairing)

    return dataclasses.replace(
        base,
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: rope_error(a, pairing),
        low_error_fn=lambda a, dtype, factor: low_terms(a, pairing),
        options=options,
    )


def rope_contract() -> Contract:
    """RoPE at explicit token positions: ``f(x (..., seq, d_k), token_positions (seq,), theta) ->
    (..., seq, d_k)``, pairs interleaved unless the spec states ``pairing: rotate_half``.

    Example (a quarter turn: ``d_k = 2``, pair 0's frequency is ``theta^0 = 1``, position ``m`` turns
    it by ``m`` radians, so position 0 keeps ``[1, 0]``):

        >>> c = rope_contract()
        >>> x = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
        >>> c.reference(x, torch.tensor([0, 3], dtype=torch.int32), 10000).round(decimals=4).tolist()
        [[1.0, 0.0], [-0.99, 0.1411]]
    """
    unconfigured = Contract(
        name="rope",
        family=MEMBER,
        parameters=(("x", ("...", "seq", "d_k")), ("token_positions", ("seq",)), ("theta", ())),
        returns=("...", "seq", "d_k"),
        reference=rotate,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=RopeOptions(),
        configure=_configure,
        samples=(((("pairing", "rotate_half"),), ("x", "token_positions", "theta")),),
        bound_text="u·(|x_a| + |x_b|)·(3 + (3 + ln theta)·|m θ_i|)",
        int_parameters=frozenset({"token_positions", "theta"}),
        integer_fn=_rope_integers,
        integer_check=_rope_check,
    )
    return _configure(unconfigured, RopeOptions(), unconfigured.parameter_names)


CONTRACTS = (rope_contract(),)


def _pairing(contract: Contract) -> str:
    return options_of(contract, RopeOptions).pairing


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """RoPE is a rotation, linear in ``x``: ``dx = R(m)ᵀ dO = R(−m) dO``, ``dO`` rotated back (the
    positions and theta get none)."""
    theta = theta_value(np.asarray(args["theta"]))
    back = -np.asarray(args["token_positions"], dtype=np.float64)
    dx = rotate_golden(f64(d_out), back, theta, _pairing(contract))
    return {"x": np.broadcast_to(dx, np.shape(args["x"])).copy()}


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """``dx`` is ``dO`` rotated back: the forward's scale with ``|dO_a| + |dO_b|`` in place of ``|x_a| + |x_b|``."""
    a, dO = absolute_args(contract, args, d_out)
    n, scale = rope_error({**a, "x": np.broadcast_to(dO, np.shape(a["x"]))}, _pairing(contract))
    return n, {"x": scale}


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: RoPE is not a variant of general attention."""
    return None


# no keywords that leave a key out: RoPE has no keys
unused_keys = no_unused_keys
attention_changed = not_general_attention
