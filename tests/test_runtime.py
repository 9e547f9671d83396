"""Tests for the worker's runtime (attnscore.sandbox.runtime) on an interpreter the sandbox user cannot read.

The fixture lays out a real Python installation inside a 0700 temporary folder (the interpreter
binary and its standard library as hard links, torch from this environment through a ``.pth``
file), as pyenv under root's home directory is on many grading machines. Nothing outside the
temporary folder changes. These tests need root (the worker drops to another user only then).
"""

from __future__ import annotations

import os
import shutil
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from attnscore.boundary.outputs import CallFailure, Received
from attnscore.report.results import Verdict
from attnscore.sandbox import bwrap, checks
from attnscore.sandbox.launch import Limits, SandboxRunner
from attnscore.sandbox.runtime import WorkerRuntime, _mirror_tree, unreadable_by, worker_runtime

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the worker drops privileges only when the grader is root")

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(call_timeout_s=30.0, bwrap=False)
ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])}
LAZY_IMPORTS = """\
import xml.dom.minidom
import encodings.idna
import torch


def scores(q, keys):
    "".encode("idna")
    torch.broadcast_shapes(q.shape, keys.shape[-1:])
    return keys @ q
"""


@pytest.fixture(scope="module")
def private_python(tmp_path_factory):
    """An interpreter under a 0700 folder: ``bin/pythonX.Y`` and ``lib/pythonX.Y`` as hard links."""
    home = tmp_path_factory.mktemp("home")
    os.chmod(home, 0o700)
    prefix = home / "py"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "installed_base": sys.base_prefix})["stdlib"])
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(os.path.realpath(sys.executable), prefix / "bin" / version)
    _mirror_tree(str(stdlib), str(prefix / "lib" / version), frozenset())
    packages = prefix / "lib" / version / "site-packages"
    packages.mkdir()
    ours = [p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "torch"))]
    # A second, readable site folder (so not mirrored) holding a package folder kept private.
    shared = Path(tempfile.mkdtemp(prefix="attnscore-test-site-"))
    os.chmod(shared, 0o755)
    (shared / "secretpkg").mkdir(mode=0o700)
    (shared / "secretpkg" / "tools.py").write_text("Y = 2\n")
    (packages / "grading-env.pth").write_text("\n".join([*ours, str(shared)]) + "\n")
    (packages / "course_helpers.py").write_text("X = 1\n")
    os.chmod(packages / "course_helpers.py", 0o600)  # kept private by the installation itself
    yield prefix / "bin" / version
    shutil.rmtree(shared)


def call(tmp_path: Path, source: str, runtime: WorkerRuntime):
    path = tmp_path / "solution.py"
    path.write_text(source)
    with SandboxRunner(path, "scores", LIMITS, runtime=runtime) as runner:
        return runner.call(ARGS, "float32"), runner.load_failure


def test_the_private_prefix_is_unreadable_by_the_worker_user(private_python):
    """The fixture reproduces the fault: the sandbox user cannot enter the interpreter's folders."""
    runtime = worker_runtime(str(private_python))
    home = str(private_python.parent.parent.parent)
    assert any(p.startswith(home) for p in runtime.path)
    assert set(unreadable_by(runtime.path, 64000, 64000)) == {p for p in runtime.path if p.startswith(home)}
    assert runtime.mirrors and all(original.startswith(home) for original, _ in runtime.mirrors)
    assert runtime.problems == ()
    assert unreadable_by(tuple(copy for _, copy in runtime.mirrors), 64000, 64000) == ()


def test_correct_code_importing_lazily_gets_right_values(tmp_path, private_python):
    """xml, encodings.idna and torch's lazily imported modules load after the privilege drop."""
    outcome, failure = call(tmp_path, LAZY_IMPORTS, worker_runtime(str(private_python)))
    assert failure is None
    assert isinstance(outcome, Received), outcome
    assert outcome.array.tolist() == pytest.approx([1.0, 0.0, 0.7])


def test_without_the_mirror_the_machine_is_blamed_not_the_student(tmp_path, private_python):
    """When the worker cannot read its interpreter, the verdict is a grader error naming the folder."""
    real = worker_runtime(str(private_python))
    outcome, _ = call(tmp_path, LAZY_IMPORTS, WorkerRuntime(real.executable, real.path))
    assert isinstance(outcome, CallFailure)
    assert outcome.verdict == Verdict.GRADER_ERROR.value
    assert outcome.message.startswith("the grading machine is misconfigured: the sandbox user cannot read ")
    assert str(private_python.parent.parent) in outcome.message


@pytest.mark.parametrize(
    "module, text",
    [
        pytest.param(
            "course_helpers", "a file of the grading machine's Python installation could not be read", id="0600 file"
        ),
        pytest.param(
            "secretpkg.tools",
            "module 'secretpkg.tools' is installed on the grading machine but the sandbox",
            id="0700 pkg",
        ),
    ],
)
def test_installed_but_private_modules_are_grader_errors(tmp_path, private_python, module, text):
    """A module the installation keeps private is a grader error (exit 3), never the student's exception."""
    outcome, failure = call(tmp_path, f"import {module}\n" + LAZY_IMPORTS, worker_runtime(str(private_python)))
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.GRADER_ERROR.value
    assert text in outcome.message
    assert failure is outcome


def test_a_module_that_does_not_exist_is_the_students_exception(tmp_path, private_python):
    """No such module anywhere: the student's exception, as before."""
    outcome, _ = call(tmp_path, "import no_such_module_xyz\n" + LAZY_IMPORTS, worker_runtime(str(private_python)))
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.EXCEPTION.value
    assert "No module named 'no_such_module_xyz'" in outcome.message


def test_grade_says_in_one_line_when_the_sandbox_cannot_work(monkeypatch, private_python):
    """A machine where the worker cannot read its interpreter: exit 3 before grading, one line with the fix."""
    real = worker_runtime(str(private_python))
    monkeypatch.setattr(checks, "worker_runtime", lambda **_: WorkerRuntime(real.executable, real.path))
    monkeypatch.setattr(bwrap, "bwrap_available", lambda: False)
    spec = str(ROOT / "specs" / "dot_product_scores.yaml")
    sub = str(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py")
    result = CliRunner().invoke(main_command(), ["grade", sub, "--spec", spec])
    assert result.exit_code == 3
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: the sandbox cannot run submissions on this machine: the sandbox user (uid 64000) ")
    assert line.endswith(
        "part of the Python installation; make it readable by all users, install bubblewrap, "
        "or run attnscore as a user other than root (nothing was graded)"
    )


def main_command():
    from attnscore.cli import main

    return main
