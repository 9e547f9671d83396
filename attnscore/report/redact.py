"""The hidden-case rules, applied once: a failure as it may be shown.

A hidden case's :class:`~attnscore.report.failure.Failure` holds its inputs and expected values
(shrinking and diagnosis need them). :func:`redact` turns it into the failure a student may see,
and every renderer of :mod:`attnscore.report.feedback` (so every reporter: terminal, JSON,
Gradescope, PrairieLearn, pytest, the class page) renders only redacted failures: none of them
decides again what a hidden case may say.

What a hidden case loses: its arguments and their layouts, the tested dtype, every number of the
comparison (a :class:`~attnscore.report.failure.Withheld` says only the kind of mismatch and the
output's name: counts and indices give the shape away), a property check's own words (they may
quote values), the hint, the explanation, where a shrunk counterexample came from, and any text
the submission wrote (exception messages, its own exception classes, what it returned). What it
keeps: what the case checks, the verdict, a builtin exception's type name, the grader's own words
(time limits, a crash), a failure said before any hidden input ran (``disclosed``, a load
failure), the diagnosed mistake and the convention corner.

Students see less still (:func:`for_students`, called first by every student-facing reporter:
Gradescope, PrairieLearn, a class run's feedback files): a hidden case is "hidden case N" (N counts
the hidden cases in spec order) with its verdict and points, never its id, title, statement or
spec line, which often say what the case tests. The instructor's own reports (text, JSON, the
class page and spreadsheet) keep the names.
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any, ClassVar, Protocol, TypeVar

from attnscore.boundary.verdict import Verdict
from attnscore.report.failure import Failure, Mismatch, Withheld


class _Cases(Protocol):
    """What :func:`for_students` reads of a result (:class:`attnscore.report.results.SubmissionResult`,
    which imports this module): a dataclass with cases and, for an assignment, its questions."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def cases(self) -> tuple[Any, ...]: ...

    @property
    def questions(self) -> tuple[Any, ...]: ...


_Result = TypeVar("_Result", bound=_Cases)

__all__ = [
    "redact",
    "withhold",
    "anonymise",
    "for_students",
    "hidden_case_label",
    "BUILTIN_EXCEPTIONS",
    "HIDDEN_NOTE",
    "WITHHELD_CHECK",
]

BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
"""Exception type names a hidden case may show: Python's own, never a class the submission wrote."""

HIDDEN_NOTE = "hidden case: its inputs and expected values, shape and dtype are not shown"
"""Said after a withheld comparison (:func:`attnscore.report.feedback.mismatch_text`)."""

WITHHELD_CHECK = "the property does not hold on this input (details are not shown for a hidden case)"
"""What a hidden case says in place of a property check's own words."""

_CALL_TEXT = {
    Verdict.BAD_RETURN_TYPE: "returned something that is not one numeric result",
    Verdict.MEMORY_LIMIT: "ran out of memory",
    Verdict.FUNCTION_MISSING: "the graded function was not found",
    Verdict.GRADER_ERROR: "the grading machine failed on this case (not your code)",
    Verdict.WRONG_PARAMETERS: "your module's parameters are not the ones the spec states (names and shapes)",
}


def withhold(m: Mismatch | Withheld) -> Withheld:
    """A comparison's findings as a hidden case may show them: the verdict and the output's name.

    >>> withhold(Mismatch(Verdict.WRONG_SHAPE, detail="out has shape (2,), expected shape (3,)"))
    Withheld(verdict=<Verdict.WRONG_SHAPE: 'wrong_shape'>, name='out')
    """
    return Withheld(m.verdict, m.name)


def _call_detail(failure: Failure) -> str:
    """What a hidden case may say about a failed call: nothing the submission wrote (messages, its
    own class names, text it returned), since it could carry the hidden inputs; a builtin
    exception's type only."""
    if failure.disclosed:
        return failure.detail  # said before any hidden input ran
    if failure.verdict is Verdict.EXCEPTION:
        if failure.exception in BUILTIN_EXCEPTIONS:
            return f"raised {failure.exception} (its message is not shown for a hidden case)"
        if failure.exception:
            return "raised an exception of its own class (its type and message are not shown for a hidden case)"
        return "your code raised an exception (details are not shown for a hidden case)"
    if failure.verdict in _CALL_TEXT:
        return f"{_CALL_TEXT[failure.verdict]} (details are not shown for a hidden case)"
    return failure.detail  # timeouts and crashes: the grader's own words


def redact(failure: Failure) -> Failure:
    """``failure`` as it may be shown: a visible case's as it is, a hidden case's under the rules
    above (its second causes too). Redacting twice gives the same failure.

    The redacted failure keeps ``hidden`` (the feedback says "hidden case"); ``detail`` holds what
    may be said of a failed call or, for a property check, :data:`WITHHELD_CHECK`, and is marked
    ``disclosed`` (safe to show), which is what makes redaction idempotent.
    """
    others = tuple(redact(o) for o in failure.other_causes)
    if not failure.hidden:
        return failure if others == failure.other_causes else dataclasses.replace(failure, other_causes=others)
    if failure.mismatch is not None:
        detail = ""
    elif failure.check:
        detail = WITHHELD_CHECK
    else:
        detail = _call_detail(failure)
    return dataclasses.replace(
        failure,
        dtype="",
        args=None,
        layouts=None,
        mismatch=None if failure.mismatch is None else withhold(failure.mismatch),
        check="",
        detail=detail,
        disclosed=True,
        exception=failure.exception if failure.exception in BUILTIN_EXCEPTIONS else "",
        hint="",
        explanation="",
        shrunk_from=None,
        other_causes=others,
    )


def hidden_case_label(number: int) -> str:
    """What students call the ``number``-th hidden case of a spec (1-based, in spec order).

    >>> hidden_case_label(2)
    'hidden case 2'
    """
    return f"hidden case {number}"


def anonymise(failure: Failure, label: str) -> Failure:
    """A hidden case's failure as a student sees it: :func:`redact`-ed, and named by ``label`` alone.

    Its id, title and statement become ``label`` and its spec line is dropped (renderers leave out
    an empty location), its second causes likewise. A visible case's failure is only redacted.
    Anonymising twice with the same label gives the same failure.
    """
    shown = redact(failure)
    if not shown.hidden:
        return shown
    return dataclasses.replace(
        shown,
        case_id=label,
        title=label,
        statement=label,
        location="",
        other_causes=tuple(anonymise(o, label) for o in shown.other_causes),
    )


def _to_student(failure: Failure) -> Failure:
    """``failure`` marked as shown to a student (:attr:`Failure.for_students`), its second causes too."""
    return dataclasses.replace(
        failure, for_students=True, other_causes=tuple(_to_student(o) for o in failure.other_causes)
    )


def for_students(result: _Result) -> _Result:
    """``result`` as students may see it: each hidden case named "hidden case N" (N counting the
    hidden cases in spec order, so a spec's hidden cases keep their numbers from one submission to
    the next), with its verdict and points; no id, title, statement or spec line of it is left, in
    the case or in its failure (:func:`anonymise`). Every failure is marked as shown to a student
    (:attr:`Failure.for_students`: no advice that only an instructor can act on). Applying it
    twice changes nothing.

    For an assignment (a result with ``questions``), N counts the hidden cases of each question
    on its own (the case's ``question`` says which), and every case of a question whose
    ``visibility`` is ``hidden`` is a hidden case, whatever its own visibility said.

    Every student-facing reporter calls it first (Gradescope, PrairieLearn, a class run's feedback
    files); the instructor's reports (text, JSON, class page) do not.
    """
    hidden_questions = {q.id for q in result.questions if q.visibility == "hidden"}
    cases = []
    numbers: dict[str, int] = {}
    for case in result.cases:
        if case.question in hidden_questions and case.visibility != "hidden":  # a hidden question's case
            failure = None if case.failure is None else _hidden(case.failure)
            case = dataclasses.replace(case, visibility="hidden", failure=failure)
        if case.visibility == "hidden":
            numbers[case.question] = number = numbers.get(case.question, 0) + 1
            label = hidden_case_label(number)
            failure = None if case.failure is None else anonymise(case.failure, label)
            case = dataclasses.replace(case, id=label, title="", location="", failure=failure)
        if case.failure is not None:
            case = dataclasses.replace(case, failure=_to_student(case.failure))
        cases.append(case)
    return dataclasses.replace(result, cases=tuple(cases))


def _hidden(failure: Failure) -> Failure:
    """``failure`` marked hidden (its second causes too): a case of a hidden question."""
    return dataclasses.replace(failure, hidden=True, other_causes=tuple(_hidden(o) for o in failure.other_causes))
