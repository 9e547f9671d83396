"""mypy, as configured in pyproject.toml ([tool.mypy]), passes on the attnscore package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]' installs it)")

ROOT = Path(__file__).resolve().parent.parent


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    # The project's configuration and cache (.mypy_cache, git-ignored): a rerun checks only what changed.
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_package_type_checks():
    """`mypy attnscore` reports no error."""
    result = mypy("attnscore")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


def test_the_configuration_reports_type_errors(tmp_path):
    """The same configuration rejects a wrong annotation, so a pass above means something."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from fractions import Fraction\n"
        "from attnscore.report.results import points_out\n"
        "x: str = points_out(Fraction(1))\n",
        encoding="utf-8",
    )
    result = mypy(str(wrong))
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Incompatible types in assignment (expression has type "float | int", variable has type "str")' in (
        result.stdout
    )
