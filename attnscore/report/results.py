"""Results: plain frozen data, from one case up to one submission, with exact points.

Points are :class:`fractions.Fraction` throughout, so ``7 × 1/7`` is exactly 1 and a total of 0
is a score of 0, not a missing one. Reporters turn results into text, JSON or platform files and
round only then (see :func:`points_out`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from attnscore.boundary.verdict import Verdict
from attnscore.report.codec import ADDED
from attnscore.report.failure import Failure
from attnscore.report.feedback import failure_text
from attnscore.report.redact import redact

__all__ = ["Verdict", "CaseResult", "Question", "SubmissionResult", "points_out"]


@dataclass(frozen=True)
class CaseResult:
    """The verdict of one rubric item: a worked example or a property.

    Attributes:
        id: stable case id, e.g. ``"example:aligned_perpendicular_partial"`` or
            ``"property:perpendicular_keys_score_zero"``.
        kind: ``"example"``, ``"property"`` or ``"rule"`` (an assignment rule of the spec).
        title: one line saying what the case checks.
        verdict: one of :class:`Verdict`.
        points, max_points: exact points earned and available.
        visibility: ``"visible"`` or ``"hidden"``; hidden cases never show inputs or expected values.
        location: ``file:line`` of the case in its spec.
        failure: for a failed case, what judging found, as data (:class:`attnscore.report.failure.Failure`);
            None when passed.
        calls: how many calls were made to the implementation for this case.
        question: the id of the assignment question the case belongs to (:class:`Question`), or
            ``""`` when one spec was graded.
    """

    id: str
    kind: str
    title: str
    verdict: Verdict
    points: Fraction
    max_points: Fraction
    visibility: str
    location: str
    failure: Failure | None = None
    calls: int = 0
    question: str = field(default="", metadata=ADDED)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    @property
    def advises(self) -> bool:
        """A failed case that only advises: its spec does not ask about the convention corner it
        tests, so it carries no points (:attr:`Failure.advice`); it never makes a submission fail."""
        return self.failure is not None and self.failure.advice

    @property
    def label(self) -> str:
        """The case as a list of tests names it: ``"id: title"``, or the id alone for a case without
        a title (a hidden case as students see it, ``"hidden case 2"``)."""
        return f"{self.id}: {self.title}" if self.title else self.id

    @property
    def message(self) -> str:
        """The case's full feedback text, rendered from :attr:`failure` ("" when passed)."""
        return failure_text(self.failure) if self.failure is not None else ""

    @property
    def counterexample(self) -> dict[str, Any] | None:
        """A failed visible case's failing call's inputs as nested lists; None for hidden cases
        (:func:`attnscore.report.redact.redact`)."""
        return None if self.failure is None else redact(self.failure).args

    @property
    def diagnosis(self) -> dict[str, str] | None:
        """The known mistake the failing output matches, ``{"id", "message"}``, or None
        (see :mod:`attnscore.check.diagnosis`)."""
        return self.failure.diagnosis if self.failure is not None else None


@dataclass(frozen=True)
class Question:
    """One question of an assignment as it was graded: which spec, which function, how it is shown.

    Its cases are the :class:`CaseResult` whose ``question`` is this :attr:`id`; their points are
    already the question's (rescaled exactly when the assignment gives the question its own points).

    Attributes:
        id: the question's id in the assignment (snake_case, unique).
        title: one line (the spec's title unless the assignment gives one).
        spec_id, spec_version: the spec the question grades.
        function: the name graded in the submission (a function, or a class for a module spec).
        visibility: ``"visible"`` or ``"hidden"`` (every case of a hidden question is hidden).
        error: a problem that affected every case of this question only (its function missing,
            with what the submission does define), or ``""``.
    """

    id: str
    title: str
    spec_id: str
    spec_version: int
    function: str
    visibility: str = "visible"
    error: str = ""


@dataclass(frozen=True)
class SubmissionResult:
    """Every case of one spec run against one implementation.

    Attributes:
        submission: what was graded (a file path, or ``package.module:function``).
        spec_id, spec_version, spec_path: the spec that was used.
        function: the graded function's name.
        cases: the case results, worked examples first, in spec order.
        dtype, device: what the inputs were cast to and where they lived.
        seed: the base seed for generated inputs (same seed, same cases, same score).
        duration_s: wall time of the whole run, seconds.
        error: a submission-level problem that affected every case (import failure, ...), or "".
        output: the submission's own stdout/stderr, cleaned and truncated (for the student).
        questions: for an assignment, its questions in file order (:class:`Question`); the spec
            fields then name the assignment, and each case says its question. Empty for one spec.
    """

    submission: str
    spec_id: str
    spec_version: int
    spec_path: str
    function: str
    cases: tuple[CaseResult, ...]
    dtype: str
    device: str
    seed: int
    duration_s: float
    error: str = ""
    output: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    questions: tuple[Question, ...] = field(default=(), metadata=ADDED)

    @property
    def score(self) -> Fraction:
        return sum((c.points for c in self.cases), Fraction(0))

    def summary(self) -> SubmissionResult:
        """This result as a class keeps it in memory once its feedback and gradebook row are
        written: every score, verdict, diagnosis and failure detail the class's CSV, report and
        table read (:mod:`attnscore.report.spreadsheet`, :mod:`attnscore.report.class_html`,
        :func:`attnscore.report.text.batch_table`), without what only the student's own feedback
        shows (the failing call's arguments, the comparison's findings, a property's check text and
        hint, an explanation, other causes, the submission's output). A class of thousands then
        holds a few kilobytes per student instead of every counterexample.

        Example:
            >>> r = SubmissionResult("s.py", "x", 1, "x.yaml", "f", (), "float32", "cpu", 0, 0.1, output="hi")
            >>> r.summary().output, r.summary().score == r.score
            ('', True)
        """
        cases = tuple(c if c.failure is None else replace(c, failure=_summary(c.failure)) for c in self.cases)
        return replace(self, cases=cases, output="")

    @property
    def max_score(self) -> Fraction:
        return sum((c.max_points for c in self.cases), Fraction(0))

    @property
    def all_passed(self) -> bool:
        """Every case passed, or only advises (:attr:`CaseResult.advises`)."""
        return all(c.passed or c.advises for c in self.cases)

    def question_cases(self, question: str) -> tuple[CaseResult, ...]:
        """The cases of the assignment question ``question``, in order.

        Raises:
            KeyError: no question of this result has that id.
        """
        if question not in {q.id for q in self.questions}:
            known = ", ".join(q.id for q in self.questions) or "none (one spec was graded)"
            raise KeyError(f"expected a question of this result ({known}), found {question!r}")
        return tuple(c for c in self.cases if c.question == question)

    def question_score(self, question: str) -> tuple[Fraction, Fraction]:
        """``(points, max_points)`` of the assignment question ``question``, exact.

        Example:
            >>> q = Question("softmax", "Softmax", "softmax", 1, "softmax")
            >>> case = CaseResult("example:a", "example", "", Verdict.PASSED, Fraction(1, 3), Fraction(1, 3),
            ...                   "visible", "softmax.yaml:9", question="softmax")
            >>> r = SubmissionResult("s.py", "a1", 1, "a1.yaml", "", (case,) * 3, "float32", "cpu", 0, 0.0,
            ...                      questions=(q,))
            >>> r.question_score("softmax")
            (Fraction(1, 1), Fraction(1, 1))
        """
        cases = self.question_cases(question)
        return sum((c.points for c in cases), Fraction(0)), sum((c.max_points for c in cases), Fraction(0))


def points_out(points: Fraction, digits: int = 4) -> float | int:
    """Round exact points once, for output: an int when whole, else a float with ``digits``.

    Example (seven sevenths are exactly 1; 0 points stay a score of 0):
        >>> points_out(7 * Fraction(1, 7)), points_out(Fraction(2, 3)), points_out(Fraction(0))
        (1, 0.6667, 0)
    """
    if points.denominator == 1:
        return int(points)
    return round(float(points), digits)


def _summary(failure: Failure) -> Failure:
    """A failure as :meth:`SubmissionResult.summary` keeps it: its verdict, case, detail, scope and
    diagnosis; no arguments, findings, check text, hint, explanation or other causes."""
    return replace(
        failure,
        args=None,
        layouts=None,
        keywords=None,
        module=None,
        mismatch=None,
        check="",
        hint="",
        explanation="",
        shrunk_from=None,
        other_causes=(),
    )
