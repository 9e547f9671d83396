"""`attnscore verify` says what keeps a spec from being verified and what to do, line by line,
instead of one generic sentence."""

from __future__ import annotations

from fractions import Fraction

from click.testing import CliRunner

from attnscore.boundary.verdict import Verdict
from attnscore.check.verify import MutationResult, SpecVerification
from attnscore.cli import main
from attnscore.cli.verify import problems
from attnscore.report.results import CaseResult, SubmissionResult


def _reference(dtype: str, failing: tuple[str, ...] = ()) -> SubmissionResult:
    cases = tuple(
        CaseResult(
            id=case_id,
            kind="example",
            title="",
            verdict=Verdict.WRONG_VALUE if case_id in failing else Verdict.PASSED,
            points=Fraction(0 if case_id in failing else 1),
            max_points=Fraction(1),
            visibility="visible",
            location="",
        )
        for case_id in ("example:one", "example:two")
    )
    return SubmissionResult(
        submission="reference",
        spec_id="course",
        spec_version=1,
        spec_path="",
        function="attention",
        cases=cases,
        dtype=dtype,
        device="cpu",
        seed=0,
        duration_s=0.0,
    )


def _mutation(mistake: str, dtype: str, caught: bool, diagnosed: bool) -> MutationResult:
    return MutationResult("course", mistake, caught, diagnosed, ("example:one",) if caught else (), (), dtype)


def test_each_problem_is_a_line_that_says_what_to_do():
    found = [
        SpecVerification(
            "course",
            (_reference("float32", failing=("example:two",)), _reference("float64")),
            (
                _mutation("nan_hidden_after_softmax", "float32", caught=False, diagnosed=False),
                _mutation("nan_hidden_after_softmax", "float64", caught=False, diagnosed=False),
                _mutation("scores_divided_by_their_sum", "float32", caught=True, diagnosed=False),
                _mutation("scores_divided_by_their_sum", "float64", caught=True, diagnosed=True),
                _mutation("not_scaled", "float32", caught=True, diagnosed=True),
            ),
        )
    ]
    assert problems(found) == [
        "course (float32): the reference fails example:two: check the expected values and the tolerance of those cases",
        "course: mistake nan_hidden_after_softmax is MISSED (float32, float64): no case fails for it; add a worked "
        "example or property that it gets wrong, or list the mistakes the spec targets without it (the spec's "
        "mistakes: list; docs/catalogue.md lists them all)",
        "course: mistake scores_divided_by_their_sum is caught but not named as itself (float32): the cases it "
        "fails look like another mistake there; add a case where it alone is wrong, or leave it out of the spec's "
        "mistakes: list",
    ]


def test_a_verified_spec_has_no_problem():
    found = [SpecVerification("course", (_reference("float32"),), (_mutation("not_scaled", "float32", True, True),))]
    assert problems(found) == []


def test_the_command_prints_the_lines_and_exits_1(tmp_path):
    """A spec whose only worked example never masks a key: the masking mistakes are MISSED, by name."""
    spec = tmp_path / "course.yaml"
    spec.write_text(
        "format: attnscore-spec/1\nid: course\nversion: 1\ntitle: t\ndescription: d\n"
        "function:\n  name: attention\n  contract: attention\n  parameters:\n"
        "    - {name: Q, shape: [n_q, d_k]}\n    - {name: K, shape: [n_k, d_k]}\n"
        "    - {name: V, shape: [n_k, d_v]}\n    - {name: mask, shape: [n_q, n_k]}\n"
        "  returns: {shape: [n_q, d_v]}\n"
        "dtypes: [float64]\nseed: 1\n"
        "mistakes: [not_scaled, mask_ignored]\n"
        "worked_examples:\n"
        "  - id: two_keys\n    title: two keys\n"
        "    inputs: {Q: [[1, 0]], K: [[1, 0], [0, 1]], V: [[1], [3]], mask: [[true, true]]}\n"
        "    expected: [[1.6604769013466862]]\n    explanation: x\n    points: 1\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["verify", str(spec)])
    assert result.exit_code == 1, result.output
    assert "not verified:" in result.output
    assert "course: mistake mask_ignored is MISSED" in " ".join(result.output.split())
    assert "not_scaled is MISSED" not in result.output
