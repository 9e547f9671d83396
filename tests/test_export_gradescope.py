"""Tests for the Gradescope autograder bundle, run end to end in a folder laid out like /autograder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from guards import HANG_GUARD_S

from attnscore.cli import main
from attnscore.export.gradescope import build_gradescope_bundle, failure_results

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
SUBS = ROOT / "examples" / "submissions" / "scores"
STATUSES = {"passed", "failed"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The zip, built by the command line."""
    path = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {path}: ")
    return path


def autograder(tmp_path: Path, bundle: Path, files: dict[str, bytes]) -> dict:
    """Lay out /autograder under tmp_path, run the real run_autograder and read results.json."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    for name, content in files.items():
        target = root / "submission" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    env = {**os.environ, "ATTNSCORE_AUTOGRADER_ROOT": str(root), "ATTNSCORE_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def check_format(results: dict) -> None:
    """The fields Gradescope reads, with their types."""
    assert isinstance(results["score"], (int, float)) and isinstance(results["output"], str)
    for test in results["tests"]:
        assert test["status"] in STATUSES and test["max_score"] >= test["score"] >= 0
        assert test["visibility"] in ("visible", "after_due_date", "after_published", "hidden")


def test_bundle_contents(bundle):
    """The zip holds executable setup.sh and run_autograder, the spec, pinned requirements and the source."""
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in archive.infolist()}
        requirements = archive.read("requirements.txt").decode().splitlines()
        assert archive.read("spec.yaml") == SPEC.read_bytes()
        setup = archive.read("setup.sh").decode()
    assert names[:6] == [
        "setup.sh",
        "run_autograder",
        "spec.yaml",
        "requirements.txt",
        "python-version.txt",
        "grade-options.txt",
    ]
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert {"python/pyproject.toml", "python/attnscore/cli/__init__.py", "python/attnscore/boundary/worker.py"} <= set(
        names
    )
    assert "python/attnscore/bundled_specs/dot_product_scores.yaml" in names
    assert not any("__pycache__" in n for n in names)
    pins = [line for line in requirements if not line.startswith("--")]
    assert all("==" in line for line in pins)
    assert {line.split("==")[0] for line in pins} >= {"torch", "numpy", "pyyaml", "nbformat", "ipython", "click"}
    assert 'pip install --no-cache-dir -r "$source_dir/requirements.txt"' in setup
    assert 'pip install --no-cache-dir --no-deps "$source_dir/python"' in setup


def test_bundle_is_reproducible(bundle, tmp_path):
    """Two exports of the same spec give the same bytes."""
    again = tmp_path / "again.zip"
    build_gradescope_bundle(SPEC, again)
    assert again.read_bytes() == bundle.read_bytes()


def test_correct_file_gets_full_marks(tmp_path, bundle):
    """A correct .py file: every test passed, score 11 of 11."""
    results = autograder(tmp_path, bundle, {"solution.py": (SUBS / "correct_matmul.py").read_bytes()})
    check_format(results)
    assert results["score"] == 11
    assert len(results["tests"]) == 7 and {t["status"] for t in results["tests"]} == {"passed"}


def test_hidden_cases_are_shown_at_once_by_default_and_later_on_request(tmp_path, bundle):
    """Default bundle: the hidden case is a visible test (students see their total); --hidden-cases
    after_due_date: it is shown after the due date, and the output gives the visible cases' points."""
    wrong = {"solution.py": (SUBS / "absolute_value.py").read_bytes()}
    hidden = "example:three_dims_mixed_signs: "  # the spec's one hidden case
    now = autograder(tmp_path / "default", bundle, wrong)
    assert {t["visibility"] for t in now["tests"]} == {"visible"}
    assert now["output"] == f"dot_product_scores v1: {now['score']}/11 points"
    later_zip = tmp_path / "later.zip"
    build_gradescope_bundle(SPEC, later_zip, hidden_cases="after_due_date")
    later = autograder(tmp_path / "later", later_zip, wrong)
    check_format(later)
    assert later["score"] == now["score"] < 11
    assert [(t["name"], t["visibility"]) for t in later["tests"]] == [
        (t["name"], "after_due_date" if t["name"].startswith(hidden) else "visible") for t in now["tests"]
    ]
    assert later["output"].startswith("dot_product_scores v1: ")
    assert later["output"].endswith("points on the visible cases; 1 hidden case (2 points) shown after the due date")


def test_notebook_submission(tmp_path, bundle):
    """A notebook with magics and outputs is graded on its definitions."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("!pip install torch\n%matplotlib inline\nimport torch"),
            nbformat.v4.new_code_cell("%%time\ndef scores(q, keys):\n    return torch.softmax(keys @ q, -1)"),
            nbformat.v4.new_code_cell("scores(torch.ones(2), torch.ones(3, 2))"),
        ]
    )
    results = autograder(tmp_path, bundle, {"hw.ipynb": nbformat.writes(nb).encode()})
    check_format(results)
    assert results["score"] == 1  # softmax applied: only the non-contiguous property holds
    assert any("softmax_applied" in t["output"] for t in results["tests"] if t["status"] == "failed")


def test_multi_file_submission(tmp_path, bundle):
    """An entry file and a helper module it imports."""
    files = {p.name: p.read_bytes() for p in (SUBS / "correct_with_helper").iterdir() if p.suffix == ".py"}
    results = autograder(tmp_path, bundle, files)
    check_format(results)
    assert results["score"] == 11


def test_empty_submission_still_gets_valid_results(tmp_path, bundle):
    """Nothing gradable uploaded: results.json exists, score 0, and the output says why."""
    results = autograder(tmp_path, bundle, {"notes.txt": b"I forgot"})
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"].startswith("Your submission could not be graded: ")
    assert "expected a .py or .ipynb file directly in this folder, found none" in results["output"]


def test_failure_results_blame_the_machine_unless_usage():
    """Exit 2 is the submission's problem; anything else is the grading machine's."""
    assert (
        failure_results(2, "Error: x: no such file\n")["output"]
        == "Your submission could not be graded: x: no such file"
    )
    assert failure_results(3, "")["output"].startswith("The autograder could not grade this submission")


def test_export_errors_are_usage_errors(tmp_path):
    """A missing output folder or an invalid spec: exit 2 and one line, nothing written."""
    missing = CliRunner().invoke(
        main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(tmp_path / "no" / "a.zip")]
    )
    assert missing.exit_code == 2
    assert f"cannot write {tmp_path / 'no' / 'a.zip'}: the directory {tmp_path / 'no'} does not exist" in missing.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.read_text().replace("version: 1", "version: one"))
    invalid = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(bad), "-o", str(tmp_path / "a.zip")])
    assert invalid.exit_code == 2 and "invalid spec (1 problem)" in invalid.output
    assert not (tmp_path / "a.zip").exists()
