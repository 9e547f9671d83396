"""Properties of rotary position embeddings (RoPE, :mod:`attnscore.maths.families.rope`): a rotation
keeps each vector's norm, and the scores of rotated queries and keys depend on their positions only
through the offsets (RoFormer, 2021, §3.4.2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.catalogue.families import rotary
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, first_index, register
from attnscore.maths.contract import Contract
from attnscore.maths.display import format_index
from attnscore.maths.lazy_hypothesis import composite, st
from attnscore.maths.strategies import legend_sizes, random_args

__all__ = ["norm_failure", "offset_failure"]


def norm_failure(x: np.ndarray, y: np.ndarray, allowed: np.ndarray) -> str | None:
    """Where the norm of a rotated vector ``y[..., t, :]`` differs from that of ``x[..., t, :]`` by more
    than the output's allowed error (its Euclidean norm bounds the change of the norm), or None.

    >>> norm_failure(np.array([[3.0, 4.0]]), np.array([[0.0, 5.0]]), np.zeros((1, 2)))
    >>> norm_failure(np.array([[3.0, 4.0]]), np.array([[3.0, 0.0]]), np.zeros((1, 2)))[:56]
    'the rotated vector x[0] has norm 3, but x[0] has norm 5:'
    """
    if x.shape != y.shape or x.ndim < 1:
        return None  # a wrong shape is the value comparison's verdict
    with np.errstate(invalid="ignore", over="ignore"):
        before, after = np.linalg.norm(x, axis=-1), np.linalg.norm(y, axis=-1)
        slack = np.linalg.norm(np.broadcast_to(allowed, y.shape), axis=-1) + 4 * UNIT_ROUNDOFF["float64"] * before
        index = first_index(~(np.abs(after - before) <= slack))
    if index is None:
        return None
    where = format_index("x", index)
    return (
        f"the rotated vector {where} has norm {float(after[index]):.6g}, but {where} has norm "
        f"{float(before[index]):.6g}: a rotation keeps every vector's length (each pair (x_a, x_b) "
        "turned by cos and sin of one angle)"
    )


def _norm_check(ctx: CheckContext) -> str | None:
    x = np.asarray(ctx.args[0]["x"], dtype=np.float64)
    return norm_failure(x, ctx.values(0), np.asarray(ctx.allowed[0], dtype=np.float64))


register(
    Property(
        name="rope_preserves_norm",
        summary="Each rotated vector has the norm of the vector it came from: ‖rope(x)[..., t, :]‖ = ‖x[..., t, :]‖.",
        strategy=random_args,
        applies=rotary,
        check=_norm_check,
        golden=False,  # the check first, then the values (points only for computing)
    )
)


@composite
def _offset_example(draw: Callable[..., Any], contract: Contract, max_value: float) -> tuple[Args, np.ndarray, int]:
    """Queries ``x`` at drawn positions, keys of the same shape at the same positions, and a shift
    ``c`` in ``[1, 40]`` for every position."""
    sizes = draw(legend_sizes(contract))
    args = draw(random_args(contract, max_value, sizes))
    keys = draw(random_args(contract, max_value, {**sizes, "d_k": np.shape(args["x"])[-1]}))["x"]
    return args, np.asarray(keys, dtype=np.float64).reshape(np.shape(args["x"])), draw(st.integers(1, 40))


def _offset_calls(contract: Contract, example: tuple[Args, np.ndarray, int]) -> list[Args]:
    """``rope(q, p)``, ``rope(k, p)``, ``rope(q, p + c)``, ``rope(k, p + c)``."""
    args, keys, shift = example
    moved = (np.asarray(args["token_positions"]) + shift).astype(np.int32)
    return [
        args,
        {**args, "x": keys},
        {**args, "token_positions": moved},
        {**args, "x": keys, "token_positions": moved},
    ]


def _scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return q @ np.swapaxes(k, -1, -2)  # (..., seq, d_k) @ (..., d_k, seq) -> (..., seq, seq)


def offset_failure(
    rotated: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    allowed: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    shift: int,
) -> str | None:
    """Whether the scores ``q'_m · k'_n`` of the rotated queries and keys at the positions (the first
    two outputs) and at every position shifted by ``shift`` (the last two) agree within the error
    the outputs' allowed errors carry into a dot product; a sentence naming the first that does not.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> offset_failure((q, q, q, q), (np.zeros((2, 2)),) * 4, 3) is None
    True
    >>> offset_failure((q, q, q, -q), (np.zeros((2, 2)),) * 4, 3)[:60]
    'the score of rotated query 0 and key 0 is 1 at the positions'
    """
    qa, ka, qb, kb = (np.asarray(r, dtype=np.float64) for r in rotated)
    if not qa.shape == ka.shape == qb.shape == kb.shape or qa.ndim < 2:
        return None  # a wrong shape is the value comparison's verdict
    aq, ak, bq, bk = (np.broadcast_to(np.asarray(a, dtype=np.float64), qa.shape) for a in allowed)
    with np.errstate(invalid="ignore", over="ignore"):
        before, after = _scores(qa, ka), _scores(qb, kb)
        carried = (
            _scores(np.abs(qa), ak)
            + _scores(aq, np.abs(ka))
            + _scores(aq, ak)
            + _scores(np.abs(qb), bk)
            + _scores(bq, np.abs(kb))
            + _scores(bq, bk)
        )
        carried = carried + 2 * qa.shape[-1] * UNIT_ROUNDOFF["float64"] * (
            _scores(np.abs(qa), np.abs(ka)) + _scores(np.abs(qb), np.abs(kb))
        )
        index = first_index(~(np.abs(after - before) <= carried))
    if index is None:
        return None
    m, n = index[-2], index[-1]
    batch = ", ".join(str(i) for i in index[:-2])
    return (
        f"the score of rotated query {m} and key {n}{' of batch item ' + batch if batch else ''} is "
        f"{float(before[index]):.6g} at the positions but {float(after[index]):.6g} with "
        f"every position shifted by {shift}: with RoPE, q_m · k_n depends on the positions only through "
        "their offset m − n (rotate each pair by the position times its frequency, nothing else)"
    )


def _offset_check(ctx: CheckContext) -> str | None:
    shift = int(ctx.example[2]) if ctx.example is not None else 0
    outputs = tuple(ctx.values(i) for i in range(4))
    allowed = tuple(np.asarray(ctx.allowed[i], dtype=np.float64) for i in range(4))
    return offset_failure(outputs, allowed, shift)  # type: ignore[arg-type]


register(
    Property(
        name="rope_scores_depend_on_offsets",
        summary=(
            "Rotated queries and keys score q_m · k_n the same when every token position is shifted by the same "
            "amount c: the scores depend on the positions only through their offsets m − n."
        ),
        strategy=_offset_example,
        applies=rotary,
        calls=_offset_calls,
        check=_offset_check,
        golden=False,  # the check first, then the values (points only for computing)
    )
)
