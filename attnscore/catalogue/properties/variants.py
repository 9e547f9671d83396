"""Properties of the attention variants real kernels implement: grouped-query heads (SDPA with
``enable_gqa``, ``kernel_attention`` with its own ``h_kv``), the softcap's bound on the scores, the
bottom-right alignment of FlashAttention's causal mask and ALiBi distance, and SDPA's float
``attn_mask`` (a bias on the scores: a row shift changes nothing; ``-inf`` keys take no part).

Each is relational (two calls, or a call on inputs built to expose one stage) and says more than
the worked examples: random shapes and values, every head count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.catalogue.families import batch_items, sdpa_float_mask
from attnscore.catalogue.mistakes.variants import grouped_heads, kernel, kernel_alibi, kernel_softcap
from attnscore.catalogue.properties.registry import CheckContext, Property, first_index, register
from attnscore.maths.lazy_hypothesis import st
from attnscore.maths.strategies import legend_sizes, random_args

Args = dict[str, np.ndarray]


def _first_moved(ctx: CheckContext, a: np.ndarray, b: np.ndarray, allowed: np.ndarray) -> tuple[int, ...] | None:
    """The first index where ``a`` and ``b`` differ by more than twice ``allowed``, else None."""
    with np.errstate(invalid="ignore"):
        moved = ~(np.abs(a - b) <= 2 * allowed) & ~(np.isnan(a) & np.isnan(b))
    return first_index(moved)


def _shapes_differ(ctx: CheckContext, *pairs: tuple[np.ndarray, tuple[int, ...]]) -> str | None:
    for got, want in pairs:
        if got.shape != want:
            return f"expected an output of shape {want}, found {got.shape}: the property cannot be checked"
    return None


def _allowed_moved(ctx: CheckContext) -> tuple[int, ...] | None:
    """The first index where the two calls' outputs differ by more than twice the larger of their
    allowed errors, else None."""
    allowed = np.maximum(np.asarray(ctx.allowed[0]), np.asarray(ctx.allowed[1]))
    return _first_moved(ctx, ctx.values(0), ctx.values(1), allowed)


def _calls_agree(
    differs: Callable[[CheckContext, np.ndarray, np.ndarray, tuple[int, ...]], str],
    moved: Callable[[CheckContext], tuple[int, ...] | None] = _allowed_moved,
) -> Callable[[CheckContext], str | None]:
    """A property's check: the example's two calls give the same output, each of its golden value's
    shape; ``moved(ctx)`` finds the first entry that differs (:func:`_allowed_moved`, or
    :func:`_golden_moved` where the two calls' inputs differ), and ``differs(ctx, first, second,
    index)`` says why that is wrong."""

    def check(ctx: CheckContext) -> str | None:
        first, second = ctx.values(0), ctx.values(1)
        problem = _shapes_differ(ctx, (first, np.shape(ctx.goldens[0])), (second, np.shape(ctx.goldens[1])))
        if problem:
            return problem
        index = moved(ctx)
        return None if index is None else differs(ctx, first, second, index)

    return check


# ---------------------------------------------------------------------------------------------
# grouped-query heads


def _grouped_example(contract: Any, max_value: float) -> st.SearchStrategy[Args]:
    """Arguments with more query heads than key/value heads (h_q = g · h_kv, g >= 2)."""
    sizes = legend_sizes(contract).filter(lambda s: s["h_q"] > s["h_kv"])
    return sizes.flatmap(lambda s: random_args(contract, max_value, s))


def _repeated_calls(contract: Any, args: Args) -> list[Args]:
    """The call, and the same call with K and V's heads repeated for their query heads."""
    Q, K, V = (np.asarray(args[n]) for n in ("query", "key", "value"))
    group = Q.shape[-3] // K.shape[-3]
    repeated = {**args, "key": np.repeat(K, group, axis=-3), "value": np.repeat(V, group, axis=-3)}
    return [args, repeated]


def _repeated_differs(ctx: CheckContext, grouped: np.ndarray, repeated: np.ndarray, index: tuple[int, ...]) -> str:
    h_q, h_kv = np.shape(ctx.args[0]["query"])[-3], np.shape(ctx.args[0]["key"])[-3]
    where = ", ".join(map(str, index))
    return (
        f"with {h_kv} key/value heads out[{where}] = {grouped[index]:.6g}, but with K and V's heads repeated "
        f"{h_q // h_kv} times each (repeat_interleave, {h_q} heads) it is {repeated[index]:.6g}: query head "
        f"{index[-3]} must use key/value head {index[-3] // (h_q // h_kv)}"
    )


register(
    Property(
        name="gqa_equals_repeated_kv",
        summary=(
            "Grouped-query attention equals the same attention with each key/value head repeated for its "
            "group of query heads (repeat_interleave on the heads axis: h0 h0 h1 h1)."
        ),
        strategy=_grouped_example,
        applies=grouped_heads,
        calls=_repeated_calls,
        check=_calls_agree(_repeated_differs),
    )
)


# ---------------------------------------------------------------------------------------------
# softcap: the capped scores stay within ±cap, so every kept key keeps a weight


def _kept(contract: Any, n_q: int, n_k: int) -> np.ndarray:
    """``(n_q, n_k)``, True where the kernel's causal mask (bottom-right) keeps key j for query i."""
    i, j = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    return j <= i + (n_k - n_q) if contract.option("is_causal") else np.ones((n_q, n_k), dtype=bool)


def _saturated_calls(contract: Any, args: Args) -> list[Args]:
    """The queries scaled up a thousandfold and V the identity (``d_v = n_k``): the output rows are the
    weights, whose kept entries the cap keeps at least ``e^(-2 cap) / n_k``."""
    Q, K = np.asarray(args["query"]), np.asarray(args["key"])
    n_k = K.shape[-2]
    V = np.broadcast_to(np.eye(n_k), (*K.shape[:-2], n_k, n_k)).copy()
    return [{**args, "query": Q * 1000.0, "value": V}]


def _weights_bounded(ctx: CheckContext) -> str | None:
    weights = ctx.values(0)
    problem = _shapes_differ(ctx, (weights, np.shape(ctx.goldens[0])))
    if problem:
        return problem
    cap = float(ctx.contract.option("softcap"))
    n_q, n_k = weights.shape[-2], weights.shape[-1]
    keep = np.broadcast_to(_kept(ctx.contract, n_q, n_k), weights.shape)
    floor = np.exp(-2.0 * cap) / n_k
    allowed = np.asarray(ctx.allowed[0])
    with np.errstate(invalid="ignore"):
        index = first_index(keep & ~(weights >= floor - 2 * allowed))
    if index is None:
        return None
    return (
        f"with the queries scaled by 1000 and V the identity (the output rows are the weights), key {index[-1]} "
        f"of query {index[-2]} got weight {weights[index]:.6g}, below e^(-2·{cap:g}) / n_k = {floor:.6g}: the "
        f"scores were not kept within ±{cap:g} (cap · tanh(s / cap) on the scaled scores)"
    )


register(
    Property(
        name="softcap_bounds_scores",
        summary=(
            "With the queries scaled up a thousandfold (V the identity, so the output is the weights), every "
            "kept key still has a weight of at least e^(-2·cap) / n_k: the capped scores stay within ±cap."
        ),
        strategy=lambda contract, max_value: random_args(contract, max_value),
        applies=kernel_softcap,
        calls=_saturated_calls,
        check=_weights_bounded,
    )
)


# ---------------------------------------------------------------------------------------------
# bottom-right alignment: the last queries alone sit where they sat in the full call


def _aligned(c: Any) -> bool:
    """A kernel whose output depends on the query's position: causal or ALiBi (bottom-right)."""
    return kernel(c) and (bool(c.option("is_causal")) or kernel_alibi(c))


def _suffix_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[Args, int]]:
    """Arguments with n_q >= 2 and how many of the last queries to keep (1 .. n_q - 1)."""
    args = legend_sizes(contract, min_size=2).flatmap(lambda s: random_args(contract, max_value, s))
    return args.flatmap(lambda a: st.tuples(st.just(a), st.integers(1, np.shape(a["query"])[-2] - 1)))


def _suffix_calls(contract: Any, example: tuple[Args, int]) -> list[Args]:
    args, m = example
    return [args, {**args, "query": np.asarray(args["query"])[..., -m:, :]}]


def _suffix_agrees(ctx: CheckContext) -> str | None:
    args, m = ctx.example
    full, last = ctx.values(0), ctx.values(1)
    problem = _shapes_differ(ctx, (full, np.shape(ctx.goldens[0])), (last, np.shape(ctx.goldens[1])))
    if problem:
        return problem
    allowed = np.maximum(np.asarray(ctx.allowed[0])[..., -m:, :], np.asarray(ctx.allowed[1]))
    index = _first_moved(ctx, full[..., -m:, :], last, allowed)
    if index is None:
        return None
    n_q, n_k = np.shape(args["query"])[-2], np.shape(args["key"])[-2]
    row = n_q - m + index[-2]
    where = ", ".join(map(str, index))
    return (
        f"query {row} of {n_q} gives {full[..., -m:, :][index]:.6g}, but called with only the last {m} queries "
        f"(n_q = {m}) the same query gives out[{where}] = {last[index]:.6g}: positions are aligned bottom-right, "
        f"query i at key i + n_k - n_q, so the last query always sits at key {n_k - 1}"
    )


register(
    Property(
        name="bottom_right_suffix_queries",
        summary=(
            "The last m queries called alone give the same outputs as the last m rows of the full call: "
            "the causal mask and the ALiBi distance are aligned bottom-right (query i at key i + n_k - n_q)."
        ),
        strategy=_suffix_example,
        applies=_aligned,
        calls=_suffix_calls,
        check=_suffix_agrees,
    )
)


# ---------------------------------------------------------------------------------------------
# ALiBi slopes per head, or per batch item and head (FlashAttention takes both)


def _batched_example(contract: Any, max_value: float) -> st.SearchStrategy[Args]:
    """Arguments with at least one batch dim (so that slopes per batch item and head differ in shape)."""
    sizes = legend_sizes(contract).filter(lambda s: len(s["..."]) > 0)
    return sizes.flatmap(lambda s: random_args(contract, max_value, s))


def _per_batch_calls(contract: Any, args: Args) -> list[Args]:
    """The call with slopes ``(h,)``, and with the same slopes for every batch item, ``(*batch, h)``."""
    slopes = np.asarray(args["alibi_slopes"])
    batch = np.broadcast_shapes(np.shape(args["query"])[:-3], np.shape(args["key"])[:-3])
    return [args, {**args, "alibi_slopes": np.broadcast_to(slopes, (*batch, slopes.shape[-1])).copy()}]


def _per_batch_differs(ctx: CheckContext, per_head: np.ndarray, per_item: np.ndarray, index: tuple[int, ...]) -> str:
    where = ", ".join(map(str, index))
    shape = np.shape(ctx.args[1]["alibi_slopes"])
    return (
        f"with slopes of shape {np.shape(ctx.args[0]['alibi_slopes'])} out[{where}] = {per_head[index]:.6g}, but "
        f"with the same slopes for every batch item, shape {shape}, it is {per_item[index]:.6g}: slopes of shape "
        "(batch, h) give batch item b and head h the slope alibi_slopes[b, h]"
    )


register(
    Property(
        name="alibi_slopes_per_batch",
        summary=(
            "ALiBi slopes of shape (h,) and the same slopes for every batch item, shape (batch, h), give the "
            "same output (FlashAttention takes both forms)."
        ),
        strategy=_batched_example,
        # per batch item: inputs with a batch dim; slopes drawn (h,) (the alibi_layout heads), not (batch, h)
        applies=lambda c: kernel_alibi(c) and batch_items(c) and c.option("alibi_layout") == "heads",
        calls=_per_batch_calls,
        check=_calls_agree(_per_batch_differs),
    )
)


# ---------------------------------------------------------------------------------------------
# SDPA's float attn_mask: a bias on the scores (softmax is shift-invariant), -inf keys unused


def _shift_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[Args, list[int]]]:
    """Arguments and one integer shift per query row of the mask (its entries over ``n_k`` flattened)."""

    def with_shifts(a: Args) -> st.SearchStrategy[tuple[Args, list[int]]]:
        rows = int(np.prod(np.shape(a["attn_mask"])[:-1], dtype=int))
        shifts = st.lists(st.integers(-4, 4).filter(bool), min_size=rows, max_size=rows)
        return st.tuples(st.just(a), shifts)

    return random_args(contract, max_value).flatmap(with_shifts)


def _shift_calls(contract: Any, example: tuple[Args, list[int]]) -> list[Args]:
    """The call, and the same call with each query row's mask shifted by its constant (-inf stays -inf)."""
    args, shifts = example
    mask = np.asarray(args["attn_mask"], dtype=np.float64)
    shift = np.asarray(shifts, dtype=np.float64).reshape(*mask.shape[:-1], 1)
    return [args, {**args, "attn_mask": mask + shift}]


def _golden_moved(ctx: CheckContext) -> tuple[int, ...] | None:
    """The first index where the two calls' outputs differ by more than twice the allowed error plus
    the difference of their golden values (the inputs, cast to the tested dtype, may differ slightly)."""
    a, b = ctx.values(0), ctx.values(1)
    g0, g1 = (np.asarray(g, dtype=np.float64) for g in ctx.goldens[:2])
    with np.errstate(invalid="ignore"):
        slack = np.nan_to_num(np.abs(g0 - g1), nan=0.0, posinf=0.0)
    allowed = np.maximum(np.asarray(ctx.allowed[0]), np.asarray(ctx.allowed[1])) + slack / 2
    return _first_moved(ctx, a, b, allowed)


def _shift_differs(ctx: CheckContext, first: np.ndarray, shifted: np.ndarray, index: tuple[int, ...]) -> str:
    where = ", ".join(map(str, index))
    return (
        f"out[{where}] = {first[index]:.6g}, but with a constant added to every entry of query {index[-2]}'s "
        f"attn_mask row it is {shifted[index]:.6g}: the float mask is added to the scores, and softmax does not "
        "change when one constant is added to a whole row"
    )


register(
    Property(
        name="float_mask_row_shift",
        summary=(
            "Adding one constant to every entry of a query's float attn_mask row (-inf stays -inf) leaves its "
            "output unchanged: the mask is added to the scores, and softmax is shift-invariant."
        ),
        strategy=_shift_example,
        applies=sdpa_float_mask,
        calls=_shift_calls,
        check=_calls_agree(_shift_differs, _golden_moved),
    )
)


def _unused_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[Args, int]]:
    """Arguments with at least two keys, and which key to mask for every query (0 .. n_k - 1)."""
    sizes = legend_sizes(contract, min_size=2)
    args = sizes.flatmap(lambda s: random_args(contract, max_value, s))
    return args.flatmap(lambda a: st.tuples(st.just(a), st.integers(0, np.shape(a["key"])[-2] - 1)))


def _unused_calls(contract: Any, example: tuple[Args, int]) -> list[Args]:
    """Key ``j`` masked with -inf for every query; then the same call with key ``j``'s key and value changed."""
    args, j = example
    mask = np.array(args["attn_mask"], dtype=np.float64)
    mask[..., j] = -np.inf
    K, V = np.array(args["key"], dtype=np.float64), np.array(args["value"], dtype=np.float64)
    K[..., j, :] = -3.0 * K[..., j, :] + 5.0
    V[..., j, :] = 7.0
    masked = {**args, "attn_mask": mask}
    return [masked, {**masked, "key": K, "value": V}]


def _unused_differs(ctx: CheckContext, first: np.ndarray, changed: np.ndarray, index: tuple[int, ...]) -> str:
    _, j = ctx.example
    where = ", ".join(map(str, index))
    return (
        f"with key {j} masked by -inf for every query out[{where}] = {first[index]:.6g}, but with that key's "
        f"key and value changed it is {changed[index]:.6g}: a key whose attn_mask entry is -inf takes no part "
        "(weight exactly 0), whatever it holds"
    )


register(
    Property(
        name="float_mask_neg_inf_keys_unused",
        summary=(
            "A key whose float attn_mask entry is -inf for every query takes no part: changing its key and value "
            "leaves the output unchanged."
        ),
        strategy=_unused_example,
        applies=sdpa_float_mask,
        calls=_unused_calls,
        check=_calls_agree(_unused_differs, _golden_moved),
    )
)
