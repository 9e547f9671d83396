"""Tests for grading an assignment (attnscore.grade.assignment_grading, attnscore.check.assignment_session,
attnscore.sandbox.bound_runner): one worker per submission, every question, one result."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.check.assignment_session import AssignmentSession, QuestionPart, hidden_missing_text
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import Session
from attnscore.grade.assignment_grading import assignment_cases, grade_assignment, grade_assignment_many
from attnscore.grade.time_budget import assignment_limits
from attnscore.report.results import Question, Verdict
from attnscore.sandbox.runner import SandboxRunner
from attnscore.spec.assignment import load_assignment
from attnscore.submission.files import Submission

ASSIGNMENT = """\
format: attnscore-assignment/1
id: a1
title: Attention basics
questions:
  - {id: scores, spec: score_matrix, points: 10}
  - {id: weights, spec: attention_weights, weight: 2}
  - {id: sdpa, spec: sdpa, visibility: hidden}
"""

CORRECT = """\
import torch

print("IMPORTED")


def score_matrix(Q, K):
    return Q @ K.transpose(-2, -1)


def attention_weights(S, mask):
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros((), dtype=S.dtype, device=S.device))


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    print("SDPA SAW A HIDDEN INPUT")
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, scale=scale, enable_gqa=enable_gqa
    )
"""

MISSING = CORRECT.replace("def attention_weights(S, mask):", "def attention_weight(S, mask):")
WRONG = CORRECT.replace("return Q @ K.transpose(-2, -1)", "return Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5")
BROKEN = "import not_a_module_anywhere\n" + CORRECT
NO_SDPA = CORRECT.replace("def scaled_dot_product_attention(", "def sdpa(")


@pytest.fixture(scope="module")
def assignment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("assignment")
    (folder / "a1.yaml").write_text(ASSIGNMENT, encoding="utf-8")
    return load_assignment(folder / "a1.yaml")


@pytest.fixture(scope="module")
def graded(assignment, tmp_path_factory):
    """The five submissions graded as a class, two grader processes, one worker each."""
    folder = tmp_path_factory.mktemp("class")
    paths = []
    for name, text in [
        ("correct", CORRECT),
        ("missing", MISSING),
        ("wrong", WRONG),
        ("broken", BROKEN),
        ("no_sdpa", NO_SDPA),
    ]:
        (folder / f"{name}.py").write_text(text, encoding="utf-8")
        paths.append(folder / f"{name}.py")
    results = grade_assignment_many(paths, assignment, jobs=2)
    return {Path(r.submission).stem: r for r in results}


def scores(result):
    return {q.id: result.question_score(q.id) for q in result.questions}


@pytest.mark.slow
def test_correct_submission_gets_full_marks_exactly(graded):
    """Every question full marks; the total is exactly 10 + 2·23 + 16 = 72; the result names the assignment."""
    result = graded["correct"]
    assert scores(result) == {
        "scores": (Fraction(10), Fraction(10)),
        "weights": (Fraction(46), Fraction(46)),
        "sdpa": (Fraction(16), Fraction(16)),
    }
    assert result.score == result.max_score == Fraction(72)
    assert (result.spec_id, result.spec_version, result.spec_path, result.function) == ("a1", 1, "a1.yaml", "")
    assert [q.id for q in result.questions] == ["scores", "weights", "sdpa"]
    assert [(q.spec_id, q.function, q.visibility, q.error) for q in result.questions] == [
        ("score_matrix", "score_matrix", "visible", ""),
        ("attention_weights", "attention_weights", "visible", ""),
        ("sdpa", "scaled_dot_product_attention", "hidden", ""),
    ]
    assert [c.question for c in result.cases][:1] == ["scores"] and {c.question for c in result.cases} == {
        "scores",
        "weights",
        "sdpa",
    }
    assert all(c.visibility == "hidden" for c in result.question_cases("sdpa"))
    assert result.error == ""


@pytest.mark.slow
def test_the_submission_is_imported_once_and_hidden_output_never_shown(graded):
    """One worker imported the file once for all three questions (its import prints once); what it
    printed when the hidden question's inputs reached it is not in the report."""
    output = graded["correct"].output
    assert output.count("IMPORTED") == 1
    assert "SDPA SAW A HIDDEN INPUT" not in output


@pytest.mark.slow
def test_a_missing_function_costs_only_its_question(graded):
    """No attention_weights: that question gets 0 with a message naming what the file defines; the others full."""
    result = graded["missing"]
    assert scores(result) == {
        "scores": (Fraction(10), Fraction(10)),
        "weights": (Fraction(0), Fraction(46)),
        "sdpa": (Fraction(16), Fraction(16)),
    }
    message = (
        "your file has no function named 'attention_weights'; it defines: attention_weight, "
        "scaled_dot_product_attention, score_matrix"
    )
    assert result.questions[1].error == message
    assert {c.verdict for c in result.question_cases("weights")} == {Verdict.FUNCTION_MISSING}
    assert result.question_cases("weights")[0].message.startswith(message)
    assert result.error == ""


@pytest.mark.slow
def test_a_wrong_function_costs_only_its_question_with_the_mistake_named(graded):
    """score_matrix divided by √d_k: every case of that question fails, diagnosed; the others full marks."""
    result = graded["wrong"]
    assert scores(result) == {
        "scores": (Fraction(0), Fraction(10)),
        "weights": (Fraction(46), Fraction(46)),
        "sdpa": (Fraction(16), Fraction(16)),
    }
    first = result.question_cases("scores")[0]
    assert first.verdict is Verdict.WRONG_VALUE and first.diagnosis["id"] == "scaled_raw_scores"
    assert [q.error for q in result.questions] == ["", "", ""]


@pytest.mark.slow
def test_an_import_error_costs_every_question(graded):
    """An import that fails: 0 of 72, the reason is the result's error, no question's own."""
    result = graded["broken"]
    assert result.score == 0 and result.max_score == Fraction(72)
    assert result.error.startswith("your file could not be imported: line 1: `import not_a_module_anywhere` failed")
    assert {c.verdict for c in result.cases} == {Verdict.EXCEPTION}
    assert [q.error for q in result.questions] == ["", "", ""]


@pytest.mark.slow
def test_a_hidden_question_missing_its_function_names_nothing_the_submission_defines(graded):
    """Found on a hidden case: the question's error names only the function, never the file's other names."""
    result = graded["no_sdpa"]
    assert scores(result)["sdpa"] == (Fraction(0), Fraction(16))
    assert scores(result)["scores"] == (Fraction(10), Fraction(10))
    assert result.questions[2].error == hidden_missing_text("scaled_dot_product_attention")
    assert "score_matrix" not in result.questions[2].error
    assert {c.message for c in result.question_cases("sdpa")} == {
        "the graded function was not found (details are not shown for a hidden case)"
    }


@pytest.mark.slow
def test_one_worker_start_per_submission(assignment, tmp_path, monkeypatch):
    """The shared runner starts its worker once for all three questions (SandboxRunner._start counted)."""
    starts = []
    original = SandboxRunner._start

    def counted(self):
        starts.append(self.function)
        return original(self)

    monkeypatch.setattr(SandboxRunner, "_start", counted)
    path = tmp_path / "correct.py"
    path.write_text(CORRECT, encoding="utf-8")
    result = grade_assignment(path, assignment)
    assert result.score == Fraction(72)
    assert starts == [""]  # one start, of a worker that resolves each question's function per call


THREE_POINTS = """\
format: attnscore-spec/1
id: three_points
version: 1
title: scores of one query
function:
  name: scores
  contract: scores
  parameters:
    - {name: q, shape: [d_k]}
    - {name: keys, shape: [n_k, d_k]}
  returns: {shape: [n_k]}
worked_examples:
  - id: aligned
    inputs: {q: [1, 0], keys: [[1, 0], [0, 1]]}
    expected: [1, 0]
    explanation: aligned then perpendicular
    points: 1
  - id: opposed
    inputs: {q: [0, 1], keys: [[0, -1]]}
    expected: [-1]
    explanation: anti-aligned
    points: 1
    visibility: hidden
properties:
  - name: equals_qk_entries
    points: 1
    statement: scores equal Q Kᵀ
"""


def _three_points(tmp_path: Path, extra: str = ""):
    (tmp_path / "three.yaml").write_text(THREE_POINTS, encoding="utf-8")
    text = (
        "format: attnscore-assignment/1\nid: tiny\ntitle: T\nquestions:\n"
        "  - {id: first, spec: three.yaml, points: 10}\n" + extra
    )
    (tmp_path / "tiny.yaml").write_text(text, encoding="utf-8")
    return load_assignment(tmp_path / "tiny.yaml")


def test_rescaled_points_are_exact(tmp_path):
    """Three one-point cases rescaled to 10 points: 10/3 each, exactly 10 together."""
    assignment = _three_points(tmp_path)
    (cases,) = assignment_cases(assignment)
    assert [c.points for c in cases] == [Fraction(10, 3)] * 3
    assert sum(c.points for c in cases) == Fraction(10)


def test_a_hidden_question_hides_every_case(tmp_path):
    """visibility: hidden makes every case of the question hidden; a visible one keeps its spec's."""
    assignment = _three_points(tmp_path, "  - {id: second, spec: three.yaml, visibility: hidden}\n")
    first, second = assignment_cases(assignment)
    assert [c.visibility for c in first] == ["visible", "hidden", "visible"]
    assert [c.visibility for c in second] == ["hidden"] * 3


def test_every_visible_case_of_every_question_is_judged_before_any_hidden_case(tmp_path):
    """Judging order over two questions: all visible cases of both, then all hidden ones; each
    result says its question; the shared runner is closed once, at the end."""
    assignment = _three_points(tmp_path, "  - {id: second, spec: three.yaml, visibility: hidden}\n")
    cases = assignment_cases(assignment)
    order: list[tuple[str, str, str]] = []
    closed = []

    class Shared(InProcessRunner):
        def close(self) -> None:
            closed.append(True)

    class Part(InProcessRunner):
        def close(self) -> None:
            raise AssertionError("a question's runner must leave the shared runner open")

    parts = []
    for q, qcases in zip(assignment.questions, cases, strict=True):
        session = Session(q.spec, qcases, "float64", "cpu", "mine", 0, q.function, hidden_last=True)
        question = Question(q.id, q.title, q.spec.id, q.spec.version, q.function, q.visibility)
        parts.append(QuestionPart(question, session, Part(lambda q_, keys: keys @ q_)))
    run = AssignmentSession(assignment, tuple(parts), "mine", "float64", "cpu", 0)
    result = run.run(Shared(lambda: None), on_case=lambda r: order.append((r.question, r.id, r.visibility)))
    assert order == [
        ("first", "example:aligned", "visible"),
        ("first", "property:equals_qk_entries", "visible"),
        ("first", "example:opposed", "hidden"),
        ("second", "example:aligned", "hidden"),
        ("second", "example:opposed", "hidden"),
        ("second", "property:equals_qk_entries", "hidden"),
    ]
    assert closed == [True]
    assert result.score == result.max_score == Fraction(10) + Fraction(3)
    assert [c.question for c in result.cases] == ["first"] * 3 + ["second"] * 3
    assert [c.id for c in result.cases][:3] == ["example:aligned", "example:opposed", "property:equals_qk_entries"]


def test_a_submission_that_cannot_run_fails_every_question_with_its_reason(tmp_path):
    """A submission with a problem (read before anything runs): every case of every question says why."""
    assignment = _three_points(tmp_path, "  - {id: second, spec: three.yaml}\n")
    refused = Submission(tmp_path / "empty", (), None, problem="your submission has no .py file at its top level")
    result = grade_assignment(refused, assignment)
    assert result.score == 0 and result.max_score == Fraction(13)
    assert {c.verdict for c in result.cases} == {Verdict.FUNCTION_MISSING}
    assert result.error == "your submission has no .py file at its top level"
    assert [q.error for q in result.questions] == ["", ""]


def test_assignment_limits_keep_each_question_s_time(assignment):
    """The worker's call limit is the longest question's; no budget of its own; its total at least the budgets'."""
    limits = assignment_limits(assignment)
    assert (limits.call_timeout_s, limits.time_budget_s, limits.total_timeout_s) == (5.0, None, 300.0)
    many = assignment_limits(assignment, time_budget=200.0)
    assert many.total_timeout_s == 600.0
    with pytest.raises(ValueError, match="--time-budget: expected at least the per-call limit of 5 s"):
        assignment_limits(assignment, time_budget=4.0)


@pytest.mark.slow
def test_a_fresh_grader_process_loads_the_assignment_from_its_file(assignment, tmp_path, monkeypatch):
    """Where grader processes cannot fork, each loads the assignment from its file and builds the same
    cases: the result is the same as in the parent (here, _grade_in_child with nothing built yet)."""
    from attnscore.grade import assignment_grading

    monkeypatch.setattr(assignment_grading, "_CHILD_ASSIGNMENTS", {})
    path = tmp_path / "wrong.py"
    path.write_text(WRONG, encoding="utf-8")
    options = {
        "dtype": None,
        "seed": None,
        "limits": None,
        "timeout": None,
        "time_budget": None,
        "shrink_steps": 50,
        "cache_cases": False,
        "outside_reference": False,
    }
    result = assignment_grading._grade_in_child(assignment.path, Submission.from_file(path), options=options)
    assert scores(result)["scores"] == (Fraction(0), Fraction(10)) and result.score == Fraction(62)
    assert list(assignment_grading._CHILD_ASSIGNMENTS) == [(assignment.path, None, None)]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "submissions"


@pytest.mark.slow
def test_an_autograd_function_question_keeps_its_call_settings(tmp_path):
    """A FlashAttention-2 question (a factory's Function, its logsumexp read from saved tensors, its
    rules) beside score_matrix in one worker: full marks for the correct file; the dK mistake loses
    only that question's cases, diagnosed, its points rescaled exactly (22 of 28 to 20 points: 110/7)."""
    (tmp_path / "fa.yaml").write_text(
        "format: attnscore-assignment/1\nid: fa\ntitle: FA\nquestions:\n"
        "  - {id: scores, spec: score_matrix}\n  - {id: flash, spec: flash_attention_2, points: 20}\n",
        encoding="utf-8",
    )
    scores_file = (EXAMPLES / "score_matrix" / "correct_transpose.py").read_text(encoding="utf-8")
    paths = []
    for name in ("correct_tiled", "backward_dk_unscaled"):
        flash = (EXAMPLES / "flash_attention_2" / f"{name}.py").read_text(encoding="utf-8")
        (tmp_path / f"{name}.py").write_text(scores_file + "\n" + flash, encoding="utf-8")
        paths.append(tmp_path / f"{name}.py")
    right, wrong = grade_assignment_many(paths, load_assignment(tmp_path / "fa.yaml"), jobs=2)
    assert scores(right) == {"scores": (Fraction(13), Fraction(13)), "flash": (Fraction(20), Fraction(20))}
    assert any(c.kind == "rule" and c.passed for c in right.question_cases("flash"))
    assert scores(wrong) == {"scores": (Fraction(13), Fraction(13)), "flash": (Fraction(110, 7), Fraction(20))}
    failed = [(c.id, c.diagnosis["id"]) for c in wrong.cases if not c.passed and c.diagnosis]
    assert failed == [
        ("example:scale_in_every_gradient", "backward_dk_unscaled"),
        ("property:gradients_match_golden", "backward_dk_unscaled"),
    ]


HANGS = CORRECT.replace(
    "def score_matrix(Q, K):\n    return Q @ K.transpose(-2, -1)",
    "def score_matrix(Q, K):\n    while True:\n        pass",
)


@pytest.mark.slow
def test_a_question_that_hangs_spends_only_its_own_time_budget(assignment, tmp_path):
    """score_matrix loops forever: its question times out and then runs out of its own budget; the
    other questions, judged after it with the same worker restarted, keep full marks."""
    path = tmp_path / "hangs.py"
    path.write_text(HANGS, encoding="utf-8")
    result = grade_assignment(path, assignment, timeout=0.5, time_budget=1.0)
    verdicts = {c.verdict for c in result.question_cases("scores")}
    assert verdicts <= {Verdict.TIMEOUT, Verdict.BUDGET_SPENT} and Verdict.BUDGET_SPENT in verdicts
    assert scores(result)["scores"] == (Fraction(0), Fraction(10))
    assert scores(result)["weights"] == (Fraction(46), Fraction(46))
    assert scores(result)["sdpa"] == (Fraction(16), Fraction(16))
