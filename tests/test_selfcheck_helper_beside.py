"""`attnscore check folder/solution.py` whose `from helpers import x` names a helpers.py beside it:
the failure says that file was not checked and how to check the whole folder, never that no file of
the student's has that name."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main

SOLUTION = "from helpers import helper_scores\n\ndef score_matrix(Q, K):\n    return helper_scores(Q, K)\n"
HELPERS = "def helper_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"


def _check(target: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", str(target), "--spec", "score_matrix"])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("helper", ["helpers.py", "helpers/__init__.py"], ids=["module", "package"])
def test_a_helper_beside_the_file_is_named_with_the_folder_to_check(tmp_path: Path, helper: str) -> None:
    """The true hint: the helper lies beside the file, check the folder; the folder then passes."""
    folder = tmp_path / "folder sub"
    (folder / helper).parent.mkdir(parents=True, exist_ok=True)
    (folder / helper).write_text(HELPERS, encoding="utf-8")
    (folder / "solution.py").write_text(SOLUTION, encoding="utf-8")
    code, text = _check(folder / "solution.py")
    assert code == 1, text
    shown = "helpers.py" if helper == "helpers.py" else "helpers/"
    assert (
        "`from helpers import helper_scores` failed: helpers is not installed on this machine, and "
        f"{shown} lies beside solution.py but only solution.py was checked: check the whole folder "
        f"(attnscore check {shlex.quote(str(folder))})"
    ) in text
    assert "no file of yours" not in text
    whole, text = _check(folder)
    assert whole == 0, text


def test_without_a_helper_beside_it_the_hint_is_unchanged(tmp_path: Path) -> None:
    """No helpers.py anywhere: the grader's words stand."""
    (tmp_path / "solution.py").write_text(SOLUTION, encoding="utf-8")
    code, text = _check(tmp_path / "solution.py")
    assert code == 1
    assert "helpers is not installed on this machine, and no file of yours is named helpers.py" in text
