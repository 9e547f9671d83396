"""Synthetic results of an assignment (several questions, one submission) for the report, gradebook
and export tests: built by hand, no grading.

The assignment ``cs_a1`` has four questions (17 points in all):

- ``softmax`` (visible, 10 points): three cases of 10/3 points each, so a full score is exactly 10;
- ``sdpa`` (visible, 4 points): ``example:a`` (2, visible) and ``property:masked`` (2, hidden); its
  ``example:a`` has the same id as softmax's, as two questions' cases may;
- ``rope`` (hidden, 3 points): two cases of 3/2 points, both hidden;
- ``warmup`` (visible, 0 points): one case worth nothing, which must still show 0, never a blank.
"""

from __future__ import annotations

from fractions import Fraction

from attnscore.report.failure import Failure
from attnscore.report.results import CaseResult, Question, SubmissionResult, Verdict

# question id -> (title, function, visibility, [(case id, title, points, visibility)])
QUESTIONS: dict[str, tuple[str, str, str, list[tuple[str, str, Fraction, str]]]] = {
    "softmax": (
        "Softmax over the last dim",
        "softmax",
        "visible",
        [
            ("example:a", "one row", Fraction(10, 3), "visible"),
            ("example:b", "two rows", Fraction(10, 3), "visible"),
            ("property:rows_sum_to_one", "rows sum to one", Fraction(10, 3), "visible"),
        ],
    ),
    "sdpa": (
        "Scaled dot-product attention",
        "scaled_dot_product_attention",
        "visible",
        [
            ("example:a", "a bool mask", Fraction(2), "visible"),
            ("property:masked", "masked keys get no weight", Fraction(2), "hidden"),
        ],
    ),
    "rope": (
        "Rotary position embedding",
        "rope",
        "hidden",
        [
            ("example:a", "two positions", Fraction(3, 2), "hidden"),
            ("property:norm", "keeps the norm", Fraction(3, 2), "hidden"),
        ],
    ),
    "warmup": ("Warm-up", "warmup", "visible", [("example:a", "nothing to it", Fraction(0), "visible")]),
}
MAX_POINTS = Fraction(17)
SECRET = [123.456, -7.5]  # a hidden case's input: must never reach a student


def failure(question: str, cid: str, title: str, hidden: bool, verdict: Verdict, mistake: str | None) -> Failure:
    """A failing case's record; ``mistake`` sets a diagnosis."""
    return Failure(
        verdict=verdict,
        case_id=cid,
        kind=cid.split(":")[0],
        title=title,
        location=f"{question}.yaml:7",
        hidden=hidden,
        function=QUESTIONS[question][1],
        dtype="float32",
        args={"x": SECRET},
        check=f"wrong {cid} of {question}",
        diagnosis={"id": mistake, "message": f"you made {mistake}"} if mistake else None,
    )


def assignment_result(
    name: str,
    failing: dict[tuple[str, str], str | None] | None = None,
    *,
    missing: tuple[str, ...] = (),
    duration_s: float = 1.0,
    case_visibility: dict[tuple[str, str], str] | None = None,
) -> SubmissionResult:
    """``name``'s result: the cases ``(question, case id)`` in ``failing`` fail with a wrong value
    (the value: a diagnosed mistake's id, or None), every case of a question in ``missing`` fails
    with its function missing (and the question says so); ``case_visibility`` overrides a case's."""
    failing = failing or {}
    case_visibility = case_visibility or {}
    cases: list[CaseResult] = []
    questions: list[Question] = []
    for qid, (title, function, visibility, specs) in QUESTIONS.items():
        error = ""
        if qid in missing:
            error = f"the submission defines no function {function} (it defines: helper, softmax)"
        questions.append(Question(qid, title, qid, 1, function, visibility, error))
        for cid, ctitle, points, shown in specs:
            shown = case_visibility.get((qid, cid), shown)
            verdict = Verdict.PASSED
            if qid in missing:
                verdict = Verdict.FUNCTION_MISSING
            elif (qid, cid) in failing:
                verdict = Verdict.WRONG_VALUE
            record = None
            if verdict is not Verdict.PASSED:
                record = failure(qid, cid, ctitle, shown == "hidden", verdict, failing.get((qid, cid)))
            cases.append(
                CaseResult(
                    id=cid,
                    kind=cid.split(":")[0],
                    title=ctitle,
                    verdict=verdict,
                    points=points if verdict is Verdict.PASSED else Fraction(0),
                    max_points=points,
                    visibility=shown,
                    location=f"{qid}.yaml:7",
                    failure=record,
                    calls=1,
                    question=qid,
                )
            )
    return SubmissionResult(
        submission=f"class/{name}",
        spec_id="cs_a1",
        spec_version=2,
        spec_path="course/a1.yaml",
        function="",
        cases=tuple(cases),
        dtype="float32",
        device="cpu",
        seed=11,
        duration_s=duration_s,
        output="",
        environment={"sandbox": "test"},
        questions=tuple(questions),
    )
