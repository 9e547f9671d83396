"""What an exported grader carries for an assignment: its files in their relative layout, and the
course environment of all its questions together.

An assignment file names its questions' specs by paths relative to itself (or by a bundled spec's
id), and a spec names its instructor's reference file relative to itself; so a bundle keeps every
file :meth:`attnscore.spec.assignment.Assignment.files` lists at the same place relative to the
others, under one folder (``assignment/``), and the graders are told where the assignment file lies
in it (Gradescope: ``spec-path.txt``; PrairieLearn: ``options.json``'s ``spec``). A spec named by
its bundled id is not copied: the grader's own copy of attnscore has it, and the assignment names
it by id there too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from attnscore.export.bundle import ExportError
from attnscore.spec.assignment import Assignment, is_assignment_file, load_assignment
from attnscore.spec.bundled import bundled_spec_ids, bundled_spec_path
from attnscore.spec.environment import Environment
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec

__all__ = ["ASSIGNMENT_FOLDER", "AssignmentLayout", "assignment_layout", "assignment_environment", "load_graded"]

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


def load_graded(path: str | Path, *, allow_outside_reference: bool = False) -> Spec | Assignment:
    """The spec or the assignment at ``path`` (told apart by its ``format:``).

    Raises:
        attnscore.spec.located.SpecError: it does not load (every problem, located).
    """
    if is_assignment_file(path):
        return load_assignment(path, allow_outside_reference=allow_outside_reference)
    return load_spec(path)


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
