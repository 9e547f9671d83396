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

from attnscore.cli import main
from attnscore.export import targets
from attnscore.export.bundle import ExportError
from attnscore.export.gradescope import build_gradescope_bundle, failure_results
from attnscore.export.targets import choose_target
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
SUBS = ROOT / "examples" / "submissions" / "scores"
STATUSES = {"passed", "failed"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The zip, built by the command line for the default target (Ubuntu 22.04, Python 3.10)."""
    path = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {path}: ")
    assert result.output.rstrip().endswith("for the base image ubuntu-22.04 (Python 3.10)")
    return path


@pytest.fixture(scope="module")
def bundle_2404(tmp_path_factory) -> Path:
    """The zip for Ubuntu 24.04, chosen by its Python."""
    path = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    result = CliRunner().invoke(
        main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(path), "--python", "3.12"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("for the base image ubuntu-24.04 (Python 3.12)")
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
        python, image = archive.read("python-version.txt"), archive.read("base-image.txt")
    assert names[:7] == [
        "setup.sh",
        "run_autograder",
        "spec.yaml",
        "requirements.txt",
        "python-version.txt",
        "base-image.txt",
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
    assert (python, image) == (b"3.10\n", b"ubuntu-22.04\n")
    assert requirements[:2] == ["--extra-index-url https://download.pytorch.org/whl/cpu", "torch==2.13.0+cpu"]
    assert "numpy==2.2.6" in requirements and "ipython==8.39.0" in requirements  # numpy 2.3, ipython 9: no 3.10
    assert 'pip install --no-cache-dir --only-binary=:all: -r "$source_dir/requirements.txt"' in setup
    assert 'pip install --no-cache-dir --no-deps "$source_dir/python"' in setup


def test_bundle_is_reproducible(bundle, tmp_path):
    """Two exports of the same spec give the same bytes."""
    again = tmp_path / "again.zip"
    build_gradescope_bundle(SPEC, again)
    assert again.read_bytes() == bundle.read_bytes()


@pytest.mark.slow
def test_correct_file_gets_full_marks(tmp_path, bundle):
    """A correct .py file: every test passed, score 11 of 11."""
    results = autograder(tmp_path, bundle, {"solution.py": (SUBS / "correct_matmul.py").read_bytes()})
    check_format(results)
    assert results["score"] == 11
    assert len(results["tests"]) == 7 and {t["status"] for t in results["tests"]} == {"passed"}


@pytest.mark.slow
def test_hidden_cases_are_shown_at_once_by_default_and_later_on_request(tmp_path, bundle):
    """Default bundle: the hidden case is a visible test (students see their total); --hidden-cases
    after_due_date: it is shown after the due date, and the output gives the visible cases' points."""
    wrong = {"solution.py": (SUBS / "absolute_value.py").read_bytes()}
    hidden = "hidden case 1"  # the spec's one hidden case (example:three_dims_mixed_signs), never named
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


@pytest.mark.slow
def test_ubuntu_2404_bundle_grades_end_to_end(tmp_path, bundle_2404):
    """The 24.04 bundle carries its own pins and Python, and grades a correct file 11 of 11."""
    with zipfile.ZipFile(bundle_2404) as archive:
        requirements = archive.read("requirements.txt").decode().splitlines()
        assert archive.read("python-version.txt") == b"3.12\n"
        assert archive.read("base-image.txt") == b"ubuntu-24.04\n"
    assert "numpy==2.4.6" in requirements and "ipython==9.18.1" in requirements
    results = autograder(tmp_path, bundle_2404, {"solution.py": (SUBS / "correct_matmul.py").read_bytes()})
    check_format(results)
    assert results["score"] == 11


@pytest.mark.parametrize(
    ("python", "image", "expected"),
    [
        pytest.param(None, None, "ubuntu-22.04", id="default is Gradescope's default image"),
        pytest.param("3.10", None, "ubuntu-22.04", id="python 3.10"),
        pytest.param("3.12", None, "ubuntu-24.04", id="python 3.12"),
        pytest.param(None, "ubuntu-24.04", "ubuntu-24.04", id="image"),
        pytest.param("3.12", "ubuntu-24.04", "ubuntu-24.04", id="both agree"),
    ],
)
def test_choose_target(python, image, expected):
    """--python and --image name the same two targets."""
    assert choose_target(python=python, image=image).image == expected


@pytest.mark.parametrize(
    ("python", "image", "message"),
    [
        pytest.param(
            "3.11",
            None,
            "no Gradescope base image has Python 3.11: expected one of 3.10 (ubuntu-22.04), 3.12 (ubuntu-24.04)",
            id="no image has that python",
        ),
        pytest.param(
            None,
            "ubuntu-18.04",
            "unknown Gradescope base image 'ubuntu-18.04': expected one of ubuntu-22.04, ubuntu-24.04",
            id="unknown image",
        ),
        pytest.param(
            "3.10",
            "ubuntu-24.04",
            "--python 3.10 does not match --image ubuntu-24.04, whose Python is 3.12",
            id="python and image disagree",
        ),
    ],
)
def test_choose_target_refuses(python, image, message):
    """An impossible target is one ExportError that names the choices."""
    with pytest.raises(ExportError) as caught:
        choose_target(python=python, image=image)
    assert str(caught.value) == message


def test_export_refuses_unmet_pins_and_writes_nothing(tmp_path, monkeypatch):
    """Pins that do not meet attnscore's requirements stop the export, not the image build."""
    real = targets._pins_text

    def stale(target):
        return real(target).replace("numpy==2.2.6", "numpy==1.21.6").replace("click==8.5.1\n", "")

    monkeypatch.setattr(targets, "_pins_text", stale)
    out = tmp_path / "a.zip"
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(out)])
    assert result.exit_code == 2
    assert "cannot build for ubuntu-22.04 (Python 3.10): its pins" in result.output
    assert "click>=8.1 (not pinned)" in result.output and "numpy>=1.24 (pinned 1.21.6)" in result.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_export_cli_refuses_conflicting_target(tmp_path):
    """--python 3.10 with --image ubuntu-24.04: exit 2, one line, nothing written."""
    out = tmp_path / "a.zip"
    args = ["export", "gradescope", "--spec", str(SPEC), "-o", str(out), "--python", "3.10", "--image", "ubuntu-24.04"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "--python 3.10 does not match --image ubuntu-24.04, whose Python is 3.12" in result.output
    assert not out.exists()


def test_setup_stops_before_installing_on_another_python(tmp_path, bundle):
    """setup.sh on an image whose python3 is not the bundle's: exit 1 and why, before any venv or pip."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    venv = tmp_path / "venv"
    env = {
        **os.environ,
        "ATTNSCORE_AUTOGRADER_ROOT": str(root),
        "ATTNSCORE_SETUP_PYTHON3": sys.executable,
        "ATTNSCORE_SETUP_VENV": str(venv),
        "ATTNSCORE_SETUP_NO_APT": "1",
    }
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert here != "3.10"  # the test machine's Python stands for another image's
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.returncode == 1
    assert (
        f"error: this autograder was exported for the base image ubuntu-22.04 (Python 3.10), but this image's "
        f"python3 is Python {here}: select ubuntu-22.04" in done.stderr
    )
    assert not venv.exists()


@pytest.mark.slow
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
    # softmax applied: the function the notebook defines is called (its mistake is named); its values
    # are wrong everywhere, so no property earns a point beside them
    assert results["score"] == 0
    assert any("softmax_applied" in t["output"] for t in results["tests"] if t["status"] == "failed")


@pytest.mark.slow
def test_multi_file_submission(tmp_path, bundle):
    """An entry file and a helper module it imports."""
    files = {p.name: p.read_bytes() for p in (SUBS / "correct_with_helper").iterdir() if p.suffix == ".py"}
    results = autograder(tmp_path, bundle, files)
    check_format(results)
    assert results["score"] == 11


@pytest.mark.slow
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


def test_check_target_refuses_a_python_attnscore_does_not_support():
    """A target whose Python is below attnscore's Requires-Python is refused by name."""
    with pytest.raises(ExportError) as caught:
        targets.check_target(targets.Target("ubuntu-20.04", "3.8", (2, 31)))
    assert str(caught.value) == (
        "cannot build for ubuntu-20.04 (Python 3.8): attnscore requires Python >=3.10; choose another --image"
    )


def test_cli_target_choices_are_the_targets():
    """The CLI's --image and --python choices are the targets' (spelled out there for a light import)."""
    from attnscore.cli import export as export_command

    assert export_command.IMAGES == list(targets.TARGETS)
    assert export_command.PYTHONS == [t.python for t in targets.TARGETS.values()]
