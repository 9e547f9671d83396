"""The student copy of an assignment: ``attnscore export student-spec --spec A1.yaml -o handout/a1.yaml``.

What students get to self-check an assignment with ``attnscore check --spec handout/a1.yaml``:

- ``handout/a1.yaml``: the assignment with its id, version, title and description, and each
  question it hands out with its id, title, function and the student copy of its spec;
- ``handout/a1_specs/<question id>.yaml``: each of those questions' student copy
  (:mod:`attnscore.export.student_spec`: its visible cases only, hidden ones counted).

Left out, and said so in the copy's header and by the command:

- a **hidden** question (``visibility: hidden``): every case of it is hidden, so its student copy
  would hold nothing to check, and its spec's visible examples are not for students either;
- a question whose spec grades against the **instructor's own reference file**
  (``function.reference``): that file is the instructor's solution, and a student copy cannot be
  checked without it.

Points: a question's ``weight``, or the scale its ``points`` set, is kept as ``weight`` when a
YAML number says it exactly (2, 0.5); otherwise (10/3) the copy gives the spec's own points and
the header says by how much the grader scales them. The copy is checked before it is written: it
must load as an assignment. Nothing is written over a file of the full assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from attnscore.export.bundle import ExportError, check_output_folder
from attnscore.export.student_spec import write_loadable, write_student_spec
from attnscore.spec.assignment import ASSIGNMENT_FORMAT, Assignment, AssignmentQuestion, load_assignment

__all__ = ["StudentAssignment", "write_student_assignment", "left_out_reason"]


@dataclass(frozen=True)
class StudentAssignment:
    """What :func:`write_student_assignment` wrote.

    Attributes:
        path: the student copy of the assignment file.
        specs: ``(question id, student spec file)`` for each question handed out, in order.
        left_out: ``(question id, why)`` for each question left out, in order.
    """

    path: Path
    specs: tuple[tuple[str, Path], ...]
    left_out: tuple[tuple[str, str], ...]


def left_out_reason(question: AssignmentQuestion) -> str:
    """Why ``question`` is left out of the student copy, or ``""`` when it is handed out."""
    if question.visibility == "hidden":
        return "a hidden question"
    references = [Path(p).name for p in question.spec.reference_files]
    if references:
        return (
            f"its spec grades against the instructor's reference file {', '.join(references)}, which is not handed out"
        )
    return ""


def _weight(scale: Fraction) -> float | int | None:
    """``scale`` as a YAML number that reads back exactly, or None when no number does."""
    if scale.denominator == 1:
        return int(scale)
    as_float = float(scale)
    return as_float if Fraction(repr(as_float)) == scale else None


def write_student_assignment(assignment_path: str | Path, output: str | Path) -> StudentAssignment:
    """Write the student copy of the assignment ``assignment_path`` to ``output`` and its questions'
    student specs to the folder ``<output's stem>_specs/`` beside it (see the module docstring).

    Raises:
        attnscore.spec.located.SpecError: the assignment (or a question's spec) is invalid.
        ExportError: ``output``'s folder is missing and so is the folder above it (a missing
            folder is created); a file to write is a file of the full
            assignment; every question is left out; a question's spec has no student copy (every
            worked example hidden, or it is a student copy already).
        OSError: a file cannot be written.
    """
    assignment = load_assignment(assignment_path)
    target = Path(output)
    check_output_folder(target)
    folder = target.parent / f"{target.stem}_specs"
    full = {Path(p).resolve() for p in assignment.files()}
    handed = [q for q in assignment.questions if not left_out_reason(q)]
    left_out = tuple((q.id, left_out_reason(q)) for q in assignment.questions if left_out_reason(q))
    if not handed:
        why = "; ".join(f"{qid}: {reason}" for qid, reason in left_out)
        raise ExportError(f"no question of {assignment_path} can be handed out ({why})")
    planned = [target, *(folder / f"{q.id}.yaml" for q in handed)]
    for path in planned:
        if path.resolve() in full:
            raise ExportError(
                f"cannot write the student copy over {path}, a file of the full assignment; choose another -o"
            )
    target.parent.mkdir(exist_ok=True)  # once the copy can be made: a refused one leaves no folder
    folder.mkdir(exist_ok=True)
    specs: list[tuple[str, Path]] = []
    questions: list[dict[str, Any]] = []
    scaled: list[str] = []
    for question in handed:
        copy = folder / f"{question.id}.yaml"
        try:
            write_student_spec(question.spec.path, copy)
        except ExportError as exc:
            raise ExportError(f"question {question.id}: {exc}") from None
        specs.append((question.id, copy))
        entry: dict[str, Any] = {
            "id": question.id,
            "title": question.title,
            "spec": f"{folder.name}/{copy.name}",
            "function": question.function,
        }
        weight = _weight(question.scale)
        if weight is not None and question.scale != 1:
            entry["weight"] = weight
        elif weight is None:
            scaled.append(f"{question.id} by {question.scale}")
        questions.append(entry)
    data: dict[str, Any] = {"format": ASSIGNMENT_FORMAT, "id": assignment.id, "version": assignment.version}
    data["title"] = assignment.title
    if assignment.description:
        data["description"] = assignment.description
    data["questions"] = questions
    text = _header(assignment, left_out, scaled) + yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False
    )
    write_loadable(target, text, load_assignment)
    return StudentAssignment(target, tuple(specs), left_out)


def _header(assignment: Assignment, left_out: tuple[tuple[str, str], ...], scaled: list[str]) -> str:
    lines = [
        "# yaml-language-server: $schema=assignment-v1.schema.json",
        f"# Student copy of assignment {assignment.id} version {assignment.version}, for `attnscore check` (made",
        "# by `attnscore export student-spec`): each question's visible cases only. Graders refuse its specs.",
    ]
    lines += [f"# Left out: {qid} ({reason})." for qid, reason in left_out]
    if scaled:
        lines.append(f"# Points here are the specs' own; the grader scales {', '.join(scaled)}.")
    return "\n".join(lines) + "\n"
