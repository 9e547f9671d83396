"""The PrairieLearn external grader's entry point: grade ``/grade/student`` into
``/grade/results/results.json``.

PrairieLearn starts the grader image once per submission with (its external grading layout):

- ``/grade/student/``: the student's submitted files (a ``.py`` file, a notebook, or several files);
- ``/grade/tests/``: the question's ``tests/`` folder; here ``spec.yaml`` (the spec, with its
  hidden cases: students never see this folder) and ``options.json`` (optional: ``function``,
  ``entry``, the graded function's name and the entry file of multi-file submissions);
- ``/grade/data/data.json``: the question's parameters and the submission (not needed: the files
  are in ``/grade/student``);
- ``/grade/serverFilesCourse/``: the course's server files (not needed: the spec travels with the
  question).

It writes ``/grade/results/results.json`` in PrairieLearn's format
(:mod:`attnscore.report.prairielearn`), atomically, whatever happens: a submission without a
gradable file is ``gradable: false`` with a format error (not counted against the student); a
machine problem is ``gradable: false`` and says so. Submissions run in attnscore's sandbox.

``ATTNSCORE_GRADE_ROOT`` replaces ``/grade`` (to test the grader outside a container).
Command: ``python -m attnscore.export.prairielearn_grader`` (the image's
``/usr/local/bin/attnscore-grade``). Exit status 0 when results were written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from attnscore.atomic import write_atomic
from attnscore.export.grader_paths import without_grader_path
from attnscore.grade.grading import grade_many
from attnscore.report.prairielearn import prairielearn_json, prairielearn_results, prairielearn_ungradable
from attnscore.sandbox.launch import Limits, preflight
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from attnscore.submission.files import SubmissionError, find_submissions

__all__ = ["grade_job", "main", "ROOT_VARIABLE"]

ROOT_VARIABLE = "ATTNSCORE_GRADE_ROOT"


def _options(tests: Path) -> dict[str, str]:
    path = tests / "options.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not all(k in ("function", "entry") and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{path}: expected an object with string fields function and entry, found {raw!r}")
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
    spec = load_spec(tests / "spec.yaml")
    options = _options(tests)
    try:
        (submission,) = find_submissions([str(root / "student")], entry=options.get("entry"), one=True)
    except SubmissionError as exc:
        reason = without_grader_path(str(exc), root / "student")
        return prairielearn_ungradable(f"Your submission could not be graded: {reason}")
    limits = Limits(call_timeout_s=spec.timeout_s)
    problem = preflight(limits)
    if problem is not None:
        return prairielearn_ungradable(f"The grader cannot run submissions on this machine: {problem}")
    (result,) = grade_many([submission], spec, function=options.get("function"), limits=limits)
    return prairielearn_results(result)


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
