"""The student copy of a spec (attnscore export student-spec) and the self-check on it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from attnscore.check.cases import Case
from attnscore.check.verify import bundled_spec_paths
from attnscore.cli import main
from attnscore.export.bundle import ExportError
from attnscore.export.gradescope import build_gradescope_bundle
from attnscore.export.student_spec import student_spec_text, write_student_spec
from attnscore.grade.grading import grade_many
from attnscore.report.results import CaseResult
from attnscore.selfcheck import SelfCheck, check_path, visible_cases
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from attnscore.submission.files import find_submissions

ROOT = Path(__file__).resolve().parents[2]
SPECS = bundled_spec_paths()
DOT = ROOT / "specs" / "dot_product_scores.yaml"
SUBS = ROOT / "examples" / "submissions" / "scores"


@pytest.fixture(scope="module")
def dot_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The student copy of dot_product_scores, written once for the tests that only read it."""
    out = tmp_path_factory.mktemp("dot_copy") / "student.yaml"
    write_student_spec(DOT, out)
    return out


class _SelfChecks(dict[tuple[str, Path], SelfCheck]):
    """``checks[name, spec]``: `check_path` of the example submission ``name`` on ``spec``, run at
    the first asking and kept (a self-check's result is frozen data)."""

    def __missing__(self, key: tuple[str, Path]) -> SelfCheck:
        name, spec = key
        self[key] = check_path(SUBS / name, spec)
        return self[key]


@pytest.fixture(scope="module")
def self_checks() -> _SelfChecks:
    """The self-checks of the example submissions, each (submission, spec) pair once per module."""
    return _SelfChecks()


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _assert_same_cases(full: list[Case], copy: list[Case]) -> None:
    assert [c.id for c in copy] == [c.id for c in full]
    for a, b in zip(full, copy, strict=True):
        for field in ("kind", "title", "statement", "points", "visibility", "tolerance", "property_name"):
            assert getattr(a, field) == getattr(b, field), (a.id, field)
        assert a.explanation == b.explanation
        assert len(a.calls) == len(b.calls), a.id
        for ca, cb in zip(a.calls, b.calls, strict=True):
            assert list(ca.args) == list(cb.args)
            assert all(_same_array(ca.args[n], cb.args[n]) for n in ca.args), a.id  # same inputs, bit for bit
            assert _same_array(ca.golden, cb.golden) and _same_array(ca.allowed, cb.allowed), a.id
            assert (ca.check, ca.group, ca.compare_golden) == (cb.check, cb.group, cb.compare_golden)
            assert ca.layouts == cb.layouts
            assert repr(ca.example) == repr(cb.example)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_student_copy_builds_the_graders_visible_cases(path, tmp_path, monkeypatch):
    """For every bundled spec and dtype: the copy's cases are the full spec's visible ones, bit for bit."""
    # The case cache in a folder of the test's own: the copies' entries (a new file each run, never
    # read again; 88 spec-dtype pairs over the file) and the full specs' 88 would push every other
    # test's entries out of the grader's cache, which keeps the 64 last used (and so never these).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "student.yaml"
    write_student_spec(path, out)
    full, copy = load_spec(path), load_spec(out)
    for field in ("id", "version", "seed", "function", "dtypes", "timeout_s", "tolerance", "accept", "nonfinite"):
        assert getattr(copy, field) == getattr(full, field), field
    assert copy.student_copy is not None and full.student_copy is None
    hidden = [e for e in full.worked_examples if e.visibility == "hidden"]
    hidden += [p for p in full.properties if p.visibility == "hidden"]  # type: ignore[misc]
    assert copy.student_copy.hidden_cases == len(hidden)
    assert copy.student_copy.hidden_points == sum(h.points for h in hidden)
    assert copy.max_points + copy.student_copy.hidden_points == full.max_points
    for dtype in full.dtypes:
        full_cases, full_hidden = visible_cases(full, dtype)
        copy_cases, copy_hidden = visible_cases(copy, dtype)
        assert copy_hidden == full_hidden == len(hidden)
        _assert_same_cases(full_cases, copy_cases)


def test_bundled_specs_with_hidden_cases_exist():
    """The comparison above covers the case that matters: specs that have hidden cases."""
    with_hidden = [p.stem for p in SPECS if any(e.visibility == "hidden" for e in load_spec(p).worked_examples)]
    assert {"dot_product_scores", "score_matrix", "scaled_score_matrix"} <= set(with_hidden)


def _spec_with_secrets(tmp_path: Path) -> Path:
    """dot_product_scores plus a hidden example and a hidden property, each with distinctive numbers."""
    q, k = [3.14159, 2.71828], [[1.41421, 0.0]]
    expected = float(np.dot(np.float64(q), np.float64(k[0])))
    text = DOT.read_text(encoding="utf-8").replace(
        "properties:\n",
        "  - id: secret_distinctive_numbers\n"
        "    title: secret title words\n"
        f"    inputs: {{q: {q}, keys: {k}}}\n"
        f"    expected: [{expected!r}]\n"
        "    explanation: secret explanation words\n"
        "    points: 4\n"
        "    visibility: hidden\n"
        "properties:\n",
        1,
    )
    text += (
        "  - {name: inputs_not_mutated, points: 3, examples: 7, max_value: 77.25, visibility: hidden,\n"
        '     statement: "secret statement words."}\n'
    )
    path = tmp_path / "secret.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_student_copy_holds_no_hidden_inputs_expected_values_or_parameters(tmp_path):
    """Nothing of a hidden case reaches the copy's text: not its inputs, expected value, id, words or parameters."""
    spec_path = _spec_with_secrets(tmp_path)
    full = load_spec(spec_path)
    out = tmp_path / "student.yaml"
    write_student_spec(spec_path, out)
    text = out.read_text(encoding="utf-8")
    for secret in ("3.14159", "2.71828", "1.41421", "4.44", "secret", "inputs_not_mutated", "77.25", "three_dims"):
        assert secret not in text, secret
    copy = load_spec(out)
    assert copy.student_copy is not None
    assert (copy.student_copy.hidden_cases, copy.student_copy.hidden_points) == (3, 9)  # 2 + 4 + 3 points
    assert "3 hidden\n# cases (9 points)" in text
    # No array of the copy equals a hidden example's inputs or expected value.
    arrays = [a for e in copy.worked_examples for a in (*e.inputs.values(), e.expected)]
    for hidden in (e for e in full.worked_examples if e.visibility == "hidden"):
        for secret in (*hidden.inputs.values(), hidden.expected):
            assert not any(a.shape == secret.shape and np.array_equal(a, secret) for a in arrays)
    # The visible parts are written as they were.
    assert [e.id for e in copy.worked_examples] == ["aligned_perpendicular_partial", "anti_aligned"]
    assert [p.name for p in copy.properties] == [p.name for p in full.properties if p.visibility == "visible"]
    raw = yaml.safe_load(text)
    assert "mistakes" not in raw and raw["student_copy"] == {"hidden_cases": 3, "hidden_points": 9}


def _located(case: CaseResult) -> dict[str, object]:
    """The case result with its spec location (``file:line``, also quoted in messages) taken out."""
    data = dataclasses.asdict(case)
    data["message"] = case.message.replace(case.location, "LOCATION")
    if data["failure"] is not None:
        data["failure"]["location"] = ""
    return {**data, "location": ""}


@pytest.mark.slow
def test_self_check_on_the_copy_equals_the_full_spec(dot_copy, self_checks):
    """A wrong submission: same verdicts, points, messages and counterexamples on the copy as on the full spec."""
    for name in ("softmax_applied.py", "keys_not_transposed.py", "correct_matmul.py"):
        on_full = self_checks[name, DOT]
        on_copy = self_checks[name, dot_copy]
        assert on_copy.hidden == on_full.hidden == 1
        assert [_located(c) for c in on_copy.result.cases] == [_located(c) for c in on_full.result.cases], name
        # The locations differ only in pointing into the copy: same case, the copy's file and line.
        assert all(Path(c.location.rsplit(":", 1)[0]).name == "student.yaml" for c in on_copy.result.cases)
        assert (on_copy.result.score, on_copy.result.max_score) == (on_full.result.score, on_full.result.max_score)
        assert on_copy.footer() == on_full.footer()
    assert not self_checks["softmax_applied.py", dot_copy].passed


def test_check_cli_on_a_copy_says_hidden_cases_were_not_run(tmp_path):
    out = tmp_path / "student.yaml"
    runner = CliRunner()
    made = runner.invoke(main, ["export", "student-spec", "--spec", str(DOT), "-o", str(out)])
    assert made.exit_code == 0, made.output
    assert "1 hidden case left out" in made.output
    passed = runner.invoke(main, ["check", str(SUBS / "correct_matmul.py"), "--spec", str(out)])
    assert passed.exit_code == 0
    flat = " ".join(passed.output.split())
    assert "1 hidden case not run here" in flat and "not yet your grade" in flat and "Score: 9/9" in flat
    failed = runner.invoke(main, ["check", str(SUBS / "softmax_applied.py"), "--spec", str(out), "--format", "json"])
    assert failed.exit_code == 1
    assert json.loads(failed.output)["hidden_cases_not_run"] == 1


def test_export_errors_exit_2(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(
        main, ["export", "student-spec", "--spec", str(DOT), "-o", str(tmp_path / "no" / "deeper" / "s.yaml")]
    )
    assert missing.exit_code == 2 and "folder" in missing.output and "does not exist" in missing.output
    assert not (tmp_path / "no").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text(DOT.read_text(encoding="utf-8").replace("version: 1", "version: one"), encoding="utf-8")
    invalid = runner.invoke(main, ["export", "student-spec", "--spec", str(bad), "-o", str(tmp_path / "s.yaml")])
    assert invalid.exit_code == 2 and "bad.yaml:4:" in invalid.output and "Traceback" not in invalid.output
    assert not (tmp_path / "s.yaml").exists()
    nofile = runner.invoke(
        main, ["export", "student-spec", "--spec", str(tmp_path / "x.yaml"), "-o", str(tmp_path / "s.yaml")]
    )
    assert nofile.exit_code == 2 and "no such file" in nofile.output
    over = runner.invoke(main, ["export", "student-spec", "--spec", str(bad), "-o", str(bad)])
    assert over.exit_code == 2


def test_a_copy_is_never_graded_or_copied_again(tmp_path, dot_copy):
    """grade, the Gradescope export and a second student-spec export refuse a student copy (exit 2)."""
    out = dot_copy
    runner = CliRunner()
    graded = runner.invoke(main, ["grade", str(SUBS / "correct_matmul.py"), "--spec", str(out)])
    assert graded.exit_code == 2 and "student copy" in graded.output
    again = runner.invoke(main, ["export", "student-spec", "--spec", str(out), "-o", str(tmp_path / "t.yaml")])
    assert again.exit_code == 2 and "already a student copy" in again.output
    with pytest.raises(ExportError, match="student copy"):
        build_gradescope_bundle(out, tmp_path / "autograder.zip")
    assert not (tmp_path / "autograder.zip").exists()


def test_every_worked_example_hidden_is_refused(tmp_path):
    lines = [line for line in DOT.read_text(encoding="utf-8").splitlines() if line != "    visibility: hidden"]
    text = "".join(f"{line}\n" + ("    visibility: hidden\n" if line.startswith("  - id: ") else "") for line in lines)
    path = tmp_path / "all_hidden.yaml"
    path.write_text(text, encoding="utf-8")
    assert all(e.visibility == "hidden" for e in load_spec(path).worked_examples)
    with pytest.raises(ExportError, match="every worked example"):
        student_spec_text(path)


def test_malformed_student_copy_marker_is_located(tmp_path):
    out = tmp_path / "student.yaml"
    write_student_spec(DOT, out)
    out.write_text(out.read_text(encoding="utf-8").replace("hidden_cases: 1", "hidden_cases: -1"), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(out)
    assert any(p.field == "student_copy.hidden_cases" for p in caught.value.problems)


def test_check_on_the_copy_equals_the_sandboxed_grader_on_the_full_spec(dot_copy, self_checks):
    """Directly: `attnscore check` on the copy gives the grader's (full spec, sandbox) verdicts, points and messages."""
    full = load_spec(DOT)
    (graded,) = grade_many(find_submissions([str(SUBS / "keys_not_transposed.py")]), full)
    mine = self_checks["keys_not_transposed.py", dot_copy].result
    by_id = {c.id: c for c in graded.cases}
    assert [c.id for c in mine.cases] == [c.id for c in graded.cases if c.visibility == "visible"]
    assert any(not c.passed for c in mine.cases)
    for case in mine.cases:
        other = by_id[case.id]
        message = case.message.replace(case.location, other.location)
        assert (case.verdict, case.points, message, case.counterexample, case.diagnosis) == (
            other.verdict,
            other.points,
            other.message,
            other.counterexample,
            other.diagnosis,
        ), case.id
    assert mine.seed == graded.seed
