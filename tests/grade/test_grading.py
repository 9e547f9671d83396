"""Tests for grading the example submissions in the sandboxed worker (attnscore.grade.grading)."""

from __future__ import annotations

import json
import re
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_many, grade_submission
from attnscore.report import gradescope_results, submission_to_json
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.sandbox.worker_process import WorkerProcess
from attnscore.spec.load import load_spec
from attnscore.submission.files import SubmissionError, find_submissions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "submissions"
LIMITS = Limits(call_timeout_s=1.5)

# submission file -> {case id: verdict it must get}; unlisted cases may pass or fail.
SCORES_EXPECTATIONS = {
    "correct_matmul.py": "all",
    "correct_loops.py": "all",
    "correct_numpy_einsum.py": "all",
    "correct_stdlib_imports.py": "all",
    "correct_with_helper": "all",
    "returns_scores_and_weights.py": {"example:aligned_perpendicular_partial": Verdict.BAD_RETURN_TYPE},
    "softmax_applied.py": {
        "example:anti_aligned": Verdict.WRONG_VALUE,
        "property:scores_not_normalised": Verdict.WRONG_VALUE,
    },
    "elementwise_no_sum.py": {"example:aligned_perpendicular_partial": Verdict.WRONG_SHAPE},
    "cosine_similarity.py": {
        "example:aligned_perpendicular_partial": Verdict.WRONG_VALUE,
        "property:equals_qk_entries": Verdict.WRONG_VALUE,
    },
    "absolute_value.py": {
        "example:anti_aligned": Verdict.WRONG_VALUE,
        "property:scores_not_normalised": Verdict.WRONG_VALUE,
    },
    "hardcoded_examples.py": {
        "example:aligned_perpendicular_partial": Verdict.PASSED,
        "example:anti_aligned": Verdict.PASSED,
        "example:three_dims_mixed_signs": Verdict.WRONG_VALUE,
        "property:equals_qk_entries": Verdict.WRONG_VALUE,
    },
    "hangs_on_perpendicular.py": {
        "example:aligned_perpendicular_partial": Verdict.TIMEOUT,
        "property:perpendicular_keys_score_zero": Verdict.TIMEOUT,
        "example:anti_aligned": Verdict.PASSED,
    },
    "fails_at_import.py": {"example:aligned_perpendicular_partial": Verdict.EXCEPTION},
    "syntax_error.py": {"example:aligned_perpendicular_partial": Verdict.EXCEPTION},
    "wrong_function_name.py": {"example:aligned_perpendicular_partial": Verdict.FUNCTION_MISSING},
    "keys_not_transposed.py": {"example:aligned_perpendicular_partial": Verdict.EXCEPTION},
}
MATRIX_EXPECTATIONS = {
    "correct_transpose.py": "all",
    "correct_einsum.py": "all",
    "correct_broadcast_shapes.py": "all",
    "keys_not_transposed.py": {"example:two_by_two": Verdict.WRONG_VALUE},
    "all_axes_reversed.py": {"example:two_by_two": Verdict.PASSED, "example:batched_two_items": Verdict.WRONG_VALUE},
    "softmax_over_keys.py": {"property:scores_not_normalised": Verdict.WRONG_VALUE},
    "scaled_by_sqrt_dk.py": {
        "example:two_by_two": Verdict.WRONG_VALUE,
        "property:equals_qk_entries": Verdict.WRONG_VALUE,
    },
}


@pytest.fixture(scope="module")
def scores_results():
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    results = grade_many(find_submissions([str(EXAMPLES / "scores")]), spec, limits=LIMITS)
    return {Path(r.submission).name: r for r in results}


@pytest.fixture(scope="module")
def matrix_results():
    spec = load_spec(ROOT / "specs" / "score_matrix.yaml")
    results = grade_many(find_submissions([str(EXAMPLES / "score_matrix")]), spec, limits=LIMITS)
    return {Path(r.submission).name: r for r in results}


def _check(result, expectation):
    verdicts = {c.id: c.verdict for c in result.cases}
    if expectation == "all":
        assert result.score == result.max_score and result.all_passed, verdicts
        return
    assert result.score < result.max_score
    for case_id, verdict in expectation.items():
        assert verdicts[case_id] is verdict, (case_id, verdicts)
        case = next(c for c in result.cases if c.id == case_id)
        assert case.points == (case.max_points if verdict is Verdict.PASSED else 0)


@pytest.mark.slow
def test_every_scores_example_is_expected(scores_results):
    """The expectations table covers exactly the bundled scores submissions."""
    assert set(scores_results) == set(SCORES_EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(SCORES_EXPECTATIONS))
def test_scores_examples(scores_results, name):
    """Correct scores submissions get full marks; each mistake loses points where it should."""
    _check(scores_results[name], SCORES_EXPECTATIONS[name])


@pytest.mark.slow
def test_every_matrix_example_is_expected(matrix_results):
    """The expectations table covers exactly the bundled score_matrix submissions."""
    assert set(matrix_results) == set(MATRIX_EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(MATRIX_EXPECTATIONS))
def test_matrix_examples(matrix_results, name):
    """Correct score_matrix submissions get full marks; each mistake loses points where it should."""
    _check(matrix_results[name], MATRIX_EXPECTATIONS[name])


def test_full_marks_exactly_for_correct_ones(scores_results, matrix_results):
    """Exactly the correct_* submissions get full marks."""
    full = {n for results in (scores_results, matrix_results) for n, r in results.items() if r.score == r.max_score}
    assert full == {
        "correct_matmul.py",
        "correct_loops.py",
        "correct_numpy_einsum.py",
        "correct_stdlib_imports.py",
        "correct_with_helper",
        "correct_transpose.py",
        "correct_einsum.py",
        "correct_broadcast_shapes.py",
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param(
            "fails_at_import.py",
            "your file could not be imported: line 3: `from attention_helpers import dot` failed: attention_helpers is "
            "not installed on this grader, and no file of yours is named attention_helpers.py",
            id="import error",
        ),
        pytest.param(
            "syntax_error.py", "your file could not be imported: SyntaxError (line 4): expected ':'", id="syntax error"
        ),
        pytest.param(
            "wrong_function_name.py",
            "your file has no function named 'scores'; it defines: score",
            id="function missing",
        ),
    ],
)
def test_submission_level_errors_are_one_clear_line(scores_results, name, text):
    """Import failures and missing functions are one clear line, on the result and on every case."""
    result = scores_results[name]
    assert result.error == text
    assert all(text in c.message for c in result.cases)
    assert result.score == 0


def test_wrong_value_feedback_says_which_entries(matrix_results):
    """Feedback for Q K instead of Q Kᵀ shows the inputs and expected vs got per entry."""
    case = next(c for c in matrix_results["keys_not_transposed.py"].cases if c.id == "example:two_by_two")
    failure = case.failure
    assert failure.args == {"Q": [[1, 2], [3, 4]], "K": [[5, 6], [7, 8]]}
    assert (failure.mismatch.wrong, failure.mismatch.total, failure.mismatch.tolerance) == (4, 4, "exact comparison")
    assert (failure.mismatch.entries[0].index, failure.mismatch.entries[0].expected) == ((1, 0), 39.0)
    assert "4 of 4 entries of out are wrong (exact comparison):" in case.message
    assert "= 50, expected 53" in case.message
    # the inputs are printed once, in the paste-ready reproduction
    assert case.message.count("[[1, 2], [3, 4]]") == 1
    assert (
        "Reproduce: score_matrix(torch.tensor([[1, 2], [3, 4]], dtype=torch.float32), "
        "torch.tensor([[5, 6], [7, 8]], dtype=torch.float32))" in case.message
    )


def test_property_feedback_has_counterexample_and_hint(scores_results):
    """A failed property names the statement, a counterexample and the likely cause."""
    case = next(c for c in scores_results["softmax_applied.py"].cases if c.id == "property:scores_not_normalised")
    assert case.message.startswith("Property: Raw scores are not normalised")
    # shrunk when 50 sandboxed steps find a smaller failing input; never replaced by a larger one
    assert (case.failure.example, case.failure.examples) == (1, 20)
    shrunk = case.failure.shrunk_from
    assert shrunk is None or (shrunk.example, shrunk.examples) == (1, 20) and case.failure.size <= shrunk.size
    assert re.search(r"Counterexample: (shrunk by hypothesis from )?generated input 1 of 20", case.message)
    assert case.failure.hint.startswith("your scores sum to 1")
    assert "Likely cause: your scores sum to 1" in case.message
    assert "Reproduce: scores(torch.tensor([" in case.message
    assert set(case.counterexample) == {"q", "keys"}


def test_hidden_case_feedback_has_no_inputs_or_expected_values(scores_results):
    """A hidden worked example's feedback shows neither inputs nor expected values."""
    case = next(c for c in scores_results["hardcoded_examples.py"].cases if c.id == "example:three_dims_mixed_signs")
    assert case.visibility == "hidden" and case.counterexample is None
    assert "inputs and expected values, shape and dtype are not shown" in case.message
    for secret in ("1.5", "-2", "-4", "6", "[2, -1, 0.5]"):
        assert secret not in case.message


def test_grading_is_deterministic():
    """The same submission gets the same verdicts, messages and score twice."""
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    path = EXAMPLES / "scores" / "cosine_similarity.py"
    first = grade_submission(path, spec, build_cases(spec), limits=LIMITS)
    second = grade_submission(path, spec, build_cases(spec), limits=LIMITS)
    assert [(c.verdict, c.message) for c in first.cases] == [(c.verdict, c.message) for c in second.cases]
    assert first.score == second.score == Fraction(2)  # anti_aligned's 2: its layouts point needs right values


def test_worker_receives_inputs_only(monkeypatch):
    """Requests sent to the worker hold the call's arguments and nothing else."""
    sent = []
    original = WorkerProcess.send

    def spy(self, message):
        sent.append(message)
        return original(self, message)

    monkeypatch.setattr(WorkerProcess, "send", spy)
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    cases = build_cases(spec)
    grade_submission(EXAMPLES / "scores" / "correct_matmul.py", spec, cases, limits=LIMITS)
    setups = [m for m in sent if m["type"] == "setup"]
    proceeds = [m for m in sent if m["type"] == "proceed"]
    sent = [m for m in sent if m["type"] == "call"]
    # the worker's setup names its own submission only; a proceed says which call and stage
    assert setups and all(set(m) >= {"type", "folder", "entry", "function", "traps"} for m in setups)
    assert all(m["entry"] == "correct_matmul.py" and m["traps"] == [] for m in setups)
    assert len(proceeds) == len(sent) and all(set(m) == {"type", "id", "stage"} for m in proceeds)
    assert sent and all(set(m) == {"type", "id", "dtype", "device", "names", "inputs"} for m in sent)
    # the values themselves travel in the shared memory: the message only says where each input lies
    plain, view = {"name", "dtype", "shape", "offset"}, {"strides", "storage_offset", "count"}
    items = [item for m in sent for item in m["inputs"]]
    assert all(len(m["inputs"]) == 2 for m in sent)
    assert all(set(item) in (plain, plain | view) for item in items)
    assert any(set(item) == plain | view for item in items)  # non_contiguous_inputs: views of the shared storage


def test_reports_are_valid_json_with_required_fields(scores_results):
    """JSON and Gradescope reports serialise strictly and carry score, max_score and cases."""
    result = scores_results["hangs_on_perpendicular.py"]
    data = json.loads(json.dumps(submission_to_json(result), allow_nan=False))
    assert (data["score"], data["max_score"]) == (5, 11)
    assert {"id", "verdict", "points", "max_points", "message", "diagnosis"} <= set(data["cases"][0])
    assert [c["verdict"] for c in data["cases"]] == [
        "timeout",
        "passed",
        "passed",
        "timeout",
        "timeout",
        "passed",
        "timeout",
    ]
    gs = json.loads(json.dumps(gradescope_results(result), allow_nan=False))
    assert gs["score"] == 5 and len(gs["tests"]) == 7
    assert {t["status"] for t in gs["tests"]} == {"passed", "failed"}
    assert sum(t["max_score"] for t in gs["tests"]) == 11


@pytest.mark.parametrize(
    ("make", "text"),
    [
        pytest.param(lambda d: str(d / "missing.py"), "missing.py: no such file", id="missing file"),
        pytest.param(
            lambda d: str(d),
            "expected .py or .ipynb files or one folder per student in this directory, found none",
            id="empty directory",
        ),
        pytest.param(
            lambda d: (d / "a.txt").write_text("x") and str(d / "a.txt"),
            "expected a Python file ending in .py or a notebook ending in .ipynb, found '.txt'",
            id="not a .py file",
        ),
    ],
)
def test_bad_submission_paths(tmp_path, make, text):
    """Submission paths are checked before anything runs, with one clear message."""
    with pytest.raises(SubmissionError, match=text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        find_submissions([make(tmp_path)])


def test_sources_are_read_before_any_submission_runs(tmp_path):
    """A file changed on disk while the batch runs is graded as it was when grading started."""
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("def scores(q, keys):\n    return keys @ q\n")
    second.write_text("def scores(q, keys):\n    return keys @ q\n")
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")

    def tamper(result):
        second.write_text("def scores(q, keys):\n    return 0 * (keys @ q) + 12345\n")

    results = grade_many([first, second], spec, limits=LIMITS, on_result=tamper)
    assert [r.score for r in results] == [Fraction(11), Fraction(11)]


def test_feedback_uses_the_function_name_given(tmp_path):
    """--function NAME appears in the inputs and reproduction lines."""
    path = tmp_path / "mine.py"
    path.write_text("def my_scores(q, keys):\n    return (keys @ q).abs()\n")
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    result = grade_submission(path, spec, build_cases(spec), function="my_scores", limits=LIMITS)
    case = next(c for c in result.cases if c.id == "example:anti_aligned")
    assert case.failure.function == "my_scores" and case.failure.args == {"q": [0, 1], "keys": [[0, -1]]}
    assert "Reproduce: my_scores(torch.tensor([0, 1], dtype=torch.float32)" in case.message
    assert "Why: q · k = 0·0 + 1·(-1) = -1." in case.message


def test_hidden_case_exception_message_is_not_shown(tmp_path):
    """An exception in a hidden case shows its type only: its message could quote hidden inputs."""
    path = tmp_path / "leak.py"
    path.write_text("def scores(q, keys):\n    raise ValueError(f'q={q.tolist()} keys={keys.tolist()}')\n")
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    result = grade_submission(path, spec, build_cases(spec), limits=LIMITS)
    hidden = next(c for c in result.cases if c.id == "example:three_dims_mixed_signs")
    visible = next(c for c in result.cases if c.id == "example:anti_aligned")
    assert hidden.message.splitlines()[1:] == ["raised ValueError (its message is not shown for a hidden case)"]
    assert hidden.failure.exception == "ValueError"
    assert "raised ValueError: q=[0.0, 1.0] keys=[[0.0, -1.0]]" in visible.message


def test_import_failure_is_reported_once_per_case_without_inputs(scores_results):
    """A submission-level failure is the whole message of each case: no inputs, no reproduction."""
    result = scores_results["syntax_error.py"]
    assert {c.message for c in result.cases} == {result.error}


def test_parallel_grading_gives_the_same_results():
    """jobs=2 grades in two grader processes and returns the same results, in order."""
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    paths = [EXAMPLES / "scores" / n for n in ("correct_matmul.py", "cosine_similarity.py", "syntax_error.py")]
    parallel = grade_many(paths, spec, limits=LIMITS, jobs=2)
    sequential = grade_many(paths, spec, limits=LIMITS)
    assert [r.submission for r in parallel] == [p.name for p in paths]  # each by its own name
    assert [(r.score, [c.message for c in r.cases]) for r in parallel] == [
        (r.score, [c.message for c in r.cases]) for r in sequential
    ]


_SIGNAL = Path("/nonexistent")


def _slow_first(spec_path, submission, *, options):
    """A grader child's work that stands in for grading: correct_matmul.py waits for _SIGNAL."""
    if submission.name.endswith("correct_matmul.py"):
        for _ in range(600):
            if _SIGNAL.exists():
                break
            time.sleep(0.1)
    return submission.name  # stands for its result: grade_many only hands it on


def test_parallel_grading_hands_on_each_result_as_it_finishes(tmp_path, monkeypatch):
    """With jobs=2 a slow submission does not hold back the results after it: on_result (a class
    run's commit, the progress bar) sees them first, and the list still comes back in order.
    The slow one waits for the others to be handed on (a file the callback writes), so the test
    does not depend on timing; handed on in submission order, it would wait its full minute."""
    from attnscore.grade import grading

    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    paths = [EXAMPLES / "scores" / n for n in ("correct_matmul.py", "cosine_similarity.py", "syntax_error.py")]
    signal = tmp_path / "others-handed-on"
    monkeypatch.setattr(sys.modules[__name__], "_SIGNAL", signal)
    monkeypatch.setattr(grading, "_grade_in_child", _slow_first)  # the grader processes are forked: they see it
    seen: list[str] = []

    def handed_on(result):
        seen.append(result)
        if len(seen) == 2:
            signal.write_text("")

    results = grade_many(paths, spec, limits=LIMITS, jobs=2, on_result=handed_on)
    names = [p.name for p in paths]  # a submission is named by its own name (its path in the class)
    assert results == names
    assert seen[-1] == names[0] and sorted(seen) == sorted(names)


def _example_sizes(case) -> list[int]:
    """Input sizes (entries of all arguments) of each generated example's calls, by example number."""
    starts = [i for i, call in enumerate(case.calls) if not call.group or call.group[0] == i]
    ends = starts[1:] + [len(case.calls)]
    return [
        {sum(a.size for a in case.calls[i].args.values()) for i in range(s, e)}
        for s, e in zip(starts, ends, strict=True)
    ]


def test_example_counterexamples_are_never_larger_than_the_original(scores_results, matrix_results):
    """Over every example submission, a failing case's counterexample is no larger than the input it
    replaced, and the "shrunk from" label names that input truthfully."""
    checked = shrunk = 0
    hows = set()
    for spec_name, results in (("dot_product_scores", scores_results), ("score_matrix", matrix_results)):
        spec = load_spec(ROOT / "specs" / f"{spec_name}.yaml")
        cases = {c.id: c for c in build_cases(spec)}
        for result in results.values():
            for case in result.cases:
                failure = case.failure
                if failure is None or failure.scope == "submission" or failure.hidden:
                    continue
                checked += 1
                sizes = _example_sizes(cases[case.id])
                original = failure.shrunk_from
                if original is None:
                    assert failure.size in sizes[failure.example - 1], (result.submission, case.id)
                    continue
                shrunk += 1
                hows.add(original.how)
                assert original.examples == failure.examples == len(sizes)
                assert original.size in sizes[original.example - 1], (result.submission, case.id)
                if original.how == "drawn":  # another drawn input, smaller, named by its own position
                    assert failure.size in sizes[failure.example - 1] and failure.size < original.size
                else:  # a small input's or hypothesis's has no position: the label keeps the original's
                    assert original.how in ("small", "hypothesis") and original.example == failure.example
                    assert failure.size < original.size
                assert failure.size <= original.size, (result.submission, case.id, failure.size, original.size)
    assert checked > 40 and shrunk > 0 and "small" in hows


def test_a_class_graded_here_uses_one_torch_thread_and_gives_back_the_count(tmp_path):
    """While one grader process grades a class or one submission, torch runs one thread there (its
    idle OpenMP threads would spin on the workers' CPU); afterwards the process has its count back."""
    import torch

    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen: list[int] = []
    try:
        missing = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]  # unreadable: never run, every case says why
        for path in missing:
            path.write_text("{not a notebook")
        results = grade_many(
            missing, spec, limits=Limits(template=False), on_result=lambda r: seen.append(torch.get_num_threads())
        )
        assert [r.score for r in results] == [0, 0]
        assert seen == [1, 1]
        assert torch.get_num_threads() == 2
        grade_many(
            missing[:1], spec, limits=Limits(template=False), on_result=lambda r: seen.append(torch.get_num_threads())
        )
        assert seen[-1] == 1  # one submission too
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
