"""Loading and validating spec files into :class:`attnscore.spec.model.Spec`.

Validation happens in two passes and reports every problem at once, each located as
``file:line:col: field.path: expected ..., found ...``:

1. structure, against the published JSON Schema (``specs/spec-v1.schema.json``, next to the bundled specs);
2. meaning: the contract and properties exist, worked-example inputs have the declared shapes
   with consistent sizes, and each expected value agrees with the golden value of its inputs.

Bounds on the loader's own work: only a regular file of at most :data:`MAX_SPEC_BYTES` is read
(a FIFO, a device such as ``/dev/zero`` or a directory is refused before anything is read, and a
FIFO is never waited on); a worked example may ask for at most :data:`MAX_EXAMPLE_WORK` index
combinations (its broadcast batch times every size of its shape legend), so inputs whose batch
dims broadcast to a huge tensor are refused before anything is computed.

Tolerances must be able to fail a wrong answer. The rule, for the spec's tolerance and each
worked example's own, on every worked example and in every dtype of the spec: where the
expected value is not all zero, the all-zero output must fail; where it is all zero, an output off
by 1 in every entry must fail (worked examples are written in units where 1 is a meaningful
score). A tolerance that lets such an output pass (``atol: 1e300``, ``rtol: 1`` or more, a huge
``factor``) accepts the trivial answers the field notes warn about, and is a located problem.
"""

from __future__ import annotations

import json
import keyword
import math
import os
import re
import stat
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from attnscore.boundary.outputs import RETURN_KINDS
from attnscore.catalogue.conventions import applicable_corners
from attnscore.catalogue.properties import PROPERTIES
from attnscore.maths.bounds import broken_bounds, check_symbols, parse_bound
from attnscore.maths.contracts import CONTRACTS, Contract
from attnscore.maths.tolerance import RATIO_FLOOR, Tolerance, allowed_error
from attnscore.spec.located import Positioned, SpecError, SpecProblem, read_yaml
from attnscore.spec.model import PropertyUse, Spec, StudentCopy, WorkedExample

__all__ = ["load_spec", "load_specs", "spec_schema", "SpecError", "SpecProblem"]

DEFAULT_ACCEPT = RETURN_KINDS
DEFAULT_EXAMPLES = 25
DEFAULT_TIMEOUT_S = 5.0
MAX_ARRAY_DIMS = 8
MAX_SPEC_BYTES = 1024 * 1024
"""Largest spec file read, in bytes (the bundled specs are under 8 KiB)."""
MAX_EXAMPLE_WORK = 1_000_000
"""Most index combinations one worked example may ask for: the product of its inputs' broadcast
batch shape and of every symbol's size (``n_q · n_k · d_k · d_v``...), which bounds every
intermediate the golden and reference paths compute (8 MB of float64 at most)."""
_FLOAT_LIKE = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


@lru_cache(maxsize=1)
def spec_schema() -> dict[str, Any]:
    """The JSON Schema of spec format v1, as a dict."""
    # Next to the bundled specs, so that their "# yaml-language-server: $schema=spec-v1.schema.json"
    # line finds it both in a checkout (specs/) and in an installed package (attnscore/bundled_specs/).
    text = (resources.files("attnscore") / "bundled_specs" / "spec-v1.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return "null" if value is None else type(value).__name__


def _found(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{_json_type(value)} {text}"


def _schema_message(error: jsonschema.ValidationError) -> str:
    """Turn a jsonschema error into 'expected ..., found ...'."""
    v, inst = error.validator, error.instance
    if v == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        msg = f"expected {' or '.join(types)}, found {_found(inst)}"
        if isinstance(inst, str) and _FLOAT_LIKE.match(inst):
            msg += " (a quoted number is text: drop the quotes)"
        elif isinstance(inst, bool) and "string" in types:
            msg += " (YAML 1.1 reads yes/no/on/off as booleans: quote the text)"
        return msg
    if v == "required":
        named = re.match(r"^'(.+)' is a required property$", error.message)
        missing = [k for k in error.validator_value if isinstance(inst, dict) and k not in inst]
        name = named.group(1) if named else (missing[0] if missing else None)
        return f"expected field {name!r}, found it missing" if name else error.message
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(inst) - set(allowed)) if isinstance(inst, dict) else []
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"expected only known fields, found unknown field {extra[0] if extra else '?'!r}{hint}"
    if v == "enum":
        msg = f"expected one of {', '.join(map(str, error.validator_value))}, found {_found(inst)}"
        return msg
    if v == "const":
        return f"expected {error.validator_value!r}, found {_found(inst)}"
    if v == "pattern":
        return f"expected text matching {error.validator_value}, found {_found(inst)}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[v]
        return f"expected a number {op} {error.validator_value}, found {inst!r}"
    if v == "minItems":
        return f"expected at least {error.validator_value} item(s), found {len(inst)}"
    if v == "minLength":
        return f"expected non-empty text, found {_found(inst)}"
    if v == "uniqueItems":
        return f"expected unique items, found duplicates in {_found(inst)}"
    return error.message


def _strict_integer(checker: Any, instance: Any) -> bool:
    """JSON Schema's integer accepts 20.0; a spec's integer must be written as one (20)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)


def _schema_problems(doc: Positioned) -> list[SpecProblem]:
    validator = _Validator(spec_schema())
    problems = []
    for error in sorted(validator.iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path))):
        message = _schema_message(error)
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {}))
            extras = sorted(set(error.instance) - allowed)
            for extra in extras:
                problems.append(doc.problem(path + (extra,), message.replace(repr(extras[0]), repr(extra)), key=True))
            continue
        problems.append(doc.problem(path, message))
    return problems


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control_problems(doc: Positioned) -> list[SpecProblem]:
    """Text with control characters (a terminal escape written as "\\e" in YAML) never reaches a report."""
    found: list[SpecProblem] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(k, path + (k,))
                walk(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path + (i,))
        elif isinstance(value, str) and (control := _CONTROL.search(value)):
            code = ord(control.group())
            found.append(doc.problem(path, f"expected printable text, found the control character U+{code:04X}"))

    walk(doc.data, ())
    return found


def _nonfinite_problems(doc: Positioned) -> list[SpecProblem]:
    """NaN and ±inf may appear only in worked examples' inputs and expected values."""
    problems = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, path + (i,))
        elif isinstance(value, float) and not math.isfinite(value):
            in_example = len(path) >= 3 and path[0] == "worked_examples" and path[2] in ("inputs", "expected")
            if not in_example:
                problems.append(doc.problem(path, f"expected a finite number, found {value!r}"))

    walk(doc.data, ())
    return problems


def _fraction(value: float | int) -> Fraction:
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _tolerance(raw: dict[str, Any] | None, default: Tolerance) -> Tolerance:
    if raw is None:
        return default
    return Tolerance(mode=raw["mode"], rtol=raw.get("rtol"), atol=raw.get("atol"), factor=float(raw.get("factor", 2.0)))


def _shape_text(shape: list[Any] | tuple[Any, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _leaves(value: Any) -> list[Any]:
    return [leaf for item in value for leaf in _leaves(item)] if isinstance(value, list) else [value]


def _array(
    doc: Positioned, path: tuple[Any, ...], value: Any, problems: list[SpecProblem], boolean: bool = False
) -> np.ndarray | None:
    leaves = _leaves(value)
    if boolean and not all(isinstance(x, bool) for x in leaves):
        bad = next(x for x in leaves if not isinstance(x, bool))
        problems.append(doc.problem(path, f"expected a bool mask of true/false (true = keep), found {_found(bad)}"))
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
                doc.problem(path, f"expected a rectangular array of numbers, found ragged nesting {_found(value)}")
            )
        return None
    if arr.ndim > MAX_ARRAY_DIMS:
        problems.append(doc.problem(path, f"expected at most {MAX_ARRAY_DIMS} dimensions, found {arr.ndim}"))
        return None
    return arr


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
        batched = "..." in legend
        if arr.ndim < len(fixed) or (not batched and arr.ndim != len(fixed)):
            dims = f"at least {len(fixed)}-D" if batched else f"{len(fixed)}-D"
            problems.append(
                doc.problem(
                    path + ("inputs", name),
                    f"expected shape {_shape_text(legend)} ({dims}), found shape {_shape_text(arr.shape)}",
                )
            )
            ok = False
            continue
        for symbol, size in zip(fixed, arr.shape[arr.ndim - len(fixed) :], strict=True):
            if size == 0:
                problems.append(
                    doc.problem(path + ("inputs", name), f"expected {symbol} >= 1, found an empty dimension")
                )
                ok = False
            elif symbol in sizes and sizes[symbol][0] != size:
                problems.append(
                    doc.problem(
                        path + ("inputs", name),
                        f"expected {symbol}={sizes[symbol][0]} as in {sizes[symbol][1]}, found {symbol}={size}",
                    )
                )
                ok = False
            else:
                sizes.setdefault(symbol, (size, name))
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
                    f"dims), found the ambiguous shape {_shape_text(inputs[name].shape)}",
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
        shown = ", ".join(_shape_text(b) for b in batches)
        problems.append(doc.problem(path + ("inputs",), f"expected batch dims that broadcast, found {shown}"))
        return False
    work = math.prod(batch) * math.prod(sizes.values())
    if work > MAX_EXAMPLE_WORK:
        symbols = " · ".join(f"{s}={n}" for s, n in sizes.items())
        problems.append(
            doc.problem(
                path + ("inputs",),
                f"expected at most {MAX_EXAMPLE_WORK:,} index combinations in a worked example, found {work:,} "
                f"(batch {_shape_text(batch)} · {symbols}); use smaller inputs",
            )
        )
        return False
    return True


def _worked_example(
    doc: Positioned,
    i: int,
    raw: dict[str, Any],
    contract: Contract,
    default_tol: Tolerance,
    problems: list[SpecProblem],
) -> WorkedExample | None:
    path: tuple[Any, ...] = ("worked_examples", i)
    names = contract.parameter_names
    missing = [n for n in names if n not in raw["inputs"]]
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
    for n in names:
        arr = _array(doc, path + ("inputs", n), raw["inputs"][n], problems, boolean=n in contract.bool_parameters)
        if arr is None:
            return None
        inputs[n] = arr
    expected = _array(doc, path + ("expected",), raw["expected"], problems)
    if expected is None or not _check_example_shapes(doc, path, contract, inputs, problems):
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
                f"expected shape {_shape_text(golden.shape)} (from the inputs), "
                f"found shape {_shape_text(expected.shape)}",
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
    return WorkedExample(
        id=raw["id"],
        title=raw.get("title", raw["id"].replace("_", " ")),
        inputs=inputs,
        expected=expected,
        explanation=raw["explanation"].strip(),
        points=_fraction(raw["points"]),
        visibility=raw.get("visibility", "visible"),
        tolerance=_tolerance(raw.get("tolerance"), default_tol) if "tolerance" in raw else None,
        line=doc.where(path)[0],
    )


def _weakest_field(raw: Any) -> str | None:
    """The field of a tolerance mapping that a problem with its strength points at."""
    if not isinstance(raw, dict):
        return None
    rtol = raw.get("rtol")
    if isinstance(rtol, (int, float)) and rtol >= 1:  # rtol >= 1 alone accepts 0 for every value
        return "rtol"
    return next((f for f in ("atol", "rtol", "factor") if f in raw), "mode")


def _tolerance_strength_problems(
    doc: Positioned, contract: Contract, examples: list[WorkedExample], default_tol: Tolerance, dtypes: Sequence[str]
) -> list[SpecProblem]:
    """Tolerances under which a trivial answer passes a worked example (the rule in the module docstring)."""
    found: list[SpecProblem] = []
    spec_raw = doc.data.get("tolerance")
    raws = doc.data["worked_examples"]
    index = {raw.get("id"): i for i, raw in reversed(list(enumerate(raws))) if isinstance(raw, dict)}
    reported: set[tuple[Any, ...]] = set()
    for ex in examples:
        i = index.get(ex.id, 0)
        candidates: list[tuple[Tolerance, tuple[Any, ...], Any]] = []
        if ex.tolerance is not None:
            candidates.append((ex.tolerance, ("worked_examples", i, "tolerance"), raws[i].get("tolerance")))
        if spec_raw is not None:
            candidates.append((default_tol, ("tolerance",), spec_raw))
        if not candidates:
            continue
        with np.errstate(all="ignore"):
            golden = contract.golden(ex.inputs)
            d_k, scale = contract.error_scale(ex.inputs)
            operands = contract.operand_sums(ex.inputs)
        finite = np.isfinite(golden)
        nonzero = finite & (golden != 0)
        wrong = np.zeros_like(golden) if nonzero.any() else np.where(finite, golden + 1.0, golden)
        what = "an all-zero output" if nonzero.any() else "an output off by 1 in every entry"
        for tol, where, raw in candidates:
            if where in reported or tol.mode == "exact":
                continue
            for dtype in dtypes:
                with np.errstate(all="ignore"):
                    if tol.mode == "ratio":  # the reference's own error is at most the dot-product bound
                        allowed = np.maximum(
                            allowed_error(
                                Tolerance("dot_bound", factor=tol.factor), golden, dtype, d_k, scale, operands
                            ),
                            allowed_error(RATIO_FLOOR, golden, dtype, d_k, scale, operands),
                        )
                    else:
                        allowed = allowed_error(tol, golden, dtype, d_k, scale, operands)
                    passes = bool(np.all(~finite | (np.abs(wrong - golden) <= allowed)))
                if passes:
                    field = _weakest_field(raw)
                    found.append(
                        doc.problem(
                            where + ((field,) if field else ()),
                            f"expected a tolerance under which {what} fails worked example {ex.id!r} (largest "
                            f"|expected| {float(np.max(np.abs(np.where(finite, golden, 0)), initial=0)):g}), found one "
                            f"that accepts it in {dtype} (allowed error up to "
                            f"{float(np.max(np.where(finite, allowed, 0), initial=0)):.3g})",
                        )
                    )
                    reported.add(where)
                    break
    return found


# Which tolerance fields each mode reads; any other field would be silently ignored.
_TOLERANCE_FIELDS = {"exact": set(), "close": {"rtol", "atol"}, "dot_bound": {"factor"}, "ratio": {"factor"}}


def _tolerance_problems(doc: Positioned) -> list[SpecProblem]:
    """Tolerance fields that the chosen mode would ignore (``rtol`` under ``mode: exact``)."""
    found = []
    places: list[tuple[Any, ...]] = [("tolerance",)]
    places += [("worked_examples", i, "tolerance") for i in range(len(doc.data["worked_examples"]))]
    for path in places:
        raw: Any = doc.data
        for part in path:
            raw = raw.get(part) if isinstance(raw, dict) else raw[part] if isinstance(raw, list) else None
        if not isinstance(raw, dict):
            continue
        mode: Any = raw.get("mode")
        for field in sorted(set(raw) - {"mode"} - _TOLERANCE_FIELDS.get(mode, set())):
            uses = ", ".join(sorted(_TOLERANCE_FIELDS.get(mode, set()))) or "no other field"
            found.append(
                doc.problem(path + (field,), f"expected only fields mode {mode} uses ({uses}), found {field}", key=True)
            )
    return found


def _rubric_problems(
    doc: Positioned, function: str, examples: list[WorkedExample], props: list[PropertyUse]
) -> list[SpecProblem]:
    """A spec no submission could be graded on: a function name Python cannot define, no points."""
    found = []
    if keyword.iskeyword(function) or (function.startswith("__") and function.endswith("__")):
        found.append(
            doc.problem(
                ("function", "name"),
                f"expected a name a submission can define with def, found {function!r} "
                "(a Python keyword or a special __name__)",
            )
        )
    total = sum((e.points for e in examples), Fraction(0)) + sum((p.points for p in props), Fraction(0))
    if examples and total == 0:
        found.append(doc.problem(("worked_examples",), "expected some points to award, found 0 points in every case"))
    return found


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


def _build(doc: Positioned, problems: list[SpecProblem]) -> Spec | None:
    data = doc.data
    fn = data["function"]
    contract = CONTRACTS.get(fn["contract"])
    if contract is None:
        problems.append(
            doc.problem(
                ("function", "contract"),
                f"expected one of {', '.join(sorted(CONTRACTS))}, found {_found(fn['contract'])}",
            )
        )
        return None
    declared = [(p["name"], tuple(p["shape"])) for p in fn["parameters"]]
    ties = shape_ties(contract, declared, tuple(fn["returns"]["shape"]))
    if ties is None and [n for n, _ in declared] != list(contract.parameter_names):
        want = ", ".join(f"{n} {_shape_text(s)}" for n, s in contract.parameters)
        got = ", ".join(f"{n} {_shape_text(s)}" for n, s in declared)
        problems.append(
            doc.problem(("function", "parameters"), f"expected {want} for contract {contract.name}, found {got}")
        )
    elif ties is None and (param_ties := shape_ties(contract, declared, None)) is not None:
        want_returns = contract.tied(param_ties).returns
        problems.append(
            doc.problem(
                ("function", "returns", "shape"),
                f"expected {_shape_text(want_returns)} for contract {contract.name}, "
                f"found {_shape_text(fn['returns']['shape'])}",
            )
        )
    elif ties is None:
        want = ", ".join(f"{n} {_shape_text(s)}" for n, s in contract.parameters)
        want += f" -> {_shape_text(contract.returns)}"
        got = ", ".join(f"{n} {_shape_text(s)}" for n, s in declared)
        got += f" -> {_shape_text(tuple(fn['returns']['shape']))}"
        problems.append(
            doc.problem(
                ("function", "parameters"),
                f"expected {want} for contract {contract.name}, or those shapes with one symbol standing for "
                f"another throughout (e.g. d_k in place of d_v, for kernels that need d_v = d_k), found {got}",
            )
        )
    else:
        contract = contract.tied(ties)
    bounds = []
    for j, text in enumerate(fn.get("where", [])):
        try:
            bound = parse_bound(text)
            check_symbols([bound], contract)
        except ValueError as exc:
            problems.append(doc.problem(("function", "where", j), str(exc)))
        else:
            bounds.append(bound)
    contract = contract.bounded(tuple(bounds))
    default_tol = _tolerance(data.get("tolerance"), Tolerance())
    examples = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["worked_examples"]):
        if raw["id"] in seen:
            problems.append(
                doc.problem(
                    ("worked_examples", i, "id"),
                    f"expected a unique id, found {raw['id']!r} again (first at worked_examples[{seen[raw['id']]}])",
                )
            )
        seen.setdefault(raw["id"], i)
        ex = _worked_example(doc, i, raw, contract, default_tol, problems)
        if ex is not None and (broken := broken_bounds(contract, ex.inputs)):
            problems.append(
                doc.problem(
                    ("worked_examples", i, "inputs"),
                    f"expected shapes inside function.where, found {'; '.join(broken)}",
                )
            )
        elif ex is not None:
            examples.append(ex)
    problems += _tolerance_strength_problems(
        doc, contract, examples, default_tol, tuple(data.get("dtypes", ["float32"]))
    )
    props = []
    seen_props: dict[str, int] = {}
    for i, raw in enumerate(data.get("properties", [])):
        name = raw["name"]
        if name not in PROPERTIES:
            problems.append(
                doc.problem(
                    ("properties", i, "name"),
                    f"expected a registered property ({', '.join(sorted(PROPERTIES))}), found {name!r}",
                )
            )
            continue
        if not PROPERTIES[name].applies(contract):
            problems.append(
                doc.problem(
                    ("properties", i, "name"),
                    f"expected a property that applies to contract {contract.name}, found {name!r}",
                )
            )
            continue
        if name in seen_props:
            problems.append(
                doc.problem(("properties", i, "name"), f"expected each property once, found {name!r} again")
            )
            continue
        seen_props[name] = i
        props.append(
            PropertyUse(
                name=name,
                points=_fraction(raw["points"]),
                statement=raw["statement"].strip(),
                examples=raw.get("examples", DEFAULT_EXAMPLES),
                visibility=raw.get("visibility", "visible"),
                max_value=float(raw.get("max_value", PROPERTIES[name].default_max_value)),
                line=doc.where(("properties", i))[0],
            )
        )
    mistakes: tuple[str, ...] | None = None
    if "mistakes" in data:
        from attnscore.catalogue.mistakes import MISTAKES

        listed: list[str] = []
        for i, mid in enumerate(data["mistakes"]):
            if mid not in MISTAKES:
                problems.append(
                    doc.problem(
                        ("mistakes", i),
                        f"expected a catalogue mistake, found {mid!r}; known: {', '.join(sorted(MISTAKES))}",
                    )
                )
            elif contract.name not in MISTAKES[mid].contracts:
                problems.append(
                    doc.problem(
                        ("mistakes", i), f"expected a mistake that applies to contract {contract.name}, found {mid!r}"
                    )
                )
            else:
                listed.append(mid)
        mistakes = tuple(listed)
    set_aside = []
    for corner, choice in (data.get("conventions") or {}).items():
        if corner not in applicable_corners(contract):
            known = ", ".join(applicable_corners(contract)) or "none"
            problems.append(
                doc.problem(
                    ("conventions", corner),
                    f"expected a convention corner of contract {contract.name} ({known}), found {corner!r}",
                )
            )
        elif choice == "any":
            set_aside.append(corner)
    problems += _rubric_problems(doc, fn["name"], examples, props)
    if problems:
        return None
    return Spec(
        id=data["id"],
        version=data["version"],
        title=data["title"],
        description=data.get("description", "").strip(),
        function=fn["name"],
        contract=contract,
        parameter_names=contract.parameter_names,
        accept=tuple(fn["returns"].get("accept", DEFAULT_ACCEPT)),
        dtypes=tuple(data.get("dtypes", ["float32"])),
        seed=data.get("seed", 0),
        timeout_s=float(data.get("timeout_s", DEFAULT_TIMEOUT_S)),
        tolerance=default_tol,
        worked_examples=tuple(examples),
        properties=tuple(props),
        path=doc.file,
        nonfinite=data.get("nonfinite", "match"),
        mistakes=mistakes,
        set_aside=tuple(set_aside),
        student_copy=(
            StudentCopy(data["student_copy"]["hidden_cases"], _fraction(data["student_copy"]["hidden_points"]))
            if "student_copy" in data
            else None
        ),
    )


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _read_spec_file(name: str) -> bytes:
    """The bytes of the regular file ``name`` (symbolic links followed), at most MAX_SPEC_BYTES.

    Opened non-blocking, so a FIFO is refused at once instead of waited on."""

    def fail(message: str) -> SpecError:
        return SpecError([SpecProblem(name, 1, 1, "(file)", message)])

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("expected a spec file, found no such file") from None
    except OSError as exc:
        raise fail(f"expected a readable spec file, found: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((what for test, what in _FILE_KINDS if test(mode)), "not a regular file")
            raise fail(f"expected a regular spec file, found {kind}")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MAX_SPEC_BYTES:
            chunk = os.read(fd, MAX_SPEC_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SPEC_BYTES:
            raise fail(f"expected a spec file of at most {MAX_SPEC_BYTES} bytes, found more")
        return b"".join(chunks)
    except OSError as exc:
        raise fail(f"expected a readable spec file, found: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def load_spec(path: str | Path) -> Spec:
    """Load and validate one spec file.

    Raises:
        SpecError: the file is missing, unreadable, not a regular file, larger than
            :data:`MAX_SPEC_BYTES`, not UTF-8, not YAML, or invalid (including a worked example
            asking for more than :data:`MAX_EXAMPLE_WORK` index combinations and a tolerance
            that lets the trivial answers pass, see the module docstring); ``.problems`` lists
            every problem, each with file, line, column and field path.
    """
    name = str(path)
    raw = _read_spec_file(name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = len(raw[raw.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", errors="replace")) + 1
        bad = raw[exc.start : exc.start + 1].hex()
        raise SpecError(
            [SpecProblem(name, line, col, "(file)", f"expected UTF-8 text, found the byte 0x{bad} (not UTF-8)")]
        ) from None
    doc, problems = read_yaml(text, name)
    if doc is None:
        raise SpecError(problems)
    if not isinstance(doc.data, dict):
        raise SpecError([doc.problem((), f"expected a mapping of spec fields, found {_found(doc.data)}")])
    schema_problems = _schema_problems(doc) + _nonfinite_problems(doc) + _control_problems(doc)
    if not schema_problems:
        schema_problems = _tolerance_problems(doc)
    problems += schema_problems
    spec = None if schema_problems else _build(doc, problems)
    if problems or spec is None:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)))
    return spec


def load_specs(paths: Sequence[str | Path]) -> list[Spec]:
    """Load several spec files; raise one SpecError with the problems of all of them."""
    specs, problems = [], []
    for path in paths:
        try:
            specs.append(load_spec(path))
        except SpecError as exc:
            problems += exc.problems
    if problems:
        raise SpecError(problems)
    return specs
