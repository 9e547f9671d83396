"""Tests for how Gradescope results show hidden cases and the total (attnscore.report.gradescope):
each ``hidden_cases`` choice, the export option that carries it into the bundle, and its errors."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.bundle import ExportError
from attnscore.export.gradescope import build_gradescope_bundle
from attnscore.report.gradescope import DEFAULT_HIDDEN_CASES, HIDDEN_CASES, gradescope_results
from attnscore.report.results import SubmissionResult
from tests.classdata import result

LATER = ["after_due_date", "after_published", "hidden"]
SPEC = Path(__file__).resolve().parents[2] / "specs" / "dot_product_scores.yaml"


def with_hidden(res: SubmissionResult, *ids: str) -> SubmissionResult:
    """``res`` with the cases ``ids`` hidden (their failures too)."""
    cases = []
    for case in res.cases:
        if case.id in ids:
            failure = dataclasses.replace(case.failure, hidden=True) if case.failure is not None else None
            case = dataclasses.replace(case, visibility="hidden", failure=failure)
        cases.append(case)
    return dataclasses.replace(res, cases=tuple(cases))


@pytest.fixture
def graded() -> SubmissionResult:
    """3 + 2 + 1/3 points; anti_aligned (2 points, failed) and equals_qk_entries (1/3, passed) hidden."""
    return with_hidden(
        result("ada.py", {"example:anti_aligned": None}), "example:anti_aligned", "property:equals_qk_entries"
    )


def test_default_shows_every_case_and_so_the_total(graded):
    """Default (visible): every test is shown at once, the hidden ones too, and the output gives the total."""
    data = gradescope_results(graded)
    assert DEFAULT_HIDDEN_CASES == "visible"
    assert [t["visibility"] for t in data["tests"]] == ["visible", "visible", "visible"]
    assert data["score"] == 3.3333  # 3 + 1/3 of 3 + 2 + 1/3
    assert data["output"] == "dot_product_scores v1: 3.3333/5.3333 points"
    assert data["visibility"] == "visible" and data["extra_data"]["hidden_cases"] == "visible"
    hidden = data["tests"][1]
    assert hidden["name"] == "hidden case 1" and hidden["status"] == "failed"  # never its id or title
    assert "[1.0, 0.0]" not in hidden["output"]  # a hidden case's inputs are never shown


def test_summary_folds_hidden_cases_into_one_visible_test(graded):
    """summary: the hidden cases are one visible test with their points together; none is named."""
    data = gradescope_results(graded, "summary")
    assert [t["name"] for t in data["tests"]] == ["example:aligned: one query, three keys", "hidden cases"]
    folded = data["tests"][1]
    assert (folded["score"], folded["max_score"], folded["status"], folded["visibility"]) == (
        0.3333,
        2.3333,
        "failed",
        "visible",
    )
    assert folded["output"] == (
        "1 of 2 hidden cases passed, 0.3333/2.3333 points (hidden cases are not shown one by one)"
    )
    text = json.dumps(data)
    assert "anti_aligned" not in text and "equals_qk_entries" not in text and "pointing away" not in text
    assert sum(Fraction(str(t["score"])) for t in data["tests"]) == Fraction("3.3333")
    assert data["output"] == "dot_product_scores v1: 3.3333/5.3333 points"


def test_summary_of_all_passed_hidden_cases_passes():
    """Every hidden case passed: the folded test passes with full points."""
    data = gradescope_results(with_hidden(result("ada.py", {}), "example:anti_aligned"), "summary")
    assert data["tests"][-1] | {"output": ""} == {
        "name": "hidden cases",
        "number": "3",
        "score": 2,
        "max_score": 2,
        "status": "passed",
        "output": "",
        "output_format": "text",
        "tags": ["hidden"],
        "visibility": "visible",
    }
    assert data["tests"][-1]["output"].startswith("1 of 1 hidden case passed, 2/2 points")


@pytest.mark.parametrize("choice", LATER)
def test_later_choices_give_hidden_tests_that_visibility_and_keep_the_total_out_of_the_output(graded, choice):
    """after_due_date / after_published / hidden: the hidden tests carry it; the output gives visible points only."""
    data = gradescope_results(graded, choice)
    assert [t["visibility"] for t in data["tests"]] == ["visible", choice, choice]
    when = {
        "after_due_date": "after the due date",
        "after_published": "once grades are published",
        "hidden": "to your instructor only",
    }[choice]
    assert (
        data["output"]
        == f"dot_product_scores v1: 3/3 points on the visible cases; 2 hidden cases (2.3333 points) shown {when}"
    )
    assert "5.3333" not in data["output"] and "3.3333" not in data["output"]
    assert data["score"] == 3.3333  # Gradescope records the total; it shows it once every test is shown


@pytest.mark.parametrize("choice", HIDDEN_CASES)
def test_without_hidden_cases_every_choice_is_the_same(choice):
    """A spec with no hidden case: each choice gives the same tests and the total."""
    plain = result("ada.py", {"example:aligned": None})
    data = gradescope_results(plain, choice)
    base = gradescope_results(plain)
    assert (
        data["tests"] == base["tests"]
        and data["output"] == base["output"] == "dot_product_scores v1: 2.3333/5.3333 points"
    )


def test_unknown_choice_is_refused(graded):
    """A choice outside HIDDEN_CASES: one ValueError naming the choices."""
    with pytest.raises(ValueError, match=r"expected hidden_cases to be one of visible, summary, .*found 'later'"):
        gradescope_results(graded, "later")
    with pytest.raises(ExportError, match="expected --hidden-cases to be one of"):
        build_gradescope_bundle(str(SPEC), "x.zip", hidden_cases="later")


def test_cli_choices_are_the_report_choices():
    """The two commands offer exactly HIDDEN_CASES."""
    from attnscore.cli.export import export_gradescope
    from attnscore.cli.grade import grade

    for command in (export_gradescope, grade):
        (option,) = [p for p in command.params if p.name == "hidden_cases"]
        assert tuple(option.type.choices) == HIDDEN_CASES


@pytest.mark.parametrize(
    "choice, lines", [(None, ["--hidden-cases", "visible"]), ("summary", ["--hidden-cases", "summary"])]
)
def test_export_writes_the_choice_into_grade_options(tmp_path, choice, lines):
    """`attnscore export gradescope --hidden-cases X`: grade-options.txt passes it to `attnscore grade`."""
    out = tmp_path / "a.zip"
    args = ["export", "gradescope", "--spec", str(SPEC), "-o", str(out)]
    done = CliRunner().invoke(main, args + (["--hidden-cases", choice] if choice else []))
    assert done.exit_code == 0, done.output
    with zipfile.ZipFile(out) as archive:
        assert archive.read("grade-options.txt").decode().splitlines() == lines


def test_export_refuses_an_unknown_choice(tmp_path):
    """--hidden-cases later: click's usage error, exit 2, nothing written."""
    done = CliRunner().invoke(
        main,
        ["export", "gradescope", "--spec", str(SPEC), "-o", str(tmp_path / "a.zip"), "--hidden-cases", "later"],
    )
    assert done.exit_code == 2 and "Invalid value for '--hidden-cases': 'later' is not one of" in done.output
    assert not (tmp_path / "a.zip").exists()


def test_grade_refuses_hidden_cases_without_gradescope_format(tmp_path):
    """--hidden-cases with --format text: exit 2 and one line saying it is for --format gradescope."""
    (tmp_path / "a.py").write_text("def scores(q, keys):\n    return keys @ q\n")
    done = CliRunner().invoke(main, ["grade", str(tmp_path / "a.py"), "--spec", str(SPEC), "--hidden-cases", "summary"])
    assert done.exit_code == 2
    assert "--hidden-cases summary is for --format gradescope, found --format text" in done.output
