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

import dataclasses
import keyword
import os
import stat
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from attnscore.boundary.outputs import RETURN_KINDS
from attnscore.catalogue.conventions import applicable_corners
from attnscore.catalogue.families import flash_attention_2
from attnscore.catalogue.properties import PROPERTIES
from attnscore.maths.bounds import broken_bounds, check_symbols, parse_bound
from attnscore.maths.contract import Contract
from attnscore.maths.contracts import CONTRACTS
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.bundled import SpecNotFound, bundled_spec_ids, resolve_spec
from attnscore.spec.environment import read_environment
from attnscore.spec.examples import legend_shape_text, shape_ties, worked_example
from attnscore.spec.formats import SPEC_FORMAT, format_problem
from attnscore.spec.interface import read_interface
from attnscore.spec.located import Positioned, SpecError, SpecProblem, read_yaml
from attnscore.spec.model import PropertyUse, Spec, StudentCopy, WorkedExample
from attnscore.spec.module import read_module
from attnscore.spec.reference import OwnReference, read_reference
from attnscore.spec.rules import read_rules
from attnscore.spec.schema import control_problems, found_text, nonfinite_problems, schema_problems, spec_schema
from attnscore.spec.tolerances import as_fraction, read_tolerance, tolerance_field_problems, tolerance_strength_problems

__all__ = ["load_spec", "load_specs", "spec_schema", "SpecError", "SpecProblem"]

DEFAULT_ACCEPT = RETURN_KINDS
DEFAULT_EXAMPLES = 25
DEFAULT_TIMEOUT_S = 5.0
MAX_SPEC_BYTES = 1024 * 1024
"""Largest spec file read, in bytes (the bundled specs are under 8 KiB)."""


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


def _configured(
    doc: Positioned, contract: Contract, fn: dict[str, Any], problems: list[SpecProblem]
) -> tuple[Contract, bool]:
    """``contract`` with the spec's ``function.keywords`` fixed and its optional parameters that
    the spec leaves out dropped (:meth:`attnscore.maths.contract.Contract.configured`), and
    whether that worked; each unknown keyword or value of the wrong kind is a located problem."""
    keywords: dict[str, Any] = fn.get("keywords", {})
    ok = True
    for name, value in keywords.items():
        try:
            kw = contract.keyword(name)
        except KeyError as exc:
            problems.append(doc.problem(("function", "keywords", name), exc.args[0], key=True))
            ok = False
            continue
        if not kw.accepts(value):
            problems.append(
                doc.problem(
                    ("function", "keywords", name),
                    f"keyword {name}: expected {kw.expected()}, found {found_text(value)}",
                )
            )
            ok = False
    if not ok:
        return contract, False
    names = {p["name"] for p in fn["parameters"]}
    kept = tuple(n for n in contract.parameter_names if n in names or n not in contract.optional_parameters)
    try:
        return contract.configured(keywords, kept), True
    except ValueError as exc:
        problems.append(doc.problem(("function", "keywords") if keywords else ("function", "parameters"), str(exc)))
        return contract, False


def _interface_text(contract: Contract) -> str:
    """The interface a spec states, in words (for a property its inputs would break)."""
    if contract.leading == ():
        return "inputs without leading dims"
    if contract.leading is not None:
        return f"leading dims named [{', '.join(contract.leading)}], one size each, so none broadcast"
    return "masks in full shape"


def _logsumexp_source(
    doc: Positioned,
    fn: dict[str, Any],
    contract: Any,
    examples: list[WorkedExample],
    props: list[PropertyUse],
    problems: list[SpecProblem],
) -> tuple[str, int | None] | None:
    """``function.logsumexp`` as ``(place, index)`` (None when absent); a located problem for a
    contract without a logsumexp, an index with ``returned``, or an expected L with nowhere to read it."""
    raw = fn.get("logsumexp")
    if raw is None:
        for i, use in enumerate(props):
            if use.name == "logsumexp_matches_golden":
                problems.append(
                    doc.problem(
                        ("properties", i, "name"),
                        "expected function.logsumexp to say where L is read for logsumexp_matches_golden, found none",
                    )
                )
        for i, ex in enumerate(examples):
            if ex.expected_logsumexp is not None:
                problems.append(
                    doc.problem(
                        ("worked_examples", i, "expected_logsumexp"),
                        "expected function.logsumexp to say where L is read, found none",
                    )
                )
        return None
    if not flash_attention_2(contract):
        problems.append(
            doc.problem(
                ("function", "logsumexp"),
                f"expected a contract with a logsumexp (flash_attention_2), found {contract.name}",
                key=True,
            )
        )
        return None
    if raw["in"] == "returned" and "index" in raw:
        problems.append(
            doc.problem(
                ("function", "logsumexp", "index"),
                "expected no index with in: returned (L is the second item returned), found one",
                key=True,
            )
        )
        return None
    return str(raw["in"]), raw.get("index")


def _bundled_contract(doc: Positioned, fn: dict[str, Any], problems: list[SpecProblem]) -> Contract | None:
    """The bundled contract ``function.contract`` names, configured and narrowed to the interface
    the spec states (its keywords, shapes, ties); None with the problems added."""
    for field in ("sizes", "reference_check"):
        if field in fn:
            problems.append(
                doc.problem(("function", field), f"expected {field} only with function.reference, found it", key=True)
            )
    for i, raw in enumerate(fn["parameters"]):
        if "dtype" in raw:
            problems.append(
                doc.problem(
                    ("function", "parameters", i, "dtype"),
                    "expected dtype only with function.reference (a bundled contract fixes its parameters' dtypes), "
                    "found it",
                    key=True,
                )
            )
    contract = CONTRACTS.get(fn["contract"])
    if contract is None:
        problems.append(
            doc.problem(
                ("function", "contract"),
                f"expected one of {', '.join(sorted(CONTRACTS))}, found {found_text(fn['contract'])}",
            )
        )
        return None
    contract, configured = _configured(doc, contract, fn, problems)
    if not configured:
        return None
    written = [(p["name"], tuple(p["shape"])) for p in fn["parameters"]]
    before = len(problems)
    declared, returns, interface = read_interface(doc, contract, fn, problems)
    if len(problems) > before:
        return None
    ties = shape_ties(contract, declared, returns)
    if ties is None and [n for n, _ in declared] != list(contract.parameter_names):
        want = ", ".join(f"{n} {legend_shape_text(s)}" for n, s in contract.parameters)
        got = ", ".join(f"{n} {legend_shape_text(s)}" for n, s in written)
        problems.append(
            doc.problem(("function", "parameters"), f"expected {want} for contract {contract.name}, found {got}")
        )
    elif ties is None and (param_ties := shape_ties(contract, declared, None)) is not None:
        want_returns = contract.tied(param_ties).returns
        problems.append(
            doc.problem(
                ("function", "returns", "shape"),
                f"expected {legend_shape_text(want_returns)} for contract {contract.name}, "
                f"found {legend_shape_text(fn['returns']['shape'])}",
            )
        )
    elif ties is None:
        want = ", ".join(f"{n} {legend_shape_text(s)}" for n, s in contract.parameters)
        want += f" -> {legend_shape_text(contract.returns)}"
        got = ", ".join(f"{n} {legend_shape_text(s)}" for n, s in written)
        got += f" -> {legend_shape_text(tuple(fn['returns']['shape']))}"
        problems.append(
            doc.problem(
                ("function", "parameters"),
                f"expected {want} for contract {contract.name}, or those shapes with one symbol standing for "
                f"another throughout (e.g. d_k in place of d_v, for kernels that need d_v = d_k), found {got}",
            )
        )
    else:
        contract = contract.tied(ties)
    return contract.interfaced(interface.leading, interface.full_masks, interface.omittable, interface.unit_dims)


def _instructor_tolerances(doc: Positioned, data: dict[str, Any], problems: list[SpecProblem]) -> None:
    """``dot_bound`` (the spec's or a worked example's) is a located problem for a spec's own
    reference: its error bound is the bundled contracts' own, which an instructor's function has not."""
    places: list[tuple[Any, ...]] = [("tolerance",)]
    places += [("worked_examples", i, "tolerance") for i in range(len(data["worked_examples"]))]
    for path in places:
        raw: Any = data
        for part in path:
            raw = raw.get(part) if isinstance(raw, dict) else raw[part]
        if isinstance(raw, dict) and raw.get("mode") == "dot_bound":
            problems.append(
                doc.problem(
                    path + ("mode",),
                    "expected tolerance mode close, ratio or exact for a spec with function.reference (dot_bound "
                    "needs a bundled contract's error bound), found dot_bound",
                )
            )


def _build(doc: Positioned, problems: list[SpecProblem], allow_outside_reference: bool = False) -> Spec | None:
    data = doc.data
    fn = data["function"]
    own: OwnReference | None = None
    if ("contract" in fn) == ("reference" in fn):
        found = "both" if "contract" in fn else "neither"
        problems.append(
            doc.problem(
                ("function",), f"expected exactly one of function.contract and function.reference, found {found}"
            )
        )
        return None
    if "reference" in fn:
        _instructor_tolerances(doc, data, problems)
        own = read_reference(doc, fn, allow_outside_reference, problems)
        if own is None or problems:
            return None
        contract = own.contract
    else:
        bundled = _bundled_contract(doc, fn, problems)
        if bundled is None:
            return None
        contract = bundled
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
    # a spec's own reference has no error bound of its own: close by default
    default_tol = read_tolerance(data.get("tolerance"), Tolerance("close") if own is not None else Tolerance())
    registered = {**PROPERTIES, **({p.name: p for p in own.properties} if own is not None else {})}
    examples = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["worked_examples"]):
        if (repeated := doc.repeated_id(seen, "worked_examples", i)) is not None:
            problems.append(repeated)
        ex = worked_example(doc, i, raw, contract, default_tol, problems)
        if ex is not None and (broken := broken_bounds(contract, ex.inputs)):
            problems.append(
                doc.problem(
                    ("worked_examples", i, "inputs"),
                    f"expected shapes inside function.where, found {'; '.join(broken)}",
                )
            )
        elif ex is not None:
            examples.append(ex)
    problems += tolerance_strength_problems(
        doc, contract, examples, default_tol, tuple(data.get("dtypes", ["float32"]))
    )
    props = []
    seen_props: dict[str, int] = {}
    for i, raw in enumerate(data.get("properties", [])):
        name = raw["name"]
        if name not in registered:
            problems.append(
                doc.problem(
                    ("properties", i, "name"),
                    f"expected a registered property ({', '.join(sorted(registered))}), found {name!r}",
                )
            )
            continue
        if not registered[name].applies(contract):
            open_interface = dataclasses.replace(contract, leading=None, full_masks=frozenset(), omittable=frozenset())
            why = (
                f" (its inputs need what function.parameters rules out: {_interface_text(contract)})"
                if registered[name].applies(open_interface)
                else ""
            )
            problems.append(
                doc.problem(
                    ("properties", i, "name"),
                    f"expected a property that applies to contract {contract.name}, found {name!r}{why}",
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
                points=as_fraction(raw["points"]),
                statement=raw["statement"].strip(),
                examples=raw.get("examples", DEFAULT_EXAMPLES),
                visibility=raw.get("visibility", "visible"),
                max_value=float(raw.get("max_value", registered[name].default_max_value)),
                line=doc.where(("properties", i))[0],
            )
        )
    mistakes: tuple[str, ...] | None = None
    if "mistakes" in data:
        from attnscore.catalogue.mistakes import MISTAKES, mistakes_for

        listed: list[str] = []
        own_ids = {m.id for m in own.mistakes} if own is not None else set()
        for i, mid in enumerate(data["mistakes"]):
            if mid in own_ids:
                listed.append(mid)
            elif mid not in MISTAKES:
                problems.append(
                    doc.problem(
                        ("mistakes", i),
                        f"expected a catalogue mistake, found {mid!r}; known: {', '.join(sorted(MISTAKES))}",
                    )
                )
            elif MISTAKES[mid] not in mistakes_for(contract):
                problems.append(
                    doc.problem(
                        ("mistakes", i), f"expected a mistake that applies to contract {contract.name}, found {mid!r}"
                    )
                )
            else:
                listed.append(mid)
        mistakes = tuple(listed)
    set_aside, not_asked = [], []
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
        elif choice == "not_asked":
            not_asked.append(corner)
    problems += _rubric_problems(doc, fn["name"], examples, props)
    timeout_s = float(data.get("timeout_s", DEFAULT_TIMEOUT_S))
    budget_s = float(data["time_budget_s"]) if "time_budget_s" in data else None
    if budget_s is not None and budget_s < timeout_s:
        problems.append(
            doc.problem(
                ("time_budget_s",),
                f"expected a time budget of at least timeout_s ({timeout_s:g} s), the limit of one call, "
                f"found {budget_s:g}",
            )
        )
    logsumexp = _logsumexp_source(doc, fn, contract, examples, props, problems)
    environment = read_environment(doc, data.get("environment"), problems)
    rules = read_rules(doc, data.get("rules"), problems)
    module = read_module(doc, fn, contract.bool_parameters | contract.int_parameters, problems)
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
        timeout_s=timeout_s,
        time_budget_s=budget_s,
        tolerance=default_tol,
        worked_examples=tuple(examples),
        properties=tuple(props),
        path=doc.file,
        nonfinite=data.get("nonfinite", "match"),
        mistakes=mistakes,
        set_aside=tuple(set_aside),
        not_asked=tuple(not_asked),
        logsumexp=logsumexp,
        factory=bool(fn.get("factory", False)),
        module=module,
        environment=environment,
        rules=rules,
        student_copy=(
            StudentCopy(data["student_copy"]["hidden_cases"], as_fraction(data["student_copy"]["hidden_points"]))
            if "student_copy" in data
            else None
        ),
        own_properties=own.properties if own is not None else (),
        own_mistakes=own.mistakes if own is not None else (),
        reference_files=own.files if own is not None else (),
        reference_check=own.check_function if own is not None else None,
        outside_reference=allow_outside_reference and own is not None,
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


def load_spec(path: str | Path, *, allow_outside_reference: bool = False) -> Spec:
    """Load and validate one spec file: ``path``, or the bundled spec whose id it is when no such
    file exists (``load_spec("score_matrix")``; :func:`attnscore.spec.bundled.resolve_spec`).

    A spec with its own reference (``function.reference``, :mod:`attnscore.spec.reference`)
    imports that trusted file here, in this process; a reference path that resolves outside the
    spec's own folder is a problem unless ``allow_outside_reference``.

    Raises:
        SpecError: the file is missing (and no bundled spec has that id: the message lists
            the ids), unreadable, not a regular file, larger than
            :data:`MAX_SPEC_BYTES`, not UTF-8, not YAML, or invalid (including a worked example
            asking for more than :data:`MAX_EXAMPLE_WORK` index combinations and a tolerance
            that lets the trivial answers pass, see the module docstring); ``.problems`` lists
            every problem, each with file, line, column and field path.
    """
    try:
        name = str(resolve_spec(path))
    except SpecNotFound:
        ids = ", ".join(bundled_spec_ids())
        problem = f"expected a spec file or a bundled spec id ({ids}), found no such file"
        raise SpecError([SpecProblem(str(path), 1, 1, "(file)", problem)]) from None
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
        raise SpecError([doc.problem((), f"expected a mapping of spec fields, found {found_text(doc.data)}")])
    wrong_format = format_problem(doc, SPEC_FORMAT)
    if wrong_format is not None:  # another kind or version: its fields are not a spec's
        raise SpecError([wrong_format])
    structural = schema_problems(doc) + nonfinite_problems(doc) + control_problems(doc)
    if not structural:
        structural = tolerance_field_problems(doc)
    problems += structural
    spec = None if structural else _build(doc, problems, allow_outside_reference)
    if problems or spec is None:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)))
    return spec


def load_specs(paths: Sequence[str | Path], *, allow_outside_reference: bool = False) -> list[Spec]:
    """Load several spec files; raise one SpecError with the problems of all of them."""
    specs, problems = [], []
    for path in paths:
        try:
            specs.append(load_spec(path, allow_outside_reference=allow_outside_reference))
        except SpecError as exc:
            problems += exc.problems
    if problems:
        raise SpecError(problems)
    return specs
