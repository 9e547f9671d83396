"""Worked examples in specs: arrays, shapes and shape ties, the bound on their work, the golden check."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnscore.boundary.layouts import OMIT, PASS_NONE
from attnscore.maths.contract import Contract
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.located import Positioned, SpecProblem
from attnscore.spec.model import WorkedExample
from attnscore.spec.schema import found_text
from attnscore.spec.tolerances import as_fraction, read_tolerance

MAX_ARRAY_DIMS = 8
MAX_EXAMPLE_WORK = 1_000_000
"""Most index combinations one worked example may ask for: the product of its inputs' broadcast
batch shape and of every symbol's size (``n_q · n_k · d_k · d_v``...), which bounds every
intermediate the golden and reference paths compute (8 MB of float64 at most)."""


def legend_shape_text(shape: list[Any] | tuple[Any, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _leaves(value: Any) -> list[Any]:
    return [leaf for item in value for leaf in _leaves(item)] if isinstance(value, list) else [value]


INT32_RANGE = (-(2**31), 2**31 - 1)


def _integers(doc: Positioned, path: tuple[Any, ...], value: Any, problems: list[SpecProblem]) -> np.ndarray | None:
    """An integer parameter's YAML list (``[0, 2, 5]``) as an int32 array; a float (``2.0``,
    ``2.5``), a bool or a value outside int32 is a located problem."""
    for leaf in _leaves(value):
        if isinstance(leaf, bool) or not isinstance(leaf, int):
            problems.append(
                doc.problem(path, f"expected integers (an int32 parameter, e.g. [0, 2, 5]), found {found_text(leaf)}")
            )
            return None
        if not INT32_RANGE[0] <= leaf <= INT32_RANGE[1]:
            problems.append(doc.problem(path, f"expected integers within int32 range, found {leaf}"))
            return None
    try:
        arr = np.array(value, dtype=np.int64)
    except (ValueError, TypeError):
        problems.append(doc.problem(path, f"expected a rectangular array of integers, found {found_text(value)}"))
        return None
    if arr.ndim > MAX_ARRAY_DIMS:
        problems.append(doc.problem(path, f"expected at most {MAX_ARRAY_DIMS} dimensions, found {arr.ndim}"))
        return None
    return arr.astype(np.int32)


def _array(
    doc: Positioned,
    path: tuple[Any, ...],
    value: Any,
    problems: list[SpecProblem],
    boolean: bool = False,
    integer: bool = False,
) -> np.ndarray | None:
    if integer:
        return _integers(doc, path, value, problems)
    leaves = _leaves(value)
    if boolean and not all(isinstance(x, bool) for x in leaves):
        bad = next(x for x in leaves if not isinstance(x, bool))
        problems.append(doc.problem(path, f"expected a bool mask of true/false (true = keep), found {found_text(bad)}"))
        return None
    if not boolean and any(isinstance(x, bool) for x in leaves):
        problems.append(doc.problem(path, "expected numbers, found true/false (only mask parameters take booleans)"))
        return None
    try:
        arr = np.array(value, dtype=np.bool_ if boolean else np.float64)
    except OverflowError:
        problems.append(doc.problem(path, "expected numbers within float64 range, found an integer too large"))
        return None
    except (ValueError, TypeError):
        depth, inner = 0, value
        while isinstance(inner, list) and inner:
            depth, inner = depth + 1, inner[0]
        if depth > MAX_ARRAY_DIMS:
            problems.append(doc.problem(path, f"expected at most {MAX_ARRAY_DIMS} dimensions, found {depth}"))
        else:
            problems.append(
                doc.problem(path, f"expected a rectangular array of numbers, found ragged nesting {found_text(value)}")
            )
        return None
    if arr.ndim > MAX_ARRAY_DIMS:
        problems.append(doc.problem(path, f"expected at most {MAX_ARRAY_DIMS} dimensions, found {arr.ndim}"))
        return None
    return arr


def _rank_problem(contract: Contract, name: str, legend: tuple[str, ...], arr: np.ndarray) -> str | None:
    """What is wrong with the rank of input ``name`` (None when nothing): fewer dims than its legend,
    more without ``...``, or, with named leading dims (:attr:`Contract.leading`), any other rank
    than theirs (a mask that keeps ``...`` may also be the shared ``(n_q, n_k)``)."""
    fixed = [s for s in legend if s != "..."]
    batched = "..." in legend
    declared = contract.declared_shape(name)
    unit = dict(contract.unit_dims).get(name, 0)
    if unit:  # [1, seq]: exactly that rank, the leading dims of size 1
        if arr.ndim != len(declared) or any(n != 1 for n in arr.shape[:unit]):
            return (
                f"expected shape {legend_shape_text(declared)} ({len(declared)}-D, as function.parameters states), "
                f"found shape {legend_shape_text(arr.shape)}"
            )
        return None
    if batched and contract.leading is not None:
        shared_mask = name in contract.mask_parameters and name not in contract.full_masks and arr.ndim == len(fixed)
        if arr.ndim != len(declared) and not shared_mask:
            return (
                f"expected shape {legend_shape_text(declared)} ({len(declared)}-D, as function.parameters states), "
                f"found shape {legend_shape_text(arr.shape)}"
            )
        return None
    if arr.ndim < len(fixed) or (not batched and arr.ndim != len(fixed)):
        dims = f"at least {len(fixed)}-D" if batched else f"{len(fixed)}-D"
        return f"expected shape {legend_shape_text(legend)} ({dims}), found shape {legend_shape_text(arr.shape)}"
    return None


def _leading_problems(
    doc: Positioned, path: tuple[Any, ...], contract: Contract, inputs: dict[str, np.ndarray]
) -> list[SpecProblem]:
    """Each input whose named leading dims differ in size from the first input's (``batch`` = 2 in
    Q, 3 in K), and each full-shape mask whose batch dims are not the scores' own."""
    found = []
    seen: dict[str, tuple[int, str]] = {}
    batches = []
    for name, legend in contract.parameters:
        if legend[:1] != ("...",):
            continue
        arr = inputs[name]
        batch = arr.shape[: arr.ndim - (len(legend) - 1)]
        if name in contract.mask_parameters:
            continue
        batches.append(batch)
        for dim, size in zip(contract.leading or (), batch, strict=False):
            if dim in seen and seen[dim][0] != size:
                found.append(
                    doc.problem(
                        path + ("inputs", name),
                        f"expected {dim}={seen[dim][0]} as in {seen[dim][1]}, found {dim}={size}",
                    )
                )
            seen.setdefault(dim, (int(size), name))
    try:
        scores_batch = np.broadcast_shapes(*batches) if batches else ()
    except ValueError:
        return found  # the work bound says which batch dims do not broadcast
    for name in sorted(contract.full_masks):
        arr = inputs[name]
        if arr.shape[:-2] != tuple(scores_batch):
            want = legend_shape_text(tuple(scores_batch) + ("n_q", "n_k"))
            found.append(
                doc.problem(
                    path + ("inputs", name),
                    f"expected the mask in the scores' full shape {want} (function.parameters states it so), "
                    f"found shape {legend_shape_text(arr.shape)}",
                )
            )
    return found


def _check_example_shapes(
    doc: Positioned,
    path: tuple[Any, ...],
    contract: Contract,
    inputs: dict[str, np.ndarray],
    problems: list[SpecProblem],
) -> bool:
    sizes: dict[str, tuple[int, str]] = {}
    ok = True
    for name, legend in contract.parameters:
        arr = inputs[name]
        fixed = [s for s in legend if s != "..."]
        wrong_rank = _rank_problem(contract, name, legend, arr)
        if wrong_rank is not None:
            problems.append(doc.problem(path + ("inputs", name), wrong_rank))
            ok = False
            continue
        for symbol, size in zip(fixed, arr.shape[arr.ndim - len(fixed) :], strict=True):
            if size == 0:
                problems.append(
                    doc.problem(path + ("inputs", name), f"expected {symbol} >= 1, found an empty dimension")
                )
                ok = False
            elif symbol in sizes and sizes[symbol][0] != size:
                problem = doc.problem(
                    path + ("inputs", name),
                    f"expected {symbol}={sizes[symbol][0]} as in {sizes[symbol][1]}, found {symbol}={size}",
                )
                if problem not in problems:  # a square weight (d_model, d_model) says it once
                    problems.append(problem)
                ok = False
            else:
                sizes.setdefault(symbol, (size, name))
    if ok and (contract.leading is not None or contract.full_masks):
        named = _leading_problems(doc, path, contract, inputs)
        problems.extend(named)
        ok = not named
    if ok:
        ok = _work_within_bounds(doc, path, contract, inputs, {s: n for s, (n, _) in sizes.items()}, problems)
    full = max((inputs[n].ndim for n, legend in contract.parameters if "..." in legend), default=0)
    for name in sorted(contract.bool_parameters):
        rank = inputs[name].ndim
        if 2 < rank < full:  # (B, n_q, n_k) against (B, H, n_q, n_k): which axis is B? (see reference._as_mask)
            problems.append(
                doc.problem(
                    path + ("inputs", name),
                    f"expected a mask of shape (n_q, n_k) or of the scores' full rank {full} (1 for broadcast "
                    f"dims), found the ambiguous shape {legend_shape_text(inputs[name].shape)}",
                )
            )
            ok = False
    return ok


def _work_within_bounds(
    doc: Positioned,
    path: tuple[Any, ...],
    contract: Contract,
    inputs: dict[str, np.ndarray],
    sizes: dict[str, int],
    problems: list[SpecProblem],
) -> bool:
    """The example's batch dims broadcast, and batch × every symbol's size is at most MAX_EXAMPLE_WORK."""
    batches = []
    for name, legend in contract.parameters:
        fixed = len([s for s in legend if s != "..."])
        if "..." in legend:
            batches.append(inputs[name].shape[: inputs[name].ndim - fixed])
    try:
        batch = np.broadcast_shapes(*batches) if batches else ()
    except ValueError:
        shown = ", ".join(legend_shape_text(b) for b in batches)
        problems.append(doc.problem(path + ("inputs",), f"expected batch dims that broadcast, found {shown}"))
        return False
    work = math.prod(batch) * math.prod(sizes.values())
    if work > MAX_EXAMPLE_WORK:
        symbols = " · ".join(f"{s}={n}" for s, n in sizes.items())
        problems.append(
            doc.problem(
                path + ("inputs",),
                f"expected at most {MAX_EXAMPLE_WORK:,} index combinations in a worked example, found {work:,} "
                f"(batch {legend_shape_text(batch)} · {symbols}); use smaller inputs",
            )
        )
        return False
    return True


def worked_example(
    doc: Positioned,
    i: int,
    raw: dict[str, Any],
    contract: Contract,
    default_tol: Tolerance,
    problems: list[SpecProblem],
) -> WorkedExample | None:
    path: tuple[Any, ...] = ("worked_examples", i)
    names = contract.parameter_names
    missing = [n for n in names if n not in raw["inputs"] and n not in contract.omittable]
    unknown = [n for n in raw["inputs"] if n not in names]
    for n in missing:
        problems.append(doc.problem(path + ("inputs",), f"expected an input named {n!r}, found it missing"))
    for n in unknown:
        problems.append(
            doc.problem(
                path + ("inputs", n),
                f"expected only the parameters {', '.join(names)}, found unknown input {n!r}",
                key=True,
            )
        )
    if missing or unknown:
        return None
    inputs = {}
    handover: dict[str, str] = {}
    for n in names:
        if n in contract.omittable and raw["inputs"].get(n) is None:
            handover[n] = OMIT if n not in raw["inputs"] else PASS_NONE
            continue
        if raw["inputs"][n] is None:
            optional = ", ".join(sorted(contract.omittable)) or "none"
            problems.append(
                doc.problem(
                    path + ("inputs", n),
                    f"expected an array for {n}, found null (only an optional mask may be null; optional here: "
                    f"{optional})",
                )
            )
            return None
        arr = _array(
            doc,
            path + ("inputs", n),
            raw["inputs"][n],
            problems,
            boolean=n in contract.bool_parameters,
            integer=n in contract.int_parameters,
        )
        if arr is None:
            return None
        inputs[n] = arr
    for n in handover:  # what leaving the mask out means: every key kept
        try:
            inputs[n] = contract.absent_value(n, inputs)
        except (KeyError, ValueError) as exc:
            problems.append(
                doc.problem(path + ("inputs",), f"expected inputs that give the scores' shape, found: {exc}")
            )
            return None
    inputs = {n: inputs[n] for n in names}
    expected = _array(doc, path + ("expected",), raw["expected"], problems)
    if expected is None or not _check_example_shapes(doc, path, contract, inputs, problems):
        return None
    wrong = contract.integer_problems(inputs)  # offsets that do not fit the inputs, lengths out of range
    for name, problem in wrong:
        problems.append(doc.problem(path + ("inputs", name), problem))
    if wrong:
        return None
    try:
        with np.errstate(all="ignore"):
            golden = contract.golden(inputs)
    except ValueError as exc:
        problems.append(doc.problem(path + ("inputs",), f"expected inputs the contract can score, found: {exc}"))
        return None
    if expected.shape != golden.shape:
        problems.append(
            doc.problem(
                path + ("expected",),
                f"expected shape {legend_shape_text(golden.shape)} (from the inputs), "
                f"found shape {legend_shape_text(expected.shape)}",
            )
        )
        return None
    if not np.allclose(expected, golden, rtol=1e-9, atol=1e-9, equal_nan=True):
        problems.append(
            doc.problem(
                path + ("expected",),
                f"expected the value the inputs give, {np.round(golden, 9).tolist()}, found {expected.tolist()}",
            )
        )
        return None
    backward = _backward_parts(doc, path, raw, contract, inputs, golden.shape, problems)
    if backward is None:
        return None
    convention = raw.get("convention", "")
    if convention and not _convention_holds(doc, path, convention, contract, inputs, golden.shape, problems):
        return None
    upstream, grads, lse = backward
    return WorkedExample(
        convention=convention,
        upstream=upstream,
        expected_gradients=grads,
        expected_logsumexp=lse,
        id=raw["id"],
        title=raw.get("title", raw["id"].replace("_", " ")),
        inputs=inputs,
        expected=expected,
        explanation=raw["explanation"].strip(),
        points=as_fraction(raw["points"]),
        visibility=raw.get("visibility", "visible"),
        tolerance=read_tolerance(raw.get("tolerance"), default_tol) if "tolerance" in raw else None,
        line=doc.where(path)[0],
        handover=handover,
    )


def _convention_holds(
    doc: Positioned,
    path: tuple[Any, ...],
    name: str,
    contract: Contract,
    inputs: dict[str, np.ndarray],
    shape: tuple[int, ...],
    problems: list[SpecProblem],
) -> bool:
    """Whether a worked example that says it tests convention corner ``name`` (``convention:``)
    names a corner of its contract and has inputs where the corner occurs; else a located problem."""
    from attnscore.catalogue.conventions import applicable_corners, corner_region

    known = applicable_corners(contract)
    if name not in known:
        problems.append(
            doc.problem(
                path + ("convention",),
                f"expected a convention corner of contract {contract.name} ({', '.join(known) or 'none'}), "
                f"found {name!r}",
            )
        )
        return False
    if corner_region(name, contract, inputs, shape) is None:
        problems.append(
            doc.problem(
                path + ("convention",),
                f"expected inputs where corner {name} occurs (the example tests it), found none of its rows",
            )
        )
        return False
    return True


def _close_or_problem(
    doc: Positioned, where: tuple[Any, ...], what: str, got: np.ndarray, want: np.ndarray, problems: list[SpecProblem]
) -> bool:
    """Whether a written value is the golden one (shape, then values to 1e-9); else a located problem."""
    if got.shape != want.shape:
        problems.append(
            doc.problem(
                where,
                f"expected {what} of shape {legend_shape_text(want.shape)} (from the inputs), "
                f"found shape {legend_shape_text(got.shape)}",
            )
        )
        return False
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True):
        problems.append(
            doc.problem(where, f"expected {what} the inputs give, {np.round(want, 9).tolist()}, found {got.tolist()}")
        )
        return False
    return True


def _backward_parts(
    doc: Positioned,
    path: tuple[Any, ...],
    raw: dict[str, Any],
    contract: Contract,
    inputs: dict[str, np.ndarray],
    out_shape: tuple[int, ...],
    problems: list[SpecProblem],
) -> tuple[np.ndarray | None, dict[str, np.ndarray], np.ndarray | None] | None:
    """A worked example's ``upstream``, ``expected_gradients`` and ``expected_logsumexp``, each
    checked against the golden value (None when one is wrong: the problems say where)."""
    if "upstream" not in raw:
        for key in ("expected_gradients", "expected_logsumexp"):
            if key in raw:
                problems.append(
                    doc.problem(path + (key,), f"expected upstream (dO) beside {key}, found none", key=True)
                )
                return None
        return None, {}, None
    from attnscore.catalogue.families import differentiable, flash_attention_2
    from attnscore.maths import golden_gradients

    if not differentiable(contract):
        problems.append(
            doc.problem(path + ("upstream",), f"expected a differentiable contract for upstream, found {contract.name}")
        )
        return None
    upstream = _array(doc, path + ("upstream",), raw["upstream"], problems)
    if upstream is None:
        return None
    if upstream.shape != out_shape:
        problems.append(
            doc.problem(
                path + ("upstream",),
                f"expected dO of the output's shape {legend_shape_text(out_shape)}, "
                f"found shape {legend_shape_text(upstream.shape)}",
            )
        )
        return None
    try:
        with np.errstate(all="ignore"):
            goldens = golden_gradients.contract_gradients(contract, inputs, upstream)
    except ValueError as exc:  # a spec's own reference that raises in its backward
        problems.append(
            doc.problem(path + ("upstream",), f"expected inputs the contract can differentiate, found: {exc}")
        )
        return None
    grads: dict[str, np.ndarray] = {}
    for name, value in dict(raw.get("expected_gradients") or {}).items():
        where = path + ("expected_gradients", name)
        if name not in goldens:
            problems.append(
                doc.problem(where, f"expected a gradient of {', '.join(goldens)}, found {name!r}", key=True)
            )
            return None
        arr = _array(doc, where, value, problems)
        if arr is None or not _close_or_problem(doc, where, f"the gradient d{name}", arr, goldens[name], problems):
            return None
        grads[name] = arr
    lse = None
    if "expected_logsumexp" in raw:
        where = path + ("expected_logsumexp",)
        if not flash_attention_2(contract):
            problems.append(
                doc.problem(where, f"expected a contract with a logsumexp (flash_attention_2), found {contract.name}")
            )
            return None
        from attnscore.maths.families.flash_attention_2 import logsumexp_golden

        lse = _array(doc, where, raw["expected_logsumexp"], problems)
        want = logsumexp_golden(inputs["Q"], inputs["K"], bool(contract.option("is_causal")))
        if lse is None or not _close_or_problem(doc, where, "the logsumexp L", lse, want, problems):
            return None
    return upstream, grads, lse


def shape_ties(
    contract: Contract, declared: list[tuple[str, tuple[Any, ...]]], returns: tuple[Any, ...] | None
) -> dict[str, str] | None:
    """The symbol ties of declared shapes against the contract's (``{}`` when they are the
    contract's own), or None when they are not the contract's shapes with some symbols replaced
    consistently by other symbols of the contract (``"..."`` stays in place). ``returns`` None:
    the parameters alone."""
    if [n for n, _ in declared] != list(contract.parameter_names):
        return None
    pairs = ([] if returns is None else [(contract.returns, tuple(returns))]) + [
        (legend, shape) for (_, legend), (_, shape) in zip(contract.parameters, declared, strict=True)
    ]
    symbols = {sym for legend, _ in pairs for sym in legend}
    ties: dict[str, str] = {}
    for legend, shape in pairs:
        if len(legend) != len(shape):
            return None
        for sym, got in zip(legend, shape, strict=True):
            if not isinstance(got, str) or got not in symbols or (sym == "...") != (got == "..."):
                return None
            if ties.setdefault(sym, got) != got:
                return None
    if any(ties.get(target, target) != target for target in ties.values()):
        return None  # a chain or swap (d_v -> d_k while d_k -> n_k): not one size per tied group
    return {sym: got for sym, got in ties.items() if sym != got}
