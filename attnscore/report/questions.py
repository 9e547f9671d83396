"""An assignment's questions as the reporters show them: each question's exact score, and case names
that stay distinct across questions.

A result of an assignment (:attr:`attnscore.report.results.SubmissionResult.questions` not empty)
holds every question's cases in question order; two questions may both have a case
``example:no_mask``, so a report that lists cases of several questions together names each by
:func:`case_key` (``softmax/example:no_mask``). A result of one spec has no questions: its cases
keep their plain ids, and every report of it reads as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from attnscore.report.results import CaseResult, Question, SubmissionResult

__all__ = ["QuestionScore", "case_key", "question_scores", "class_questions"]


@dataclass(frozen=True)
class QuestionScore:
    """One question of one result with its exact points.

    Attributes:
        question: the question as it was graded.
        points, max_points: the exact sums of its cases' points (0 and 0 for a question without cases).
        cases: its cases, in order.
    """

    question: Question
    points: Fraction
    max_points: Fraction
    cases: tuple[CaseResult, ...]

    @property
    def all_passed(self) -> bool:
        """Every case of the question passed, or only advises."""
        return all(c.passed or c.advises for c in self.cases)


def case_key(case: CaseResult) -> str:
    """The case's name among the cases of every question: ``question/id``, or the id alone for one spec.

    Example:
        >>> import dataclasses
        >>> from attnscore.report.results import Verdict
        >>> case = CaseResult("example:a", "example", "", Verdict.PASSED, Fraction(1), Fraction(1),
        ...                   "visible", "s.yaml:9")
        >>> case_key(case), case_key(dataclasses.replace(case, question="softmax"))
        ('example:a', 'softmax/example:a')
    """
    return f"{case.question}/{case.id}" if case.question else case.id


def question_scores(result: SubmissionResult) -> tuple[QuestionScore, ...]:
    """Each question of ``result`` with its exact score, in the assignment's order; empty for one spec.

    Example (a 10-point question of three cases: 10/3 each, exactly 10 together):
        >>> from attnscore.report.results import Verdict
        >>> q = Question("softmax", "Softmax", "softmax", 1, "softmax")
        >>> case = CaseResult("example:a", "example", "", Verdict.PASSED, Fraction(10, 3), Fraction(10, 3),
        ...                   "visible", "softmax.yaml:9", question="softmax")
        >>> r = SubmissionResult("s.py", "a1", 1, "a1.yaml", "", (case,) * 3, "float32", "cpu", 0, 0.0, questions=(q,))
        >>> [(s.question.id, s.points, s.max_points) for s in question_scores(r)]
        [('softmax', Fraction(10, 1), Fraction(10, 1))]
    """
    scores = []
    for question in result.questions:
        cases = tuple(c for c in result.cases if c.question == question.id)
        points = sum((c.points for c in cases), Fraction(0))
        top = sum((c.max_points for c in cases), Fraction(0))
        scores.append(QuestionScore(question, points, top, cases))
    return tuple(scores)


def class_questions(results: Sequence[SubmissionResult]) -> tuple[Question, ...]:
    """The questions of a class's results, in the first result's order, then any question only
    later results have (a result graded before the assignment gained a question); empty when every
    result is of one spec."""
    seen: dict[str, Question] = {}
    for result in results:
        for question in result.questions:
            seen.setdefault(question.id, question)
    return tuple(seen.values())
