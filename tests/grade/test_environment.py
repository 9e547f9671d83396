"""The course's environment on the grading machine (attnscore.grade.environment): what a spec
lists and the machine lacks is said once, before anything is graded; what it lists is usable."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from attnscore.check.cases import build_cases
from attnscore.grade.environment import environment_problem
from attnscore.grade.grading import grade_submission
from attnscore.sandbox import checks
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
CORRECT = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
ABSENT = "attnscore-course-package-that-is-not-installed"
GUARD_S = 600  # a command that hangs fails the test instead of the run


def _spec_with(tmp_path: Path, environment: str) -> Path:
    """dot_product_scores with an ``environment`` line added (its id stays: feedback names it)."""
    text = SPEC.read_text().replace("nonfinite: match\n", f"nonfinite: match\nenvironment: {environment}\n", 1)
    path = tmp_path / "dot_product_scores.yaml"
    path.write_text(text)
    return path


def _attnscore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attnscore", *args], capture_output=True, text=True, timeout=GUARD_S, cwd=ROOT
    )


def test_nothing_is_missing_for_a_spec_without_an_environment():
    """The bundled spec asks for nothing beyond attnscore's own environment."""
    assert environment_problem(load_spec(SPEC)) is None


def test_a_missing_package_is_named_with_the_pip_install_that_adds_it(tmp_path):
    """One sentence: which listed packages are missing, and the command to install them."""
    spec = load_spec(_spec_with(tmp_path, f'{{packages: [numpy, "{ABSENT}>=2"]}}'))
    assert environment_problem(spec) == (
        f"the spec's environment lists packages this machine lacks: {ABSENT}>=2 (not installed); "
        f"install them with: pip install '{ABSENT}>=2'"
    )


def test_torch_compile_without_a_compiler_is_named(tmp_path, monkeypatch):
    """A spec that allows torch.compile, on a machine whose sandbox has no g++ on its PATH."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setattr(checks, "WORKER_PATH", str(empty))
    spec = load_spec(_spec_with(tmp_path, "{torch_compile: true}"))
    assert environment_problem(spec, Limits(bwrap=False)) == (
        "the spec's environment allows torch.compile, but the sandbox cannot compile here: no C++ compiler (g++) "
        f"on the sandbox's PATH ({empty}); install it on the grading machine (apt-get install g++)"
    )


def test_torch_compile_without_pythons_headers_is_named(tmp_path, monkeypatch):
    """Python.h missing (no python3-dev): named with the package that installs it."""
    monkeypatch.setattr(checks, "WORKER_PATH", "/usr/local/bin:/usr/bin:/bin")
    if checks.shutil.which("g++", path=checks.WORKER_PATH) is None:
        pytest.skip("no g++ here: the compiler is what is missing first")
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *args, **kwargs: str(tmp_path))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert checks.compile_problem(Limits(bwrap=False)) == (
        f"Python's C headers are not installed ({tmp_path}/Python.h is missing); install them on the grading "
        f"machine (apt-get install python{version}-dev)"
    )


def test_grade_refuses_to_start_without_a_listed_package(tmp_path):
    """`attnscore grade`: exit 3 and one line saying what to install; nothing graded, no traceback."""
    done = _attnscore("grade", str(CORRECT), "--spec", str(_spec_with(tmp_path, f"{{packages: [{ABSENT}]}}")))
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"Error: the spec's environment lists packages this machine lacks: {ABSENT} (not installed); install them "
        f"with: pip install {ABSENT} (nothing was graded)"
    ]


def test_check_says_once_what_to_install_and_checks_anyway(tmp_path):
    """`attnscore check` on a student's machine: a note, once, then the self-check as usual."""
    done = _attnscore("check", str(CORRECT), "--spec", str(_spec_with(tmp_path, f"{{packages: [{ABSENT}]}}")))
    assert done.returncode == 0, done.stdout + done.stderr
    note = (
        f"Note: the spec's environment lists packages this machine lacks: {ABSENT} (not installed); install them "
        f"with: pip install {ABSENT} (the grader has them)"
    )
    assert done.stderr.splitlines() == [note]
    assert "Score: 9/9" in done.stdout


EINOPS = """\
import einops
import torch


def scores(q, keys):
    return einops.einsum(keys, q, "n d, d -> n")
"""


def test_a_listed_package_is_usable_in_the_sandbox(tmp_path):
    """A submission importing einops gets full marks when the spec lists einops (and it is installed)."""
    pytest.importorskip("einops")
    spec_path = _spec_with(tmp_path, "{packages: [einops]}")
    spec = load_spec(spec_path)
    assert environment_problem(spec) is None
    path = tmp_path / "solution.py"
    path.write_text(EINOPS)
    result = grade_submission(path, spec, build_cases(spec), shrink_steps=0)
    assert (result.score, result.max_score) == (11, 11), [c.message for c in result.cases]
