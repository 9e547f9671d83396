"""Tests for the worker's Landlock confinement (attnscore.boundary.landlock, attnscore.boundary.worker._confine)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary import landlock
from attnscore.boundary.confinement import granted_paths as _granted
from attnscore.boundary.outputs import Received
from attnscore.sandbox.launch import Limits, SandboxRunner, protections

ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
needs_landlock = pytest.mark.skipif(landlock.abi_version() == 0, reason="the kernel has no Landlock")


@pytest.fixture
def public_secret():
    """A file every user may read, outside anything the worker is granted (like a spec in a checkout)."""
    folder = Path(tempfile.mkdtemp(prefix="attnscore-test-public-"))
    os.chmod(folder, 0o755)
    secret = folder / "spec.yaml"
    secret.write_text("expected: [42]\n")
    os.chmod(secret, 0o644)
    yield secret
    shutil.rmtree(folder)


def run(tmp_path: Path, body: str, limits: Limits) -> tuple[object, str]:
    path = tmp_path / "solution.py"
    path.write_text("import os, socket\n\ndef scores(q, keys):\n" + body + "    return keys @ q\n")
    with SandboxRunner(path, "scores", limits) as runner:
        outcome = runner.call(ARGS, "float32")
        return outcome, runner.captured_output().decode()


@needs_landlock
def test_world_readable_files_outside_the_grant_cannot_be_read(tmp_path, public_secret):
    """A file every user may read is still out of reach; the right value still comes back."""
    body = (
        f"    try:\n        print(open({str(public_secret)!r}).read())\n"
        "    except OSError as e:\n        print('denied', e.errno)\n"
    )
    outcome, output = run(tmp_path, body, Limits(bwrap=False))
    assert isinstance(outcome, Received) and outcome.array.tolist() == [1.0, 0.0]
    assert output.strip() == "denied 13"


@needs_landlock
def test_without_landlock_the_same_file_is_readable(tmp_path, public_secret):
    """The control: with Landlock off (and no bwrap) the file is readable, so the test above means something."""
    body = f"    print(open({str(public_secret)!r}).read().strip())\n"
    _, output = run(tmp_path, body, Limits(bwrap=False, landlock=False))
    assert output.strip() == "expected: [42]"


@pytest.mark.skipif(landlock.abi_version() < 4, reason="TCP rules need Landlock ABI 4")
def test_tcp_connect_is_refused(tmp_path):
    """No TCP connection leaves the worker (EACCES before any packet), even to 127.0.0.1."""
    body = (
        "    try:\n        socket.create_connection(('127.0.0.1', 9), timeout=0.5)\n"
        "    except OSError as e:\n        print('connect', e.errno)\n"
    )
    _, output = run(tmp_path, body, Limits(bwrap=False))
    assert output.strip() == "connect 13"


@needs_landlock
def test_the_working_folder_is_writable(tmp_path):
    """The worker may still write its own working folder (HOME, TMPDIR)."""
    body = "    import tempfile\n    with tempfile.TemporaryFile() as f:\n        f.write(b'x')\n    print('wrote')\n"
    outcome, output = run(tmp_path, body, Limits(bwrap=False))
    assert isinstance(outcome, Received) and output.strip() == "wrote"


@needs_landlock
def test_protections_line_names_landlock():
    """The sandbox line in every report says which Landlock rules hold."""
    line = protections(Limits(bwrap=False))
    assert f"landlock v{landlock.abi_version()}: fs without specs" in line
    assert protections(Limits(bwrap=False, landlock=False)).startswith(
        "no bwrap and no landlock: a readable filesystem; "
    )


def test_grader_packages_inside_site_packages_are_not_granted(tmp_path):
    """An installed attnscore inside site-packages is carved out: every sibling is granted, it is not."""
    site = tmp_path / "site-packages"
    for name in ("attnscore", "graders", "torch", "numpy"):
        (site / name).mkdir(parents=True)
    (site / "six.py").write_text("")
    deny = [str(site / "attnscore"), str(site / "graders"), "/elsewhere/project"]
    assert _granted(str(site), deny) == [str(site / "numpy"), str(site / "six.py"), str(site / "torch")]
    assert _granted(str(tmp_path / "other"), deny) == [str(tmp_path / "other")]
    assert _granted("/elsewhere", deny) == []


def test_grade_warns_when_submissions_could_read_the_spec(tmp_path):
    """No bwrap and no Landlock: a spec every user may read gets a warning naming the fix; a private one does not."""
    from attnscore.sandbox.launch import spec_exposure

    public = Path(tempfile.mkdtemp(prefix="attnscore-test-spec-"))
    try:
        os.chmod(public, 0o755)
        spec = public / "spec.yaml"
        spec.write_text("id: x\n")
        os.chmod(spec, 0o644)
        bare = Limits(bwrap=False, landlock=False)
        warning = spec_exposure(str(spec), bare)
        assert warning is not None and warning.endswith(
            "so hidden cases are exposed: keep specs in a folder only the grader can read (chmod 700), "
            "or install bubblewrap"
        )
        if os.geteuid() == 0:
            os.chmod(public, 0o700)
            assert spec_exposure(str(spec), bare) is None
        if landlock.abi_version():
            assert spec_exposure(str(spec), Limits(bwrap=False)) is None
    finally:
        shutil.rmtree(public)


@needs_landlock
def test_a_site_packages_holding_the_grader_still_imports_its_other_packages(tmp_path):
    """A pip-installed grader sits inside site-packages: a worker that confines itself before its
    imports (a fresh one) still imports the other packages there (the folder was listed before
    Landlock), while neither that folder nor the grader's package can be listed now, and the
    grader's package neither imports nor reads."""
    site = tmp_path / "site-packages"
    for name, text in (("allowed_pkg", "VALUE = 7\n"), ("graderpkg", "SECRET = 1\n")):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    denied = site / "graderpkg" / "__init__.py"
    code = (
        "import os, sys\n"
        "from attnscore.boundary import landlock\n"
        "from attnscore.boundary.worker import _confine\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "sys.path_importer_cache.clear()  # as in a fresh worker: site-packages not listed before\n"
        f"print(_confine({str(work)!r}, [{str(site / 'graderpkg')!r}]))\n"
        "import allowed_pkg\nprint('allowed', allowed_pkg.VALUE)\n"
        f"for folder in ({str(site)!r}, {str(site / 'graderpkg')!r}):\n"
        "    try:\n        os.listdir(folder)\n        print('listed')\n"
        "    except OSError as exc:\n        print('list', exc.errno)\n"
        "try:\n    import graderpkg\n    print('grader imported', graderpkg.SECRET)\n"
        "except Exception as exc:\n    print('grader', type(exc).__name__)\n"
        f"try:\n    open({str(denied)!r}).read()\n    print('grader read')\n"
        "except OSError as exc:\n    print('grader read', exc.errno)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    expected = ["allowed 7", "list 13", "list 13", "grader PermissionError", "grader read 13"]
    assert lines[0].startswith("landlock v") and lines[1:] == expected, done.stdout + done.stderr
