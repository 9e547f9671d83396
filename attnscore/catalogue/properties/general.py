"""Properties that apply to every contract: reference values, inputs, aliasing, dtype, determinism,
non-contiguous inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.boundary.layouts import LAYOUTS, describe_layout, expand_values
from attnscore.catalogue.families import leading_symbol
from attnscore.catalogue.properties.registry import CheckContext, Property, register
from attnscore.maths.lazy_hypothesis import composite, st
from attnscore.maths.strategies import legend_sizes, random_args
from attnscore.maths.tolerance import close_enough, entries_close

register(
    Property(
        name="matches_reference",
        summary="The output matches the reference (float64 golden value) on random inputs.",
        strategy=random_args,
        omits=True,
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
    """``returned_float64`` when the output is a float64 tensor for inputs of another dtype *and* its
    values are right (the mistake's message says so): what the check observed, not a guess."""
    out = ctx.outputs[0]
    if out.kind != "tensor" or out.dtype != "float64" or ctx.dtype == "float64":
        return None
    got, golden = ctx.values(0), np.asarray(ctx.goldens[0], dtype=np.float64)
    allowed = np.asarray(ctx.allowed[0], dtype=np.float64)
    return "returned_float64" if got.shape == golden.shape and close_enough(got, golden, allowed) else None


def _deterministic(ctx: CheckContext) -> str | None:
    a, b = ctx.values(0), ctx.values(1)
    if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
        return "two calls with the same inputs returned different results; the function must be deterministic"
    return None


def _own_rule(name: str, summary: str, **fields: Any) -> Property:
    """A property of random arguments that judges only its own rule (no golden value: a wrong value
    is the other cases' concern); ``fields`` give the rest as :class:`Property` takes them."""
    return Property(name=name, summary=summary, strategy=random_args, golden=False, **fields)


register(
    _own_rule(
        "inputs_not_mutated",
        "The function does not change its inputs in place (the runner compares them after the call).",
        check=_not_mutated,
        diagnosis="inputs_mutated",
        omits=True,
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
    _own_rule(
        "output_not_aliased",
        "The output is a new tensor that shares no memory with an input (also when nothing is masked).",
        calls=_and_nothing_masked,
        check=_not_aliased,
    )
)
register(
    _own_rule(
        "dtype_device_follow_inputs",
        "The output is a tensor with the inputs' dtype and on the inputs' device.",
        check=_dtype_device,
        diagnosis=_float64_result,
        every_dtype=True,  # a float32 result for float64 inputs fails, whichever dtype is graded
        omits=True,
    )
)
register(
    _own_rule(
        "deterministic",
        "Calling twice with the same inputs gives bit-for-bit the same output.",
        calls=lambda c, ex: [ex, ex],
        check=_deterministic,
        omits=True,
    )
)


def _layout_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], dict[str, str]]]:
    # integer parameters (cu_seqlens, key_lengths) stay contiguous: kernels require it (FlashAttention's
    # varlen checks cu_seqlens.is_contiguous()) and an expanded view would change their values
    names = tuple(n for n in contract.parameter_names if n not in contract.int_parameters)
    layouts = st.tuples(*[st.sampled_from(LAYOUTS) for _ in names]).map(lambda ls: dict(zip(names, ls, strict=True)))
    # every legend size >= 2, so that a transposed or sliced view is really not contiguous
    args = legend_sizes(contract, min_size=2).flatmap(lambda sizes: random_args(contract, max_value, sizes))
    return st.tuples(args, layouts)


def _laid_out_values(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    """The same values once as fresh contiguous tensors, once per argument with only that argument
    as a view, and (with several arguments) once with every argument a view (see ``call_layouts``)."""
    args, layouts = example
    values = {name: expand_values(a, layouts[name]) if name in layouts else a for name, a in args.items()}
    return [values] * len(_view_layouts(contract, example))


def _view_layouts(contract: Any, example: Any) -> list[dict[str, str] | None]:
    """Per call: None (contiguous), ``{name: layout}`` for each argument alone, then all of them."""
    _, layouts = example
    alone: list[dict[str, str] | None] = [{name: layout} for name, layout in layouts.items()]
    return [None, *alone, *([dict(layouts)] if len(alone) > 1 else [])]


_CONTIGUITY_HINT = (
    "your code reads that input as if it were contiguous (e.g. .view() on an input, or raw storage "
    "indexing); the same values in a transposed, sliced or expanded view must give the same result: "
    "use .reshape() or .contiguous() first"
)


def _noise_level(ctx: CheckContext, a: np.ndarray, allowed: np.ndarray) -> float:
    """How many times its allowed error the contiguous output is off the golden value, from 1 up to the
    rounding of float32 in a float64 run: views may change the summation order, so outputs that
    agree with each other only to the precision the code really computes in are not a layout bug
    (the value cases judge that precision)."""
    golden = np.asarray(ctx.goldens[0], dtype=np.float64)
    cap = UNIT_ROUNDOFF["float32"] / UNIT_ROUNDOFF["float64"] if ctx.dtype == "float64" else 1.0
    if golden.shape != a.shape:
        return 1.0
    ok = np.isfinite(golden) & np.isfinite(a) & (allowed > 0)
    if not ok.any():
        return 1.0
    with np.errstate(over="ignore"):  # a subnormal allowance: the ratio is inf, clipped to the cap
        ratio = float(np.max(np.abs(a[ok] - golden[ok]) / allowed[ok]))
    return float(np.clip(ratio, 1.0, cap))


def _same_for_views(ctx: CheckContext) -> str | None:
    """Each view call against the contiguous one; the first that differs names its argument(s)."""
    a = ctx.values(0)
    base = np.asarray(ctx.allowed[0], dtype=np.float64)
    allowed = base if base.shape == a.shape else np.full(a.shape, np.max(base, initial=0.0))
    allowed = 2 * allowed * _noise_level(ctx, a, allowed)
    layouts = _view_layouts(ctx.contract, ctx.example) if ctx.example is not None else [None] * len(ctx.outputs)
    for number in range(1, len(ctx.outputs)):
        b = ctx.values(number)
        if a.shape == b.shape and close_enough(b, a, allowed):
            continue  # the usual call: nothing to name
        viewed = layouts[number] or {}
        given = list(ctx.args[number].items())  # the spec's names, in the contract's order
        order = list(ctx.contract.parameter_names)
        named = {order.index(n): lay for n, lay in viewed.items() if n in order}
        which = (
            "every input a view at once"
            if len(viewed) > 1
            else "; ".join(describe_layout(given[i][0], lay, np.shape(given[i][1])) for i, lay in named.items())
        )
        hint = _CONTIGUITY_HINT if len(viewed) == 1 else _CONTIGUITY_HINT.replace("that input", "its inputs")
        if a.shape != b.shape:
            return (
                f"the same values gave shape {tuple(a.shape)} as contiguous tensors but {tuple(b.shape)} "
                f"when {which}; " + hint
            )
        differs = ~entries_close(b, a, allowed)
        index = tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else ()
        where = f"out[{', '.join(map(str, index))}]" if index else "out"
        return (
            f"the same values gave {where} = {a[index]:.6g} as contiguous tensors but {b[index]:.6g} "
            f"when {which}; " + hint
        )
    return None


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
        call_layouts=_view_layouts,
        golden=False,  # judges only its own property: views and contiguous tensors agree
        check=_same_for_views,
    )
)


@composite
def _items_example(draw: Any, contract: Any, max_value: float) -> tuple[dict[str, np.ndarray], int]:
    """Arguments with at least two items along the leading dim (:func:`leading_symbol`), and which
    item to call alone."""
    symbol = leading_symbol(contract)
    sizes = draw(legend_sizes(contract))
    count = draw(st.integers(2, 3))
    if symbol == "...":
        sizes["..."] = (count, *tuple(sizes["..."])[1:])
    elif symbol not in dict(contract.fixed_sizes):
        sizes[symbol] = count
    args = draw(random_args(contract, max_value, sizes))
    first = next(a for n, a in args.items() if dict(contract.parameters)[n][:1] == (symbol,))
    return args, draw(st.integers(0, int(np.shape(first)[0]) - 1))


def _items_calls(contract: Any, example: tuple[dict[str, np.ndarray], int]) -> list[dict[str, np.ndarray]]:
    """The call on every item, and item ``i`` alone as a batch of one (``x[i:i+1]`` on every
    parameter whose shape starts with the leading dim; the others as they are)."""
    args, i = example
    symbol = leading_symbol(contract)
    legends = dict(contract.parameters)
    alone = {n: a[i : i + 1] if legends[n][:1] == (symbol,) else a for n, a in args.items()}
    # (np.ascontiguousarray makes a 0-d integer parameter, theta or max_seqlen, 1-d: those stay as they are)
    return [args, {n: np.ascontiguousarray(a) if np.ndim(a) else a for n, a in alone.items()}]


def _items_check(ctx: CheckContext) -> str | None:
    """Item ``i`` of the call on every item equals the call on item ``i`` alone."""
    whole, alone = ctx.values(0), ctx.values(1)
    i = ctx.example[1]
    if whole.ndim < 1 or whole.shape[0] <= i or whole[i : i + 1].shape != alone.shape:
        return None  # a wrong shape is the value comparison's verdict
    allowed = np.asarray(ctx.allowed[0], dtype=np.float64)
    allowed_item = allowed[i : i + 1] if allowed.shape == whole.shape else allowed
    if close_enough(whole[i : i + 1], alone, allowed_item + np.asarray(ctx.allowed[1], dtype=np.float64)):
        return None
    return (
        f"item {i} of a call on several items differs from calling item {i} alone: items along the leading "
        "dim must not mix (reduce and normalise over the other dims only)"
    )


register(
    Property(
        name="leading_dims_independent",
        summary=(
            "Items along the leading dim (a batch) are computed on their own: f(x)[i] = f(x[i:i+1])[0] "
            "(an instructor's own reference function whose result starts with that dim, RoPE)."
        ),
        strategy=_items_example,
        applies=lambda c: leading_symbol(c) is not None,
        calls=_items_calls,
        check=_items_check,
        default_max_value=5.0,
    )
)
