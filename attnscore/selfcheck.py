"""Student self-check: the visible cases of a spec, on the student's own machine, before submitting.

``attnscore check solution.py --spec SPEC`` and, in a notebook cell,
``check("scores", spec="specs/dot_product_scores.yaml")`` run only the spec's *visible* cases
(hidden cases are neither run nor shown) and give the grader's own feedback: the same cases (same
seed), the same judging, the same minimal counterexamples (same shrinking budget), the same points
(worker-evidenced properties are feedback only, as in the sandbox) and the same text rendering
(:func:`attnscore.report.text.submission_text`).

Isolation: none beyond a per-call time limit. The code is the student's own, on the student's own
machine, so it runs in this process (a file or notebook is imported from a temporary copy; a
function object is called as is). Each call and the import are stopped after the spec's
``timeout_s`` with a timeout verdict where the platform has ``SIGALRM`` and this is the main thread
(else there is no time limit: Ctrl-C stops a hang). The grader's sandbox is not involved. The
grader's time budget applies as in grading (``time_budget_s``, ``time_budget=``): the calls
together may take that long, counted in wall time here (the per-call limit is wall time too), and
the cases left once it is spent are not run (verdict ``budget_spent``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnscore.boundary import worker
from attnscore.boundary.outputs import CallFailure, Outcome
from attnscore.boundary.standins import run_notebook
from attnscore.check.case_cache import cached_cases
from attnscore.check.cases import Case
from attnscore.check.implementation import environment
from attnscore.check.runner import InProcessRunner, RefusedRunner, Runner, budget_cut_text, budgeted_limit
from attnscore.check.session import Session
from attnscore.grade.policy import grading_budget, unscored_in_sandbox
from attnscore.grade.time_budget import budget_problem, call_and_budget
from attnscore.maths.display import counted
from attnscore.report.results import CaseResult, SubmissionResult, Verdict, points_out
from attnscore.sandbox.removal import remove_tree
from attnscore.spec.assignment import Assignment
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec
from attnscore.submission.files import Submission, find_submissions
from attnscore.submission.static_rules import rule_places

__all__ = [
    "AssignmentSelfCheck",
    "SelfCheck",
    "check",
    "check_assignment_path",
    "check_function",
    "check_path",
    "visible_cases",
]


@dataclasses.dataclass(frozen=True)
class SelfCheck:
    """The outcome of a self-check: the result on the visible cases and how many were left out.

    Its ``repr`` is the grader's text report, so a notebook cell that ends in ``check(...)`` shows it.

    Attributes:
        result: the visible cases' results (points as the grader gives them).
        hidden: how many hidden cases the grader also runs (not run here).
    """

    result: SubmissionResult
    hidden: int

    @property
    def passed(self) -> bool:
        """Every visible case passed."""
        return self.result.all_passed

    def text(self, width: int = 100) -> str:
        """The report as plain text (the grader's rendering, then a line about hidden cases)."""
        from rich.console import Console

        from attnscore.report.text import submission_text

        # force_jupyter=False: in a Jupyter kernel rich would also display what it renders here (the
        # report shown twice: once by rich, once as the cell's value); this console only records text
        console = Console(
            file=io.StringIO(), record=True, width=width, color_system=None, highlight=False, force_jupyter=False
        )
        console.print(submission_text(self.result))
        return console.export_text().rstrip("\n") + "\n" + self.footer()

    def footer(self) -> str:
        """One line: visible cases only, and how many hidden cases the grader adds."""
        if not self.hidden:
            return "Self-check: every case of this spec is visible; the grader runs the same cases."
        cases = f"{self.hidden} hidden case{'s' * (self.hidden != 1)}"
        them = "them" if self.hidden != 1 else "it"
        line = f"Self-check: visible cases only; {cases} not run here. The grader also runs {them} when you submit."
        if self.passed:
            line += " Every visible case passed, which is not yet your grade."
        return line

    def __repr__(self) -> str:
        return self.text()


def visible_cases(spec: Spec, dtype: str | None = None, seed: int | None = None) -> tuple[list[Case], int]:
    """The spec's visible cases, built exactly as the grader builds them (points included), and
    the number of hidden cases left out (on a student copy, the full spec's hidden cases, which
    the copy only counts). They are read from the case cache when it holds them
    (:func:`attnscore.check.case_cache.cached_cases`, as ``attnscore grade`` does): a second
    self-check of the same spec does not draw its inputs again."""
    cases = unscored_in_sandbox(cached_cases(spec, dtype or spec.dtypes[0], seed))
    visible = [c for c in cases if c.visibility != "hidden"]
    elsewhere = spec.student_copy.hidden_cases if spec.student_copy is not None else 0
    return visible, len(cases) - len(visible) + elsewhere


class _CallTimeout(BaseException):
    """Raised by the alarm inside a call that ran too long (a BaseException: ``except Exception``
    in the student's code does not swallow it)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_CallTimeout` after ``seconds`` of wall time (no limit off the main thread)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum: int, frame: object) -> None:
        raise _CallTimeout

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _TimedRunner(InProcessRunner):
    """The in-process runner with the spec's per-call wall-time limit and, with ``budget_s``, a time
    budget: the wall time of all its calls together (a call may take what is left of it, at most
    ``timeout_s``; once it is spent, calls are answered with
    :func:`attnscore.check.runner.budget_spent_failure` without running)."""

    def __init__(
        self,
        function: Callable[..., object],
        timeout_s: float,
        spec: Spec | None = None,
        budget_s: float | None = None,
    ) -> None:
        if spec is None:
            super().__init__(function, "cpu")
        else:  # as the grader calls it: the spec's keywords, a factory, where L is read
            how: dict[str, Any] = {
                "logsumexp": spec.logsumexp,
                "factory": spec.factory,
                "module": spec.module,
                # keywords by name, and an optional argument left out (never passed as the OMITTED marker)
                "bind": spec.contract.binding,
            }
            super().__init__(function, "cpu", **how)
        self.timeout_s = timeout_s
        self.budget_s = budget_s
        self.calls_spent = 0.0  # wall seconds of its calls: the budget's clock

    def _limited(self, call: Callable[[], Outcome]) -> Outcome:
        limit = budgeted_limit(self.timeout_s, self.budget_s, self.calls_spent)
        if isinstance(limit, CallFailure):
            return limit
        began = time.monotonic()
        try:
            with _time_limit(limit):
                return call()
        except _CallTimeout:
            if limit < self.timeout_s and self.budget_s is not None:
                return CallFailure(Verdict.TIMEOUT, budget_cut_text(self.budget_s, self.timeout_s))
            return CallFailure(
                Verdict.TIMEOUT,
                f"the call took longer than {self.timeout_s:g} s (an infinite loop, or far too slow)",
            )
        finally:
            self.calls_spent += time.monotonic() - began


def _judge(
    spec: Spec,
    runner: Runner,
    *,
    name: str,
    function: str,
    dtype: str | None,
    seed: int | None,
    shrink_steps: int,
    submission: Submission | None = None,
) -> SelfCheck:
    """The visible part of :func:`attnscore.grade.grading.grade_submission`, with ``runner``: one
    :class:`attnscore.check.session.Session` on the visible cases, with the grading budget (a
    runner that could not load the code, :class:`RefusedRunner`, is not shrunk; its failure is
    the result's ``error``). The spec's rules are read from ``submission``'s code where there is
    one (in process nothing traps the calls themselves)."""
    start = time.perf_counter()
    dtype = dtype or spec.dtypes[0]
    cases, hidden = visible_cases(spec, dtype, seed)
    session = Session(
        spec,
        tuple(cases),
        dtype,
        "cpu",
        name,
        spec.seed if seed is None else seed,
        function,
        budget=grading_budget(shrink_steps),
        environment={**environment("cpu", pinned=False), "sandbox": "none (self-check, in process)"},
        cheapest_first=True,
        rule_places=rule_places(submission, spec.rules) if submission is not None and spec.rules else None,
    )
    return SelfCheck(session.run(runner, started=start), hidden)


def _spec(spec: Spec | str | Path) -> Spec:
    return spec if isinstance(spec, Spec) else load_spec(spec)


def check_function(
    function: Callable[..., object],
    spec: Spec | str | Path,
    *,
    name: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    shrink_steps: int = 50,
    time_budget: float | None = None,
) -> SelfCheck:
    """Self-check a function object (already defined, e.g. in a notebook) on ``spec``'s visible cases.

    Args:
        function: the implementation; called with torch tensors on the CPU in the spec's dtype.
        spec: a :class:`Spec` or the path of a spec file.
        name: what the report calls it (default: the function's qualified name).
        dtype: the tested dtype (default: the spec's first).
        seed: base seed of generated inputs (default: the spec's, as the grader).
        shrink_steps: examples tried per failing property to find a minimal counterexample.
        time_budget: seconds all the calls may take together (default: the spec's, as the grader).

    Raises:
        attnscore.spec.located.SpecError: the spec file is invalid.
        ValueError: ``time_budget`` is shorter than the spec's per-call limit.
    """
    loaded = _spec(spec)
    return _judge(
        loaded,
        _TimedRunner(function, loaded.timeout_s, loaded, _budget(loaded, time_budget)),
        name=name or str(getattr(function, "__qualname__", None) or repr(function)),
        function=loaded.function,
        dtype=dtype,
        seed=seed,
        shrink_steps=shrink_steps,
    )


def _budget(spec: Spec, time_budget: float | None) -> float:
    """The time budget of a self-check: ``time_budget`` or the grader's for ``spec``.

    Raises:
        ValueError: it is shorter than the spec's per-call limit (one line, naming the option).
    """
    call, budget = call_and_budget(spec, None, time_budget)
    problem = budget_problem(call, budget, "--time-budget" if time_budget is not None else "time_budget_s")
    if problem is not None:
        raise ValueError(problem)
    return budget


def _load(folder: Path, entry: str | None, function: str, timeout_s: float) -> Callable[..., object] | CallFailure:
    """Import the entry file from ``folder`` as the sandbox worker does and return ``function``,
    or the failure every call then gets (the worker's own messages)."""
    if entry is None:
        chosen, why = worker.choose_entry(str(folder), function)
        if chosen is None:
            return CallFailure(Verdict.FUNCTION_MISSING, why, "submission")
        entry = chosen
    path = folder / entry
    if not path.is_file():
        files = [p.name for p in folder.glob("*.py")]
        return CallFailure(Verdict.FUNCTION_MISSING, worker.missing_entry_text(entry, files), "submission")
    sys.path[:0] = [str(path.parent)] if path.parent == folder else [str(path.parent), str(folder)]
    module_name = f"attnscore_selfcheck_{id(path):x}"
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        if path.stem.isidentifier() and path.stem not in sys.modules:
            sys.modules[path.stem] = module
        with _time_limit(max(timeout_s, 10.0)):
            if worker.is_notebook(str(path)):  # cell by cell, as the grader runs it
                run_notebook(module, path.read_text(encoding="utf-8"), str(path))
            else:
                module_spec.loader.exec_module(module)
    except _CallTimeout:
        return CallFailure(Verdict.TIMEOUT, "importing your file took too long (code that runs at import?)")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the student's import error (or exit()) is their verdict
        why = worker.describe_import_error(exc, str(path), machine="this machine")
        return CallFailure(worker.failure_verdict(exc), why, "submission")
    value = getattr(module, function, None)
    if value is None or not callable(value):
        message = worker.missing_function_text(function, value, vars(module), module_name)
        return CallFailure(Verdict.FUNCTION_MISSING, message, "submission")
    return value


_NOT_YOURS = re.compile(r"and no file of yours is named ([A-Za-z_][A-Za-z0-9_]*)\.py")


def _beside(failure: CallFailure, path: Path) -> CallFailure:
    """A single file's import of a module that is not installed but lies beside it (``from helpers
    import x`` with ``helpers.py`` in the same folder): that file was not checked, so the failure
    says so and how to check the whole folder, instead of claiming no file of the student's has that
    name."""
    match = _NOT_YOURS.search(failure.message)
    if match is None or not path.is_file():
        return failure
    module, folder = match.group(1), path.parent
    if not ((folder / f"{module}.py").is_file() or (folder / module).is_dir()):
        return failure
    said = (
        f"and {module}{'.py' if (folder / f'{module}.py').is_file() else '/'} lies beside {path.name} but only "
        f"{path.name} was checked: check the whole folder (attnscore check {shlex.quote(str(folder))})"
    )
    return dataclasses.replace(failure, message=failure.message.replace(match.group(0), said))


def check_path(
    path: str | Path,
    spec: Spec | str | Path,
    *,
    function: str | None = None,
    entry: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    shrink_steps: int = 50,
    time_budget: float | None = None,
) -> SelfCheck:
    """Self-check a submission as the grader reads it (a ``.py`` file, a notebook or a folder).

    The files are read and converted exactly as for grading (:func:`find_submissions`, one
    submission), copied to a temporary folder and imported in this process. ``time_budget``:
    seconds all its calls may take together (default: the spec's, as the grader).

    Raises:
        attnscore.submission.files.SubmissionError: ``path`` is missing or not a submission.
        attnscore.spec.located.SpecError: the spec file is invalid.
        ValueError: ``time_budget`` is shorter than the spec's per-call limit.
    """
    loaded = _spec(spec)
    budget = _budget(loaded, time_budget)
    name = function or loaded.function
    (submission,) = find_submissions([str(path)], entry=entry, one=True)
    options = {
        "name": submission.name,
        "function": name,
        "dtype": dtype,
        "seed": seed,
        "shrink_steps": shrink_steps,
        "submission": submission,
    }
    if submission.problem is not None:
        refused = RefusedRunner(CallFailure(Verdict.FUNCTION_MISSING, submission.problem, "submission"))
        return _judge(loaded, refused, **options)  # type: ignore[arg-type]
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    tmp = tempfile.mkdtemp(prefix="attnscore-check-")
    try:  # removed without recursion: the student's code may have built a folder chain of any depth in it
        folder = Path(tmp)
        _lay_out(submission, folder)
        try:
            loaded_function = _load(folder, submission.entry, name, loaded.timeout_s)
            if isinstance(loaded_function, CallFailure):
                loaded_function = _beside(loaded_function, Path(path))
                return _judge(loaded, RefusedRunner(loaded_function), **options)  # type: ignore[arg-type]
            runner = _TimedRunner(loaded_function, loaded.timeout_s, loaded, budget)
            return _judge(loaded, runner, **options)  # type: ignore[arg-type]
        finally:
            sys.path[:] = saved_path
            for module in set(sys.modules) - saved_modules:  # the student's modules: a later check re-imports
                if str(getattr(sys.modules[module], "__file__", None) or "").startswith(tmp):
                    del sys.modules[module]
    finally:
        remove_tree(tmp)


def _lay_out(submission: Submission, folder: Path) -> None:
    for relative, content in submission.files:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def check(
    function: str | Callable[..., object] | None = None,
    spec: Spec | str | Path | None = None,
    *,
    dtype: str | None = None,
    seed: int | None = None,
    shrink_steps: int = 50,
) -> SelfCheck:
    """Self-check from a notebook cell or a script, like otter's ``grader.check``.

    ``check("scores", spec="specs/dot_product_scores.yaml")`` looks ``scores`` up among the
    caller's globals (the notebook's namespace); ``check(scores, spec=...)`` takes the function
    itself; ``check(spec=...)`` looks up the spec's function name. The result's ``repr`` is the
    grader's report of the visible cases.

    Raises:
        TypeError: ``spec`` is missing.
        attnscore.spec.located.SpecError: the spec file is invalid.
    """
    if spec is None:
        raise TypeError("check() needs spec=, e.g. check('scores', spec='specs/dot_product_scores.yaml')")
    loaded = _spec(spec)
    if callable(function):
        return check_function(function, loaded, dtype=dtype, seed=seed, shrink_steps=shrink_steps)
    name = function or loaded.function
    namespace = sys._getframe(1).f_globals
    found = namespace.get(name)
    if not callable(found):
        what = "nothing" if found is None else f"a {type(found).__name__}"
        message = f"no function named {name!r} is defined here (found {what}); run the cell that defines it first"
        refused = RefusedRunner(CallFailure(Verdict.FUNCTION_MISSING, message, "submission"))
        return _judge(loaded, refused, name=name, function=name, dtype=dtype, seed=seed, shrink_steps=0)
    return check_function(found, loaded, name=name, dtype=dtype, seed=seed, shrink_steps=shrink_steps)


@dataclasses.dataclass(frozen=True)
class AssignmentSelfCheck:
    """The outcome of a self-check of an assignment: its visible questions' visible cases.

    Attributes:
        result: one result for the visible questions (``questions`` lists them), each case with its
            ``question``, points rescaled as the grader rescales them.
        hidden: how many hidden cases of the visible questions the grader also runs (not run here).
        skipped: the hidden questions' ids, not run here (the grader runs every case of them).
    """

    result: SubmissionResult
    hidden: int
    skipped: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """Every visible case of every visible question passed."""
        return self.result.all_passed

    def footer(self) -> str:
        """Lines: each visible question's points, the hidden cases and questions not run here."""
        lines = []
        for question in self.result.questions:
            got, out_of = self.result.question_score(question.id)
            lines.append(f"{question.id}  {points_out(got)}/{points_out(out_of)}  {question.error}".rstrip())
        lines.append(f"Total on the visible cases: {points_out(self.result.score)}/{points_out(self.result.max_score)}")
        if self.skipped:
            lines.append(
                f"Hidden question{'s' * (len(self.skipped) != 1)} not run here: {', '.join(self.skipped)} "
                "(the grader runs every case of them when you submit)."
            )
        if self.hidden:
            lines.append(f"Self-check: {counted(self.hidden, 'hidden case')} of the questions above not run here.")
        return "\n".join(lines)


def check_assignment_path(
    path: str | Path,
    assignment: Assignment,
    *,
    entry: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    shrink_steps: int = 50,
    time_budget: float | None = None,
) -> AssignmentSelfCheck:
    """Self-check a submission on every visible question of ``assignment``: each question's
    visible cases, as :func:`check_path` checks one spec (``function`` the question's), points
    rescaled as the grader rescales them; hidden questions are not run.

    Raises:
        attnscore.submission.files.SubmissionError: ``path`` is missing or not a submission.
        ValueError: ``time_budget`` is shorter than a question's per-call limit.
    """
    from attnscore.report.results import Question

    cases: list[CaseResult] = []
    questions: list[Question] = []
    errors: list[str] = []
    hidden = 0
    first: SubmissionResult | None = None
    for q in assignment.questions:
        if q.visibility == "hidden":
            continue
        outcome = check_path(
            path,
            q.spec,
            function=q.function,
            entry=entry,
            dtype=dtype,
            seed=seed,
            shrink_steps=shrink_steps,
            time_budget=time_budget,
        )
        first = first or outcome.result
        hidden += outcome.hidden
        cases += [
            dataclasses.replace(c, points=c.points * q.scale, max_points=c.max_points * q.scale, question=q.id)
            for c in outcome.result.cases
        ]
        errors.append(outcome.result.error)
        questions.append(Question(q.id, q.title, q.spec.id, q.spec.version, q.function, q.visibility))
    shared = errors[0] if errors and errors[0] and len(set(errors)) == 1 and len(errors) > 1 else ""
    questions = [
        dataclasses.replace(question, error="" if shared else err)
        for question, err in zip(questions, errors, strict=True)
    ]
    skipped = tuple(q.id for q in assignment.questions if q.visibility == "hidden")
    result = SubmissionResult(
        submission=first.submission if first is not None else Path(path).name,
        spec_id=assignment.id,
        spec_version=assignment.version,
        spec_path=assignment.shown_path,
        function="",
        cases=tuple(cases),
        dtype=dtype or "/".join(dict.fromkeys(q.spec.dtypes[0] for q in assignment.questions)),
        device="cpu",
        seed=seed if seed is not None else assignment.questions[0].spec.seed,
        duration_s=0.0 if first is None else first.duration_s,
        error=shared,
        output=first.output if first is not None else "",
        environment=dict(first.environment) if first is not None else {},
        questions=tuple(questions),
    )
    return AssignmentSelfCheck(result, hidden, skipped)
