"""Tests for the student self-check: visible cases only, the grader's feedback, exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import nbformat
import pytest
import torch
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.selfcheck import check, check_function, check_path, visible_cases
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
SUBS = ROOT / "examples" / "submissions" / "scores"


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


@pytest.mark.slow
def test_only_visible_cases_run(spec):
    """The self-check runs exactly the visible cases, with the grader's points, and counts the hidden ones."""
    visible, hidden = visible_cases(spec)
    assert hidden == 1 and len(visible) == 6
    outcome = check_path(SUBS / "correct_matmul.py", spec)
    assert [c.id for c in outcome.result.cases] == [c.id for c in visible]
    assert all(c.visibility == "visible" for c in outcome.result.cases)
    assert "example:three_dims_mixed_signs" not in outcome.text()  # the hidden worked example
    assert outcome.passed and outcome.result.score == sum(c.points for c in visible) == 9
    ending = "1 hidden case not run here. The grader also runs it when you submit. Every visible case passed"
    assert outcome.text().rstrip().endswith(ending + ", which is not yet your grade.")


@pytest.mark.slow
def test_feedback_equals_the_graders_on_visible_cases(spec):
    """A wrong submission gets the very same verdicts, points and messages as from the sandboxed grader."""
    (graded,) = grade_many(find_submissions([str(SUBS / "softmax_applied.py")]), spec)
    mine = check_path(SUBS / "softmax_applied.py", spec).result
    by_id = {c.id: c for c in graded.cases}
    assert [c.id for c in mine.cases] == [c.id for c in graded.cases if c.visibility == "visible"]
    for case in mine.cases:
        other = by_id[case.id]
        assert (case.verdict, case.points, case.message) == (other.verdict, other.points, other.message), case.id
    assert mine.seed == graded.seed


@pytest.mark.parametrize(
    "source, verdict, message",
    [
        pytest.param("import nonexistent_module_xyz\n", Verdict.EXCEPTION, "nonexistent_module_xyz", id="import error"),
        pytest.param(
            "def other(q, keys):\n    return q\n", Verdict.FUNCTION_MISSING, "it defines: other", id="wrong name"
        ),
        pytest.param("scores = 3\n", Verdict.FUNCTION_MISSING, "an int, not a function", id="not callable"),
        pytest.param("def scores(q, keys)\n", Verdict.EXCEPTION, "SyntaxError", id="syntax error"),
        pytest.param("raise SystemExit(0)\n", Verdict.EXCEPTION, "", id="exit at import"),
    ],
)
def test_broken_files_fail_every_case_with_a_message(tmp_path, spec, source, verdict, message):
    """A file that cannot give the function fails every visible case the same way, with the reason."""
    path = tmp_path / "solution.py"
    path.write_text(source)
    result = check_path(path, spec).result
    assert {c.verdict for c in result.cases} == {verdict}
    assert message in result.error
    assert result.score == 0


@pytest.mark.slow
def test_a_hanging_call_times_out(tmp_path, spec):
    """An infinite loop on perpendicular keys is stopped after the spec's per-call limit, as a timeout."""
    source = textwrap.dedent(
        """
        def scores(q, keys):
            out = keys @ q
            while bool((out == 0).any()):
                pass
            return out
        """
    )
    (tmp_path / "solution.py").write_text(source)
    result = check_path(tmp_path / "solution.py", spec, shrink_steps=0).result
    verdicts = {c.id: c.verdict for c in result.cases}
    assert verdicts["example:aligned_perpendicular_partial"] is Verdict.TIMEOUT
    assert verdicts["example:anti_aligned"] is Verdict.PASSED


@pytest.mark.slow
def test_notebook_and_folder_solutions(tmp_path, spec):
    """A notebook (with magics) and a folder with a helper module are checked as the grader reads them."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("%matplotlib inline\nimport torch"),
            nbformat.v4.new_code_cell("def scores(q, keys):\n    return keys @ q"),
            nbformat.v4.new_code_cell("scores(torch.ones(2), torch.ones(3, 2))"),
        ]
    )
    nbformat.write(nb, tmp_path / "hw.ipynb")
    assert check_path(tmp_path / "hw.ipynb", spec).passed
    assert check_path(SUBS / "correct_with_helper", spec).passed


@pytest.mark.slow
def test_check_in_a_notebook_cell_finds_the_function_by_name(spec):
    """check("scores", spec=...) looks the name up in the caller's globals, like otter's grader.check."""
    namespace = {"check": check, "SPEC": str(SPEC)}
    exec("def scores(q, keys):\n    return keys @ q\nresult = check('scores', spec=SPEC)", namespace)
    assert namespace["result"].passed
    exec("result = check('missing', spec=SPEC)", namespace)
    missing = namespace["result"].result
    assert {c.verdict for c in missing.cases} == {Verdict.FUNCTION_MISSING}
    assert "no function named 'missing' is defined here" in missing.error
    assert "Score: 0/9" in repr(namespace["result"])


@pytest.mark.slow
def test_check_takes_a_function_object(spec):
    """check(function, spec=...) checks the object itself; the repr is the grader's text report."""
    outcome = check(lambda q, keys: torch.softmax(keys @ q, dim=-1), spec=spec)
    assert not outcome.passed
    assert "Known mistake (softmax_applied)" in repr(outcome)
    assert check_function(lambda q, keys: keys @ q, SPEC).passed
    with pytest.raises(TypeError, match="check\\(\\) needs spec="):
        check("scores")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
def test_cli_exit_codes_and_json(tmp_path):
    """attnscore check exits 0 when every visible case passes, 1 when some fail, 2 for a usage error."""
    ok = run("check", str(SUBS / "correct_matmul.py"), "--spec", str(SPEC))
    assert ok.exit_code == 0, ok.output
    assert "Score: 9/9" in ok.output and "visible cases only" in ok.output
    wrong = run(
        "check", str(SUBS / "softmax_applied.py"), "--spec", str(SPEC), "--format", "json", "--shrink-steps", "0"
    )
    assert wrong.exit_code == 1
    data = json.loads(wrong.output)
    # 0: its non_contiguous_inputs point needs right values
    assert data["hidden_cases_not_run"] == 1 and data["score"] == 0 and data["max_score"] == 9
    missing = run("check", str(tmp_path / "nope.py"), "--spec", str(SPEC))
    assert missing.exit_code == 2
    assert missing.output.strip() == f"Error: {tmp_path / 'nope.py'}: no such file"
    bad_dtype = run("check", str(SUBS / "correct_matmul.py"), "--spec", str(SPEC), "--dtype", "float16")
    assert bad_dtype.exit_code == 2 and "is not one of this spec's dtypes" in bad_dtype.output


@pytest.mark.slow
def test_a_solution_that_builds_a_deep_folder_chain_beside_itself_is_checked(tmp_path, spec, monkeypatch):
    """The self-check's copy of the solution is removed without recursion: a 3,000-deep chain built
    next to it at import (tempfile's cleanup raised RecursionError) leaves a normal result and no folder."""
    import tempfile

    source = textwrap.dedent(
        """
        import os

        start = os.open(".", os.O_RDONLY)
        os.chdir(os.path.dirname(os.path.abspath(__file__)))
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        os.fchdir(start)


        def scores(q, keys):
            return keys @ q
        """
    )
    (tmp_path / "solution.py").write_text(source)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = check_path(tmp_path / "solution.py", spec, shrink_steps=0).result
    assert result.score == result.max_score
    assert list(scratch.iterdir()) == []
