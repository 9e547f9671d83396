"""An assignment's run: every question's session over one shared runner, one result.

An assignment grades several functions of one submission, imported once (:mod:`attnscore.spec.assignment`).
Each question is a :class:`~attnscore.check.session.Session` of its own spec and cases (points
already rescaled, visibility applied) judged through its own runner, a view of the one shared
runner that names the question's function in every call. :meth:`AssignmentSession.run`
interleaves the sessions' groups (:meth:`Session.order`) so that hidden inputs come last of all:

1. every question's visible cases, with their shrinking, question after question;
2. the shared runner's output and load failure are taken (nothing the submission says after it
   has seen a hidden input reaches the student), and each question's own load failure (its
   function missing, found on a visible case);
3. every question's hidden cases, unshrunk;
4. every question's rule cases; the shared runner is closed.

The result is one :class:`~attnscore.report.results.SubmissionResult`: every question's cases in
question order, each with its ``question``, and the questions themselves (``questions``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping

from attnscore.boundary.outputs import CallFailure
from attnscore.check.runner import Runner
from attnscore.check.session import NO_SHRINK, Session, run_result
from attnscore.report.results import CaseResult, Question, SubmissionResult
from attnscore.spec.assignment import Assignment

__all__ = ["AssignmentSession", "QuestionPart", "hidden_missing_text"]


def hidden_missing_text(function: str) -> str:
    """A question's error when its function was found missing on a hidden case: what the submission
    defines is not listed (the worker's answer came after hidden inputs had reached it).

    >>> hidden_missing_text("sdpa")
    "your submission does not define 'sdpa' (found on a hidden case)"
    """
    return f"your submission does not define {function!r} (found on a hidden case)"


@dataclasses.dataclass(frozen=True)
class QuestionPart:
    """One question of an assignment's run.

    Attributes:
        question: the question as the result lists it (its ``error`` is filled in by the run).
        session: the question's session: its spec, its cases (points rescaled, visibility
            applied), ``hidden_last`` and its budget.
        runner: the question's runner, a view of the shared runner naming its function; closing
            it must leave the shared runner open.
    """

    question: Question
    session: Session
    runner: Runner


@dataclasses.dataclass(frozen=True)
class AssignmentSession:
    """The questions ``parts`` of ``assignment`` judged for one ``submission``.

    Attributes:
        assignment: the loaded assignment (its id, version and shown path name the result).
        parts: one :class:`QuestionPart` per question, in question order.
        submission, dtype, device, seed, environment: recorded in the result (``dtype``: the
            questions' dtypes as one word, ``seed``: the base seed shown).
    """

    assignment: Assignment
    parts: tuple[QuestionPart, ...]
    submission: str
    dtype: str
    device: str
    seed: int
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def run(
        self,
        shared: Runner,
        *,
        on_case: Callable[[CaseResult], None] | None = None,
        started: float | None = None,
    ) -> SubmissionResult:
        """Judge every question (see the module docstring) and close ``shared``, the runner every
        question's runner calls through (its load failure is the submission's: an import that
        failed costs every question).

        ``on_case`` is called with each case's final result, its ``question`` set, in judging order.
        """
        start = time.perf_counter() if started is None else started
        orders = [part.session.order() for part in self.parts]
        judged: list[dict[int, CaseResult]] = [{} for _ in self.parts]
        try:
            for part, (first, _, _), done in zip(self.parts, orders, judged, strict=True):
                done.update(part.session.judge(first, part.runner, part.session.budget, on_case=_tell(on_case, part)))
            output, said = shared.output_text(), shared.load_failure
            known = [part.runner.load_failure for part in self.parts]  # said before any hidden input
            for part, (_, last, _), done, own in zip(self.parts, orders, judged, known, strict=True):
                done.update(
                    part.session.judge(last, part.runner, NO_SHRINK, on_case=_tell(on_case, part), disclosed=own)
                )
            for part, (_, _, ruled), done in zip(self.parts, orders, judged, strict=True):
                done.update(part.session.judge_rules(ruled, done, part.runner, on_case=_tell(on_case, part)))
        finally:
            shared.close()
        cases: list[CaseResult] = []
        questions: list[Question] = []
        for part, done, own in zip(self.parts, judged, known, strict=True):
            qid = part.question.id
            cases += [dataclasses.replace(done[i], question=qid) for i in range(len(part.session.cases))]
            questions.append(dataclasses.replace(part.question, error=_question_error(part, shared, own)))
        return run_result(self, self.assignment, "", tuple(cases), shared, output, said, start, tuple(questions))


def _tell(on_case: Callable[[CaseResult], None] | None, part: QuestionPart) -> Callable[[CaseResult], None] | None:
    """``on_case`` given each result of ``part`` with its question set."""
    if on_case is None:
        return None
    qid = part.question.id
    return lambda result: on_case(dataclasses.replace(result, question=qid))


def _question_error(part: QuestionPart, shared: Runner, known: CallFailure | None) -> str:
    """The question's own problem: its function missing (found on a visible case: the worker's full
    message, naming what the submission defines; on a hidden one: :func:`hidden_missing_text`), or ""
    (a failure of the whole submission is the result's ``error``, not a question's)."""
    final = part.runner.load_failure
    if final is None or final is shared.load_failure:
        return ""
    if known is not None:
        return known.message
    return hidden_missing_text(part.question.function)
