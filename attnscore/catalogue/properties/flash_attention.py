"""Properties of a FlashAttention-2 assignment (:mod:`attnscore.maths.families.flash_attention_2`): the saved
logsumexp ``L``, long rows that span many key tiles, and the backward check of worked examples.

``L`` is read where the spec's ``function.logsumexp`` says (``ctx.saved_tensors`` or a returned
``(O, L)`` tuple, :func:`attnscore.boundary.gradients.find_logsumexp`), in a call that also runs the
backward pass (a Function's saved tensors exist only while its graph does), and compared with
:func:`attnscore.maths.families.flash_attention_2.logsumexp_golden` under
:func:`~attnscore.maths.families.flash_attention_2.logsumexp_allowed`. A failure names the query whose ``L`` is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.gradients import WithGradients
from attnscore.catalogue.families import flash_attention_2
from attnscore.catalogue.properties.gradients import backward_pass_property, first_gradient_failure
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, register
from attnscore.maths.contract import Contract
from attnscore.maths.display import format_index, format_number, shape_text
from attnscore.maths.families.flash_attention_2 import logsumexp_allowed, logsumexp_golden
from attnscore.maths.lazy_hypothesis import composite, hnp, st
from attnscore.maths.strategies import drawing_small, readable_values
from attnscore.maths.tolerance import entries_close

__all__ = ["backward_check", "logsumexp_failure", "LOGSUMEXP_FACTOR"]

LOGSUMEXP_FACTOR = 4.0
"""How many times the one-pass bound of ``L``'s rounding error (:func:`logsumexp_allowed`) a
submission's ``L`` may be off: a tiled online softmax rounds once per tile, not once."""


def _floats(m: float) -> st.SearchStrategy[float]:
    return st.floats(-m, m, allow_nan=False, allow_subnormal=False, width=32)


@composite
def _flash_example(
    draw: Callable[..., Any], c: Contract, max_value: float, *, n_k: tuple[int, int] = (1, 9)
) -> tuple[Args, np.ndarray]:
    """``(args, dO)``: Q ``(batch, n_q, d)``, K and V ``(batch, n_k, d)`` and an upstream ``dO``
    (exactly the spec's named leading dims, :attr:`attnscore.maths.contract.Contract.leading`)."""
    if c.leading is not None:
        batch = tuple(draw(st.integers(1, 2)) for _ in c.leading)
    else:
        batch = draw(st.sampled_from([(), (1,), (2,), (2, 2)]))
    n_keys = draw(st.integers(*n_k))
    if n_k[0] > 9 and n_keys % 16 == 0:
        n_keys += 1  # a long row is never a multiple of a common tile size (16, 32, 64, 128): its last tile is partial
    long_causal = n_k[0] > 9 and bool(c.option("is_causal")) if c.keywords else False
    # causal rows are as long as the query's position: long rows need as many queries as keys
    n_q = draw(st.integers(max(1, n_keys - 8), n_keys)) if long_causal else draw(st.integers(1, 6))
    if long_causal and n_q % 16 == 0:
        n_q -= 1
    d = draw(st.integers(1, 8))
    elements = _floats(float(np.float32(max_value * 0.999)))
    Q = readable_values(draw(hnp.arrays(np.float64, (*batch, n_q, d), elements=elements)), max_value)
    K = readable_values(draw(hnp.arrays(np.float64, (*batch, n_keys, d), elements=elements)), max_value)
    V = readable_values(draw(hnp.arrays(np.float64, (*batch, n_keys, d), elements=elements)), max_value)
    dO = readable_values(draw(hnp.arrays(np.float64, (*batch, n_q, d), elements=elements)), max_value)
    return {"Q": Q, "K": K, "V": V}, dO


def _names(ctx: CheckContext) -> dict[str, str]:
    return dict(zip(ctx.contract.parameter_names, ctx.args[-1], strict=True))


def logsumexp_failure(ctx: CheckContext) -> str | None:
    """What is wrong with the logsumexp ``L`` of the context's last call, or None when it is right
    (or when the runner was not asked for it: no ``function.logsumexp``)."""
    out = ctx.outputs[-1]
    if not isinstance(out, WithGradients):
        return "no logsumexp came back from this call (the runner did not run the backward pass)"
    if out.logsumexp is None and not out.logsumexp_problem:
        return "the spec does not say where L is read (function.logsumexp)"
    if out.logsumexp is None:
        return f"the logsumexp L could not be read: {out.logsumexp_problem}"
    names = _names(ctx)
    args = ctx.args[-1]
    Q, K = args[names["Q"]], args[names["K"]]
    is_causal = bool(ctx.contract.option("is_causal"))
    want = logsumexp_golden(Q, K, is_causal)
    got = np.asarray(out.logsumexp, dtype=np.float64)
    if got.shape != want.shape:
        return f"L has shape {shape_text(got.shape)}, but should have shape {shape_text(want.shape)} (..., n_q)"
    allowed = logsumexp_allowed(Q, K, is_causal, ctx.dtype, LOGSUMEXP_FACTOR)
    ok = entries_close(got, want, allowed)
    if ok.all():
        return None
    excess = np.where(ok, -np.inf, np.nan_to_num(np.abs(got - want), nan=np.inf) - allowed)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), got.shape)) if got.ndim else ()
    return (
        f"the logsumexp L is wrong: {format_index('L', index)} = {format_number(got[index], 'float64')}, but should "
        f"be {format_number(want[index])} = logsumexp over the kept keys of the scaled scores Q Kᵀ / √d (natural "
        f"log; allowed error {format_number(float(allowed[index]), 'float32')}); {int((~ok).sum())} of {ok.size} "
        "entries wrong"
    )


def _gradient_problem(ctx: CheckContext) -> str | None:
    out = ctx.outputs[-1]
    if not isinstance(out, WithGradients):
        return "no gradients came back from this call (the runner did not run the backward pass)"
    return first_gradient_failure(out, ctx.gradient_goldens[-1] or {}, ctx.gradient_allowed[-1] or {}, ctx.dtype)


def backward_check(ctx: CheckContext) -> str | None:
    """A worked example's backward pass: each gradient, then ``L`` when the spec reads it."""
    problem = _gradient_problem(ctx)
    if problem:
        return problem
    out = ctx.outputs[-1]
    if flash_attention_2(ctx.contract) and isinstance(out, WithGradients):
        if out.logsumexp is not None or out.logsumexp_problem:
            return logsumexp_failure(ctx)
    return None


register(
    backward_pass_property(
        "logsumexp_matches_golden",
        "The logsumexp L (..., n_q) the forward keeps for the backward (where function.logsumexp says) is "
        "logsumexp over the kept keys of the scaled scores Q Kᵀ / √d, in natural log, for every query.",
        strategy=lambda c, m: _flash_example(c, m, n_k=(1, 80)),
        applies=flash_attention_2,
        check=logsumexp_failure,
    )
)

register(
    Property(
        name="long_rows_match_reference",
        summary=(
            "Rows of 65 to 300 keys (many key tiles of 16, 32 or 64, the last one partial) give the reference "
            "output: an online softmax that does not rescale its running sum and output when the running max "
            "grows is exact while a row fits in one tile, and wrong here."
        ),
        strategy=lambda c, m: _flash_example(c, m, n_k=(65, 300)).map(lambda ex: ex[0]),
        applies=flash_attention_2,
        default_max_value=4.0,
    )
)


TILE_EDGES = (17, 33, 65)
"""Sequence lengths just past a tile multiple: one full tile of 16, 32 or 64 and one more."""


@composite
def _tile_edge_example(draw: Callable[..., Any], c: Contract, max_value: float) -> Args:
    """Q ``(batch, n_q, d)``, K and V ``(batch, n_k, d)`` with n_q and n_k each just past a tile
    multiple (:data:`TILE_EDGES`; the smallest, 17, when drawing small inputs for shrinking, with one
    batch item and d <= 2), so a loop that drops the last, partial tile or needs n to be a multiple
    of its tile shows on every example."""
    small = drawing_small()
    edges = TILE_EDGES[:1] if small else TILE_EDGES
    if c.leading is not None:
        batch = tuple(draw(st.integers(1, 1 if small else 2)) for _ in c.leading)
    else:
        batch = draw(st.sampled_from([(1,)] if small else [(), (1,), (2,)]))
    n_q, n_k = draw(st.sampled_from(edges)), draw(st.sampled_from(edges))
    d = draw(st.integers(1, 2 if small else 8))
    elements = _floats(float(np.float32(max_value * 0.999)))
    return {
        "Q": readable_values(draw(hnp.arrays(np.float64, (*batch, n_q, d), elements=elements)), max_value),
        "K": readable_values(draw(hnp.arrays(np.float64, (*batch, n_k, d), elements=elements)), max_value),
        "V": readable_values(draw(hnp.arrays(np.float64, (*batch, n_k, d), elements=elements)), max_value),
    }


register(
    Property(
        name="tile_edges_match_reference",
        summary=(
            "n_q and n_k just past a tile multiple (17, 33 or 65: a full tile of 16, 32 or 64 and one more) give "
            "the reference output: every row of the last, partial query tile is written and every key of the "
            "last, partial key tile is read, and nothing needs n to be a multiple of the tile size."
        ),
        strategy=_tile_edge_example,
        applies=flash_attention_2,
        default_max_value=4.0,
    )
)
