"""Properties of the Q Kᵀ views: score, scores, score_matrix, scaled_score_matrix."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.catalogue.families import (
    batch_items,
    dot_product,
    many_keys,
    many_queries,
    open_leading_dims,
    scaled_dot_product,
)
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, register
from attnscore.maths.contract import Contract
from attnscore.maths.lazy_hypothesis import composite, st
from attnscore.maths.strategies import perpendicular_qk, random_qk
from attnscore.maths.tolerance import close_enough


def _qk_args(c: Contract, Q: np.ndarray, K: np.ndarray) -> Args:
    assert c.qk is not None  # only used for Q Kᵀ views
    return c.qk.pack(Q, K)


def _qk_strategy(
    strategy: Callable[..., st.SearchStrategy[Any]],
) -> Callable[[Contract, float], st.SearchStrategy[Any]]:
    return lambda c, m: strategy(c, m).map(lambda qk: _qk_args(c, *qk))


def _ints(max_value: float) -> st.SearchStrategy[int]:
    m = max(1, int(max_value))
    return st.integers(-m, m)


@composite
def _int_qk(
    draw: Callable[..., Any], c: Contract, max_value: float, min_batch_items: int = 0, heads: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Small-integer (exact in every dtype) Q, K the contract can express (with the rank a spec's
    named leading dims fix, :attr:`attnscore.maths.contract.Contract.leading`)."""
    batch: tuple[int, ...] = ()
    if c.batched:
        if c.leading is not None:
            batch = tuple(draw(st.integers(1, 3)) for _ in c.leading)
        else:
            batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        if (min_batch_items or heads) and (batch or c.leading is None):
            batch = (draw(st.integers(max(2, min_batch_items), 4)),) + batch[1:]
    n_q = 1 if c.single_query else draw(st.integers(1, 4))
    n_k = 1 if c.single_key else draw(st.integers(1, 5))
    d_k = draw(st.sampled_from([1, 2, 3, 4, 8] if not heads else [1, 4, 16]))
    m = max(1, int(max_value))
    Q = draw(
        st.lists(
            st.integers(-m, m),
            min_size=int(np.prod(batch, dtype=int)) * n_q * d_k,
            max_size=int(np.prod(batch, dtype=int)) * n_q * d_k,
        )
    )
    K = draw(
        st.lists(
            st.integers(-m, m),
            min_size=int(np.prod(batch, dtype=int)) * n_k * d_k,
            max_size=int(np.prod(batch, dtype=int)) * n_k * d_k,
        )
    )
    return (np.array(Q, np.float64).reshape(*batch, n_q, d_k), np.array(K, np.float64).reshape(*batch, n_k, d_k))


def _scaled(c: Contract) -> bool:
    """Whether the contract is a view of ``Q Kᵀ / √d_k``."""
    return c.qk is not None and c.qk.scaled


def _scale(c: Contract, d_k: int) -> float:
    return 1.0 / np.sqrt(d_k) if _scaled(c) else 1.0


def _perpendicular_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return (
        "every key here but the last is perpendicular to the queries (q · k = 0), so its score must be 0; "
        "the last key points along the first query, so it scores q · q (not 0)"
    )


def _perpendicular_and_aligned(c: Contract, max_value: float) -> st.SearchStrategy[Args]:
    """Keys perpendicular to every query (:func:`attnscore.maths.strategies.perpendicular_qk`), then
    one more key along each batch item's first query, whose score is not 0: an all-zero output (a
    function that computes nothing) is wrong here. A contract with a single key keeps its one
    perpendicular key."""

    def aligned(qk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        Q, K = qk
        if c.single_key:
            return Q, K
        return Q, np.concatenate([K, Q[..., :1, :]], axis=-2)

    return perpendicular_qk(c, max_value).map(aligned).map(lambda qk: _qk_args(c, *qk))


def _normalisation_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    if got.shape != golden.shape or got.size == 0 or not np.isfinite(got).all():
        return None
    rows = got.reshape(-1, golden.shape[-1]) if golden.ndim else got.reshape(1, 1)
    if np.allclose(rows.sum(axis=-1), 1.0, atol=1e-3):
        return "your scores sum to 1: raw scores are not weights, so do not apply softmax or normalise them"
    if (got >= 0).all() and (golden < 0).any():
        return "your scores are never negative, but q · k is negative when a key points away from the query"
    return None


def _not_normalised_inputs(contract: Contract, max_value: float) -> st.SearchStrategy[Args]:
    def revealing(qk: tuple[np.ndarray, np.ndarray]) -> bool:
        S = np.einsum("...id,...jd->...ij", *qk)
        return bool((S < -0.5).any()) and bool((np.abs(S.sum(axis=-1) - 1.0) > 0.25).all())

    return random_qk(contract, max_value).filter(revealing).map(lambda qk: _qk_args(contract, *qk))


register(
    Property(
        name="equals_qk_entries",
        summary="Each score equals the matching entry of Q Kᵀ (the dot product of that query and key).",
        strategy=_qk_strategy(random_qk),
        applies=dot_product,
    )
)
register(
    Property(
        name="perpendicular_keys_score_zero",
        summary=(
            "A key perpendicular to the query scores exactly zero (next to a key along the query, which does not)."
        ),
        strategy=_perpendicular_and_aligned,
        applies=dot_product,
        hint=_perpendicular_hint,
        default_max_value=3.0,
    )
)
register(
    Property(
        name="scores_not_normalised",
        summary="Raw scores are not normalised: they can be negative and need not sum to one.",
        strategy=_not_normalised_inputs,
        applies=dot_product,
        hint=_normalisation_hint,
    )
)


@composite
def _parallel_qk(draw: Callable[..., Any], c: Contract, max_value: float, sign: int) -> tuple[np.ndarray, np.ndarray]:
    Q, K = draw(_int_qk(c, max_value))
    q = Q[..., :1, :]  # one query per batch item, repeated
    q = np.where(np.abs(q).sum(axis=-1, keepdims=True) == 0, 1.0, q)
    factors = np.array(draw(st.lists(st.integers(1, 3), min_size=K.shape[-2], max_size=K.shape[-2])), np.float64)
    K = sign * factors[:, None] * q  # (..., n_k, d_k)
    return np.broadcast_to(q, Q.shape).copy(), K


def _norms(ctx: CheckContext) -> np.ndarray:
    c = ctx.contract
    assert c.qk is not None  # only used for Q Kᵀ views
    Q, K = c.qk.to_qk(ctx.args[0])
    prod = np.linalg.norm(Q, axis=-1)[..., :, None] * np.linalg.norm(K, axis=-1)[..., None, :]
    return c.qk.from_scores(prod) * _scale(c, Q.shape[-1])


def _norm_product(ctx: CheckContext) -> str | None:
    got, want = ctx.values(0), _norms(ctx)
    if got.shape == want.shape and not close_enough(got, want, ctx.allowed[0] + 1e-9 * np.abs(want)):
        return "a key parallel to the query must score |q|·|k|" + (" / √d_k" if _scaled(ctx.contract) else "")
    return None


def _negative(ctx: CheckContext) -> str | None:
    got = ctx.values(0)
    if got.shape == ctx.goldens[0].shape and not (got < 0).all():
        return "a key pointing exactly away from the query must get a negative score"
    return None


def _cauchy_schwarz(ctx: CheckContext) -> str | None:
    got, bound = ctx.values(0), _norms(ctx)
    if got.shape == bound.shape and (np.abs(got) > bound * (1 + 1e-9) + ctx.allowed[0]).any():
        return "|score| exceeds |q|·|k|" + (" / √d_k" if _scaled(ctx.contract) else "") + " (Cauchy–Schwarz)"
    return None


register(
    Property(
        name="parallel_keys_score_norm_product",
        summary="A key parallel to the query (same direction) scores |q|·|k| (divided by √d_k when scaled).",
        strategy=lambda c, m: _parallel_qk(c, m, 1).map(lambda qk: _qk_args(c, *qk)),
        applies=dot_product,
        check=_norm_product,
        default_max_value=3.0,
    )
)
register(
    Property(
        name="anti_aligned_keys_score_negative",
        summary="A key pointing exactly away from the query gets a negative score (-|q|·|k|).",
        strategy=lambda c, m: _parallel_qk(c, m, -1).map(lambda qk: _qk_args(c, *qk)),
        applies=dot_product,
        check=_negative,
        default_max_value=3.0,
        hint=lambda g, e: (
            "scores of anti-aligned keys are negative; do not take absolute values or normalise"
            if g.shape == e.shape and bool(((g >= 0) & (e < 0)).any())
            else None  # negative but wrong: the sign is not the problem
        ),
    )
)
register(
    Property(
        name="cauchy_schwarz_bound",
        summary="No score exceeds |q|·|k| in magnitude (Cauchy–Schwarz; divided by √d_k when scaled).",
        strategy=_qk_strategy(random_qk),
        applies=dot_product,
        check=_cauchy_schwarz,
    )
)


@composite
def _linear(draw: Callable[..., Any], c: Contract, max_value: float, which: int) -> tuple[Any, ...]:
    Q1, K1 = draw(_int_qk(c, max_value))
    Q2 = np.array(draw(st.lists(_ints(max_value), min_size=Q1.size, max_size=Q1.size)), np.float64).reshape(Q1.shape)
    K2 = np.array(draw(st.lists(_ints(max_value), min_size=K1.size, max_size=K1.size)), np.float64).reshape(K1.shape)
    a, b = draw(st.integers(-3, 3)), draw(st.integers(-3, 3))
    return Q1, Q2, K1, K2, a, b, which


def _linear_calls(c: Contract, ex: tuple[Any, ...]) -> list[Args]:
    Q1, Q2, K1, K2, a, b, which = ex
    if which == 0:
        return [_qk_args(c, Q1, K1), _qk_args(c, Q2, K1), _qk_args(c, a * Q1 + b * Q2, K1)]
    return [_qk_args(c, Q1, K1), _qk_args(c, Q1, K2), _qk_args(c, Q1, a * K1 + b * K2)]


def _linear_check(ctx: CheckContext) -> str | None:
    o1, o2, o3 = ctx.values(0), ctx.values(1), ctx.values(2)
    a, b = ctx.example[4], ctx.example[5]
    if o1.shape != o2.shape or o1.shape != o3.shape:
        return None
    allowed = ctx.allowed[2] + abs(a) * ctx.allowed[0] + abs(b) * ctx.allowed[1]
    if not close_enough(o3, a * o1 + b * o2, allowed):
        which = "queries" if ctx.example[6] == 0 else "keys"
        return f"f at a·x + b·y differs from a·f(x) + b·f(y) (a={a}, b={b}, x and y {which}): scores are linear"
    return None


def _linear_in(argument: int, name: str, summary: str) -> Property:
    """Linearity in one argument (0: the query, 1: the keys), the other held fixed."""
    return Property(
        name=name,
        summary=summary,
        strategy=lambda c, m: _linear(c, m, argument),
        applies=dot_product,
        calls=_linear_calls,
        check=_linear_check,
        default_max_value=3.0,
    )


register(
    _linear_in(0, "linear_in_query", "Scores are linear in the query: f(a·q1 + b·q2, K) = a·f(q1, K) + b·f(q2, K).")
)
register(_linear_in(1, "linear_in_key", "Scores are linear in the keys: f(Q, a·K1 + b·K2) = a·f(Q, K1) + b·f(Q, K2)."))


@composite
def _permuted(draw: Callable[..., Any], c: Contract, max_value: float, axis: str) -> tuple[Any, ...]:
    Q, K = draw(random_qk(c, max_value))
    n = K.shape[-2] if axis == "keys" else Q.shape[-2]
    perm = np.array(draw(st.permutations(list(range(n)))), dtype=np.int64)
    return Q, K, perm, axis


def _perm_calls(c: Contract, ex: tuple[Any, ...]) -> list[Args]:
    Q, K, perm, axis = ex
    if axis == "keys":
        return [_qk_args(c, Q, K), _qk_args(c, Q, K[..., perm, :])]
    return [_qk_args(c, Q, K), _qk_args(c, Q[..., perm, :], K)]


def _perm_check(ctx: CheckContext) -> str | None:
    o1, o2 = ctx.values(0), ctx.values(1)
    perm, axis = ctx.example[2], ctx.example[3]
    if o1.ndim < 1 or o1.shape != o2.shape:
        return None
    if axis == "keys":
        want, allowed = o1[..., perm], ctx.allowed[1] + ctx.allowed[0][..., perm]
    else:
        if o1.ndim < 2:
            return None
        want, allowed = o1[..., perm, :], ctx.allowed[1] + ctx.allowed[0][..., perm, :]
    if not close_enough(o2, want, allowed):
        return (
            "permuting the keys must permute the score columns the same way"
            if axis == "keys"
            else "permuting the queries must permute the score rows the same way"
        )
    return None


def _permuting(axis: str, many: Callable[[Contract], bool], name: str, summary: str) -> Property:
    """Permutation along ``axis`` (``"keys"`` or ``"queries"``), for the dot-product contracts with
    ``many`` of them."""
    return Property(
        name=name,
        summary=summary,
        strategy=lambda c, m: _permuted(c, m, axis),
        applies=lambda c: dot_product(c) and many(c),
        calls=_perm_calls,
        check=_perm_check,
    )


register(
    _permuting(
        "keys",
        many_keys,
        "permuting_keys_permutes_scores",
        "Reordering the keys reorders the scores the same way: f(Q, P K) = f(Q, K) Pᵀ.",
    )
)
register(
    _permuting(
        "queries",
        many_queries,
        "permuting_queries_permutes_rows",
        "Reordering the queries reorders the rows of the scores the same way: f(P Q, K) = P f(Q, K).",
    )
)


@composite
def _batched_qk(draw: Callable[..., Any], c: Contract, max_value: float, heads: bool = False) -> tuple[Any, ...]:
    Q, K = draw(_int_qk(c, max_value, min_batch_items=2, heads=heads))
    i = draw(st.integers(0, Q.shape[0] - 1))
    return Q, K, i


def _batch_calls(c: Contract, ex: tuple[Any, ...]) -> list[Args]:
    """The batched call, and item ``i`` alone: without its batch axis, or as a batch of one
    (``Q[i:i+1]``) when the spec names the leading dims (its inputs always have that rank)."""
    Q, K, i = ex
    if c.leading is not None:
        return [_qk_args(c, Q, K), _qk_args(c, Q[i : i + 1], K[i : i + 1])]
    return [_qk_args(c, Q, K), _qk_args(c, Q[i], K[i])]


def _batch_check(what: str) -> Callable[[CheckContext], str | None]:
    """The check that a batch item's scores equal those of the same item called alone (``what``
    when they differ); a partial of a module-level function, so built cases can be cached."""
    return functools.partial(_batch_item_check, what)


def _batch_item_check(what: str, ctx: CheckContext) -> str | None:
    o1, o2 = ctx.values(0), ctx.values(1)
    i = ctx.example[2]
    alone = np.asarray(ctx.allowed[1])
    if ctx.contract.leading is not None and o2.ndim >= 1 and o2.shape[:1] == (1,):  # a batch of one
        o2, alone = o2[0], alone[0]
    if o1.ndim < 1 or o1.shape[1:] != o2.shape:
        return None
    if not close_enough(o1[i], o2, ctx.allowed[0][i] + alone):
        return what
    return None


@composite
def _broadcast_qk(draw: Callable[..., Any], c: Contract, max_value: float) -> Args:
    """Q and K whose leading dims differ but broadcast: sizes 1 against n, and fewer dims on one side.

    E.g. Q (2, 1, n_q, d_k) and K (3, n_k, d_k) give scores of shape (2, 3, n_q, n_k)."""
    Q, K = draw(_int_qk(c, max_value, min_batch_items=2))
    batch = Q.shape[:-2]
    q_batch, k_batch = list(batch), list(batch)
    for axis in range(len(batch)):
        side = draw(st.sampled_from(["q", "k", "both"]))
        if side == "q":
            q_batch[axis] = 1
        elif side == "k":
            k_batch[axis] = 1
    if q_batch == k_batch:  # make sure the two differ
        q_batch[0] = 1
    Q = Q[tuple(slice(0, n) for n in q_batch)]
    K = K[tuple(slice(0, n) for n in k_batch)]
    if draw(st.booleans()) and all(n == 1 for n in k_batch[:1]):
        K = K.reshape(K.shape[1:])  # K has fewer leading dims than Q
    elif draw(st.booleans()) and all(n == 1 for n in q_batch[:1]):
        Q = Q.reshape(Q.shape[1:])
    return _qk_args(c, np.ascontiguousarray(Q), np.ascontiguousarray(K))


register(
    Property(
        name="batch_dims_broadcast",
        summary="Leading (batch, head) dims of Q and K broadcast: Q (2, 1, n_q, d_k) with K (3, n_k, d_k) "
        "gives (2, 3, n_q, n_k).",
        strategy=lambda c, m: _broadcast_qk(c, m),
        applies=lambda c: dot_product(c) and open_leading_dims(c),
        default_max_value=3.0,
    )
)
register(
    Property(
        name="batch_items_independent",
        summary="Each batch item is scored on its own: f(Q, K)[b] = f(Q[b], K[b]).",
        strategy=lambda c, m: _batched_qk(c, m),
        applies=lambda c: dot_product(c) and batch_items(c),
        calls=_batch_calls,
        check=_batch_check(
            "item b of a batched call differs from scoring item b alone: "
            "batch items must not mix (swap only the last two axes)"
        ),
        default_max_value=3.0,
    )
)
register(
    Property(
        name="scale_independent_of_heads",
        summary="With heads (..., heads, n, d_k), the scale is 1/√d_k per head: head h alone gives the same scores.",
        strategy=lambda c, m: _batched_qk(c, m, heads=True),
        applies=lambda c: scaled_dot_product(c) and c.leading != (),
        calls=_batch_calls,
        check=_batch_check(
            "head h scored alone differs from head h inside the multi-head call: "
            "scale by √d_k (per-head width), not √(heads·d_k)"
        ),
        default_max_value=3.0,
    )
)


def _symmetric_calls(c: Contract, X: np.ndarray) -> list[Args]:
    return [_qk_args(c, X, X)]


def _symmetric_check(ctx: CheckContext) -> str | None:
    o = ctx.values(0)
    if o.ndim < 2 or o.shape[-1] != o.shape[-2]:
        return None
    if not close_enough(o, np.swapaxes(o, -1, -2), ctx.allowed[0] + np.swapaxes(ctx.allowed[0], -1, -2)):
        return "scoring a set of vectors against itself must give a symmetric matrix (x_i · x_j = x_j · x_i)"
    return None


register(
    Property(
        name="self_scores_symmetric",
        summary="Scoring vectors against themselves gives a symmetric matrix: f(X, X) = f(X, X)ᵀ.",
        strategy=lambda c, m: random_qk(c, m).map(lambda qk: qk[0]),
        applies=lambda c: dot_product(c) and many_queries(c) and many_keys(c),
        calls=_symmetric_calls,
        check=_symmetric_check,
    )
)
register(
    Property(
        name="scaled_is_raw_over_sqrt_dk",
        summary="Scaled scores equal the raw scores Q Kᵀ divided by √d_k (d_k = the per-head key width).",
        strategy=lambda c, m: _int_qk(c, m).map(lambda qk: _qk_args(c, *qk)),
        applies=scaled_dot_product,
        default_max_value=3.0,
        hint=lambda g, e: (
            "your scores are off by a constant factor: divide Q Kᵀ by √d_k exactly once"
            if g.shape == e.shape
            and np.isfinite(g).all()
            and np.abs(e).max() > 0
            and np.allclose(g, e * (np.vdot(g, e) / np.vdot(e, e)), rtol=1e-4, atol=1e-6)
            and abs(np.vdot(g, e) / np.vdot(e, e) - 1.0) > 0.01  # a real factor, not rounding noise
            else None
        ),
    )
)
