"""Properties of causal attention in the flag form (no mask argument; see
:func:`attnscore.maths.reference.causal_attention`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.catalogue.families import causal
from attnscore.catalogue.properties.registry import CheckContext, Property, first_moved, register
from attnscore.maths import golden
from attnscore.maths.lazy_hypothesis import st
from attnscore.maths.strategies import legend_sizes, random_args


def _alignment(contract: Any) -> str:
    return "top_left" if contract.name.endswith("top_left") else "bottom_right"


def _future_example(contract: Any, max_value: float) -> st.SearchStrategy[tuple[dict[str, np.ndarray], int, int]]:
    """Arguments with n_k >= 2, a first changed key ``t`` (>= 1) and a seed for the new key/value rows."""
    args = legend_sizes(contract, min_size=2).flatmap(lambda sizes: random_args(contract, max_value, sizes))
    return args.flatmap(
        lambda a: st.tuples(st.just(a), st.integers(1, np.shape(a["K"])[-2] - 1), st.integers(0, 2**16))
    )


def _changed_future(contract: Any, example: Any) -> list[dict[str, np.ndarray]]:
    args, t, seed = example
    rng = np.random.default_rng(seed)
    K, V = np.array(args["K"], dtype=np.float64), np.array(args["V"], dtype=np.float64)
    K[..., t:, :] = rng.integers(-9, 10, size=K[..., t:, :].shape)
    V[..., t:, :] = rng.integers(-9, 10, size=V[..., t:, :].shape)
    return [args, {"Q": args["Q"], "K": K, "V": V}]


def _future_ignored(ctx: CheckContext) -> str | None:
    args, t, _ = ctx.example
    before, after = ctx.values(0), ctx.values(1)
    want = np.shape(ctx.goldens[0])
    if before.shape != want or after.shape != np.shape(ctx.goldens[1]):
        return (
            f"expected outputs of shape {want}, found {before.shape} and {after.shape}: which query saw which "
            "key cannot be told"
        )
    n_q, n_k = np.shape(args["Q"])[-2], np.shape(args["K"])[-2]
    keep = golden.causal_keep(n_q, n_k, _alignment(ctx.contract))
    blind = np.asarray(~keep[:, t:].any(axis=-1))  # queries that see none of the changed keys
    limits = [np.asarray(a, dtype=np.float64) for a in ctx.allowed]
    if any(a.shape != before.shape for a in limits):  # a wrong-shaped output: its largest allowed error
        limits = [np.full(before.shape, np.max(a, initial=0.0)) for a in limits]
    allowed = np.maximum(limits[0], limits[1])
    index = first_moved(before, after, allowed, blind[:, None])
    if index is None:
        return None
    return (
        f"changing keys and values {t}..{n_k - 1} (the future of query {index[-2]}) changed out"
        f"[{', '.join(map(str, index))}] from {before[index]:.6g} to {after[index]:.6g}: a query must not see "
        f"keys after its own position ({_alignment(ctx.contract).replace('_', '-')} aligned)"
    )


register(
    Property(
        name="causal_future_keys_ignored",
        summary=(
            "Changing the keys and values after a query's position leaves that query's output unchanged "
            "(the causal flag hides the future)."
        ),
        strategy=_future_example,
        applies=causal,
        calls=_changed_future,
        golden=False,  # judges only its own property: the values are matches_reference's concern
        check=_future_ignored,
    )
)
