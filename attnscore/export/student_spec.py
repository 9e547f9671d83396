"""The student copy of a spec: ``attnscore export student-spec --spec SPEC -o student.yaml``.

A student copy holds what ``attnscore check`` needs and nothing a student should not see: the
spec's identity (id, version, seed: generated inputs are seeded from them, so they stay), its
function, dtypes, time limit and tolerances, and its *visible* worked examples and properties with
their ids, points, statements and tolerances unchanged. Hidden worked examples (inputs, expected
values, explanations, ids, titles) and hidden properties (names, parameters) are left out; the
``student_copy`` field says how many cases and how many points were left out, no more. Hidden
ids are not written because ids and titles often say what a hidden case tests
(``nan_in_kept_key``). The ``mistakes`` list is left out too: ``attnscore verify`` proves it on
the full spec, and a copy without the hidden cases need not catch every listed mistake.

The copy is written as clean YAML (PyYAML; multi-line text in block style) after a header
comment; the full spec's comments are not carried over. Because property seeds are derived from
(spec id, version, base seed, property name, dtype) and never from a case's position
(:func:`attnscore.check.cases.derive_seed`), the copy's visible cases are the full spec's, input
for input and bit for bit. Graders refuse a student copy (:func:`refuse_student_copy`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from attnscore.atomic import write_atomic
from attnscore.export.bundle import ExportError, check_output_folder
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError, read_yaml
from attnscore.spec.model import Spec

__all__ = ["StudentCopyText", "refuse_student_copy", "student_spec_text", "write_loadable", "write_student_spec"]


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper with multi-line text in block style (``|``), as specs are written."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(ch in value for ch in "\r\t") and value == value.rstrip(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _has_mapping(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(_has_mapping(v) for v in value))


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    """Arrays (lists of numbers or of arrays) on one line, ``[[1, 0], [0, 1]]``; lists of mappings in block style."""
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=not _has_mapping(value))


_Dumper.add_representer(str, _text)
_Dumper.add_representer(list, _list)


def _number(points: Fraction) -> int | float:
    return int(points) if points.denominator == 1 else float(points)


class StudentCopyText(str):
    """The student copy's YAML text, with what was left out: ``hidden_cases`` and ``hidden_points``."""

    hidden_cases: int
    hidden_points: Fraction


def student_spec_text(spec_path: str | Path) -> StudentCopyText:
    """The YAML text of the student copy of the spec file ``spec_path`` (see the module docstring).

    Raises:
        attnscore.spec.located.SpecError: the spec is invalid (every problem, located).
        ExportError: the spec is already a student copy, every worked example is hidden (a
            spec needs at least one worked example, so no valid copy exists), or the spec has its
            own reference function (``function.reference``: the reference is the solution).
    """
    spec = load_spec(spec_path)
    if spec.student_copy is not None:
        raise ExportError(f"{spec_path} is already a student copy; export the student copy from the full spec")
    if spec.reference_files:
        raise ExportError(
            f"{spec_path} has its own reference function (function.reference), which a student copy would have to "
            "carry, and it is the solution: students check their work on a grader (Gradescope, PrairieLearn) instead"
        )
    text = Path(spec_path).read_text(encoding="utf-8")
    doc, problems = read_yaml(text, str(spec_path))
    if doc is None:  # load_spec read it a moment ago; only a file changed in between gets here
        raise SpecError(problems)
    data: dict[str, Any] = copy.deepcopy(doc.data)
    examples = [e for e in data["worked_examples"] if e.get("visibility", "visible") != "hidden"]
    properties = [p for p in data.get("properties", []) if p.get("visibility", "visible") != "hidden"]
    hidden_examples = [e for e in spec.worked_examples if e.visibility == "hidden"]
    hidden_properties = [p for p in spec.properties if p.visibility == "hidden"]
    if not examples:
        raise ExportError(
            f"every worked example of {spec_path} is hidden; a spec needs at least one worked example, "
            "so make one visible to hand out a student copy"
        )
    hidden_cases = len(hidden_examples) + len(hidden_properties)
    hidden_points = sum((e.points for e in hidden_examples), Fraction(0)) + sum(
        (p.points for p in hidden_properties), Fraction(0)
    )
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "mistakes":
            continue
        if key == "worked_examples":
            out["student_copy"] = {"hidden_cases": hidden_cases, "hidden_points": _number(hidden_points)}
            value = examples
        elif key == "properties":
            value = properties
            if not properties:
                continue
        out[key] = value
    header = (
        "# yaml-language-server: $schema=spec-v1.schema.json\n"
        f"# Student copy of spec {spec.id} version {spec.version}, for `attnscore check` (made by\n"
        "# `attnscore export student-spec`): the visible cases only. The grader also runs "
        f"{hidden_cases} hidden\n# case{'s' * (hidden_cases != 1)} "
        f"({_number(hidden_points)} point{'s' * (hidden_points != 1)}), which this copy leaves out. "
        "Graders refuse this file.\n"
    )
    body = yaml.dump(out, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)
    result = StudentCopyText(header + body)
    result.hidden_cases = hidden_cases
    result.hidden_points = hidden_points
    return result


def write_student_spec(spec_path: str | Path, output: str | Path) -> StudentCopyText:
    """Write the student copy of ``spec_path`` to ``output`` (atomically) and return its text.

    The copy is checked before it is written: it must load as a valid spec.

    Raises:
        attnscore.spec.located.SpecError: the spec is invalid.
        ExportError: ``output``'s folder is missing and so is the folder above it (a missing
            folder is created, as ``export prairielearn -o`` creates its own), ``output`` is the spec itself, or no
            student copy can be made (see :func:`student_spec_text`).
        OSError: the file cannot be written.
    """
    target = Path(output)
    check_output_folder(target)
    if target.exists() and target.resolve() == Path(spec_path).resolve():
        raise ExportError(f"cannot write the student copy over the spec itself ({spec_path}); choose another -o")
    text = student_spec_text(spec_path)
    target.parent.mkdir(exist_ok=True)  # once the copy can be made: a refused one leaves no folder
    write_loadable(target, text, load_spec)
    return text


def write_loadable(target: Path, text: str, load: Callable[[Path], object]) -> None:
    """Write ``text`` to ``target`` (atomically) once ``load`` (:func:`attnscore.spec.load.load_spec`,
    :func:`attnscore.spec.assignment.load_assignment`) took it from a file beside ``target``: a
    student copy that does not load is a bug here, never a file handed out.

    Raises:
        attnscore.spec.located.SpecError: the copy does not load (nothing is written then).
        OSError: a file cannot be written.
    """
    check = target.parent / f".{target.name}.check.yaml"
    try:
        write_atomic(check, text.encode("utf-8"))
        load(check)
    finally:
        check.unlink(missing_ok=True)
    write_atomic(target, text.encode("utf-8"))


def refuse_student_copy(spec: Spec, what: str) -> None:
    """Raise :class:`ExportError` when ``spec`` is a student copy (``what``: the refused action,
    e.g. ``"grade"``): grading on it would leave the hidden cases out of the grade."""
    if spec.student_copy is not None:
        raise ExportError(
            f"{spec.shown_path} is a student copy (its hidden cases are left out): {what} needs the full spec"
        )
