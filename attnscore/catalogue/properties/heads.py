"""Properties of multi-head attention with its four projections (:mod:`attnscore.maths.families.multihead`):
the heads are independent, and a causal one never lets a token see the tokens after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.catalogue.families import multihead, multihead_causal
from attnscore.catalogue.properties.registry import CheckContext, Property, first_moved, register
from attnscore.maths.lazy_hypothesis import st
from attnscore.maths.strategies import legend_sizes, random_args


def _two_tokens(contract: Any, max_value: float) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """Arguments with at least two tokens (and two context tokens)."""
    return legend_sizes(contract, min_size=2).flatmap(lambda sizes: random_args(contract, max_value, sizes))


def _limits(ctx: CheckContext, shape: tuple[int, ...]) -> np.ndarray:
    """The larger allowed error of the example's two calls, entry by entry (their largest entry for a
    wrong-shaped output)."""
    limits = [np.asarray(a, dtype=np.float64) for a in ctx.allowed]
    if any(a.shape != shape for a in limits):
        limits = [np.full(shape, np.max(a, initial=0.0)) for a in limits]
    return np.maximum(limits[0], limits[1])


def _shapes_problem(ctx: CheckContext) -> str | None:
    before, after = ctx.values(0), ctx.values(1)
    want = np.shape(ctx.goldens[0])
    if before.shape != want or after.shape != np.shape(ctx.goldens[1]):
        return (
            f"expected outputs of shape {want}, found {before.shape} and {after.shape}: the heads cannot be told apart"
        )
    return None


@dataclass(frozen=True)
class _Moved:
    """An output entry the change moved: its index, its value before and after."""

    index: tuple[int, ...]
    before: float
    after: float

    @property
    def entry(self) -> str:
        """The entry as a message names it: ``out[0, 1, 2]``."""
        return f"out[{', '.join(map(str, self.index))}]"


def _first_change(ctx: CheckContext, among: np.ndarray) -> _Moved | str | None:
    """The outputs' shape problem, else the first entry the change moved among the entries ``among``
    selects (:func:`~attnscore.catalogue.properties.registry.first_moved`), None where none moved."""
    problem = _shapes_problem(ctx)
    if problem is not None:
        return problem
    before, after = ctx.values(0), ctx.values(1)
    index = first_moved(before, after, _limits(ctx, before.shape), among)
    return None if index is None else _Moved(index, before[index], after[index])


# ---------------------------------------------------------------------------------------------
# heads are independent


def _heads_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int, int]]:
    """Arguments with at least two heads, a head ``h`` and a seed for its new weight rows."""
    args = _two_tokens(contract, max_value).filter(lambda a: int(np.asarray(a["num_heads"])) >= 2)
    return args.flatmap(
        lambda a: st.tuples(st.just(a), st.integers(0, int(np.asarray(a["num_heads"])) - 1), st.integers(0, 2**16))
    )


def _rows(args: dict[str, np.ndarray], h: int) -> slice:
    d = np.shape(args["x"])[-1]
    d_head = d // int(np.asarray(args["num_heads"]))
    return slice(h * d_head, (h + 1) * d_head)


def _head_changed(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    """The example with ``W_o`` the identity, then the same with head ``h``'s rows of ``W_q``, ``W_k``,
    ``W_v`` (of each third of a packed ``c_attn``) redrawn."""
    args, h, seed = example
    d = np.shape(args["x"])[-1]
    first = {**args, "W_o": np.eye(d)}
    rng = np.random.default_rng(seed)
    rows = _rows(args, h)
    changed = dict(first)
    if "c_attn" in args:
        c_attn = np.array(args["c_attn"], dtype=np.float64)
        for third in range(3):
            block = c_attn[third * d : (third + 1) * d]
            block[rows] = rng.integers(-3, 4, size=block[rows].shape)
        changed["c_attn"] = c_attn
    else:
        for name in ("W_q", "W_k", "W_v"):
            W = np.array(args[name], dtype=np.float64)
            W[rows] = rng.integers(-3, 4, size=W[rows].shape)
            changed[name] = W
    return [first, changed]


def _heads_independent(ctx: CheckContext) -> str | None:
    args, h, _ = ctx.example
    cols = _rows(args, h)
    others = np.ones(np.shape(ctx.goldens[0])[-1], dtype=bool)
    others[cols] = False  # the other heads' columns of the concatenated heads
    moved = _first_change(ctx, others)
    if not isinstance(moved, _Moved):
        return moved  # the outputs' shape problem, or None: no other head's column moved
    return (
        f"with W_o the identity, changing only head {h}'s rows {cols.start}..{cols.stop - 1} of W_q, W_k and W_v "
        f"changed {moved.entry} from {moved.before:.6g} to {moved.after:.6g}, outside head "
        f"{h}'s columns {cols.start}..{cols.stop - 1}: each head must see only its own d_head-wide slice of the "
        "projections"
    )


register(
    Property(
        name="heads_independent",
        summary=(
            "With W_o the identity, changing one head's rows of W_q, W_k and W_v changes only that head's "
            "columns of the output (the heads are independent)."
        ),
        strategy=_heads_example,
        applies=multihead,
        calls=_head_changed,
        golden=False,  # judges only its own property: the values are matches_reference's concern
        check=_heads_independent,
        default_max_value=3.0,
    )
)


# ---------------------------------------------------------------------------------------------
# a causal token never sees the tokens after it


def _later_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int, int]]:
    """Arguments with at least two tokens, a first changed token ``t`` (>= 1) and a seed."""
    return _two_tokens(contract, max_value).flatmap(
        lambda a: st.tuples(st.just(a), st.integers(1, np.shape(a["x"])[-2] - 1), st.integers(0, 2**16))
    )


def _later_changed(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    """The example, then the same with tokens ``t..`` of ``x`` (and of ``context``) redrawn."""
    args, t, seed = example
    rng = np.random.default_rng(seed)
    changed = dict(args)
    for name in ("x", "context"):
        if name in args:
            X = np.array(args[name], dtype=np.float64)
            X[..., t:, :] = rng.integers(-5, 6, size=X[..., t:, :].shape)
            changed[name] = X
    return [args, changed]


def _later_unseen(ctx: CheckContext) -> str | None:
    _, t, _ = ctx.example
    earlier = np.zeros(np.shape(ctx.goldens[0])[-2], dtype=bool)
    earlier[:t] = True
    moved = _first_change(ctx, earlier[:, None])
    if not isinstance(moved, _Moved):
        return moved  # the outputs' shape problem, or None: no earlier token's output moved
    return (
        f"changing tokens {t}.. changed {moved.entry} (token {moved.index[-2]}) from "
        f"{moved.before:.6g} to {moved.after:.6g}: under the causal mask token i attends only to tokens j <= i"
    )


register(
    Property(
        name="later_tokens_unseen",
        summary=(
            "Changing the tokens from position t on leaves the outputs of the tokens before t unchanged "
            "(the causal mask hides the future)."
        ),
        strategy=_later_example,
        applies=multihead_causal,
        calls=_later_changed,
        golden=False,
        check=_later_unseen,
        default_max_value=3.0,
    )
)
