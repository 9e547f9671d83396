"""Properties of the backward pass: gradients against the golden float64 gradients, masked keys.

Each example is ``(args, dO)``: arguments drawn like :func:`attnscore.maths.strategies.random_args`
and an upstream gradient ``dO`` of the output's shape drawn the same way (deterministic per seed,
as every drawn input). Its call runs forward with the float inputs requiring grad and then
``backward(dO)`` (:mod:`attnscore.boundary.gradients`); the output is compared with the golden value
as usual, then each input's gradient with its float64 golden gradient
(:mod:`attnscore.maths.golden_gradients`) under :func:`~attnscore.maths.tolerance.gradient_allowed`.
A mask never gets a gradient asked for. A failure names the input and the wrong entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from attnscore.boundary.gradients import WithGradients
from attnscore.catalogue.families import attention_with_mask, differentiable, general_attention_variant, masked
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, register
from attnscore.maths.contracts import Contract
from attnscore.maths.display import format_index, format_number, shape_text
from attnscore.maths.families.registry import family_of
from attnscore.maths.lazy_hypothesis import composite, hnp, st
from attnscore.maths.strategies import legend_sizes, random_args, readable_values
from attnscore.maths.tolerance import entries_close

__all__ = ["backward_pass_property", "gradient_arrival_failure", "gradient_failure", "first_gradient_failure"]


def _floats(max_value: float) -> st.SearchStrategy[float]:
    m = float(np.float32(max_value)) if float(np.float32(max_value)) <= max_value else float(max_value) * 0.999
    return st.floats(-m, m, allow_nan=False, allow_subnormal=False, width=32)


@composite
def _args_and_upstream(
    draw: Callable[..., Any], c: Contract, max_value: float, *, unused_key: bool = False
) -> tuple[Args, np.ndarray]:
    sizes = draw(legend_sizes(c))
    args = draw(random_args(c, max_value, sizes=sizes))
    if "mask" in args and draw(st.integers(0, 3)) != 0:
        # most examples keep a key in every row (a fully masked row has no gradient to check)
        mask = args["mask"].copy()
        n_q, n_k = mask.shape[-2:]
        mask[..., np.arange(n_q), np.arange(n_q) % n_k] = True
        args = {**args, "mask": mask}
    if unused_key and "attn_mask" in args and args["attn_mask"].dtype == np.bool_:
        mask = args["attn_mask"].copy()
        mask[..., :, draw(st.integers(0, mask.shape[-1] - 1))] = False  # a key no query keeps
        args = {**args, "attn_mask": mask}
    if unused_key and "mask" in args:
        mask = args["mask"].copy()
        j = draw(st.integers(0, mask.shape[-1] - 1))
        if attention_with_mask(c):
            mask[..., :, j] = False  # key j is masked for every query: its value and key take no part
        else:
            mask[..., draw(st.integers(0, mask.shape[-2] - 1)), j] = False
        args = {**args, "mask": mask}
    with np.errstate(all="ignore"):
        shape = np.shape(c.golden(args))
    d_out = readable_values(draw(hnp.arrays(np.float64, shape, elements=_floats(max_value))), max_value)
    return args, d_out


def _upstream(c: Contract, example: tuple[Args, np.ndarray]) -> np.ndarray:
    return example[1]


def _names(ctx: CheckContext) -> dict[str, str]:
    """Contract parameter name -> the spec's name."""
    return dict(zip(ctx.contract.parameter_names, ctx.args[-1], strict=True))


def _received_gradients(ctx: CheckContext) -> WithGradients | str:
    out = ctx.outputs[-1]
    if not isinstance(out, WithGradients):
        return "no gradients came back from this call (the runner did not run the backward pass)"
    return out


def gradient_arrival_failure(name: str, got: Any, shape: tuple[int, ...], missing: bool = False) -> str | None:
    """Why the gradient with respect to input ``name`` cannot be compared, or None when it can: it
    never arrived (``missing``: its ``.grad`` stayed None), or ``got`` does not have the input's
    ``shape``.

    >>> gradient_arrival_failure("K", np.zeros((2, 3)), (3, 2))
    'the gradient with respect to K has shape (2, 3), but K has shape (3, 2)'
    """
    if missing:
        return (
            f"no gradient reached {name}: its .grad stayed None after backward (the output does not depend on "
            f"{name} through operations autograd can follow, or the backward returned None for it)"
        )
    if np.shape(got) != shape:
        return (
            f"the gradient with respect to {name} has shape {shape_text(np.shape(got))}, "
            f"but {name} has shape {shape_text(shape)}"
        )
    return None


def gradient_failure(
    name: str, got: np.ndarray, golden: np.ndarray, allowed: np.ndarray, dtype: str, missing: bool = False
) -> str | None:
    """What is wrong with the gradient with respect to input ``name``, or None when it is right.

    >>> gradient_failure("K", np.array([[0.5, 2.0]]), np.array([[0.5, 1.0]]), np.array([[1e-6, 1e-6]]), "float32")
    'the gradient with respect to K is wrong: dK[0, 1] = 2, but should be 1 (allowed error 1e-06); 1 of 2 entries wrong'
    """
    problem = gradient_arrival_failure(name, got, np.shape(golden), missing)
    if problem:
        return problem
    ok = entries_close(got, golden, allowed)
    if ok.all():
        return None
    with np.errstate(invalid="ignore"):
        excess = np.where(ok, -np.inf, np.nan_to_num(np.abs(got - golden), nan=np.inf) - allowed)
    at = np.unravel_index(int(np.argmax(excess)), np.shape(got)) if np.ndim(got) else ()
    index = tuple(int(i) for i in at)
    return (
        f"the gradient with respect to {name} is wrong: {format_index('d' + name, index)} = "
        f"{format_number(np.asarray(got)[index], dtype)}, but should be {format_number(np.asarray(golden)[index])} "
        f"(allowed error {format_number(float(np.broadcast_to(allowed, np.shape(got))[index]), 'float32')}); "
        f"{int((~ok).sum())} of {ok.size} entries wrong"
    )


def _gradients_match(ctx: CheckContext) -> str | None:
    got = _received_gradients(ctx)
    if isinstance(got, str):
        return got
    return first_gradient_failure(got, ctx.gradient_goldens[-1] or {}, ctx.gradient_allowed[-1] or {}, ctx.dtype)


def first_gradient_failure(
    got: WithGradients, goldens: Mapping[str, np.ndarray], allowed: Mapping[str, np.ndarray], dtype: str
) -> str | None:
    """What is wrong with the first input's gradient in ``goldens``' order that is wrong
    (:func:`gradient_failure`), or None when every gradient ``goldens`` names is right.

    ``got`` holds the gradients that came back (an input with none counts as missing), each in its
    own dtype (``dtype``, the tested one, when it says none); ``allowed`` maps each name in
    ``goldens`` to its allowed error (KeyError for a name it lacks).
    """
    for name, golden in goldens.items():
        values = got.gradients.get(name)
        problem = gradient_failure(
            name,
            np.zeros(0) if values is None else values.astype(np.float64),
            golden,
            allowed[name],
            got.gradient_dtypes.get(name, dtype),
            missing=values is None,
        )
        if problem:
            return problem
    return None


def _unused_keys(ctx: CheckContext) -> dict[str, np.ndarray]:
    """A keyword contract's keys that no query keeps (a bool ``attn_mask``, causal, a window), per
    key/value gradient in its own layout, as its family says: ``{spec name of K or V: bool (..., n_k)}``."""
    c = ctx.contract
    names = _names(ctx)
    a = {n: np.asarray(ctx.args[-1][names[n]]) for n in c.parameter_names}
    rule = family_of(c).unused_keys(c)
    return {} if rule is None else {names[n]: unused for n, unused in rule(a).items()}


def _keyword_masked_no_gradient(ctx: CheckContext, got: WithGradients) -> str | None:
    return _gradient_on_unused_key(
        got, _unused_keys(ctx), ctx.dtype, "no query keeps", "a key every query masks (attn_mask, causal or window)"
    )


def _gradient_on_unused_key(
    got: WithGradients, unused: Mapping[str, np.ndarray], dtype: str, which: str, rule: str
) -> str | None:
    """The first non-zero gradient entry of a key or value that no query uses, or None: ``unused``
    maps the spec's name of K or V to its bool ``(..., n_k)`` mask of unused keys (the gradient's
    shape without its last dim); a missing or misshapen gradient is gradients_match_golden's concern."""
    for name, keys in unused.items():
        g = got.gradients.get(name)
        if g is None or g.shape[:-1] != keys.shape:
            continue
        rows = np.argwhere(keys[..., None] & (g != 0))
        if rows.size:
            at = tuple(int(i) for i in rows[0])
            return (
                f"a key that {which} still gets a gradient: {format_index('d' + name, at)} = "
                f"{format_number(g[at], dtype)}, but {rule} takes no part, so it should be 0"
            )
    return None


def _masked_no_gradient(ctx: CheckContext) -> str | None:
    got = _received_gradients(ctx)
    if isinstance(got, str):
        return got
    if general_attention_variant(ctx.contract):
        return _keyword_masked_no_gradient(ctx, got)
    names = _names(ctx)
    args = ctx.args[-1]
    mask = np.asarray(args[names["mask"]], dtype=bool)
    if attention_with_mask(ctx.contract):
        S_shape = np.broadcast_shapes(np.shape(args[names["Q"]])[:-1] + (np.shape(args[names["K"]])[-2],), mask.shape)
        unused = np.asarray(~np.broadcast_to(mask, S_shape).any(axis=-2))  # (..., n_k): keys no query keeps
        by_name = {names[p]: unused for p in ("V", "K")}
        return _gradient_on_unused_key(got, by_name, ctx.dtype, "every query masks", "a masked key")
    s = names["S"]
    g = got.gradients.get(s)
    if g is None:
        return None
    if np.broadcast_shapes(mask.shape, g.shape) != g.shape:
        return None
    masked_entries: np.ndarray = ~np.broadcast_to(mask, g.shape)
    rows = np.argwhere(masked_entries & (g != 0))
    if rows.size:
        at = tuple(int(i) for i in rows[0])
        return (
            f"a masked score still gets a gradient: {format_index('d' + s, at)} = {format_number(g[at], ctx.dtype)}, "
            "but a masked entry takes no part in the output, so it should be 0"
        )
    return None


def backward_pass_property(name: str, summary: str, **fields: Any) -> Property:
    """A property whose examples are ``(args, dO)``: one call with ``args`` that also runs the
    backward pass with the upstream gradient ``dO`` (its output's shape), drawn with inputs bounded
    by 3 and tagged ``gradients``; ``fields`` give the rest (``strategy``, ``applies``, ``check``,
    ...) as :class:`Property` takes them."""
    return Property(
        name=name,
        summary=summary,
        upstream=_upstream,
        calls=lambda c, ex: [ex[0]],
        default_max_value=3.0,
        tags=("gradients",),
        **fields,
    )


register(
    backward_pass_property(
        "gradients_match_golden",
        "With an upstream gradient dO drawn like the inputs, the backward pass gives each float input the "
        "golden float64 gradient (closed forms) within the dtype's error bound; the mask gets none.",
        strategy=lambda c, m: _args_and_upstream(c, m),
        applies=differentiable,
        check=_gradients_match,
    )
)
register(
    backward_pass_property(
        "masked_entries_get_no_gradient",
        "No gradient flows to what a mask leaves out: a masked score gets a zero gradient, and a key "
        "that every query masks (a mask, SDPA's bool attn_mask, causal, a window) gets zero gradients for its "
        "key and value.",
        strategy=lambda c, m: _args_and_upstream(c, m, unused_key=True),
        applies=lambda c: differentiable(c) and (masked(c) or family_of(c).unused_keys(c) is not None),
        check=_masked_no_gradient,
        golden=False,
    )
)
