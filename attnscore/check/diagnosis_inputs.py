"""The diagnosis's own inputs: the confirmation and probe calls it makes beside a failing call.

Drawn once per spec (from its seed) and dtype, as plain data (:mod:`attnscore.check.diagnosis`
makes the implementation's calls on them, once per runner): :data:`CONFIRMATIONS` fixed random inputs
of the contract, the mistakes' own further sizes (``confirm_sizes``, ``probe_sizes``), the corners
where conventions part, and for a backward pass an upstream gradient each.

"Once per spec" means once per everything the calls are drawn and judged from (:func:`drawn_from`):
two configurations of one spec (``--sweep is_causal=true,false``, ``--keyword``, ``--where``) share
its id and version but not its contract or examples, and each gets its own calls and goldens.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.check.cases import Call, spec_call
from attnscore.maths.contract import Contract
from attnscore.maths.strategies import derive_seed
from attnscore.spec.model import Spec

__all__ = [
    "CONFIRMATIONS",
    "confirmation_args",
    "diagnosis_calls",
    "drawn_from",
    "random_array",
    "resized_args",
    "sized_call",
    "sized_kind",
]

CONFIRMATIONS = 3

# The legend sizes of the confirmation inputs. d_k differs from one to the next, so that no
# per-d_k scale rule (√d_k, d_k/2, 2·d_k, √(heads·d_k)) is a constant factor of the right one over
# all three, and on each of them those scales and √d_v all differ (d_k = 4, where d_k/2 = √d_k, is
# avoided); d_v != d_k; two to four heads; n_q <= n_k, so no query lacks a key under either
# causal alignment; d_a = d_k once (for the additive projection mistake that needs it). Where a
# contract names its query and key/value heads (h_q, h_kv), they are grouped: H_q = 2·H_kv, 3·H_kv
# and 2·H_kv, so that a group of query heads shares a KV head on every input (h0 h0 h1 h1 and
# h0 h1 h0 h1 differ) and a contract with only h_q has several heads.
_CONFIRMATION_SIZES: tuple[dict[str, Any], ...] = (
    {"...": (2,), "n_q": 3, "n_k": 5, "d_k": 3, "d_v": 5, "d_q": 4, "d_a": 2, "h_q": 4, "h_kv": 2},
    {"...": (3,), "n_q": 4, "n_k": 4, "d_k": 6, "d_v": 4, "d_q": 3, "d_a": 5, "h_q": 3, "h_kv": 1},
    {"...": (2, 4), "n_q": 2, "n_k": 6, "d_k": 10, "d_v": 7, "d_q": 5, "d_a": 10, "h_q": 2, "h_kv": 1},
)

# The probe input with more queries than keys (n_q = n_k + 2: a query past the last key under
# every alignment), beside the confirmation inputs' n_q <= n_k.
_MORE_QUERIES = {"n_q": 5, "n_k": 3}


# The confirmation and probe inputs of the last _KEPT (spec, dtype, kind)s, each with the spec's
# parts its key names by identity (kept alive, so that no other object takes their id).
_KEPT = 64
_INPUTS: OrderedDict[tuple[object, ...], tuple[tuple[object, ...], list[Call]]] = OrderedDict()


def drawn_from(spec: Spec, dtype: str, which: str) -> tuple[object, ...]:
    """The key of a spec's diagnosis calls: everything they are drawn and judged from. Its id and
    version (the seed), file, contract (its keywords included), tolerance and parameter names by
    value; its worked examples (the probes) and own mistakes (their sizes) by identity. Not what
    only judging reads (``set_aside``): every case of one spec shares the calls."""
    return (
        spec.id,
        spec.version,
        str(getattr(spec, "path", "")),
        spec.contract,
        spec.tolerance,
        tuple(spec.parameter_names),
        id(spec.worked_examples),
        id(spec.own_mistakes),
        dtype,
        which,
    )


def _calls(spec: Spec, dtype: str, which: str, draw: Callable[[], list[Call]]) -> list[Call]:
    """The calls ``draw`` makes for ``spec``, ``dtype`` and ``which``, drawn once (see :func:`drawn_from`)."""
    key = drawn_from(spec, dtype, which)
    kept = _INPUTS.get(key)
    if kept is None:
        kept = ((spec.worked_examples, spec.own_mistakes), draw())
        _INPUTS[key] = kept
        if len(_INPUTS) > _KEPT:
            _INPUTS.popitem(last=False)
    else:
        _INPUTS.move_to_end(key)
    return kept[1]


def _additive_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A float mask added to the scores: biases in ±[0.25, 2], about one entry in five exactly 0 and
    one in four ``-inf`` in every other row. Every row keeps a finite, non-zero entry; with two or
    more keys the even rows (counted over all leading dims) have a ``-inf`` entry and the odd ones
    none, so that reading it as bool, ignoring it or subtracting it all differ, and subtracting it
    (``-(-inf) = +inf``) leaves the odd rows finite: the confirmation of a mistake that depends on
    the ``-inf`` entries sees rows with and without them."""
    mask = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.25, 2.0, size=shape)
    draw = rng.random(shape)
    mask[draw < 0.2] = 0.0
    mask[draw > 0.75] = -np.inf
    if len(shape) >= 1 and shape[-1] >= 1:
        rows = mask.reshape(-1, shape[-1])
        for number, row in enumerate(rows):
            j = rng.integers(shape[-1])
            if shape[-1] >= 2 and number % 2 == 1:  # an odd row: no -inf
                blank = ~np.isfinite(row)
                row[blank] = rng.choice([-1.0, 1.0], size=int(blank.sum())) * rng.uniform(0.25, 2.0, int(blank.sum()))
            if not np.isfinite(row[j]) or row[j] == 0.0:
                row[j] = rng.uniform(0.25, 2.0)
            if shape[-1] >= 2 and number % 2 == 0 and np.isfinite(row).all():
                row[(j + 1 + rng.integers(shape[-1] - 1)) % shape[-1]] = -np.inf
        mask = rows.reshape(shape)
    return mask


def random_array(rng: np.random.Generator, shape: tuple[int, ...], is_bool: bool) -> np.ndarray:
    """Random non-zero values in ±[0.25, 2] (no ties, no zeros); a mask keeps about 60% of the
    keys, and in every row at least one key and (with two or more keys) masks at least one."""
    if not is_bool:
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.25, 2.0, size=shape)
    mask = rng.random(shape) < 0.6
    if len(shape) >= 1 and shape[-1] >= 1:
        rows = mask.reshape(-1, shape[-1])
        for row in rows:
            row[rng.integers(shape[-1])] = True
            if shape[-1] >= 2 and row.all():
                row[rng.integers(shape[-1])] = False
                if not row.any():
                    row[0] = True
        mask = rows.reshape(shape)
    return mask


def _pick(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` from ``rng`` (an integer parameter's rule, :meth:`Contract.integers`)."""
    return int(rng.integers(lo, hi + 1))


def _leading_sizes(contract: Contract, batch: tuple[int, ...]) -> tuple[int, ...]:
    """``batch`` with exactly as many dims as the spec names (:attr:`Contract.leading`: its inputs
    always have that rank): cut, or padded with 2s; ``batch`` itself for the open ``...``."""
    if contract.leading is None:
        return batch
    count = len(contract.leading)
    return batch[:count] + (2,) * max(0, count - len(batch))


def _sized_args(spec: Spec, sizes: dict[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random arguments of the legend ``sizes`` (see :func:`random_array`), with the rank the spec
    states (:func:`_leading_sizes`) and its contract's own integer parameters."""
    contract = spec.contract
    legend = {sym: 3 for _, symbols in contract.parameters for sym in symbols if sym != "..."}
    sizes = {**sizes, "...": _leading_sizes(contract, tuple(sizes["..."])), **dict(contract.fixed_sizes)}
    sizes, integers = contract.integers(functools.partial(_pick, rng), {**legend, **sizes})
    args = {}
    for name, symbols in contract.parameters:
        if name in integers:  # offsets or lengths from the contract's own rule, with the sizes they fit
            args[name] = integers[name]
            continue
        shape: tuple[int, ...] = ()
        for sym in symbols:
            shape += tuple(sizes["..."]) if sym == "..." else (int(sizes.get(sym, 3)),)
        if name in contract.additive_parameters:
            args[name] = _additive_mask(rng, shape)
        else:
            args[name] = random_array(rng, shape, name in contract.bool_parameters)
    return args


def confirmation_args(spec: Spec) -> list[dict[str, np.ndarray]]:
    """The :data:`CONFIRMATIONS` argument sets (by contract parameter name, float64 or bool) the
    implementation is also called on, drawn once per spec from its seed (see ``_CONFIRMATION_SIZES``)."""
    out = []
    for number, sizes in enumerate(_CONFIRMATION_SIZES[:CONFIRMATIONS]):
        rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis", number))
        out.append(_sized_args(spec, dict(sizes), rng))
    return out


def resized_args(spec: Spec, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Arguments like the first confirmation input's, with the legend ``sizes`` in place of its own
    (``{"n_q": 17, "n_k": 17}``: a mistake's further confirmation, probe or witness input), drawn
    from the spec's seed and the sizes, so the same every time."""
    rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis", "sized", sorted(sizes.items())))
    return _sized_args(spec, {**_CONFIRMATION_SIZES[0], **sizes}, rng)


def mistake_sizes(spec: Spec, which: str) -> list[dict[str, int]]:
    """The further confirmation (``which="confirm_sizes"``) or probe (``"probe_sizes"``) sizes of the
    mistakes that apply to the spec's contract, each once, in catalogue order."""
    out: list[dict[str, int]] = []
    for mistake in spec.known_mistakes():
        for sizes in getattr(mistake, which):
            if sizes not in out:
                out.append(dict(sizes))
    return out


def _corners(spec: Spec, base: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Inputs where conventions and masking rules part: from ``base``, a query with every key
    masked; a masked key holding +inf, NaN or a huge score; more queries than keys."""
    contract = spec.contract
    names = set(contract.parameter_names)
    out: list[dict[str, np.ndarray]] = []
    if "mask" in names:
        mask = np.array(base["mask"], dtype=bool)
        full = dict(base, mask=mask.copy())
        full["mask"][..., 0, :] = False
        out.append(full)
        first = mask[..., 0, :].reshape(-1, mask.shape[-1])[0]
        j = int(np.argmin(first))  # a masked key of query 0 (every row masks one)
        if "S" in names:
            for value in (np.inf, np.nan, 1e4):
                S = np.array(base["S"], dtype=np.float64)
                S[..., 0, j] = value
                out.append(dict(base, S=S))
        elif {"Q", "K"} <= names:
            Q, K = np.asarray(base["Q"], dtype=np.float64), np.array(base["K"], dtype=np.float64)
            q0 = Q[..., 0, :]
            K[..., j, :] = q0 * (1e4 * np.sqrt(Q.shape[-1]) / np.sum(q0 * q0, axis=-1, keepdims=True))
            out.append(dict(base, K=K))  # query 0's masked key j scores 1e4
            K = np.array(base["K"], dtype=np.float64)
            K[..., j, :] = np.inf * np.sign(q0)  # query 0's masked key j scores +inf
            out.append(dict(base, K=K))
    for name in sorted(contract.additive_parameters & names):  # a float mask: query 0 with every entry -inf
        blank = np.array(base[name], dtype=np.float64)
        blank[..., 0, :] = -np.inf
        out.append(dict(base, **{name: blank}))
    if contract.name.startswith("causal_attention") and {"Q", "K", "V"} <= names:
        Q, K, V = (np.asarray(base[n]) for n in ("Q", "K", "V"))
        n = min(K.shape[-2], Q.shape[-2])
        out.append({"Q": np.concatenate([Q, Q[..., :1, :]], axis=-2), "K": K[..., : n - 1, :], "V": V[..., : n - 1, :]})
    return out


def diagnosis_calls(spec: Spec, dtype: str, which: str) -> list[Call]:
    """The confirmation calls (``which="confirm"``: :func:`confirmation_args` and the mistakes' own
    ``confirm_sizes``) or the probe calls (``"probe"``: the worked examples, the corners, more
    queries than keys where the contract has both, and the mistakes' ``probe_sizes``), made once
    per spec and dtype."""

    def draw() -> list[Call]:
        confirm = confirmation_args(spec)
        if which == "confirm":
            confirm += [resized_args(spec, sizes) for sizes in mistake_sizes(spec, "confirm_sizes")]
            return [spec_call(spec, args, dtype, spec.tolerance) for args in confirm]
        calls = []
        for ex in getattr(spec, "worked_examples", ()):
            try:
                calls.append(spec_call(spec, ex.inputs, dtype, ex.tolerance or spec.tolerance))
            except Exception:  # noqa: BLE001 - an example that cannot be cast here is no probe
                continue
        calls.extend(spec_call(spec, args, dtype, spec.tolerance) for args in _corners(spec, confirm[0]))
        legend = {sym for _, symbols in spec.contract.parameters for sym in symbols}
        more = [_MORE_QUERIES] if {"n_q", "n_k"} <= legend else []
        sized = [resized_args(spec, sizes) for sizes in more + mistake_sizes(spec, "probe_sizes")]
        calls.extend(spec_call(spec, args, dtype, spec.tolerance) for args in sized)
        return calls

    return _calls(spec, dtype, which, draw)


def sized_kind(sizes: dict[str, int]) -> str:
    """The kind (``which``) of the sized call for ``sizes``, in :func:`drawn_from`'s key."""
    return f"sized {sorted(sizes.items())}"


def sized_call(spec: Spec, dtype: str, sizes: dict[str, int]) -> Call:
    """The call of :func:`resized_args` for ``sizes``, built once per spec and dtype."""
    return _calls(
        spec, dtype, sized_kind(sizes), lambda: [spec_call(spec, resized_args(spec, sizes), dtype, spec.tolerance)]
    )[0]


def backward_calls(spec: Spec, dtype: str) -> list[Call]:
    """The confirmation inputs with an upstream gradient each (drawn once per spec and dtype)."""

    def draw() -> list[Call]:
        calls = []
        inputs = confirmation_args(spec) + [resized_args(spec, z) for z in mistake_sizes(spec, "confirm_sizes")]
        for number, args in enumerate(inputs):
            rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis-upstream", number))
            with np.errstate(all="ignore"):
                shape = np.shape(spec.contract.golden(args))
            upstream = random_array(rng, shape, False)
            calls.append(spec_call(spec, args, dtype, spec.tolerance, upstream=upstream))
        return calls

    return _calls(spec, dtype, "backward", draw)
