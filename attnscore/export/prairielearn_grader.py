"""The PrairieLearn external grader's entry point: grade ``/grade/student`` into
``/grade/results/results.json``.

PrairieLearn starts the grader image once per submission with (its external grading layout):

- ``/grade/student/``: the student's submitted files (a ``.py`` file, a notebook, or several files);
- ``/grade/tests/``: the question's ``tests/`` folder; here ``spec.yaml`` (the spec, with its
  hidden cases: students never see this folder) and ``options.json`` (optional: ``function``,
  ``entry``, the graded function's name and the entry file of multi-file submissions; ``spec``,
  the path in ``tests/`` of the file to grade against instead of ``spec.yaml``: an assignment's
  file, its questions' specs and reference files beside it);
- ``/grade/data/data.json``: the question's parameters and the submission (not needed: the files
  are in ``/grade/student``);
- ``/grade/serverFilesCourse/``: the course's server files (not needed: the spec travels with the
  question).

It writes ``/grade/results/results.json`` in PrairieLearn's format
(:mod:`attnscore.report.prairielearn`), atomically, whatever happens: a submission without a
gradable file, or one that could not be loaded because a file of it does not parse as Python, is
``gradable: false`` with a format error per problem (PrairieLearn marks it "invalid, not gradable":
no points given or lost, no attempt charged); a machine problem is ``gradable: false`` and says
so. Submissions run in attnscore's sandbox.

``ATTNSCORE_GRADE_ROOT`` replaces ``/grade`` (to test the grader outside a container).
Command: ``python -m attnscore.export.prairielearn_grader`` (the image's
``/usr/local/bin/attnscore-grade``). Exit status 0 when results were written.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from attnscore.atomic import write_atomic
from attnscore.boundary.untrusted import clean_text
from attnscore.export.grader_paths import without_grader_path
from attnscore.grade.assignment_grading import grade_assignment_many
from attnscore.grade.environment import environment_problem
from attnscore.grade.grading import grade_many
from attnscore.grade.time_budget import assignment_limits, grading_limits
from attnscore.report.prairielearn import prairielearn_json, prairielearn_results, prairielearn_ungradable
from attnscore.report.results import SubmissionResult
from attnscore.sandbox.launch import preflight
from attnscore.spec.assignment import Assignment, load_spec_or_assignment
from attnscore.spec.located import SpecError
from attnscore.submission.files import Submission, SubmissionError, find_submissions, printable_name

__all__ = ["grade_job", "main", "prairielearn_ungradable_files", "unparsed_files", "ROOT_VARIABLE"]

ROOT_VARIABLE = "ATTNSCORE_GRADE_ROOT"


def _options(tests: Path) -> dict[str, str]:
    path = tests / "options.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not all(
        k in ("function", "entry", "spec") and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"{path}: expected an object with string fields function, entry and spec, found {raw!r}")
    spec = raw.get("spec")
    if spec is not None and (spec.startswith("/") or ".." in PurePosixPath(spec).parts or not spec.strip()):
        raise ValueError(f"{path}: expected spec to be a path inside tests/ (e.g. assignment/a1.yaml), found {spec!r}")
    return raw


def grade_job(root: Path) -> dict[str, Any]:
    """Grade the submission laid out under ``root`` (like ``/grade``) and return the results object.

    Raises:
        SpecError, ValueError, OSError: the question is misconfigured (a problem of the course,
            not the student); :func:`main` turns these into ``gradable: false`` results.
    """
    tests = root / "tests"
    if hasattr(os, "geteuid") and os.geteuid() == 0 and tests.is_dir():
        tests.chmod(0o700)  # the sandboxed worker (another uid) must not read the spec's hidden cases
    options = _options(tests)
    spec = load_spec_or_assignment(tests / options.get("spec", "spec.yaml"))
    try:
        (submission,) = find_submissions([str(root / "student")], entry=options.get("entry"), one=True)
    except SubmissionError as exc:
        reason = without_grader_path(str(exc), root / "student")
        return prairielearn_ungradable(f"Your submission could not be graded: {reason}")
    if isinstance(spec, Assignment):  # every question's function in one upload, one worker
        limits = assignment_limits(spec)
        problem = preflight(limits) or next(
            filter(None, (environment_problem(q.spec, limits) for q in spec.questions)), None
        )
        if problem is not None:
            return prairielearn_ungradable(f"The grader cannot run submissions on this machine: {problem}")
        (result,) = grade_assignment_many([submission], spec, limits=limits, cache_cases=True)
    else:
        limits = grading_limits(spec)
        problem = preflight(limits) or environment_problem(spec, limits)
        if problem is not None:
            return prairielearn_ungradable(f"The grader cannot run submissions on this machine: {problem}")
        (result,) = grade_many([submission], spec, function=options.get("function"), limits=limits, cache_cases=True)
    problems = unparsed_files(submission) if _never_loaded(result) else []
    if problems:  # it does not parse: not gradable, not a graded 0 (PrairieLearn charges no attempt)
        return prairielearn_ungradable_files(problems)
    return prairielearn_results(result)


def _never_loaded(result: SubmissionResult) -> bool:
    """Every case failed because the submission could not be loaded (one submission-wide failure)."""
    return bool(result.cases) and all(c.failure is not None and c.failure.scope == "submission" for c in result.cases)


def unparsed_files(submission: Submission) -> list[str]:
    """One line per ``.py`` file of ``submission`` that does not parse as Python
    (``solution.py, line 3: expected ':'``), in file order; empty when every file parses.

    Parsing compiles to a syntax tree only (``ast.PyCF_ONLY_AST``): nothing of the submission runs
    in the grader. A file the parser cannot take at all (a null byte, nesting too deep for it)
    counts as not parsing.
    """
    problems = []
    for name, content in submission.files:
        if not name.endswith(".py"):
            continue
        try:
            compile(content, name, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            where = f", line {exc.lineno}" if isinstance(exc.lineno, int) and exc.lineno > 0 else ""
            problems.append(f"{printable_name(name)}{where}: {clean_text(str(exc.msg), 300)}")
        except (ValueError, RecursionError, MemoryError) as exc:
            problems.append(f"{printable_name(name)}: Python cannot read it ({type(exc).__name__})")
    return problems


def prairielearn_ungradable_files(problems: list[str]) -> dict[str, Any]:
    """``gradable: false`` results for files that do not parse, one format error each."""
    data = prairielearn_ungradable(
        "Your submission could not be graded: it does not parse as Python, so no case could run "
        "(this attempt is not counted against you): " + "; ".join(problems[:5])
    )
    return {**data, "format_errors": [f"{p} (the file does not parse as Python)" for p in problems]}


def main(argv: list[str] | None = None) -> int:
    """Grade ``$ATTNSCORE_GRADE_ROOT`` (default ``/grade``); always write results.json."""
    root = Path(os.environ.get(ROOT_VARIABLE, "/grade"))
    try:
        data = grade_job(root)
    except SpecError as exc:
        data = prairielearn_ungradable(
            "The question is misconfigured (invalid spec): " + "; ".join(str(p) for p in exc.problems[:5])
        )
    except Exception as exc:  # noqa: BLE001 - the results file must be written whatever happens
        data = prairielearn_ungradable(
            f"The grader failed (a problem of the course, not yours): {type(exc).__name__}: {exc}"
        )
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    write_atomic(results / "results.json", prairielearn_json(data).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
