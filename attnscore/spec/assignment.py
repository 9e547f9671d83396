"""Assignment files: several questions graded in one submission.

An assignment (format ``attnscore-assignment/1``, JSON Schema ``assignment-v1.schema.json``
beside the specs' own) lists questions; each names a spec (a file relative to the assignment, or
a bundled spec's id), the name it grades in the submission (default: the spec's
``function.name``), its points and its visibility::

    format: attnscore-assignment/1
    id: cs336_a1_attention
    title: Assignment 1, attention
    questions:
      - {id: scores, spec: score_matrix, points: 10}
      - {id: weights, spec: attention_weights.yaml, function: softmax_weights, weight: 2}
      - {id: sdpa, spec: sdpa, visibility: hidden}

Points: ``points: P`` rescales the spec's points exactly so that the question totals ``P``
(three cases of 1 point each with ``points: 10`` become 10/3 each); ``weight: W`` multiplies
them; with neither the spec's own points stand. A question ``visibility: hidden`` hides every
case of it.

Loading reports every problem at once, each located as the spec loader does
(``file:line:col: questions[2].points: expected ..., found ...``), the YAML 1.1 traps included;
a question whose spec does not load adds that spec's own located problems.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from attnscore.catalogue.properties import PROPERTIES
from attnscore.spec.bundled import bundled_spec_ids, bundled_spec_path
from attnscore.spec.formats import ASSIGNMENT_FORMAT, format_problem
from attnscore.spec.load import _read_spec_file, load_spec
from attnscore.spec.located import Positioned, SpecError, SpecProblem, read_yaml
from attnscore.spec.model import Spec
from attnscore.spec.schema import (
    assignment_schema,
    control_problems,
    found_text,
    nonfinite_problems,
    schema_problems,
)
from attnscore.spec.tolerances import as_fraction

__all__ = [
    "ASSIGNMENT_FORMAT",
    "MAX_QUESTION_POINTS",
    "Assignment",
    "AssignmentQuestion",
    "assignment_schema",
    "graded_points",
    "is_assignment_file",
    "load_assignment",
    "load_assignment_specs",
    "load_spec_or_assignment",
]


VISIBILITIES = ("visible", "hidden")

MAX_QUESTION_POINTS = 10**6
"""The most points one question may total (its ``points``, or its spec's points times ``weight``);
``weight`` is at most this too. A bound keeps totals and reports readable: 1e308 is a typo."""


@dataclass(frozen=True)
class AssignmentQuestion:
    """One question of an assignment, its spec loaded.

    Attributes:
        id: the question's id (snake_case, unique in its assignment).
        title: one line: the question's ``title``, else its spec's.
        spec: the question's :class:`~attnscore.spec.model.Spec`.
        function: the name graded in the submission (``function:``, else the spec's ``function.name``).
        points: the question's total after rescaling, exact (``points:``; ``weight`` times the spec's
            points; else the spec's points as graded, :func:`graded_points`).
        scale: what every case's points of the spec are multiplied by (``points / graded_points``,
            ``weight``, or 1), exact.
        visibility: ``"visible"`` or ``"hidden"`` (every case of a hidden question is hidden).
        line: the question's line in the assignment file (1-based).
    """

    id: str
    title: str
    spec: Spec
    function: str
    points: Fraction
    scale: Fraction
    visibility: str
    line: int


@dataclass(frozen=True)
class Assignment:
    """An assignment file, loaded: its questions in file order.

    Attributes:
        id, version, title, description: as the file says (``version`` 1 when it says none).
        path: the file it was loaded from.
        questions: the :class:`AssignmentQuestion` s, in file order.
        outside_reference: whether it was loaded with ``allow_outside_reference`` (a grader process
            that loads it again must be told so too).
    """

    id: str
    version: int
    title: str
    description: str
    path: str
    questions: tuple[AssignmentQuestion, ...]
    outside_reference: bool = False

    @property
    def max_points(self) -> Fraction:
        """The assignment's total, exact: every question's :attr:`AssignmentQuestion.points`."""
        return sum((q.points for q in self.questions), Fraction(0))

    @property
    def shown_path(self) -> str:
        """The assignment's name as reports show it, the same on every machine: ``<id>.yaml``."""
        return f"{self.id}.yaml"

    def question(self, question_id: str) -> AssignmentQuestion:
        """The question ``question_id``.

        Raises:
            KeyError: no question has that id (the message lists the ids).
        """
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(
            f"expected a question of {self.id} ({', '.join(q.id for q in self.questions)}), found {question_id!r}"
        )

    def files(self) -> tuple[Path, ...]:
        """Every file grading needs, each once, in order: the assignment file, each question's spec
        file, and each instructor reference file a spec names (its ``reference_files``, where the
        spec model has them): what an export bundle copies."""
        found: list[Path] = [Path(self.path)]
        for q in self.questions:
            found.append(Path(q.spec.path))
            found += [Path(p) for p in q.spec.reference_files]
        return tuple(dict.fromkeys(found))


def graded_points(spec: Spec) -> Fraction:
    """The points grading ``spec`` can award, exact: its worked examples, properties and rules,
    less the cases that only advise (a convention corner the spec does not ask about or sets aside
    carries no points, as :func:`attnscore.check.cases.build_cases` builds them).

    >>> from attnscore.spec.load import load_spec
    >>> graded_points(load_spec("score_matrix")) == load_spec("score_matrix").max_points
    True
    """
    aside = set(spec.not_asked) | set(spec.set_aside)
    total = sum((e.points for e in spec.worked_examples if not (e.convention and e.convention in aside)), Fraction(0))
    for use in spec.properties:
        corner = PROPERTIES[use.name].corner if use.name in PROPERTIES else ""
        if not (corner and corner in aside):
            total += use.points
    return total + sum((r.points for r in spec.rules), Fraction(0))


def _read_text(name: str) -> str:
    """The assignment file's text (a regular UTF-8 file of at most MAX_SPEC_BYTES), else a located SpecError."""
    try:
        raw = _read_spec_file(name)
    except SpecError as exc:
        raise SpecError(exc.problems, kind="assignment") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = len(raw[raw.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", errors="replace")) + 1
        bad = raw[exc.start : exc.start + 1].hex()
        raise SpecError(
            [SpecProblem(name, line, col, "(file)", f"expected UTF-8 text, found the byte 0x{bad} (not UTF-8)")],
            kind="assignment",
        ) from None


def is_assignment_file(path: str | Path, *, any_version: bool = False) -> bool:
    """Whether ``path`` is a regular file (of at most the spec size limit) whose YAML says
    ``format: attnscore-assignment/1`` (with ``any_version``: ``attnscore-assignment/`` and any
    version, which :func:`load_assignment` then reports as unknown); False for anything else (a
    spec, a bundled spec id, a missing or unreadable file, text that is not YAML). Never raises.

    >>> is_assignment_file("score_matrix")
    False
    """
    try:
        text = _read_text(str(path))
    except (SpecError, OSError):
        return False
    doc, _ = read_yaml(text, str(path))
    if doc is None or not isinstance(doc.data, dict):
        return False
    found = doc.data.get("format")
    if any_version:
        return isinstance(found, str) and found.startswith(ASSIGNMENT_FORMAT.rsplit("/", 1)[0] + "/")
    return found == ASSIGNMENT_FORMAT


def _spec_file(base: Path, text: str) -> Path | None:
    """The spec a question names: the file ``text`` relative to the assignment's folder ``base``
    when it exists, else the bundled spec whose id (or file name) it is, else None."""
    candidate = base / text
    if candidate.exists() or candidate.is_symlink():
        return candidate
    stem = text[: -len(".yaml")] if text.endswith(".yaml") else text
    if "/" not in text and "\\" not in text and stem in bundled_spec_ids():
        return bundled_spec_path(stem)
    return None


def _question(
    doc: Positioned,
    i: int,
    raw: dict[str, Any],
    base: Path,
    allow_outside_reference: bool,
    problems: list[SpecProblem],
) -> AssignmentQuestion | None:
    """Question ``i`` of the assignment, its spec loaded and its points rescaled, or None (its
    problems, and its spec's, added to ``problems``)."""
    where = ("questions", i)
    ok = True
    if "points" in raw and "weight" in raw:
        problems.append(
            doc.problem(
                (*where, "weight"),
                f"expected points or weight, not both, found points: {raw['points']} and weight: {raw['weight']} "
                "(points sets the question's total, weight multiplies the spec's own points)",
                key=True,
            )
        )
        ok = False
    function = raw.get("function")
    if function is not None and (
        keyword.iskeyword(function) or (function.startswith("__") and function.endswith("__"))
    ):
        problems.append(
            doc.problem(
                (*where, "function"),
                f"expected a name a submission can define with def or class, found {function!r} "
                "(a Python keyword or a special __name__)",
            )
        )
        ok = False
    path = _spec_file(base, raw["spec"])
    if path is None:
        ids = ", ".join(bundled_spec_ids())
        problems.append(
            doc.problem(
                (*where, "spec"),
                f"expected a spec file (relative to {doc.file}) or a bundled spec id ({ids}), "
                f"found {found_text(raw['spec'])}, which is neither",
            )
        )
        return None
    if is_assignment_file(path):
        itself = " (this assignment itself)" if path.resolve() == Path(doc.file).resolve() else ""
        problems.append(
            doc.problem(
                (*where, "spec"),
                f"expected a spec file or a bundled spec id, found {path}, an assignment file{itself}: assignments "
                "do not nest; name each question's spec here",
            )
        )
        return None
    try:
        spec = load_spec(path, allow_outside_reference=allow_outside_reference)
    except SpecError as exc:
        problems.append(
            doc.problem(
                (*where, "spec"),
                f"expected a spec that loads, found {path} with {len(exc.problems)} problem(s) "
                "(listed with its own lines)",
            )
        )
        problems.extend(exc.problems)
        return None
    own = graded_points(spec)
    if "points" in raw:
        wanted = as_fraction(raw["points"])
        if own == 0:
            problems.append(
                doc.problem((*where, "points"), f"expected a spec with points to rescale, found {spec.id} awarding 0")
            )
            return None
        scale = wanted / own
    else:
        scale = as_fraction(raw["weight"]) if "weight" in raw else Fraction(1)
        if own * scale > MAX_QUESTION_POINTS:
            given = f"weight {raw['weight']} times" if "weight" in raw else "(no points or weight)"
            problems.append(
                doc.problem(
                    (*where, "weight" if "weight" in raw else "spec"),
                    f"expected a question total of at most {MAX_QUESTION_POINTS} points, found {given} the "
                    f"{own} points of {spec.id}: {float(own * scale):.6g} points (give points: instead)",
                )
            )
            return None
    if not ok:
        return None
    return AssignmentQuestion(
        id=raw["id"],
        title=raw.get("title", spec.title),
        spec=spec,
        function=function or spec.function,
        points=own * scale,
        scale=scale,
        visibility=raw.get("visibility", "visible"),
        line=doc.where(where)[0],
    )


def _question_index(field: str) -> int | None:
    """The question a problem's field path lies in (``questions[2].points``: 2), else None."""
    match = re.match(r"^questions\[(\d+)\]", field)
    return int(match.group(1)) if match else None


def load_assignment(path: str | Path, *, allow_outside_reference: bool = False) -> Assignment:
    """Load and validate the assignment file ``path`` and every question's spec.

    ``allow_outside_reference`` is handed to the spec loader for each question's spec: whether a
    spec may name an instructor's reference file outside its own folder.

    Raises:
        SpecError: the file is missing, unreadable, not a regular file, larger than the spec size
            limit, not UTF-8 or not YAML; it breaks the schema (an unknown field, a visibility
            other than visible or hidden, a quoted number, ...); two questions share an id; a
            question gives both ``points`` and ``weight``, a ``function`` no ``def`` can define,
            a ``spec`` that is neither a file nor a bundled id, or a spec that does not load (its
            own located problems follow). ``.problems`` lists every problem, each located.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "a1.yaml").write_text(
        ...     "format: attnscore-assignment/1\\nid: a1\\ntitle: A1\\n"
        ...     "questions:\\n  - {id: scores, spec: score_matrix, points: 10}\\n")
        >>> a1 = load_assignment(folder / "a1.yaml")
        >>> [(q.id, q.function, q.points) for q in a1.questions]
        [('scores', 'score_matrix', Fraction(10, 1))]
    """
    name = str(path)
    text = _read_text(name)
    doc, problems = read_yaml(text, name)
    if doc is None:
        raise SpecError(problems, kind="assignment")
    if not isinstance(doc.data, dict):
        shown = found_text(doc.data)
        raise SpecError([doc.problem((), f"expected a mapping of assignment fields, found {shown}")], kind="assignment")
    wrong_format = format_problem(doc, ASSIGNMENT_FORMAT)
    if wrong_format is not None:  # another kind or version: its fields are not this one's
        raise SpecError([wrong_format], kind="assignment")
    nonfinite = nonfinite_problems(doc)
    infinite = {p.field for p in nonfinite}  # `.inf` is said once, as not finite (not also as over the bound)
    structural = [p for p in schema_problems(doc, assignment_schema()) if p.field not in infinite]
    structural += nonfinite + control_problems(doc)
    problems += structural
    # a question with a problem of form (or a YAML trap) is not read further; the others still are
    broken = {_question_index(p.field) for p in problems}
    if None in broken:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)), kind="assignment")
    data = doc.data
    base = Path(name).parent
    questions: list[AssignmentQuestion] = []
    spec_problems: list[SpecProblem] = []
    own: list[SpecProblem] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["questions"]):
        if i in broken:
            continue
        if (repeated := doc.repeated_id(seen, "questions", i, "question id")) is not None:
            own.append(repeated)
        found: list[SpecProblem] = []
        question = _question(doc, i, raw, base, allow_outside_reference, found)
        own += [p for p in found if p.file == name]
        spec_problems += [p for p in found if p.file != name]
        if question is not None:
            questions.append(question)
    problems += own
    if problems or spec_problems:
        raise SpecError(sorted(problems, key=lambda p: (p.line, p.col)) + spec_problems, kind="assignment")
    return Assignment(
        id=data["id"],
        version=data.get("version", 1),
        title=data["title"],
        description=data.get("description", "").strip(),
        path=name,
        questions=tuple(questions),
        outside_reference=allow_outside_reference,
    )


def load_spec_or_assignment(path: str | Path, *, allow_outside_reference: bool = False) -> Spec | Assignment:
    """What a command's ``--spec FILE`` names: an :class:`Assignment` when the file says
    ``format: attnscore-assignment/1`` (:func:`is_assignment_file`), else a spec
    (:func:`attnscore.spec.load.load_spec`: a file, or a bundled spec's id).

    Raises:
        SpecError: as :func:`load_assignment` or :func:`attnscore.spec.load.load_spec` raise.

    >>> load_spec_or_assignment("score_matrix").id
    'score_matrix'
    """
    if is_assignment_file(path, any_version=True):
        return load_assignment(path, allow_outside_reference=allow_outside_reference)
    return load_spec(path, allow_outside_reference=allow_outside_reference)


def load_assignment_specs(paths: Sequence[str | Path], *, allow_outside_reference: bool = False) -> list[Spec]:
    """The specs of ``paths`` (spec files, bundled ids or assignment files: an assignment stands for
    its questions' specs), each spec file once, in order (what ``attnscore verify`` verifies).

    Raises:
        SpecError: one error with the problems of every path that does not load.
    """
    specs: list[Spec] = []
    problems: list[SpecProblem] = []
    kinds: set[str] = set()
    seen: set[str] = set()
    for path in paths:
        try:
            loaded = load_spec_or_assignment(path, allow_outside_reference=allow_outside_reference)
        except SpecError as exc:
            problems += exc.problems
            kinds.add(exc.kind)
            continue
        for spec in [q.spec for q in loaded.questions] if isinstance(loaded, Assignment) else [loaded]:
            key = str(Path(spec.path).resolve())
            if key not in seen:
                seen.add(key)
                specs.append(spec)
    if problems:
        raise SpecError(problems, kind=kinds.pop() if len(kinds) == 1 else "spec")
    return specs
