"""Imports the grader lacks, graded in the sandbox: a file's failed import is one sentence naming the
student's line and the package; a notebook's costs only the functions that need it; the documented
self-check (``from attnscore.selfcheck import check``) neither fails nor prints."""

from __future__ import annotations

import functools
from pathlib import Path

import nbformat
import pytest

from attnscore.check.cases import Case, build_cases
from attnscore.grade.grading import grade_submission
from attnscore.report.results import Verdict
from attnscore.selfcheck import check_path
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")


@functools.cache
def _cases() -> tuple[Case, ...]:
    """The spec's cases, built at the first test that needs them (not at
    collection, which every xdist worker does) and shared by the module's tests."""
    return tuple(build_cases(SPEC))


MISSING = "attnscore_course_package_that_is_not_installed"


def _grade(path: Path):
    (submission,) = find_submissions([str(path)], one=True)
    return grade_submission(submission, SPEC, _cases(), shrink_steps=0)


def _notebook(tmp_path: Path, *cells: str) -> Path:
    """A notebook of a markdown cell, then ``cells`` as code cells (cell numbers count the markdown one)."""
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# Homework 3"), *(nbformat.v4.new_code_cell(c) for c in cells)]
    )
    path = tmp_path / "hw3.ipynb"
    path.write_text(nbformat.writes(nb))
    return path


def test_a_files_missing_package_is_one_sentence_with_the_students_line(tmp_path):
    """Every case fails with the same load failure: line 3, the statement, the package; no generated line."""
    path = tmp_path / "solution.py"
    path.write_text(f"import torch\n\nimport {MISSING} as pd\n\n\ndef scores(q, keys):\n    return keys @ q\n")
    result = _grade(path)
    why = (
        f"your file could not be imported: line 3: `import {MISSING} as pd` failed: {MISSING} is not installed on "
        f"this grader, and no file of yours is named {MISSING}.py"
    )
    assert result.score == 0 and result.error == why
    assert {c.verdict for c in result.cases} == {Verdict.EXCEPTION}
    assert all(c.failure is not None and c.failure.scope == "submission" for c in result.cases)


def test_a_notebook_cell_whose_import_fails_costs_nothing_when_unused(tmp_path):
    """`import pandas as pd` in a scratch cell, unused by the graded function: full marks."""
    path = _notebook(
        tmp_path,
        f"import torch\nimport {MISSING} as pd",
        "def scores(q, keys):\n    return keys @ q",
        "pd.DataFrame({'a': [1]}).head()",
    )
    result = _grade(path)
    assert (result.score, result.max_score) == (11, 11), result.error


def test_a_function_that_needs_the_missing_package_names_the_cell(tmp_path):
    """Only the function that uses the package fails, with the cell, the statement and the package."""
    path = _notebook(
        tmp_path,
        f"import torch\nimport {MISSING} as pd",
        "def scores(q, keys):\n    return torch.tensor(pd.Series(keys @ q).values)",
    )
    result = _grade(path)
    assert result.score == 0
    visible = [c for c in result.cases if c.visibility != "hidden"]
    why = f"raised ModuleNotFoundError: cell 2: `import {MISSING} as pd` failed: {MISSING} is not installed on "
    details = [c.failure.detail if c.failure is not None else "" for c in visible]
    why += f"this grader, and no file of yours is named {MISSING}.py"
    assert visible and all(d == why for d in details), details  # no line of the generated module


def test_annotations_and_decorators_from_a_missing_package(tmp_path):
    """jaxtyping-style annotations of a missing package do not stop the definition; its decorator does
    make the decorated function need the package."""
    path = _notebook(
        tmp_path,
        f"import torch\nfrom {MISSING} import Float, typechecked",
        'def scores(q: Float[torch.Tensor, "d"], keys: Float[torch.Tensor, "n d"]) -> Float[torch.Tensor, "n"]:\n'
        "    return keys @ q",
        "@typechecked\ndef helper(x):\n    return x",
    )
    assert _grade(path).score == 11


DOCUMENTED_SELFCHECK = [
    "from attnscore.selfcheck import check",
    "def scores(q, keys):\n    return keys @ q",
    'check("scores", spec="specs/dot_product_scores.yaml")  # looks `scores` up in the notebook',
    'check(scores, spec="specs/dot_product_scores.yaml")  # or pass the function itself',
]


def test_the_documented_self_check_in_a_notebook_grades_fully_and_prints_nothing(tmp_path):
    """The cells docs/notebooks-and-platforms.md shows students, graded in the sandbox: full marks, no output."""
    result = _grade(_notebook(tmp_path, *DOCUMENTED_SELFCHECK))
    assert (result.score, result.max_score, result.error, result.output) == (11, 11, "", "")


def test_the_self_check_called_at_the_top_of_a_file_does_nothing_in_the_grader(tmp_path):
    """A file that runs its self-check when imported (and asserts on it) imports in the sandbox and prints nothing."""
    path = tmp_path / "solution.py"
    path.write_text(
        "from attnscore.selfcheck import check\n\n\ndef scores(q, keys):\n    return keys @ q\n\n\n"
        'assert check("scores", spec="specs/dot_product_scores.yaml").passed\n'
    )
    result = _grade(path)
    assert (result.score, result.error, result.output) == (11, "", "")


def test_the_self_check_of_a_notebook_with_a_missing_package_says_this_machine(tmp_path):
    """`attnscore check` runs a notebook cell by cell too: the unused missing import costs nothing there."""
    path = _notebook(tmp_path, f"import {MISSING} as pd", "def scores(q, keys):\n    return keys @ q")
    assert check_path(path, SPEC).passed


def test_the_self_check_of_a_file_with_a_missing_package_says_this_machine(tmp_path):
    """On the student's machine the sentence says the package is not installed on this machine."""
    path = tmp_path / "solution.py"
    path.write_text(f"import {MISSING}\n\n\ndef scores(q, keys):\n    return keys @ q\n")
    outcome = check_path(path, SPEC)
    assert outcome.result.error == (
        f"your file could not be imported: line 1: `import {MISSING}` failed: {MISSING} is not installed on this "
        f"machine, and no file of yours is named {MISSING}.py"
    )


@pytest.mark.parametrize("use", ["pd.concat", "pd"])
def test_an_assignment_that_reads_a_missing_package_at_import(tmp_path, use):
    """A kept assignment computed from the missing package at import (`W = pd.eye(2)`) gives a stand-in;
    the function that reads it fails naming the cell, the import does not."""
    path = _notebook(
        tmp_path,
        f"import torch\nimport {MISSING} as pd",
        f"W = {use}([1])",
        "def scores(q, keys):\n    return keys @ q + 0 * W",
    )
    result = _grade(path)
    detail = result.cases[0].failure.detail if result.cases[0].failure is not None else ""
    assert result.score == 0 and detail.startswith("raised ModuleNotFoundError: cell 2: `import"), detail
