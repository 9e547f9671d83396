"""Properties that apply to every contract: reference values, inputs, aliasing, dtype, determinism,
non-contiguous inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from attnscore.catalogue.properties.registry import CheckContext, Property, register
from attnscore.check.layouts import LAYOUTS, expand_values
from attnscore.check.strategies import legend_sizes, random_args
from attnscore.maths.tolerance import close_enough, entries_close

register(
    Property(
        name="matches_reference",
        summary="The output matches the reference (float64 golden value) on random inputs.",
        strategy=random_args,
    )
)


def _not_mutated(ctx: CheckContext) -> str | None:
    for insp in ctx.inspections:
        if insp and insp.get("mutated"):
            return f"your function changed its input(s) {', '.join(insp['mutated'])} in place; leave inputs as they are"
    return None


def _not_aliased(ctx: CheckContext) -> str | None:
    for insp in ctx.inspections:
        if insp and insp.get("aliased"):
            return (
                f"your output shares memory with the input(s) {', '.join(insp['aliased'])}; "
                "return a new tensor, not a view of an input"
            )
    return None


def _dtype_device(ctx: CheckContext) -> str | None:
    out = ctx.outputs[0]
    if out.kind != "tensor":
        return f"returned a {out.kind}; return a torch tensor with the inputs' dtype ({ctx.dtype}) and device"
    if out.dtype != ctx.dtype:
        return f"the output has dtype {out.dtype}, but the inputs are {ctx.dtype}: keep the inputs' dtype"
    if out.device.split(":")[0] != ctx.device.split(":")[0]:
        return f"the output is on {out.device}, but the inputs are on {ctx.device}: keep the inputs' device"
    return None


def _float64_result(ctx: CheckContext) -> str | None:
    """``returned_float64`` when the output is a float64 tensor for inputs of another dtype."""
    out = ctx.outputs[0]
    return "returned_float64" if out.kind == "tensor" and out.dtype == "float64" and ctx.dtype != "float64" else None


def _deterministic(ctx: CheckContext) -> str | None:
    a, b = ctx.values(0), ctx.values(1)
    if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
        return "two calls with the same inputs returned different results; the function must be deterministic"
    return None


register(
    Property(
        name="inputs_not_mutated",
        summary="The function does not change its inputs in place (the runner compares them after the call).",
        strategy=random_args,
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        check=_not_mutated,
        diagnosis="inputs_mutated",
    )
)


def _and_nothing_masked(contract: Any, example: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The example, and for a contract with a mask the same inputs with every key kept (where a
    shortcut such as ``if mask.all(): return S`` hands back the input itself)."""
    if not contract.bool_parameters:
        return [example]
    kept = {n: np.ones_like(a, dtype=bool) if n in contract.bool_parameters else a for n, a in example.items()}
    return [example, kept]


register(
    Property(
        name="output_not_aliased",
        summary="The output is a new tensor that shares no memory with an input (also when nothing is masked).",
        strategy=random_args,
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        calls=_and_nothing_masked,
        check=_not_aliased,
    )
)
register(
    Property(
        name="dtype_device_follow_inputs",
        summary="The output is a tensor with the inputs' dtype and on the inputs' device.",
        strategy=random_args,
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        check=_dtype_device,
        diagnosis=_float64_result,
        every_dtype=True,  # a float32 result for float64 inputs fails, whichever dtype is graded
    )
)
register(
    Property(
        name="deterministic",
        summary="Calling twice with the same inputs gives bit-for-bit the same output.",
        strategy=random_args,
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        calls=lambda c, ex: [ex, ex],
        check=_deterministic,
    )
)


def _layout_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], dict[str, str]]]:
    names = contract.parameter_names
    layouts = st.tuples(*[st.sampled_from(LAYOUTS) for _ in names]).map(lambda ls: dict(zip(names, ls, strict=True)))
    # every legend size >= 2, so that a transposed or sliced view is really not contiguous
    args = legend_sizes(contract, min_size=2).flatmap(lambda sizes: random_args(contract, max_value, sizes))
    return st.tuples(args, layouts)


def _laid_out_values(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    args, layouts = example
    values = {name: expand_values(a, layouts[name]) for name, a in args.items()}
    return [values, values]  # first as fresh contiguous tensors, then as views (see layouts=)


_CONTIGUITY_HINT = (
    "your code reads an input as if it were contiguous (e.g. .view() on an input, or raw storage "
    "indexing); the same values in a transposed, sliced or expanded view must give the same result: "
    "use .reshape() or .contiguous() first"
)


def _same_for_views(ctx: CheckContext) -> str | None:
    contiguous, viewed = ctx.outputs
    a, b = ctx.values(0), ctx.values(1)
    if a.shape != b.shape:
        return (
            f"the same values gave shape {tuple(a.shape)} as contiguous tensors but {tuple(b.shape)} as views; "
            + _CONTIGUITY_HINT
        )
    allowed = np.asarray(ctx.allowed[1], dtype=np.float64)
    # the golden value's allowed error, entry by entry; a wrong-shaped output gets its largest
    allowed = 2 * (allowed if allowed.shape == a.shape else np.full(a.shape, np.max(allowed, initial=0.0)))
    if close_enough(b, a, allowed):
        return None
    differs = ~entries_close(b, a, allowed)
    index = tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else ()
    where = f"out[{', '.join(map(str, index))}]" if index else "out"
    return (
        f"the same values gave {where} = {a[index]:.6g} as contiguous tensors but {b[index]:.6g} as views; "
        + _CONTIGUITY_HINT
    )


register(
    Property(
        name="non_contiguous_inputs",
        summary=(
            "Inputs handed over as non-contiguous views (transposed, sliced every other column, or "
            "expanded with stride 0) give the same result as the same values in fresh contiguous tensors."
        ),
        strategy=_layout_example,
        calls=_laid_out_values,
        layouts=lambda c, ex: dict(ex[1]),
        golden=False,  # judges only its own property: views and contiguous tensors agree
        check=_same_for_views,
    )
)
