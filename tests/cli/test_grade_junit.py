"""``attnscore grade --format junit``: JUnit XML of graded results, one testsuite per submission
(per question of an assignment: tests/report/test_assignment_reports.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from attnscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "dot_product_scores.yaml")
SUBS = ROOT / "examples" / "submissions" / "scores"


def test_grade_junit_writes_one_suite_with_a_failure_per_failed_case(tmp_path):
    """absolute_value.py on dot_product_scores: 7 tests, the failures typed by verdict; exit 1."""
    out = tmp_path / "junit.xml"
    result = CliRunner().invoke(
        main, ["grade", str(SUBS / "absolute_value.py"), "--spec", SPEC, "--format", "junit", "--output", str(out)]
    )
    assert result.exit_code == 1, result.output
    root = ET.fromstring(out.read_bytes())
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "absolute_value.py: dot_product_scores"
    assert suite.get("tests") == "7" and int(suite.get("failures")) >= 1
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["score"] == "4/11" and properties["function"] == "scores"
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert len(failed) == int(suite.get("failures"))
    assert {f.find("failure").get("type") for f in failed} <= {"wrong_value", "wrong_shape", "exception"}
