"""Relational properties of sequence masks in FlashAttention-style kernels (the ``flash_attn``
contract, :mod:`attnscore.maths.families.flash`): keys outside a query's window never change its
output, and decoding against a KV cache gives the rows of full causal attention."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.catalogue.mistakes.sequences import flash, flash_cache
from attnscore.catalogue.properties.registry import CheckContext, Property, first_moved, register
from attnscore.maths.families.flash import flash_keep, flash_window
from attnscore.maths.lazy_hypothesis import st
from attnscore.maths.strategies import legend_sizes, random_args


def _bounded(c: Any) -> bool:
    """A flash contract whose window hides some keys (a sliding window or ``causal``)."""
    return flash(c) and flash_window(c) != (-1, -1)


def _sizes(contract: Any, square: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Legend sizes with ``2 <= n_q <= n_k`` such that some query has keys outside its window:
    a bounded left side hides key 0 from the last query once ``n_k >= left + 2``, a bounded right
    side hides key ``n_k - 1`` from query 0 once ``n_q >= right + 2``; ``n_q = n_k`` when ``square``."""
    left, right = flash_window(contract)
    least_k = max(2, left + 2 if left != -1 else 2)
    least_q = max(2, right + 2 if right != -1 else 2)

    def resize(sizes: dict[str, Any], n_k: int, n_q: int) -> dict[str, Any]:
        return {**sizes, "n_k": n_k, "n_q": n_k if square else n_q}

    return legend_sizes(contract).flatmap(
        lambda sizes: st.integers(max(least_k, least_q), max(least_k, least_q) + 3).flatmap(
            lambda n_k: st.integers(least_q, n_k).map(lambda n_q: resize(sizes, n_k, n_q))
        )
    )


# ---------------------------------------------------------------------------------------------
# keys outside the window


def _outside_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int, int]]:
    """Arguments, a query ``r`` with keys outside its window, and a seed for those keys' new rows."""

    def with_row(a: dict[str, np.ndarray]) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int, int]]:
        n_q, n_k = np.shape(a["q"])[1], np.shape(a["k"])[1]
        keep = flash_keep(flash_window(contract), n_q, n_k)
        rows = [int(i) for i in np.flatnonzero(~keep.all(axis=-1))]
        return st.tuples(st.just(a), st.sampled_from(rows), st.integers(0, 2**16))

    args = _sizes(contract, square=False).flatmap(lambda sizes: random_args(contract, max_value, sizes))
    return args.flatmap(with_row)


def _outside(contract: Any, args: dict[str, np.ndarray], r: int) -> np.ndarray:
    """``(n_k,)`` bool: the keys outside query ``r``'s window."""
    n_q, n_k = np.shape(args["q"])[1], np.shape(args["k"])[1]
    return ~flash_keep(flash_window(contract), n_q, n_k)[r]


def _changed_outside(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    args, r, seed = example
    rng = np.random.default_rng(seed)
    hidden = _outside(contract, args, r)
    K, V = np.array(args["k"], dtype=np.float64), np.array(args["v"], dtype=np.float64)
    K[:, hidden] = rng.integers(-9, 10, size=K[:, hidden].shape)  # (b, n_k, h_kv, d_k): keys on axis 1
    V[:, hidden] = rng.integers(-9, 10, size=V[:, hidden].shape)
    return [args, {"q": args["q"], "k": K, "v": V}]


def _limits(ctx: CheckContext, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each call's allowed error, or its largest one everywhere when an output has the wrong shape."""
    limits = [np.asarray(a, dtype=np.float64) for a in ctx.allowed]
    return [a if a.shape == shape else np.full(shape, np.max(a, initial=0.0)) for a in limits]


def _shape_problem(ctx: CheckContext, *pairs: tuple[int, tuple[int, ...]]) -> str | None:
    for i, want in pairs:
        if ctx.values(i).shape != want:
            found = ctx.values(i).shape
            return f"expected an output of shape {want}, found {found}: which query saw which key cannot be told"
    return None


def _outside_ignored(ctx: CheckContext) -> str | None:
    args, r, _ = ctx.example
    before, after = ctx.values(0), ctx.values(1)
    problem = _shape_problem(ctx, (0, np.shape(ctx.goldens[0])), (1, np.shape(ctx.goldens[1])))
    if problem:
        return problem
    hidden = _outside(ctx.contract, args, r)
    n_q, n_k = np.shape(args["q"])[1], np.shape(args["k"])[1]
    keep = flash_keep(flash_window(ctx.contract), n_q, n_k)
    blind = np.asarray(~keep[:, hidden].any(axis=-1))  # (n_q,): queries that keep none of the changed keys
    limits = _limits(ctx, before.shape)
    allowed = np.maximum(limits[0], limits[1])
    index = first_moved(before, after, allowed, blind[None, :, None, None])  # (b, n_q, h_q, d_v)
    if index is None:
        return None
    keys = ", ".join(str(int(j)) for j in np.flatnonzero(hidden))
    left, right = flash_window(ctx.contract)
    return (
        f"changing keys and values {keys} (outside the window of query {index[1]}) changed out"
        f"[{', '.join(map(str, index))}] from {before[index]:.6g} to {after[index]:.6g}: query i keeps only keys "
        f"j in [i + n_k - n_q - left, i + n_k - n_q + right] (left={left}, right={right}; -1 unbounded)"
    )


register(
    Property(
        name="keys_outside_window_ignored",
        summary=(
            "Changing the keys and values outside a query's window (sliding window, or the future under causal, "
            "aligned bottom-right) leaves that query's output unchanged."
        ),
        strategy=_outside_example,
        applies=_bounded,
        calls=_changed_outside,
        golden=False,  # judges only its own property: the values are matches_reference's concern
        check=_outside_ignored,
    )
)


# ---------------------------------------------------------------------------------------------
# decoding against a KV cache


def _cache_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int]]:
    """Square arguments (``n_q = n_k = n``, one full causal pass) and a step ``t`` in ``[0, n)``."""
    args = _sizes(contract, square=True).flatmap(lambda sizes: random_args(contract, max_value, sizes))
    return args.flatmap(lambda a: st.tuples(st.just(a), st.integers(0, np.shape(a["q"])[1] - 1)))


def _cache_calls(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    """The full causal pass; one decode step of token ``t`` against the cache of tokens ``0..t``; the
    continued prefill of tokens ``t..n-1`` against every key."""
    a, t = example
    q, k, v = a["q"], a["k"], a["v"]
    return [
        a,
        {"q": q[:, t : t + 1], "k": k[:, : t + 1], "v": v[:, : t + 1]},
        {"q": q[:, t:], "k": k, "v": v},
    ]


def _cache_rows_match(ctx: CheckContext) -> str | None:
    _, t = ctx.example
    want = [np.shape(g) for g in ctx.goldens]
    problem = _shape_problem(ctx, *enumerate(want))
    if problem:
        return problem
    full = ctx.values(0)
    limits = _limits(ctx, full.shape)
    n = full.shape[1]
    for i, rows, what in (
        (1, slice(t, t + 1), f"decoding token {t} against a cache of {t} earlier tokens (n_q = 1, n_k = {t + 1})"),
        (2, slice(t, n), f"continuing the prefill at token {t} against every key (n_q = {n - t}, n_k = {n})"),
    ):
        got, expect = ctx.values(i), full[:, rows]
        allowed = np.maximum(np.asarray(ctx.allowed[i], dtype=np.float64), limits[0][:, rows])
        if allowed.shape != got.shape:
            allowed = np.full(got.shape, np.max(allowed, initial=0.0))
        with np.errstate(invalid="ignore"):
            off = ~(np.abs(got - expect) <= 2 * allowed) & ~(np.isnan(got) & np.isnan(expect))
        if off.any():
            index = tuple(int(x) for x in np.argwhere(off)[0])
            row = (index[0], index[1] + rows.start, *index[2:])
            return (
                f"{what} gave out[{', '.join(map(str, index))}] = {got[index]:.6g}, but the full causal pass gave "
                f"{expect[index]:.6g} at out[{', '.join(map(str, row))}]: the cache's keys are the earlier tokens, "
                "so query i is token i + n_k - n_q and keeps keys j <= i + n_k - n_q (bottom-right)"
            )
    return None


register(
    Property(
        name="cache_decoding_matches_full_causal",
        summary=(
            "Decoding token t against a KV cache of the tokens before it, and continuing the prefill from token t, "
            "give the rows t.. of one full causal pass over every token."
        ),
        strategy=_cache_example,
        applies=flash_cache,
        calls=_cache_calls,
        golden=False,  # judges only its own relation: the values are matches_reference's concern
        check=_cache_rows_match,
    )
)
