"""The property registry: named, documented checks with their input strategies.

A spec lists properties by name (``properties: - name: perpendicular_keys_score_zero``) with
points and a student-facing statement; the behaviour lives here, in Python, never in YAML.

A property draws *examples* from a hypothesis strategy (see :mod:`attnscore.strategies`). Each
example becomes one or more *calls* of the implementation (``calls``): a relational property
such as "permuting keys permutes scores" calls ``f(Q, K)`` and ``f(Q, P K)``. Every call is
compared with the float64 golden value under the spec's tolerance (unless ``golden`` is False),
and then ``check`` looks at all the example's outputs together and returns a failure message or
None. On failure ``hint`` may add a sentence in the property's own terms.

Properties that look at the call itself (inputs mutated, output aliasing an input) need a runner
that reports ``last_inspection`` (the in-process runner does); with any other runner they check
values only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from attnscore.contracts import Contract
from attnscore.outputs import Received
from attnscore.strategies import legend_sizes, perpendicular_qk, random_args, random_qk

__all__ = ["Property", "CheckContext", "PROPERTIES", "get_property", "register", "applicable_properties"]

Args = dict[str, np.ndarray]


@dataclass(frozen=True)
class CheckContext:
    """What a property's ``check`` sees for one example.

    Attributes:
        outputs: the plain results of the example's calls, in call order.
        args: the arguments of those calls (cast to the tested dtype).
        goldens, allowed: the float64 golden value and allowed error of each call.
        inspections: per call, the runner's ``last_inspection`` (``{"mutated": [...], "aliased": [...]}``)
            or None when the runner cannot inspect calls.
        dtype, device: the tested dtype and device.
        contract: the spec's contract.
        example: the drawn example the calls were made from.
    """

    outputs: Sequence[Received]
    args: Sequence[Args]
    goldens: Sequence[np.ndarray]
    allowed: Sequence[np.ndarray]
    inspections: Sequence[dict[str, list[str]] | None]
    dtype: str
    device: str
    contract: Contract
    example: Any = None

    def values(self, i: int) -> np.ndarray:
        return self.outputs[i].array.astype(np.float64)


def _no_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return None


@dataclass(frozen=True)
class Property:
    """A registered property.

    Attributes:
        name: registry name, used in specs.
        summary: what it checks, for documentation and as the default statement.
        strategy: ``(contract, max_value) -> strategy of examples``.
        applies: ``contract -> bool``: whether the property makes sense for the contract.
        calls: ``(contract, example) -> list of argument dicts``; default: the example is the arguments.
        check: ``CheckContext -> str | None`` over all of an example's outputs, or None.
        golden: whether every call is also compared with the golden value.
        hint: ``(got, golden) -> str | None``: a sentence explaining a failing output.
        diagnosis: id of the catalogue mistake to report when ``check`` fails (see :mod:`attnscore.mistakes`).
        default_max_value: default bound on input magnitudes.
    """

    name: str
    summary: str
    strategy: Callable[[Contract, float], st.SearchStrategy[Any]]
    applies: Callable[[Contract], bool] = lambda c: True
    calls: Callable[[Contract, Any], list[Args]] = lambda c, ex: [ex]
    check: Callable[[CheckContext], str | None] | None = None
    golden: bool = True
    hint: Callable[[np.ndarray, np.ndarray], str | None] = _no_hint
    diagnosis: str | None = None
    default_max_value: float = 10.0
    tags: tuple[str, ...] = field(default_factory=tuple)


PROPERTIES: dict[str, Property] = {}


def register(prop: Property) -> Property:
    """Add ``prop`` to the registry; its name must be new."""
    if prop.name in PROPERTIES:
        raise ValueError(f"property {prop.name!r} is already registered")
    PROPERTIES[prop.name] = prop
    return prop


def get_property(name: str) -> Property:
    """Return the property called ``name``; raise KeyError naming the known ones."""
    try:
        return PROPERTIES[name]
    except KeyError:
        raise KeyError(f"unknown property {name!r}; known: {', '.join(sorted(PROPERTIES))}") from None


def applicable_properties(contract: Contract) -> list[str]:
    """Names of the registered properties that apply to ``contract``."""
    return [p.name for p in PROPERTIES.values() if p.applies(contract)]


# --------------------------------------------------------------------------------------------
# helpers


def _close(a: np.ndarray, b: np.ndarray, allowed: np.ndarray) -> bool:
    """Equal shapes, same NaN/inf placement, finite entries within ``allowed``."""
    if a.shape != b.shape:
        return False
    with np.errstate(invalid="ignore"):
        same_nonfinite = (np.isnan(a) == np.isnan(b)) & (np.isinf(a) == np.isinf(b))
        if not same_nonfinite.all():
            return False
        fin = np.isfinite(a) & np.isfinite(b)
        inf_ok = np.where(np.isinf(a), a == b, True)
        return bool(inf_ok.all() and (np.abs(np.where(fin, a - b, 0.0)) <= allowed).all())


def _is_qk(c: Contract) -> bool:
    return c.is_qk_view


def _qk_args(c: Contract, Q: np.ndarray, K: np.ndarray) -> Args:
    assert c.pack is not None  # only used for Q Kᵀ views
    return c.pack(Q, K)


def _qk_strategy(
    strategy: Callable[..., st.SearchStrategy[Any]],
) -> Callable[[Contract, float], st.SearchStrategy[Any]]:
    return lambda c, m: strategy(c, m).map(lambda qk: _qk_args(c, *qk))


def _ints(max_value: float) -> st.SearchStrategy[int]:
    m = max(1, int(max_value))
    return st.integers(-m, m)


@st.composite
def _int_qk(
    draw: Callable[..., Any], c: Contract, max_value: float, min_batch_items: int = 0, heads: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Small-integer (exact in every dtype) Q, K the contract can express."""
    batch: tuple[int, ...] = ()
    if c.batched:
        batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        if min_batch_items or heads:
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


def _scale(c: Contract, d_k: int) -> float:
    return 1.0 / np.sqrt(d_k) if c.scale == "sqrt" else 1.0


# --------------------------------------------------------------------------------------------
# any contract

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
        check=_not_mutated,
        diagnosis="inputs_mutated",
    )
)
register(
    Property(
        name="output_not_aliased",
        summary="The output is a new tensor that shares no memory with an input.",
        strategy=lambda c, m: c.arguments(m),
        check=_not_aliased,
    )
)
register(
    Property(
        name="dtype_device_follow_inputs",
        summary="The output is a tensor with the inputs' dtype and on the inputs' device.",
        strategy=lambda c, m: c.arguments(m),
        check=_dtype_device,
    )
)
register(
    Property(
        name="deterministic",
        summary="Calling twice with the same inputs gives bit-for-bit the same output.",
        strategy=lambda c, m: c.arguments(m),
        calls=lambda c, ex: [ex, ex],
        check=_deterministic,
    )
)

# --------------------------------------------------------------------------------------------
# Q Kᵀ views (score, scores, score_matrix, scaled_score_matrix)


def _perpendicular_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return "every key here is perpendicular to the queries (q · k = 0), so every score must be 0"


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
        applies=_is_qk,
    )
)
register(
    Property(
        name="perpendicular_keys_score_zero",
        summary="A key perpendicular to the query scores exactly zero.",
        strategy=_qk_strategy(perpendicular_qk),
        applies=_is_qk,
        hint=_perpendicular_hint,
        default_max_value=3.0,
    )
)
register(
    Property(
        name="scores_not_normalised",
        summary="Raw scores are not normalised: they can be negative and need not sum to one.",
        strategy=_not_normalised_inputs,
        applies=_is_qk,
        hint=_normalisation_hint,
    )
)


@st.composite
def _parallel_qk(draw: Callable[..., Any], c: Contract, max_value: float, sign: int) -> tuple[np.ndarray, np.ndarray]:
    Q, K = draw(_int_qk(c, max_value))
    q = Q[..., :1, :]  # one query per batch item, repeated
    q = np.where(np.abs(q).sum(axis=-1, keepdims=True) == 0, 1.0, q)
    factors = np.array(draw(st.lists(st.integers(1, 3), min_size=K.shape[-2], max_size=K.shape[-2])), np.float64)
    K = sign * factors[:, None] * q  # (..., n_k, d_k)
    return np.broadcast_to(q, Q.shape).copy(), K


def _norms(ctx: CheckContext) -> np.ndarray:
    c = ctx.contract
    assert c.to_qk is not None and c.from_scores is not None
    Q, K = c.to_qk(ctx.args[0])
    prod = np.linalg.norm(Q, axis=-1)[..., :, None] * np.linalg.norm(K, axis=-1)[..., None, :]
    return c.from_scores(prod) * _scale(c, Q.shape[-1])


def _norm_product(ctx: CheckContext) -> str | None:
    got, want = ctx.values(0), _norms(ctx)
    if got.shape == want.shape and not _close(got, want, ctx.allowed[0] + 1e-9 * np.abs(want)):
        return "a key parallel to the query must score |q|·|k|" + (" / √d_k" if ctx.contract.scale == "sqrt" else "")
    return None


def _negative(ctx: CheckContext) -> str | None:
    got = ctx.values(0)
    if got.shape == ctx.goldens[0].shape and not (got < 0).all():
        return "a key pointing exactly away from the query must get a negative score"
    return None


def _cauchy_schwarz(ctx: CheckContext) -> str | None:
    got, bound = ctx.values(0), _norms(ctx)
    if got.shape == bound.shape and (np.abs(got) > bound * (1 + 1e-9) + ctx.allowed[0]).any():
        return "|score| exceeds |q|·|k|" + (" / √d_k" if ctx.contract.scale == "sqrt" else "") + " (Cauchy–Schwarz)"
    return None


register(
    Property(
        name="parallel_keys_score_norm_product",
        summary="A key parallel to the query (same direction) scores |q|·|k| (divided by √d_k when scaled).",
        strategy=lambda c, m: _parallel_qk(c, m, 1).map(lambda qk: _qk_args(c, *qk)),
        applies=_is_qk,
        check=_norm_product,
        default_max_value=3.0,
    )
)
register(
    Property(
        name="anti_aligned_keys_score_negative",
        summary="A key pointing exactly away from the query gets a negative score (-|q|·|k|).",
        strategy=lambda c, m: _parallel_qk(c, m, -1).map(lambda qk: _qk_args(c, *qk)),
        applies=_is_qk,
        check=_negative,
        default_max_value=3.0,
        hint=lambda g, e: "scores of anti-aligned keys are negative; do not take absolute values or normalise",
    )
)
register(
    Property(
        name="cauchy_schwarz_bound",
        summary="No score exceeds |q|·|k| in magnitude (Cauchy–Schwarz; divided by √d_k when scaled).",
        strategy=_qk_strategy(random_qk),
        applies=_is_qk,
        check=_cauchy_schwarz,
    )
)


@st.composite
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
    if not _close(o3, a * o1 + b * o2, allowed):
        which = "queries" if ctx.example[6] == 0 else "keys"
        return f"f at a·x + b·y differs from a·f(x) + b·f(y) (a={a}, b={b}, x and y {which}): scores are linear"
    return None


register(
    Property(
        name="linear_in_query",
        summary="Scores are linear in the query: f(a·q1 + b·q2, K) = a·f(q1, K) + b·f(q2, K).",
        strategy=lambda c, m: _linear(c, m, 0),
        applies=_is_qk,
        calls=_linear_calls,
        check=_linear_check,
        default_max_value=3.0,
    )
)
register(
    Property(
        name="linear_in_key",
        summary="Scores are linear in the keys: f(Q, a·K1 + b·K2) = a·f(Q, K1) + b·f(Q, K2).",
        strategy=lambda c, m: _linear(c, m, 1),
        applies=_is_qk,
        calls=_linear_calls,
        check=_linear_check,
        default_max_value=3.0,
    )
)


@st.composite
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
    if not _close(o2, want, allowed):
        return (
            "permuting the keys must permute the score columns the same way"
            if axis == "keys"
            else "permuting the queries must permute the score rows the same way"
        )
    return None


register(
    Property(
        name="permuting_keys_permutes_scores",
        summary="Reordering the keys reorders the scores the same way: f(Q, P K) = f(Q, K) Pᵀ.",
        strategy=lambda c, m: _permuted(c, m, "keys"),
        applies=lambda c: _is_qk(c) and not c.single_key,
        calls=_perm_calls,
        check=_perm_check,
    )
)
register(
    Property(
        name="permuting_queries_permutes_rows",
        summary="Reordering the queries reorders the rows of the scores the same way: f(P Q, K) = P f(Q, K).",
        strategy=lambda c, m: _permuted(c, m, "queries"),
        applies=lambda c: _is_qk(c) and not c.single_query,
        calls=_perm_calls,
        check=_perm_check,
    )
)


@st.composite
def _batched_qk(draw: Callable[..., Any], c: Contract, max_value: float, heads: bool = False) -> tuple[Any, ...]:
    Q, K = draw(_int_qk(c, max_value, min_batch_items=2, heads=heads))
    i = draw(st.integers(0, Q.shape[0] - 1))
    return Q, K, i


def _batch_calls(c: Contract, ex: tuple[Any, ...]) -> list[Args]:
    Q, K, i = ex
    return [_qk_args(c, Q, K), _qk_args(c, Q[i], K[i])]


def _batch_check(what: str) -> Callable[[CheckContext], str | None]:
    def check(ctx: CheckContext) -> str | None:
        o1, o2 = ctx.values(0), ctx.values(1)
        i = ctx.example[2]
        if o1.ndim < 1 or o1.shape[1:] != o2.shape:
            return None
        if not _close(o1[i], o2, ctx.allowed[0][i] + ctx.allowed[1]):
            return what
        return None

    return check


register(
    Property(
        name="batch_items_independent",
        summary="Each batch item is scored on its own: f(Q, K)[b] = f(Q[b], K[b]).",
        strategy=lambda c, m: _batched_qk(c, m),
        applies=lambda c: _is_qk(c) and c.batched,
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
        applies=lambda c: _is_qk(c) and c.scale == "sqrt",
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
    if not _close(o, np.swapaxes(o, -1, -2), ctx.allowed[0] + np.swapaxes(ctx.allowed[0], -1, -2)):
        return "scoring a set of vectors against itself must give a symmetric matrix (x_i · x_j = x_j · x_i)"
    return None


register(
    Property(
        name="self_scores_symmetric",
        summary="Scoring vectors against themselves gives a symmetric matrix: f(X, X) = f(X, X)ᵀ.",
        strategy=lambda c, m: random_qk(c, m).map(lambda qk: qk[0]),
        applies=lambda c: _is_qk(c) and not c.single_query and not c.single_key,
        calls=_symmetric_calls,
        check=_symmetric_check,
    )
)
register(
    Property(
        name="scaled_is_raw_over_sqrt_dk",
        summary="Scaled scores equal the raw scores Q Kᵀ divided by √d_k (d_k = the per-head key width).",
        strategy=lambda c, m: _int_qk(c, m).map(lambda qk: _qk_args(c, *qk)),
        applies=lambda c: _is_qk(c) and c.scale == "sqrt",
        default_max_value=3.0,
        hint=lambda g, e: (
            "your scores are off by a constant factor: divide Q Kᵀ by √d_k exactly once"
            if g.shape == e.shape
            and np.isfinite(g).all()
            and np.abs(e).max() > 0
            and np.allclose(g, e * (np.vdot(g, e) / np.vdot(e, e)), rtol=1e-4, atol=1e-6)
            else None
        ),
    )
)

# --------------------------------------------------------------------------------------------
# masks and weights


def _is_weights(c: Contract) -> bool:
    return c.kind == "weights"


@st.composite
def _logits_and_mask(
    draw: Callable[..., Any],
    c: Contract,
    max_value: float,
    *,
    offset: float = 0.0,
    masked_junk: bool = False,
    nan_kept: bool = False,
    full_row: str = "some",
    integer: bool = False,
) -> Args:
    sizes = draw(legend_sizes(c))
    args = draw(random_args(c, max_value, sizes=sizes))
    S, mask = args["S"], args["mask"].copy()
    if integer:
        S = np.round(S)
    if full_row == "none":
        mask[..., 0] = True  # every row keeps a key
    elif full_row == "one":
        mask.reshape(-1, mask.shape[-1])[0] = False  # the first row is fully masked
    S = S + offset
    if masked_junk:
        junk = np.array([np.nan, np.inf, -np.inf, 1e4, -1e4])
        picks = draw(st.lists(st.integers(0, 4), min_size=S.size, max_size=S.size))
        S = np.where(mask, S, junk[np.array(picks, dtype=int)].reshape(S.shape))
    if nan_kept:
        flat_keep = np.flatnonzero(mask)
        if flat_keep.size:
            j = flat_keep[draw(st.integers(0, flat_keep.size - 1))]
            S = S.copy()
            S.flat[j] = np.nan
    return {"S": S, "mask": mask}


def _row_sums(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    if w.shape != mask.shape:
        return None
    sums = w.sum(axis=-1)
    kept = mask.any(axis=-1)
    tol = (
        8
        * w.shape[-1]
        * {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}[ctx.dtype]
        + 1e-12
    )
    if not np.all(np.where(kept, np.abs(sums - 1.0) <= tol, True)):
        return "a row of weights with at least one kept key must sum to 1"
    return None


def _non_negative(ctx: CheckContext) -> str | None:
    w = ctx.values(0)
    if (w < 0).any():
        return "weights must never be negative"
    return None


def _shift_calls(c: Contract, ex: tuple[Args, float]) -> list[Args]:
    args, shift = ex
    return [args, {"S": args["S"] + shift, "mask": args["mask"]}]


def _shift_check(ctx: CheckContext) -> str | None:
    o1, o2 = ctx.values(0), ctx.values(1)
    if o1.shape == o2.shape and not _close(o1, o2, ctx.allowed[0] + ctx.allowed[1]):
        return "adding the same number to every logit of a row must not change the weights (softmax is shift-invariant)"
    return None


def _masked_zero(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    if w.shape == mask.shape and not np.all(np.where(mask, True, w == 0)):
        return "a masked key must get weight exactly 0, whatever its score holds (NaN and inf included)"
    return None


def _masked_neg_inf(ctx: CheckContext) -> str | None:
    out, mask = ctx.values(0), ctx.args[0]["mask"]
    if out.shape == mask.shape and not np.all(np.where(mask, True, out == -np.inf)):
        return "a masked entry must become -inf, whatever it held before (NaN and inf included)"
    return None


def _fully_masked_zero(ctx: CheckContext) -> str | None:
    w, mask = ctx.values(0), ctx.args[0]["mask"]
    rows = ~mask.any(axis=-1)
    if w.shape == mask.shape and rows.any() and not (w[rows] == 0).all():
        return "a fully masked row must be all zeros (the stated convention), not NaN"
    return None


register(
    Property(
        name="weights_sum_to_one",
        summary="Each row of weights with at least one kept key sums to 1.",
        strategy=lambda c, m: _logits_and_mask(c, m, full_row="none"),
        applies=_is_weights,
        check=_row_sums,
    )
)
register(
    Property(
        name="weights_non_negative",
        summary="Every weight is >= 0.",
        strategy=lambda c, m: _logits_and_mask(c, m),
        applies=_is_weights,
        check=_non_negative,
    )
)
register(
    Property(
        name="softmax_shift_invariant",
        summary="Adding a constant to every logit leaves the weights unchanged.",
        strategy=lambda c, m: st.tuples(_logits_and_mask(c, m, integer=True), st.integers(-50, 50).map(float)),
        applies=_is_weights,
        calls=_shift_calls,
        check=_shift_check,
    )
)
register(
    Property(
        name="masked_positions_zero_weight",
        summary="Masked keys get weight 0 whatever their logits hold (NaN, inf, huge values).",
        strategy=lambda c, m: _logits_and_mask(c, m, masked_junk=True),
        applies=_is_weights,
        check=_masked_zero,
    )
)
register(
    Property(
        name="masked_positions_neg_inf",
        summary="Masked entries become -inf whatever they held (NaN and inf included); kept entries are unchanged.",
        strategy=lambda c, m: _logits_and_mask(c, m, masked_junk=True),
        applies=lambda c: c.kind == "mask",
        check=_masked_neg_inf,
    )
)


def _nan_propagates(ctx: CheckContext) -> str | None:
    """Masked scores: exactly the golden value (NaN stays where it was, masked entries -inf).
    Weights: in a row with a NaN at a kept key every kept weight is NaN (masked weights may be 0 or
    NaN, as the common idioms differ); the other rows match the golden value."""
    got, golden, allowed = ctx.values(0), ctx.goldens[0], ctx.allowed[0]
    if got.shape != golden.shape:
        return f"the result has shape {got.shape}, expected {golden.shape}"
    mask = np.broadcast_to(ctx.args[0]["mask"], golden.shape)
    S = np.broadcast_to(ctx.args[0]["S"], golden.shape)
    nan_rows = np.zeros(golden.shape, dtype=bool)
    if ctx.contract.kind != "mask":
        nan_rows = np.broadcast_to((np.isnan(S) & mask).any(axis=-1, keepdims=True), golden.shape)
        if not np.isnan(got[nan_rows & mask]).all():
            return "a NaN score at a kept key must make that row's kept weights NaN: do not hide it"
    rest = ~nan_rows
    g, w, a = got[rest], golden[rest], allowed[rest]
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isfinite(w), np.abs(g - w) <= a, g == w) | (np.isnan(g) & np.isnan(w))
    if not ok.all():
        where = "kept entries must keep their value (NaN stays NaN) and masked ones become -inf"
        return where if ctx.contract.kind == "mask" else "the rows without a NaN score must match the reference"
    return None


register(
    Property(
        name="nan_in_kept_position_propagates",
        summary="A NaN logit at a kept key is not hidden: the kept weights of its row are NaN.",
        strategy=lambda c, m: _logits_and_mask(c, m, nan_kept=True),
        applies=lambda c: c.kind in ("weights", "mask"),
        check=_nan_propagates,
        golden=False,
    )
)
register(
    Property(
        name="fully_masked_row_zero",
        summary="A query whose keys are all masked gets all-zero weights (convention), never NaN.",
        strategy=lambda c, m: _logits_and_mask(c, m, full_row="one"),
        applies=_is_weights,
        check=_fully_masked_zero,
        diagnosis="nan_fully_masked",
    )
)
register(
    Property(
        name="stable_for_large_logits",
        summary="Logits around 1000 give finite, correct weights (subtract the row max before exp).",
        strategy=lambda c, m: _logits_and_mask(c, m, offset=1000.0, full_row="none"),
        applies=_is_weights,
    )
)


@st.composite
def _attention_args(draw: Callable[..., Any], c: Contract, max_value: float, full_row: str = "some") -> Args:
    args = draw(random_args(c, max_value))
    mask = np.broadcast_to(args["mask"], args["mask"].shape).copy()
    if full_row == "one":
        mask.reshape(-1, mask.shape[-1])[0] = False
    args["mask"] = mask
    return args


def _attention_in_value_range(ctx: CheckContext) -> str | None:
    out, V = ctx.values(0), ctx.args[0]["V"]
    lo, hi = V.min(axis=-2, keepdims=True), V.max(axis=-2, keepdims=True)
    if out.shape[-1:] != V.shape[-1:] or out.ndim != V.ndim:
        return None
    slack = ctx.allowed[0]
    ok = (out >= np.minimum(lo, 0) - slack) & (out <= np.maximum(hi, 0) + slack)
    if not ok.all():
        return "each output is a weighted average of the values, so it must lie between their min and max"
    return None


register(
    Property(
        name="attention_output_in_value_range",
        summary=(
            "Each output entry lies within the range of the values (a convex combination), 0 for fully masked rows."
        ),
        strategy=lambda c, m: _attention_args(c, m),
        applies=lambda c: c.kind == "attention",
        check=_attention_in_value_range,
    )
)
register(
    Property(
        name="attention_fully_masked_row_zero",
        summary="A query whose keys are all masked gets the zero vector (convention), never NaN.",
        strategy=lambda c, m: _attention_args(c, m, full_row="one"),
        applies=lambda c: c.kind == "attention",
        diagnosis="nan_fully_masked",
    )
)
