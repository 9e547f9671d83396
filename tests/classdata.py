"""Synthetic class results for the gradebook, spreadsheet and class report tests (no grading)."""

from __future__ import annotations

from fractions import Fraction

from attnscore.report.failure import Failure
from attnscore.report.results import CaseResult, SubmissionResult, Verdict

CASES = [
    ("example:aligned", "one query, three keys", Fraction(3)),
    ("example:anti_aligned", "a key pointing away", Fraction(2)),
    ("property:equals_qk_entries", "equals q·k", Fraction(1, 3)),
]


def case(cid: str, title: str, max_points: Fraction, verdict: Verdict, mistake: str | None = None) -> CaseResult:
    """One case result; ``mistake`` sets a diagnosis."""
    failure = None
    if verdict is not Verdict.PASSED:
        failure = Failure(
            verdict=verdict,
            case_id=cid,
            kind=cid.split(":")[0],
            title=title,
            location="spec.yaml:1",
            hidden=False,
            function="scores",
            dtype="float32",
            args={"q": [1.0, 0.0]},
            check=f"wrong <b>{cid}</b>",
            diagnosis={"id": mistake, "message": f"you made {mistake}"} if mistake else None,
        )
    return CaseResult(
        id=cid,
        kind=cid.split(":")[0],
        title=title,
        verdict=verdict,
        points=max_points if verdict is Verdict.PASSED else Fraction(0),
        max_points=max_points,
        visibility="visible",
        location="spec.yaml:1",
        failure=failure,
        calls=1,
    )


def result(name: str, failing: dict[str, str | None], duration_s: float = 1.0, error: str = "") -> SubmissionResult:
    """A result where the cases in ``failing`` (id -> mistake id or None) fail with a wrong value."""
    cases = tuple(
        case(cid, title, pts, Verdict.WRONG_VALUE if cid in failing else Verdict.PASSED, failing.get(cid))
        for cid, title, pts in CASES
    )
    return SubmissionResult(
        submission=f"class/{name}",
        spec_id="dot_product_scores",
        spec_version=1,
        spec_path="specs/dot_product_scores.yaml",
        function="scores",
        cases=cases,
        dtype="float32",
        device="cpu",
        seed=7,
        duration_s=duration_s,
        error=error,
        output="hello\n",
        environment={"sandbox": "test"},
    )


def class_rows() -> list[tuple[str, SubmissionResult]]:
    """Six students: 2 correct, 3 with softmax_applied (one also cosine_similarity), 1 slow one."""
    return [
        ("alice.py", result("alice.py", {})),
        ("bob.py", result("bob.py", {"example:aligned": "softmax_applied", "example:anti_aligned": "softmax_applied"})),
        ("carol", result("carol", {"example:aligned": "softmax_applied", "property:equals_qk_entries": None})),
        (
            "dave.py",
            result("dave.py", {"example:aligned": "cosine_similarity", "example:anti_aligned": "softmax_applied"}),
        ),
        ("=evil<script>.py", result("=evil<script>.py", {"property:equals_qk_entries": None}, duration_s=1.1)),
        ("slow.py", result("slow.py", {}, duration_s=30.0)),
    ]
