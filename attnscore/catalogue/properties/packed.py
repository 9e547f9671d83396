"""Relational properties of packed variable-length batches (``flash_attn_varlen``) and of key padding
(``key_padding_attention``): a packed batch equals its sequences run one by one, the keys of
another sequence never change a query's output, and keys past the valid length never change it."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.catalogue.mistakes.packed import key_padding, varlen
from attnscore.catalogue.properties.registry import CheckContext, Property, first_moved, register
from attnscore.maths.families.flash_varlen import sequence_slices
from attnscore.maths.families.key_padding import key_keep
from attnscore.maths.lazy_hypothesis import st
from attnscore.maths.strategies import random_args

Args = dict[str, np.ndarray]


def _several(contract: Any, max_value: float) -> st.SearchStrategy[Args]:
    """Packed arguments with at least two sequences (so that a boundary exists)."""
    return random_args(contract, max_value).filter(lambda a: np.size(a["cu_seqlens_q"]) >= 3)


def _limit(ctx: CheckContext, i: int, shape: tuple[int, ...]) -> np.ndarray:
    """Call ``i``'s allowed error, or its largest entry everywhere when the output has another shape."""
    a = np.asarray(ctx.allowed[i], dtype=np.float64)
    return a if a.shape == shape else np.full(shape, np.max(a, initial=0.0))


def _shape_problem(ctx: CheckContext) -> str | None:
    for i, golden in enumerate(ctx.goldens):
        if ctx.values(i).shape != np.shape(golden):
            return (
                f"expected an output of shape {np.shape(golden)}, found {ctx.values(i).shape}: "
                "which query saw which key cannot be told"
            )
    return None


def _index(i: tuple[int, ...]) -> str:
    return ", ".join(map(str, i))


# ---------------------------------------------------------------------------------------------
# a packed batch equals its sequences one by one


def _one_sequence(a: Args, rows: slice, cols: slice) -> Args:
    """Sequence ``rows``/``cols`` of ``a`` as a packed batch of one."""
    n_q, n_k = rows.stop - rows.start, cols.stop - cols.start
    return {
        "q": a["q"][rows],
        "k": a["k"][cols],
        "v": a["v"][cols],
        "cu_seqlens_q": np.array([0, n_q], dtype=np.int32),
        "cu_seqlens_k": np.array([0, n_k], dtype=np.int32),
        "max_seqlen_q": np.array(n_q, dtype=np.int32),
        "max_seqlen_k": np.array(n_k, dtype=np.int32),
    }


def _with_keys(a: Args) -> list[tuple[int, slice, slice]]:
    """``(s, query rows, key rows)`` of each sequence of ``a`` that has a key: one without keys is not
    run alone (a call with no key at all); its queries keep no key in the packed batch either, and get
    the zero vector there (a fully masked corner, judged by the cases about it)."""
    pairs = zip(sequence_slices(a["cu_seqlens_q"]), sequence_slices(a["cu_seqlens_k"]), strict=True)
    return [(s, r, c) for s, (r, c) in enumerate(pairs) if c.stop > c.start]


def _one_by_one_calls(contract: Any, a: Args) -> list[Args]:
    """Each sequence with a key alone (a batch of one), then the packed batch."""
    return [*(_one_sequence(a, r, c) for _, r, c in _with_keys(a)), a]


def _one_by_one(ctx: CheckContext) -> str | None:
    a = ctx.example
    problem = _shape_problem(ctx)
    if problem:
        return problem
    last = len(ctx.outputs) - 1
    packed = ctx.values(last)
    packed_limit = _limit(ctx, last, packed.shape)
    for call, (s, rows, _) in enumerate(_with_keys(a)):
        alone = ctx.values(call)
        allowed = np.maximum(_limit(ctx, call, alone.shape), packed_limit[rows])
        with np.errstate(invalid="ignore"):
            off = ~(np.abs(packed[rows] - alone) <= 2 * allowed) & ~(np.isnan(packed[rows]) & np.isnan(alone))
        if off.any():
            i = tuple(int(x) for x in np.argwhere(off)[0])
            at = (i[0] + rows.start, *i[1:])
            return (
                f"sequence {s} alone (cu_seqlens [0, {rows.stop - rows.start}]) gave out[{_index(i)}] = "
                f"{alone[i]:.6g}, but in the packed batch its row gave out[{_index(at)}] = {packed[at]:.6g}: "
                "each sequence of a packed batch attends only to itself, as if run alone"
            )
    return None


register(
    Property(
        name="packed_equals_sequences_one_by_one",
        summary=(
            "A packed variable-length batch gives, for each sequence, the output of that sequence run alone "
            "(a batch of one)."
        ),
        strategy=_several,
        applies=varlen,
        calls=_one_by_one_calls,
        golden=False,  # judges only its own relation: the values are matches_reference's concern
        check=_one_by_one,
    )
)


# ---------------------------------------------------------------------------------------------
# keys of another sequence never change the output


def _other_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[Args, int, int]]:
    """Packed arguments, a sequence ``s`` whose output is watched, and a seed for the other keys."""
    return _several(contract, max_value).flatmap(
        lambda a: st.tuples(st.just(a), st.integers(0, np.size(a["cu_seqlens_q"]) - 2), st.integers(0, 2**16))
    )


def _others_changed(contract: Any, example: Any) -> list[Args]:
    a, s, seed = example
    rng = np.random.default_rng(seed)
    own = sequence_slices(a["cu_seqlens_k"])[s]
    others = np.ones(np.shape(a["k"])[0], dtype=bool)
    others[own] = False
    K, V = np.array(a["k"], dtype=np.float64), np.array(a["v"], dtype=np.float64)
    K[others] = rng.integers(-9, 10, size=K[others].shape)  # (total_k, h_kv, d_k): key rows of other sequences
    V[others] = rng.integers(-9, 10, size=V[others].shape)
    return [a, {**a, "k": K, "v": V}]


def _others_ignored(ctx: CheckContext) -> str | None:
    a, s, _ = ctx.example
    problem = _shape_problem(ctx)
    if problem:
        return problem
    before, after = ctx.values(0), ctx.values(1)
    rows = sequence_slices(a["cu_seqlens_q"])[s]
    allowed = np.maximum(_limit(ctx, 0, before.shape), _limit(ctx, 1, after.shape))[rows]
    i = first_moved(before[rows], after[rows], allowed)
    if i is None:
        return None
    at = (i[0] + rows.start, *i[1:])
    return (
        f"changing the keys and values of the other sequences changed out[{_index(at)}] (sequence {s}) from "
        f"{before[at]:.6g} to {after[at]:.6g}: sequence {s} attends only to its own key rows "
        f"cu_seqlens_k[{s}]..cu_seqlens_k[{s + 1}]-1"
    )


register(
    Property(
        name="keys_of_other_sequences_ignored",
        summary=(
            "Changing the keys and values of the other sequences of a packed batch leaves a sequence's output "
            "unchanged."
        ),
        strategy=_other_example,
        applies=varlen,
        calls=_others_changed,
        golden=False,
        check=_others_ignored,
    )
)


# ---------------------------------------------------------------------------------------------
# keys past the valid length never change the output


def _padded_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[Args, int]]:
    """Arguments where some batch item has padding keys (a length below ``n_k``), and a seed."""
    args = random_args(contract, max_value).filter(
        lambda a: bool(np.any(np.asarray(a["key_lengths"]) < np.shape(a["key"])[-2]))
    )
    return st.tuples(args, st.integers(0, 2**16))


def _padding_changed(contract: Any, example: Any) -> list[Args]:
    a, seed = example
    rng = np.random.default_rng(seed)
    K, V = np.array(a["key"], dtype=np.float64), np.array(a["value"], dtype=np.float64)  # (b, h_kv, n_k, d)
    pad = ~key_keep(a["key_lengths"], K.shape[-2])  # (b, n_k)
    for b, j in zip(*np.nonzero(pad), strict=True):
        K[b, :, j] = rng.integers(-9, 10, size=K[b, :, j].shape)
        V[b, :, j] = rng.integers(-9, 10, size=V[b, :, j].shape)
    return [a, {**a, "key": K, "value": V}]


def _padding_ignored(ctx: CheckContext) -> str | None:
    a, _ = ctx.example
    problem = _shape_problem(ctx)
    if problem:
        return problem
    before, after = ctx.values(0), ctx.values(1)
    allowed = np.maximum(_limit(ctx, 0, before.shape), _limit(ctx, 1, after.shape))
    i = first_moved(before, after, allowed)
    if i is None:
        return None
    length = int(np.asarray(a["key_lengths"]).reshape(-1)[i[0]])
    return (
        f"changing the padding keys and values (j >= key_lengths[{i[0]}] = {length}) changed out[{_index(i)}] "
        f"from {before[i]:.6g} to {after[i]:.6g}: keys past the valid length must get no weight"
    )


register(
    Property(
        name="keys_past_length_ignored",
        summary=(
            "Changing the keys and values past a batch item's valid length (key_lengths) leaves the output unchanged."
        ),
        strategy=_padded_example,
        applies=key_padding,
        calls=_padding_changed,
        golden=False,
        check=_padding_ignored,
    )
)
