"""Properties that apply to every contract: reference values, inputs, aliasing, dtype, determinism."""

from __future__ import annotations

import numpy as np

from attnscore.properties.registry import CheckContext, Property, register

register(
    Property(
        name="matches_reference",
        summary="The output matches the reference (float64 golden value) on random inputs.",
        strategy=lambda c, m: c.arguments(m),
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
        strategy=lambda c, m: c.arguments(m),
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        check=_not_mutated,
        diagnosis="inputs_mutated",
    )
)
register(
    Property(
        name="output_not_aliased",
        summary="The output is a new tensor that shares no memory with an input.",
        strategy=lambda c, m: c.arguments(m),
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        check=_not_aliased,
    )
)
register(
    Property(
        name="dtype_device_follow_inputs",
        summary="The output is a tensor with the inputs' dtype and on the inputs' device.",
        strategy=lambda c, m: c.arguments(m),
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        check=_dtype_device,
        diagnosis=_float64_result,
    )
)
register(
    Property(
        name="deterministic",
        summary="Calling twice with the same inputs gives bit-for-bit the same output.",
        strategy=lambda c, m: c.arguments(m),
        golden=False,  # judges only its own property: a wrong value is the other cases' concern
        calls=lambda c, ex: [ex, ex],
        check=_deterministic,
    )
)
