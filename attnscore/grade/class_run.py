"""A class run: grade a class into an output folder that survives being killed and rerun.

``attnscore grade CLASS --spec SPEC --out DIR`` calls :func:`grade_class`, which writes

- ``DIR/gradebook.sqlite``: every result, committed as it finishes (:mod:`attnscore.grade.gradebook`);
- ``DIR/feedback/<student>.txt``: each student's feedback, written atomically as soon as the
  result is committed (named by :func:`feedback_name`: bounded and distinct for distinct students);
- ``DIR/grades.csv``: one row per student (:mod:`attnscore.report.spreadsheet`);
- ``DIR/report.html``: the class report (:mod:`attnscore.report.class_html`).

Only submissions without a current result are graded (new, changed, or graded against another
spec key); the others are read back from the gradebook. The CSV and the report cover every
student of this run, graded now or before.

One student never stops the class: when a student's result cannot be stored or their feedback
file cannot be written, the run goes on, and the problem is recorded for that student
(:attr:`ClassRun.problems`, and the ``error`` column of the CSV).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console

from attnscore.atomic import write_atomic
from attnscore.grade.gradebook import Gradebook, spec_key, student_name, submission_key
from attnscore.grade.time_budget import assignment_limits, grading_limits
from attnscore.report.redact import for_students
from attnscore.report.results import SubmissionResult
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from attnscore.report.text import submission_text
from attnscore.sandbox.launch import Limits
from attnscore.spec.assignment import Assignment
from attnscore.spec.model import Spec
from attnscore.submission.files import Submission, SubmissionError

__all__ = [
    "ClassRun",
    "grade_class",
    "feedback_name",
    "feedback_text",
    "GRADEBOOK",
    "GRADES_CSV",
    "REPORT_HTML",
    "FEEDBACK",
]

GRADEBOOK = "gradebook.sqlite"
GRADES_CSV = "grades.csv"
REPORT_HTML = "report.html"
FEEDBACK = "feedback"


def sweep_partial_writes(folder: Path) -> int:
    """Remove the temporary files (``.NAME.XXXXXXXX.tmp``) that :func:`attnscore.atomic.write_atomic`
    left in ``folder`` when a run was killed mid-write; returns how many went. Only plain files
    are removed; a folder that does not exist has none."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed


@dataclass(frozen=True)
class ClassRun:
    """What a class run did.

    Attributes:
        rows: ``(student, result)`` for every submission of this run, in submission order: each
            result's :meth:`~attnscore.report.results.SubmissionResult.summary` (scores, verdicts,
            diagnoses), or the whole result when the run was asked for them (``whole_results``);
            the gradebook and the feedback files hold every result whole.
        graded: students graded in this run (new or changed).
        reused: students whose stored result was current.
        out: the output folder.
        problems: ``(student, what went wrong)`` for each student whose result could not be
            stored in the gradebook or whose feedback file could not be written (the others are
            unaffected; a result that was not stored is graded again by the next run).
    """

    rows: tuple[tuple[str, SubmissionResult], ...]
    graded: tuple[str, ...]
    reused: tuple[str, ...]
    out: Path
    problems: tuple[tuple[str, str], ...] = ()


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_MAX_KEPT_CHARS = 120


def feedback_name(student: str) -> str:
    """The feedback file's name for ``student``: at most 141 bytes, and distinct for distinct students.

    A plain name (letters, digits, ``.``, ``_`` and ``-``, not starting with ``.``, at most 120
    characters) is kept: ``alice.py`` -> ``alice.py.txt``. Any other name has each other
    character replaced by ``_``, is cut to 120 characters, and gets ``~`` and 16 hex digits of
    its SHA-256: ``a b.py`` -> ``a_b.py~<hash>.txt``. A kept name never holds ``~``, so a changed
    name cannot collide with a kept one, and two changed names collide only if their 64-bit
    hashes do. (Names that differ only in case are distinct files on case-sensitive file systems.)

    Example:
        >>> feedback_name("alice.py"), feedback_name("a b.py") != feedback_name("a_b.py")
        ('alice.py.txt', True)
    """
    if _PLAIN_NAME.fullmatch(student) and len(student) <= _MAX_KEPT_CHARS:
        return f"{student}.txt"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", student).lstrip(".")[:_MAX_KEPT_CHARS]
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe}~{digest}.txt"


def _attnscore_version() -> str:
    try:
        return version("attnscore")
    except PackageNotFoundError:
        return "unknown"


def feedback_text(result: SubmissionResult) -> str:
    """The student's feedback file: the text report of ``result`` as students may see it (no colour,
    lines unwrapped; hidden cases named "hidden case N", :func:`attnscore.report.redact.for_students`)."""
    console = Console(  # force_jupyter=False: only recorded, never displayed in a notebook kernel
        file=io.StringIO(),
        record=True,
        width=100,
        color_system=None,
        highlight=False,
        soft_wrap=True,
        force_jupyter=False,
    )
    console.print(submission_text(for_students(result)))
    return console.export_text()


def grade_class(
    submissions: Sequence[Submission],
    spec: Spec | Assignment,
    out: Path | str,
    *,
    function: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    shrink_steps: int = 50,
    jobs: int = 1,
    scheduler: Any = None,
    on_plan: Callable[[int, int], None] | None = None,
    on_result: Callable[[str, SubmissionResult], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
    cache_cases: bool = False,
    whole_results: bool = False,
) -> ClassRun:
    """Grade what needs grading into ``out`` and write the feedback, CSV and report.

    Each result is stored in the gradebook and its feedback written as soon as it is ready; from
    then on the run keeps only its :meth:`~attnscore.report.results.SubmissionResult.summary`
    (what the CSV, report and table read), so that its memory stays about the same for a class
    of 2,000 as for 200. ``whole_results`` keeps every result whole in :attr:`ClassRun.rows`
    instead (a caller that reports every counterexample, such as ``--format json``).

    Args:
        submissions: from :func:`attnscore.submission.files.find_submissions`; each is named by
            its file or folder name (:func:`attnscore.grade.gradebook.student_name`).
        scheduler: a dask scheduler address: grade on that cluster
            (:func:`attnscore.grade.cluster.grade_on_cluster`) instead of here with ``jobs``.
        on_plan: called once with (students in the run, students to grade now).
        on_result: called with each newly graded ``(student, result)`` after it is committed.
        on_notice: with ``scheduler``, called with a line naming each dask worker lost during the
            run (its submissions are graded again elsewhere).
        function, dtype, seed, limits, shrink_steps, jobs, cache_cases: as for :func:`grade_many`.
        whole_results: keep each result whole, not its summary (see above).

    ``spec`` may be an :class:`~attnscore.spec.assignment.Assignment`: every question graded with
    one worker per submission (:func:`attnscore.grade.assignment_grading.grade_assignment_many`;
    ``function`` does not apply, ``dtype`` and ``seed`` default to each question's spec's); its
    gradebook key covers the assignment file and every spec file (:meth:`Assignment.files`).
    ``scheduler`` does not take an assignment.

    Raises:
        SubmissionError: two submissions have the same name.
        attnscore.grade.gradebook.GradebookError: the gradebook is in use or not a gradebook.
        attnscore.grade.cluster.ClusterError: the cluster cannot be used.
    """
    out = Path(out)
    names: dict[str, Submission] = {}
    for submission in submissions:
        name = student_name(submission)
        if name in names:
            raise SubmissionError(
                f"two submissions are both named {name!r} ({names[name].path} and {submission.path}); a class run "
                "names students by file or folder name: grade them into different --out folders"
            )
        names[name] = submission
    if isinstance(spec, Assignment):
        if scheduler is not None:
            raise ValueError("grading an assignment on a dask cluster is not supported: grade it here (--jobs)")
        limits = limits or assignment_limits(spec)
        options: dict[str, Any] = {"dtype": dtype, "seed": seed, "limits": asdict(limits), "shrink_steps": shrink_steps}
        spec_bytes = _files_bytes(spec.files())
    else:
        dtype = dtype or spec.dtypes[0]
        limits = limits or grading_limits(spec)
        options = {
            "function": function or spec.function,
            "dtype": dtype,
            "seed": spec.seed if seed is None else seed,
            "limits": asdict(limits),
            "shrink_steps": shrink_steps,
        }
        # the spec and the instructor's reference files it grades with: an edited reference regrades
        spec_bytes = Path(spec.path).read_bytes() + _files_bytes(Path(f) for f in spec.reference_files)
    spec_k = spec_key(spec_bytes, spec.version, _attnscore_version(), options)
    sub_keys = {name: submission_key(s) for name, s in names.items()}
    problems: dict[str, str] = {}

    def write_feedback(student: str, result: SubmissionResult) -> None:
        try:
            write_atomic(out / FEEDBACK / feedback_name(student), feedback_text(result).encode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - one student's output never stops the class
            problems.setdefault(student, f"feedback file not written: {_reason(exc)}")

    def kept(result: SubmissionResult) -> SubmissionResult:
        return result if whole_results else result.summary()

    made = _missing_folders(out)  # removed again, with a new gradebook, when the run stops before grading anything
    new_book = not (out / GRADEBOOK).exists()
    with Gradebook(out / GRADEBOOK) as book:
        for folder in (out, out / FEEDBACK):  # this run holds the gradebook: no other run writes here
            sweep_partial_writes(folder)
        done = {name: _named(book.current(name, sub_keys[name], spec_k), name) for name in names}
        todo = [name for name, result in done.items() if result is None]
        # a stored result whose feedback file is missing (a run killed between commit and feedback):
        # written again from the whole result, before only its summary is kept
        for name, result in done.items():
            if result is not None and not (out / FEEDBACK / feedback_name(name)).exists():
                write_feedback(name, result)
            done[name] = None if result is None else kept(result)
        if on_plan is not None:
            on_plan(len(names), len(todo))
        run_id = book.start_run(spec.id, spec_k, len(names), len(todo))
        by_submission = {names[name].name: name for name in todo}
        committed: list[str] = []
        batch = [names[name] for name in todo]
        # Graded elsewhere (grader processes, all forked before the first result arrives, or dask
        # workers), this process only waits between results: the report's drawing library is loaded
        # then, once the first result is in, instead of after the last one. Graded here (one job),
        # loading it early would only move that time, not overlap it.
        elsewhere = scheduler is not None or (jobs > 1 and len(batch) > 1)

        def commit(result: SubmissionResult) -> None:
            student = by_submission[result.submission]
            committed.append(student)
            try:
                book.record(run_id, student, sub_keys[student], spec_k, result)
            except (sqlite3.Error, ValueError) as exc:  # the result is kept for this run's CSV and report
                problems.setdefault(student, f"result not stored in the gradebook (graded again next run): {exc}")
            write_feedback(student, result)
            done[student] = kept(result)
            if on_result is not None:
                on_result(student, result)
            if len(committed) == 1 and elsewhere:
                _load_report_drawing()

        common: dict[str, Any] = {
            "function": function,
            "dtype": dtype,
            "seed": seed,
            "limits": limits,
            "shrink_steps": shrink_steps,
            "on_result": commit,
            "keep": False,  # each result is committed as it comes: none is held by the grading loop
        }
        try:
            if isinstance(spec, Assignment):
                if batch:
                    from attnscore.grade.assignment_grading import grade_assignment_many

                    common.pop("function")
                    grade_assignment_many(batch, spec, jobs=jobs, cache_cases=cache_cases, **common)
            elif batch and scheduler is not None:
                from attnscore.grade.cluster import grade_on_cluster  # dask is optional

                grade_on_cluster(batch, spec, scheduler, on_notice=on_notice, cache_cases=cache_cases, **common)
            elif batch:
                from attnscore.grade.grading import grade_many  # the grading stack: only with something to grade

                grade_many(batch, spec, jobs=jobs, cache_cases=cache_cases, **common)
        except BaseException:
            if not committed:  # nothing half-written remains: the gradebook as it was, or none
                if new_book:
                    book.discard()
                    _remove_empty(made)
                else:
                    with contextlib.suppress(sqlite3.Error):
                        book.forget_run(run_id)
            raise
        book.finish_run(run_id)
        rows = tuple((name, result) for name, result in done.items() if result is not None)
        # The CSV and report of an unchanged class (every result reused, the same students) are the
        # ones already there: a rerun rewrites them only when something they show changed.
        shown = _outputs_key(spec_k, {name: sub_keys[name] for name, _ in rows}) if not todo else None
        if problems or shown is None or book.outputs_key() != shown or not _present(out):
            book.set_outputs_key(None)  # until both are written: a killed write is redone next run
            write_atomic(out / GRADES_CSV, grades_csv(rows, notes=problems).encode(CSV_ENCODING))
            from attnscore.report.class_html import class_report_html  # matplotlib: only when drawn

            html = class_report_html(rows, f"{spec.id} v{spec.version}")
            write_atomic(out / REPORT_HTML, html.encode("utf-8"))
            if not problems:
                book.set_outputs_key(_outputs_key(spec_k, {name: sub_keys[name] for name, _ in rows}))
    reused = tuple(name for name in names if name not in todo)
    return ClassRun(rows, tuple(todo), reused, out, tuple(problems.items()))


def _load_report_drawing() -> None:
    """Import the class report's module (matplotlib) now; a failure is left for the report itself
    to meet and report when it is drawn."""
    try:
        import attnscore.report.class_html  # noqa: F401 - loaded here, used by the report
    except Exception:  # noqa: BLE001 - the report's own import raises it again, where it is handled
        pass


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while each is empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _files_bytes(files: Iterable[Path]) -> bytes:
    """The files' contents, each after its length (so that no two lists of files give the same
    bytes): what a class run's spec key hashes beside the spec's own options."""
    return b"".join(len(data).to_bytes(8, "big") + data for data in (f.read_bytes() for f in files))


def _outputs_key(spec: str, submissions: dict[str, str]) -> str:
    """What the CSV and report show is fixed by the spec key and each student's submission key."""
    text = "\n".join([spec, *(f"{name}\t{key}" for name, key in sorted(submissions.items()))])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _present(out: Path) -> bool:
    return (out / GRADES_CSV).is_file() and (out / REPORT_HTML).is_file()


def _named(result: SubmissionResult | None, student: str) -> SubmissionResult | None:
    """A stored result as this run shows it: named by the student's path in the class folder (a
    gradebook written by an older attnscore may hold the grading machine's path)."""
    if result is None or result.submission == student:
        return result
    return replace(result, submission=student)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"
