"""What an exported grader carries for an assignment: its files in their relative layout, and the
course environment of all its questions together.

An assignment file names its questions' specs by paths relative to itself (or by a bundled spec's
id), and a spec names its instructor's reference file relative to itself; so a bundle keeps every
file :meth:`attnscore.spec.assignment.Assignment.files` lists at the same place relative to the
others, under one folder (``assignment/``), and the graders are told where the assignment file lies
in it (Gradescope: ``spec-path.txt``; PrairieLearn: ``options.json``'s ``spec``). A spec named by
its bundled id is not copied: the grader's own copy of attnscore has it, and the assignment names
it by id there too.

A single spec that grades against its instructor's own reference file (``function.reference``)
travels the same way: the bundle's ``spec.yaml`` with each reference file at its path relative to
the spec (:func:`spec_reference_layout`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from attnscore.export.bundle import ExportError
from attnscore.export.student_spec import refuse_student_copy
from attnscore.spec.assignment import Assignment, load_spec_or_assignment
from attnscore.spec.bundled import bundled_spec_ids, bundled_spec_path
from attnscore.spec.environment import Environment
from attnscore.spec.located import SpecError
from attnscore.spec.model import Spec
from attnscore.spec.reference import OUTSIDE_REFERENCE_HINT

__all__ = [
    "ASSIGNMENT_FOLDER",
    "AssignmentLayout",
    "assignment_layout",
    "assignment_environment",
    "spec_reference_layout",
    "load_graded",
    "graded_environment",
    "EXPORT_OUTSIDE_HINT",
]

ASSIGNMENT_FOLDER = "assignment"
"""The folder of a bundle that holds the assignment's files."""


@dataclass(frozen=True)
class AssignmentLayout:
    """An assignment's files as a bundle holds them.

    Attributes:
        entry: the assignment file's path in the bundle (``assignment/course/a1.yaml``), POSIX.
        files: ``(path in the bundle, file here)`` for every file grading needs, the assignment
            file first, each once.
    """

    entry: str
    files: tuple[tuple[str, Path], ...]


def _bundled_files() -> set[Path]:
    return {Path(bundled_spec_path(i)) for i in bundled_spec_ids()}


def assignment_layout(assignment: Assignment) -> AssignmentLayout:
    """Where each file of ``assignment`` goes in a bundle: under ``assignment/``, at its path
    relative to the deepest folder that holds them all (the assignment's own folder when every
    spec and reference file lies under it), so every relative path still resolves.

    Raises:
        ExportError: a file it lists cannot be read (it changed since the assignment was loaded).
    """
    bundled = _bundled_files()
    files = [Path(p) for p in assignment.files() if Path(p) not in bundled or Path(p) == Path(assignment.path)]
    absolute = [Path(os.path.abspath(p)) for p in files]  # lexical, as the loader joined the paths
    root = Path(os.path.commonpath([str(p.parent) for p in absolute]))
    placed: list[tuple[str, Path]] = []
    for here, where in zip(files, absolute, strict=True):
        if not here.is_file():
            raise ExportError(f"cannot copy {here} into the bundle: expected a file the assignment needs, found none")
        placed.append((str(PurePosixPath(ASSIGNMENT_FOLDER, *where.relative_to(root).parts)), here))
    return AssignmentLayout(placed[0][0], tuple(placed))


def spec_reference_layout(spec: Spec, prefix: str = "") -> tuple[tuple[str, Path], ...]:
    """``(path in the bundle, file here)`` of each reference file of ``spec`` (its
    ``reference_files``; none for a bundled contract), at its path relative to the spec's folder
    under ``prefix`` (where the bundle puts the spec itself), so the spec's ``function.reference``
    still resolves.

    Raises:
        ExportError: a reference file lies outside the spec's folder (a bundle keeps the spec as
            ``spec.yaml`` at its top, so nothing can lie above it: move the file beside the spec,
            or grade it as a question of an assignment, whose bundle keeps any layout), or is gone.
    """
    folder = Path(os.path.realpath(Path(spec.path).parent))  # as the loader resolved the references
    placed = []
    for reference in spec.reference_files:
        where = Path(os.path.realpath(reference))
        if not where.is_relative_to(folder):
            raise ExportError(
                f"cannot carry {reference} into the bundle: a spec's reference file must lie in the spec's folder "
                f"({folder}) or below it to be exported with the spec; move it there, or export an assignment "
                "naming the spec"
            )
        if not where.is_file():
            raise ExportError(
                f"cannot copy {reference} into the bundle: expected the spec's reference file, found none"
            )
        placed.append((str(PurePosixPath(prefix, *where.relative_to(folder).parts)), Path(reference)))
    return tuple(placed)


EXPORT_OUTSIDE_HINT = (
    "an exported grader loads only the files the bundle carries, under the spec's folder: move the reference "
    "into the spec's folder (or below it); export takes no --allow-outside-reference"
)
"""Said instead of :data:`attnscore.spec.reference.OUTSIDE_REFERENCE_HINT` when exporting."""


def load_graded(spec_path: str | Path) -> Spec | Assignment:
    """The spec or assignment an export bundles (:func:`attnscore.spec.assignment.load_spec_or_assignment`).

    A reference file outside its spec's folder is refused, and the problem says to move it: the
    platform's grader loads the spec from the bundle without trusting outside files, and a single
    spec's bundle keeps ``spec.yaml`` at its top, so nothing above it can travel.

    Raises:
        attnscore.spec.located.SpecError: the spec or assignment is invalid.
    """
    try:
        return load_spec_or_assignment(spec_path)
    except SpecError as exc:
        raise SpecError(
            [
                dataclasses.replace(p, message=p.message.replace(OUTSIDE_REFERENCE_HINT, EXPORT_OUTSIDE_HINT))
                for p in exc.problems
            ],
            kind=exc.kind,
        ) from None


def graded_environment(
    graded: Spec | Assignment, spec_path: str | Path, function: str | None, grader: str
) -> Environment:
    """The environment a ``grader`` (``"a Gradescope autograder"``) for ``graded`` (from
    ``spec_path``) installs: the spec's own, or every question's together
    (:func:`assignment_environment`).

    Raises:
        ExportError: the spec or a question's is a student copy
            (:func:`attnscore.export.student_spec.refuse_student_copy`), or ``function`` is given
            with an assignment (each question names its own function).
    """
    if isinstance(graded, Spec):
        refuse_student_copy(graded, grader)
        return graded.environment
    for question in graded.questions:
        refuse_student_copy(question.spec, f"{grader} (question {question.id})")
    if function:
        raise ExportError(
            f"--function {function}: an assignment names each question's function itself "
            f"(questions[].function in {spec_path}); leave --function out"
        )
    return assignment_environment(graded)


def assignment_environment(assignment: Assignment) -> Environment:
    """The course environment of every question together: each package any question's spec lists
    (once, in question order), and ``torch_compile`` when any question allows it.

    Example (two questions' environments):
        >>> from types import SimpleNamespace as S
        >>> a = S(questions=[S(spec=S(environment=Environment(("einops",)))),
        ...                  S(spec=S(environment=Environment(("einops", "jaxtyping"), torch_compile=True)))])
        >>> assignment_environment(a)
        Environment(packages=('einops', 'jaxtyping'), torch_compile=True)
    """
    packages: dict[str, None] = {}
    compile_ = False
    for question in assignment.questions:
        environment = question.spec.environment
        packages.update(dict.fromkeys(environment.packages))
        compile_ = compile_ or environment.torch_compile
    return Environment(tuple(packages), compile_)
