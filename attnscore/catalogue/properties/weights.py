"""Properties of masks, softmax weights and attention."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.catalogue.families import attention, gives_weights, masked, masked_scores, weights
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, register
from attnscore.maths.contract import Contract
from attnscore.maths.display import format_number
from attnscore.maths.lazy_hypothesis import composite, st
from attnscore.maths.strategies import legend_sizes, random_args
from attnscore.maths.tolerance import close_enough


@composite
def _logits_and_mask(
    draw: Callable[..., Any],
    c: Contract,
    max_value: float,
    *,
    offset: float = 0.0,
    masked_junk: bool = False,
    nan_kept: bool = False,
    full_row: str = "some",
    integer: bool = False,
) -> Args:
    sizes = draw(legend_sizes(c))
    args = draw(random_args(c, max_value, sizes=sizes))
    S, mask = args["S"], args["mask"].copy()
    if integer:
        S = np.round(S)
    if full_row == "none":
        mask[..., 0] = True  # every row keeps a key
    elif full_row == "one":
        mask.reshape(-1, mask.shape[-1])[0] = False  # the first row is fully masked
    S = S + offset
    if masked_junk:
        junk = np.array([np.nan, np.inf, -np.inf, 1e4, -1e4])
        picks = draw(st.lists(st.integers(0, 4), min_size=S.size, max_size=S.size))
        S = np.where(mask, S, junk[np.array(picks, dtype=int)].reshape(S.shape))
    if nan_kept:
        flat_keep = np.flatnonzero(mask)
        if flat_keep.size:
            j = flat_keep[draw(st.integers(0, flat_keep.size - 1))]
            S = S.copy()
            S.flat[j] = np.nan
    return {"S": S, "mask": mask}


def _row_sums(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    if w.shape != mask.shape:
        return None
    sums = w.sum(axis=-1)
    kept = mask.any(axis=-1)
    tol = 8 * w.shape[-1] * UNIT_ROUNDOFF[ctx.dtype] + 1e-12
    if not np.all(np.where(kept, np.abs(sums - 1.0) <= tol, True)):
        return "a row of weights with at least one kept key must sum to 1"
    return None


def _non_negative(ctx: CheckContext) -> str | None:
    w = ctx.values(0)
    if (w < 0).any():
        return "weights must never be negative"
    return None


def _shift_calls(c: Contract, ex: tuple[Args, float]) -> list[Args]:
    args, shift = ex
    return [args, {"S": args["S"] + shift, "mask": args["mask"]}]


def _shift_check(ctx: CheckContext) -> str | None:
    o1, o2 = ctx.values(0), ctx.values(1)
    if o1.shape == o2.shape and not close_enough(o1, o2, ctx.allowed[0] + ctx.allowed[1]):
        return "adding the same number to every logit of a row must not change the weights (softmax is shift-invariant)"
    return None


def _masked_zero(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    if w.shape == mask.shape and not np.all(np.where(mask, True, w == 0)):
        return "a masked key must get weight exactly 0, whatever its score holds (NaN and inf included)"
    return None


def _masked_neg_inf(ctx: CheckContext) -> str | None:
    out, mask = ctx.values(0), ctx.args[0]["mask"]
    if out.shape == mask.shape and not np.all(np.where(mask, True, out == -np.inf)):
        return "a masked entry must become -inf, whatever it held before (NaN and inf included)"
    return None


def _fully_masked_zero(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    rows = ~mask.any(axis=-1)
    if w.shape == mask.shape and rows.any() and not (w[rows] == 0).all():
        return "a fully masked row must be all zeros (the stated convention), not NaN"
    return None


def _fully_masked_query_zero(ctx: CheckContext) -> str | None:
    """attention: a query with no kept key gets the zero vector; the other rows are the value cases' concern."""
    out, golden, mask = ctx.values(0), ctx.goldens[0], np.asarray(ctx.args[0]["mask"], dtype=bool)
    if out.shape != golden.shape:
        return f"the result has shape {out.shape}, expected {golden.shape}"
    rows = np.broadcast_to(~mask.any(axis=-1), golden.shape[:-1])
    if rows.any() and not (out[rows] == 0).all():
        index = tuple(int(i) for i in np.argwhere(rows & ~(out == 0).all(axis=-1))[0])
        got = ", ".join(f"{v:.6g}" for v in out[index])
        return (
            f"query {index} keeps no key, so its output must be the zero vector (the stated convention), found [{got}]"
        )
    return None


def _on_logits(
    name: str, summary: str, draw: dict[str, Any] | None = None, applies: Any = weights, **fields: Any
) -> Property:
    """A property whose examples are drawn logits and a mask (:func:`_logits_and_mask` with the
    options ``draw``), for the contracts that give weights unless ``applies`` says otherwise;
    ``fields`` give the rest as :class:`Property` takes them."""
    options = draw or {}
    return Property(
        name=name,
        summary=summary,
        strategy=lambda c, m: _logits_and_mask(c, m, **options),
        applies=applies,
        **fields,
    )


register(
    _on_logits(
        "weights_sum_to_one",
        "Each row of weights with at least one kept key sums to 1.",
        draw={"full_row": "none"},
        check=_row_sums,
    )
)
register(
    _on_logits(
        "weights_non_negative",
        "Every weight is >= 0.",
        check=_non_negative,
    )
)
register(
    Property(
        name="softmax_shift_invariant",
        summary="Adding a constant to every logit leaves the weights unchanged.",
        strategy=lambda c, m: st.tuples(_logits_and_mask(c, m, integer=True), st.integers(-50, 50).map(float)),
        applies=weights,
        calls=_shift_calls,
        check=_shift_check,
    )
)
register(
    _on_logits(
        "masked_positions_zero_weight",
        "Masked keys get weight 0 whatever their logits hold (NaN, inf, huge values).",
        draw={"masked_junk": True},
        check=_masked_zero,
    )
)
register(
    _on_logits(
        "masked_positions_neg_inf",
        "Masked entries become -inf whatever they held (NaN and inf included); kept entries are unchanged.",
        draw={"masked_junk": True},
        applies=lambda c: masked(c) and not gives_weights(c),
        check=_masked_neg_inf,
    )
)


def _nan_propagates(ctx: CheckContext) -> str | None:
    """Masked scores: exactly the golden value (NaN stays where it was, masked entries -inf).
    Weights: in a row with a NaN at a kept key every kept weight is NaN (masked weights may be 0 or
    NaN, as the common idioms differ); the other rows match the golden value."""
    got, golden, allowed = ctx.values(0), ctx.goldens[0], ctx.allowed[0]
    if got.shape != golden.shape:
        return f"the result has shape {got.shape}, expected {golden.shape}"
    mask = np.broadcast_to(ctx.args[0]["mask"], golden.shape)
    S = np.broadcast_to(ctx.args[0]["S"], golden.shape)
    nan_rows = np.zeros(golden.shape, dtype=bool)
    if not masked_scores(ctx.contract):
        nan_rows = np.broadcast_to((np.isnan(S) & mask).any(axis=-1, keepdims=True), golden.shape)
        hidden = nan_rows & mask & ~np.isnan(got)
        if hidden.any():
            index = tuple(int(i) for i in np.argwhere(hidden)[0])
            return (
                f"out[{', '.join(map(str, index))}] = {format_number(float(got[index]), ctx.dtype)}, expected NaN: "
                "a NaN score at a kept key must make that row's kept weights NaN: do not hide it"
            )
    rest = ~nan_rows
    g, w, a = got[rest], golden[rest], allowed[rest]
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isfinite(w), np.abs(g - w) <= a, g == w) | (np.isnan(g) & np.isnan(w))
    if not ok.all():
        where = "kept entries must keep their value (NaN stays NaN) and masked ones become -inf"
        rule = where if masked_scores(ctx.contract) else "the rows without a NaN score must match the reference"
        index = tuple(int(i) for i in np.argwhere(rest)[int(np.argmin(ok))])
        return (
            f"out[{', '.join(map(str, index))}] = {format_number(float(got[index]), ctx.dtype)}, "
            f"expected {format_number(float(golden[index]), ctx.dtype)}: {rule}"
        )
    return None


register(
    _on_logits(
        "nan_in_kept_position_propagates",
        "A NaN logit at a kept key is not hidden: the kept weights of its row are NaN.",
        draw={"nan_kept": True},
        applies=lambda c: masked(c) and not attention(c),
        check=_nan_propagates,
        golden=False,
    )
)
register(
    _on_logits(
        "fully_masked_row_zero",
        "A query whose keys are all masked gets all-zero weights (convention), never NaN.",
        draw={"full_row": "one"},
        check=_fully_masked_zero,
        golden=False,  # judges only its own property: the fully masked rows
        corner="fully_masked_row",
    )
)
register(
    _on_logits(
        "stable_for_large_logits",
        "Logits around 1000 give finite, correct weights (subtract the row max before exp).",
        draw={"offset": 1000.0, "full_row": "none"},
    )
)


@composite
def _attention_args(draw: Callable[..., Any], c: Contract, max_value: float, full_row: str = "some") -> Args:
    args = draw(random_args(c, max_value))
    mask = np.broadcast_to(args["mask"], args["mask"].shape).copy()
    if full_row == "one":
        mask.reshape(-1, mask.shape[-1])[0] = False
    args["mask"] = mask
    return args


def _attention_in_value_range(ctx: CheckContext) -> str | None:
    out, V = ctx.values(0), ctx.args[0]["V"]
    lo, hi = V.min(axis=-2, keepdims=True), V.max(axis=-2, keepdims=True)
    if out.shape[-1:] != V.shape[-1:] or out.ndim != V.ndim:
        return None
    slack = ctx.allowed[0]
    ok = (out >= np.minimum(lo, 0) - slack) & (out <= np.maximum(hi, 0) + slack)
    if not ok.all():
        return "each output is a weighted average of the values, so it must lie between their min and max"
    return None


register(
    Property(
        name="attention_output_in_value_range",
        summary=(
            "Each output entry lies within the range of the values (a convex combination), 0 for fully masked rows."
        ),
        strategy=lambda c, m: _attention_args(c, m),
        applies=lambda c: attention(c) and masked(c),
        check=_attention_in_value_range,
    )
)
register(
    Property(
        name="attention_fully_masked_row_zero",
        summary="A query whose keys are all masked gets the zero vector (convention), never NaN.",
        strategy=lambda c, m: _attention_args(c, m, full_row="one"),
        applies=lambda c: attention(c) and masked(c),
        check=_fully_masked_query_zero,
        golden=False,  # judges only its own property: the fully masked queries
        corner="fully_masked_row",
    )
)
