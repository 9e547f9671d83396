"""Hypothesis strategies for score inputs, and deterministic drawing of examples.

Every strategy here generates a canonical pair ``(Q, K)`` of float64 arrays with shapes
``(..., n_q, d_k)`` and ``(..., n_k, d_k)`` that the contract can express (no batch dims for
``scores``, ``n_q = 1`` for one query, ...); :attr:`attnscore.maths.contract.QKView.pack` turns the
pair into the contract's arguments.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from attnscore.maths.families.registry import family_of
from attnscore.maths.lazy_hypothesis import composite, hnp, hypothesis, st

if TYPE_CHECKING:
    from attnscore.maths.contract import Contract

__all__ = [
    "QK",
    "Args",
    "qk_shapes",
    "random_qk",
    "perpendicular_qk",
    "draw_examples",
    "legend_sizes",
    "random_args",
    "small_sizes",
    "readable_values",
    "TINY",
    "drawing_small",
    "wide_shapes",
    "batch_dims",
]

QK = tuple[np.ndarray, np.ndarray]
Args = dict[str, np.ndarray]
T = TypeVar("T")

MAX_BATCH_DIMS = 2
SMALL_SIZE = 2
"""The largest size :func:`small_sizes` lets :func:`qk_shapes` and :func:`legend_sizes` draw."""

WIDE_EXTRA_QUERIES = 2
"""How many more queries than keys the wide shape ``"queries"`` draws (``n_q = n_k + 2``)."""
WIDE_HEADS = (4, 2)
"""``(h_q, h_kv)`` that the wide shape ``"heads"`` draws for grouped-query heads."""
WIDE_SHAPES = ("queries", "heads")
"""The wide shapes :func:`small_sizes` can draw (:func:`wide_shapes`)."""

_SMALL: contextvars.ContextVar[bool] = contextvars.ContextVar("attnscore_small_sizes", default=False)
_WIDE: contextvars.ContextVar[str] = contextvars.ContextVar("attnscore_wide_shape", default="")


@contextlib.contextmanager
def small_sizes(wide: str = "") -> Iterator[None]:
    """Within it, :func:`qk_shapes` and :func:`legend_sizes` draw every size (``n_q``, ``n_k``,
    ``d_k``, each legend symbol; grouped-query heads ``h_kv`` at most :data:`SMALL_SIZE` and
    ``h_q`` at most that many per KV head) at most :data:`SMALL_SIZE` (never below a strategy's
    own minimum) and at most one batch dim of at most that size: the same strategies, drawing the
    smallest inputs they can make. Sizes a strategy draws itself (a window, a cache length) are
    its own. Shrinking in grading draws such inputs
    (:mod:`attnscore.check.small_inputs`); graded cases never do.

    ``wide`` (one of :data:`WIDE_SHAPES`) reaches a shape bugs hide in that the cap leaves out:
    ``"queries"`` draws ``n_q = n_k + 2`` (:data:`WIDE_EXTRA_QUERIES`: bottom-right causal with its
    first two queries fully masked), ``"heads"`` grouped-query heads ``h_q = 4`` over ``h_kv = 2``
    (:data:`WIDE_HEADS`: grouping tells ``h0 h0 h1 h1`` from ``h0 h1 h0 h1``); every other size as
    capped. :func:`wide_shapes` says which a contract has.

    Raises:
        ValueError: ``wide`` is not ``""`` or one of :data:`WIDE_SHAPES`.
    """
    if wide and wide not in WIDE_SHAPES:
        raise ValueError(f"wide: expected one of {', '.join(WIDE_SHAPES)} (or empty), found {wide!r}")
    token = _SMALL.set(True)
    wide_token = _WIDE.set(wide)
    try:
        yield
    finally:
        _WIDE.reset(wide_token)
        _SMALL.reset(token)


def wide_shapes(contract: Contract) -> tuple[str, ...]:
    """The wide shapes of :data:`WIDE_SHAPES` that draw something the plain cap does not for
    ``contract``: ``"queries"`` when ``n_q`` and ``n_k`` are its legend's, drawn apart (not one query
    or one key, not tied) and no bound of it forbids ``n_q > n_k``; ``"heads"`` when ``h_q`` and
    ``h_kv`` are its legend's and not tied."""
    symbols = {sym for _, legend in contract.parameters for sym in legend}
    tied = {frozenset(pair) for pair in contract.ties}
    one = {"n_q": 1, "n_k": 1}
    queries = {"n_q", "n_k"} <= symbols and _widened(contract, one, wide="queries") != one
    heads = {"h_q", "h_kv"} <= symbols and frozenset({"h_q", "h_kv"}) not in tied
    return tuple(name for name, has in zip(WIDE_SHAPES, (queries, heads), strict=True) if has)


def _widened(
    contract: Contract, sizes: dict[str, Any], min_size: int = 1, max_size: int | None = None, wide: str | None = None
) -> dict[str, Any]:
    """``sizes`` as the wide shape ``wide`` (default: the one :func:`small_sizes` draws now) has them:
    ``n_q = n_k + 2`` (``n_k`` lowered where ``max_size`` would be passed; unchanged where a bound of
    the contract, ``n_q <= n_k``, or a tie forbids it), or grouped heads ``h_q = 4``, ``h_kv = 2``."""
    wide = _WIDE.get() if wide is None else wide
    tied = {frozenset(pair) for pair in contract.ties}
    sizes = dict(sizes)
    if wide == "queries" and "n_q" in sizes and "n_k" in sizes and frozenset({"n_q", "n_k"}) not in tied:
        if contract.single_query or contract.single_key:
            return sizes
        top = sizes["n_k"] if max_size is None else min(sizes["n_k"], max_size - WIDE_EXTRA_QUERIES)
        widened = {**sizes, "n_k": top, "n_q": top + WIDE_EXTRA_QUERIES}
        if top >= min_size and all(bound.holds(widened) for bound in contract.bounds):
            sizes = widened
    if wide == "heads" and "h_q" in sizes and "h_kv" in sizes and frozenset({"h_q", "h_kv"}) not in tied:
        sizes["h_q"], sizes["h_kv"] = WIDE_HEADS
    return sizes


def _upper(bound: int, low: int = 1) -> int:
    """``bound`` as the drawing is capped now (:func:`small_sizes`), never below ``low``."""
    return max(low, min(bound, SMALL_SIZE)) if _SMALL.get() else bound


def drawing_small() -> bool:
    """Whether drawing is capped now (inside :func:`small_sizes`): a strategy that draws sizes of its
    own (a window, a sequence length just past a tile) draws its smallest ones."""
    return _SMALL.get()


def batch_dims(draw: Callable[..., Any], contract: Contract | None = None) -> tuple[int, ...]:
    """Draw the leading (batch, head) dims of an input: up to :data:`MAX_BATCH_DIMS` of them, each
    of size 1 to 3; exactly ``len(contract.leading)`` of them when the spec names its leading dims
    (:attr:`attnscore.maths.contract.Contract.leading`: ``[batch, n_q, d_k]`` is always 3-D)."""
    small = _SMALL.get()
    leading = contract.leading if contract is not None else None
    if leading is not None:
        fixed = dict(contract.fixed_sizes) if contract is not None else {}
        return tuple(fixed[d] if d in fixed else draw(st.integers(1, _upper(3))) for d in leading)
    return tuple(draw(st.lists(st.integers(1, _upper(3)), max_size=1 if small else MAX_BATCH_DIMS)))


@composite
def qk_shapes(
    draw: Callable[..., Any], contract: Contract, min_d_k: int = 1, max_d_k: int = 8
) -> tuple[tuple[int, ...], int, int, int]:
    """Draw ``(batch, n_q, n_k, d_k)`` that ``contract`` can express."""
    batch = batch_dims(draw, contract) if contract.batched else ()
    n_q = 1 if contract.single_query else draw(st.integers(1, _upper(5)))
    n_k = 1 if contract.single_key else draw(st.integers(1, _upper(6)))
    d_k = draw(st.integers(min_d_k, _upper(max_d_k, min_d_k)))
    n_q, n_k = (_widened(contract, {"n_q": n_q, "n_k": n_k})[s] for s in ("n_q", "n_k"))  # wide: n_q = n_k + 2
    if contract.ties:  # a spec's tied symbols (e.g. n_k = n_q for a square kernel) take one size
        sizes = {"n_q": n_q, "n_k": n_k, "d_k": d_k}
        for symbol, same_as in contract.ties:
            if symbol in sizes and same_as in sizes:
                sizes[symbol] = sizes[same_as]
        n_q, n_k, d_k = sizes["n_q"], sizes["n_k"], sizes["d_k"]
    return batch, n_q, n_k, d_k


def _values(max_value: float) -> st.SearchStrategy[float]:
    """Finite float32-representable values in ``[-max_value, max_value]`` (the bound rounded inwards)."""
    bound = np.float32(max_value)
    if float(bound) > max_value:
        bound = np.nextafter(bound, np.float32(0))
    m = float(bound)
    return st.floats(-m, m, allow_nan=False, allow_subnormal=False, width=32)


TINY = 2.0**-10
"""Drawn values below ``min(TINY, TINY · max_value)`` in magnitude are drawn as 0 (:func:`readable_values`)."""


def readable_values(values: Any, max_value: float) -> np.ndarray:
    """``values`` (drawn by :func:`_values`) as a float64 array, magnitudes below
    ``min(TINY, TINY · max_value)`` set to 0 (zeros keep their sign).

    Hypothesis likes the smallest normal float32 (``1.1754944e-38``) and its neighbours: subnormal or
    zero once cast to float16, unreadable in a counterexample, and no value-checking property is about
    them (a property about underflow draws its own inputs). Applied after drawing, so the draws
    themselves (and every other value) stay as they were.
    """
    arr = np.array(values, dtype=np.float64)
    tiny = min(TINY, TINY * float(max_value))
    arr[(np.abs(arr) < tiny) & (arr != 0)] = 0.0
    return arr


@composite
def random_qk(draw: Callable[..., Any], contract: Contract, max_value: float = 10.0) -> QK:
    """Queries and keys with arbitrary finite values in ``[-max_value, max_value]``."""
    batch, n_q, n_k, d_k = draw(qk_shapes(contract))
    q_vals = draw(
        st.lists(
            _values(max_value),
            min_size=int(np.prod(batch, dtype=int)) * n_q * d_k,
            max_size=int(np.prod(batch, dtype=int)) * n_q * d_k,
        )
    )
    k_vals = draw(
        st.lists(
            _values(max_value),
            min_size=int(np.prod(batch, dtype=int)) * n_k * d_k,
            max_size=int(np.prod(batch, dtype=int)) * n_k * d_k,
        )
    )
    Q = readable_values(q_vals, max_value).reshape(*batch, n_q, d_k)
    K = readable_values(k_vals, max_value).reshape(*batch, n_k, d_k)
    return Q, K


def _not_parallel(q: np.ndarray, v: np.ndarray) -> bool:
    """Whether ``v`` has a component perpendicular to ``q`` (integer vectors, so exactly)."""
    return bool(((q @ q) * v - (q @ v) * q).any())


@composite
def perpendicular_qk(draw: Callable[..., Any], contract: Contract, max_value: float = 3.0) -> QK:
    """Keys exactly perpendicular to every query (small integers, so ``Q Kᵀ`` is exactly 0).

    Per batch item, the queries are non-zero multiples of one integer vector ``q`` and each key
    is ``(q·q) r − (q·r) q`` for an integer vector ``r`` not parallel to ``q``: a non-zero key
    with ``q · k = 0`` exactly, and usually with every coordinate non-zero.
    """
    batch, n_q, n_k, d_k = draw(qk_shapes(contract, min_d_k=2, max_d_k=6))
    m = max(1, int(max_value))
    coord = st.integers(-m, m)
    vector = st.lists(coord, min_size=d_k, max_size=d_k).map(lambda v: np.array(v, dtype=np.int64))
    Qs, Ks = [], []
    for _ in range(int(np.prod(batch, dtype=int))):
        q = draw(vector.filter(lambda v: bool(v.any())))
        multiples = draw(
            st.lists(st.integers(1, m).flatmap(lambda c: st.sampled_from([c, -c])), min_size=n_q, max_size=n_q)
        )
        keys = []
        for _ in range(n_k):
            r = draw(vector.filter(functools.partial(_not_parallel, q)))
            keys.append((q @ q) * r - (q @ r) * q)
        Qs.append(np.outer(multiples, q))
        Ks.append(np.stack(keys))
    Q = np.stack(Qs).astype(np.float64).reshape(*batch, n_q, d_k)
    K = np.stack(Ks).astype(np.float64).reshape(*batch, n_k, d_k)
    return Q, K


@contextlib.contextmanager
def _without_local_constants() -> Iterator[None]:
    """Stop hypothesis from mixing in literals mined from the loaded "local" modules.

    Hypothesis (>= 6.13x) sometimes draws constants found in the source of modules it considers
    local (anything outside site-packages: an editable install, the course's own files). Which
    modules happen to be imported would then change the generated cases, so the same submission
    could get different cases from ``attnscore grade`` and from a script. Only the global
    constants stay. Private API, hence the guards.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - other hypothesis versions
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    if original is None or not hasattr(providers, "Constants"):  # pragma: no cover
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None:
        cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        if cache is not None:
            cache.cache.clear()


def draw_examples(strategy: st.SearchStrategy[T], count: int, seed: int) -> list[T]:
    """Draw up to ``count`` examples from ``strategy``, the same ones for the same ``seed``.

    Uses hypothesis's generation phase with a fixed seed and no example database, so grading
    is derandomised: the same spec, property and seed always give the same inputs (for the
    same hypothesis version, which the report records).
    """
    drawn: list[T] = []

    @hypothesis.settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
        derandomize=False,
        print_blob=False,
    )
    @hypothesis.seed(seed)
    @hypothesis.given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    with _without_local_constants():
        collect()
    return drawn[:count]


@composite
def legend_sizes(draw: Callable[..., Any], contract: Contract, max_size: int = 6, min_size: int = 1) -> dict[str, Any]:
    """Draw one size per legend symbol of ``contract`` (``"..."`` -> a tuple of batch dims)."""
    symbols = {sym for _, legend in contract.parameters for sym in legend}
    sizes: dict[str, Any] = {"...": batch_dims(draw, contract)}
    for sym in sorted(symbols - {"..."}):
        sizes[sym] = draw(st.integers(min_size, _upper(max(min_size, max_size), min_size)))
    if "h_q" in sizes and "h_kv" in sizes:  # grouped-query heads: h_q is a multiple of h_kv
        sizes["h_kv"] = draw(st.integers(1, _upper(3)))
        sizes["h_q"] = sizes["h_kv"] * draw(st.integers(1, _upper(3)))
    sizes = _widened(contract, sizes, min_size, max_size)
    sizes.update((sym, size) for sym, size in contract.fixed_sizes if sym in sizes)  # a spec's function.sizes
    return sizes


def _array(draw: Callable[..., Any], shape: tuple[int, ...], max_value: float, is_bool: bool) -> np.ndarray:
    if is_bool:
        return draw(hnp.arrays(np.bool_, shape, elements=st.booleans()))
    return readable_values(draw(hnp.arrays(np.float64, shape, elements=_values(max_value))), max_value)


def _additive_mask(draw: Callable[..., Any], shape: tuple[int, ...], max_value: float) -> np.ndarray:
    """A float mask added to the scores (SDPA's float ``attn_mask``), ``shape`` ``(..., n_q, n_k)``:
    finite biases in ``±max_value`` (negative and positive: they shift the scores), about one entry
    in four ``-inf`` (the key is masked out), and about one row in five all ``-inf`` (a query with no
    key left, whose output is the zero vector as PyTorch 2.5+ gives)."""
    entry = st.one_of(_values(max_value), _values(max_value), _values(max_value), st.just(-np.inf))
    mask = readable_values(draw(hnp.arrays(np.float64, shape, elements=entry)), max_value)
    if mask.ndim >= 1 and mask.size:
        rows = mask.reshape(-1, shape[-1])
        blank = draw(st.lists(st.integers(0, 4), min_size=rows.shape[0], max_size=rows.shape[0]))
        rows[np.array(blank) == 0] = -np.inf
        mask = rows.reshape(shape)
    return mask


def _mask_shape(
    draw: Callable[..., Any], contract: Contract, legend: tuple[str, ...], sizes: dict[str, Any], name: str = ""
) -> tuple[int, ...]:
    """The shape of mask ``name`` with legend ``("...", n_q, n_k)``.

    For attention, whose contract accepts a mask of the scores' full rank with size-1 dims that
    broadcast, or of shape ``(n_q, n_k)`` shared by every batch item and head, all three forms are
    drawn when there are batch dims (code that indexes ``mask[b]`` fails on a shared one), unless
    the spec states that the mask comes in full shape (:attr:`Contract.full_masks`); other
    contracts take a mask of the scores' own shape.
    """
    rest = tuple(sizes[sym] for sym in legend[1:])
    batch: tuple[int, ...] = sizes["..."]
    if not family_of(contract).SHARED_MASKS or not batch or name in contract.full_masks:
        return batch + rest
    form = draw(st.sampled_from(("full", "shared", "broadcast")))
    if form == "shared":
        return rest
    if form == "broadcast":
        return tuple(draw(st.sampled_from((b, 1))) for b in batch) + rest
    return batch + rest


@composite
def random_args(
    draw: Callable[..., Any], contract: Contract, max_value: float = 10.0, sizes: dict[str, Any] | None = None
) -> Args:
    """Arguments for ``contract`` with shapes from its legend and finite values in ``±max_value``.

    Bool parameters (masks) get random True/False entries (True = keep); an attention mask also
    comes shared by the batch (``(n_q, n_k)``) or with size-1 batch dims (see :func:`_mask_shape`).
    Additive float masks (``contract.additive_parameters``) get finite biases, ``-inf`` entries and
    whole rows of ``-inf`` (see :func:`_additive_mask`).
    Integer parameters (``contract.int_parameters``: ``cu_seqlens``, ``key_lengths``) come from the
    contract's own rule (:meth:`attnscore.maths.contract.Contract.integers`), which also fixes the
    sizes they constrain (``total_q``, ``total_k``) before the float inputs are drawn.
    A mask that keeps everything is not forced here (it would make the diagnosis's confirmation
    inputs unable to tell a mask ignored from another mistake); ``output_not_aliased`` makes that
    call itself.
    """
    sizes = sizes if sizes is not None else draw(legend_sizes(contract))
    sizes, integers = contract.integers(lambda lo, hi: draw(st.integers(lo, hi)), sizes)
    args: Args = {}
    for name, legend in contract.parameters:
        if name in integers:  # int32 offsets or lengths, drawn with the sizes they fit
            args[name] = integers[name]
            continue
        is_bool = name in contract.bool_parameters
        shape: tuple[int, ...] = ()
        if is_bool and legend[:1] == ("...",):
            shape = _mask_shape(draw, contract, legend, sizes, name)
        else:
            shape = (1,) * dict(contract.unit_dims).get(name, 0)
            for sym in legend:
                shape += sizes["..."] if sym == "..." else (sizes[sym],)
        if name in contract.additive_parameters:
            args[name] = _additive_mask(draw, shape, max_value)
        else:
            args[name] = _array(draw, shape, max_value, is_bool)
    return args


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from a SHA-256 of the parts (stable across runs and machines)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big")
