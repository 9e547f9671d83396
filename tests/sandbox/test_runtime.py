"""Tests for the worker's runtime (attnscore.sandbox.runtime) on an interpreter the sandbox user cannot read.

The fixture lays out a real Python installation inside a 0700 temporary folder (the interpreter
binary and its standard library as hard links, torch from this environment through a ``.pth``
file), as pyenv under root's home directory is on many grading machines. Nothing outside the
temporary folder changes. These tests need root (the worker drops to another user only then).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
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

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.slow
def test_correct_code_importing_lazily_gets_right_values(tmp_path, private_python):
    """xml, encodings.idna and torch's lazily imported modules load after the privilege drop."""
    outcome, failure = call(tmp_path, LAZY_IMPORTS, worker_runtime(str(private_python)))
    assert failure is None
    assert isinstance(outcome, Received), outcome
    assert outcome.array.tolist() == pytest.approx([1.0, 0.0, 0.7])


@pytest.mark.slow
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
    assert "`import no_such_module_xyz` failed: no_such_module_xyz is not installed on this grader" in outcome.message


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


# ---------------------------------------------------------------- the mirror cache, built once per interpreter


@pytest.fixture
def cache(monkeypatch):
    """An empty cache folder in /tmp (0755, so the worker uid can enter it), a lock folder of its
    own, and a fresh process's view: no mirror held, no build recorded."""
    from attnscore.sandbox import runtime

    folder = Path(tempfile.mkdtemp(prefix="attnscore-test-cache-"))
    os.chmod(folder, 0o755)
    locks = Path(tempfile.mkdtemp(prefix="attnscore-test-locks-"))
    monkeypatch.setattr(runtime, "_LOCK_FOLDER", str(locks))
    monkeypatch.setattr(runtime, "BUILDS", [])
    _forget_held()
    yield folder
    _forget_held()
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(locks, ignore_errors=True)


def _forget_held() -> None:
    """Release the shared locks this process holds on mirrors (what a grader's exit does)."""
    from attnscore.sandbox import runtime

    for fd in runtime._HELD:
        os.close(fd)
    runtime._HELD.clear()


def _build(python: Path, folder: Path) -> WorkerRuntime:
    from attnscore.sandbox import runtime

    return runtime._build(str(python), 64000, 64000, cache=str(folder))


def _cached(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("attnscore-mirror-"))


def test_the_mirror_is_built_once_and_reused(private_python, cache):
    """A second run finds the first run's mirror (no build); both get the same readable copies."""
    from attnscore.sandbox import runtime

    first = _build(private_python, cache)
    _forget_held()
    second = _build(private_python, cache)
    assert len(runtime.BUILDS) == 1 and first.mirrors == second.mirrors and first.problems == ()
    [name] = _cached(cache)
    assert all(copy.startswith(str(cache / name) + "/") for _, copy in second.mirrors)
    info = os.stat(cache / name)
    assert (info.st_uid, stat_mode(info)) == (0, 0o755)
    assert unreadable_by(tuple(copy for _, copy in second.mirrors), 64000, 64000) == ()


def stat_mode(info: os.stat_result) -> int:
    return info.st_mode & 0o7777


@pytest.mark.slow
def test_a_changed_installation_gets_a_new_mirror_and_the_old_one_goes(private_python, cache):
    """A folder of the module path changed (a package installed): new key, new mirror; the old one,
    held by nobody, is removed; held by a live grader, it stays."""
    from attnscore.sandbox import runtime

    old = _build(private_python, cache)
    [old_name] = _cached(cache)
    site_folder = next(p for p in old.path if p.endswith("site-packages"))
    (Path(site_folder) / "newly_installed.py").write_text("Z = 3\n")
    held = _build(private_python, cache)  # this process still holds the old one: it stays
    assert len(runtime.BUILDS) == 2 and held.mirrors != old.mirrors
    assert old_name in _cached(cache) and len(_cached(cache)) == 2
    mirrored_site = _through_mirror(site_folder, held.mirrors)
    assert mirrored_site is not None and os.path.exists(os.path.join(mirrored_site, "newly_installed.py"))
    _forget_held()
    (Path(site_folder) / "another.py").write_text("W = 4\n")
    try:
        _build(private_python, cache)
        assert len(runtime.BUILDS) == 3 and len(_cached(cache)) == 1 and old_name not in _cached(cache)
    finally:
        (Path(site_folder) / "newly_installed.py").unlink()
        (Path(site_folder) / "another.py").unlink()


def _through_mirror(path: str, mirrors) -> str | None:
    for original, copy in mirrors:
        if path == original or path.startswith(original + "/"):
            return copy + path[len(original) :]
    return None


@pytest.mark.slow
@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda top: os.chmod(top, 0o777), id="world-writable folder"),
        pytest.param(lambda top: os.chown(top, 64000, 64000), id="folder given to a worker uid"),
        pytest.param(lambda top: os.chmod(top / "manifest.json", 0o666), id="world-writable manifest"),
        pytest.param(lambda top: os.chmod(top / "0", 0o777), id="world-writable mirror folder"),
        pytest.param(lambda top: (top / "manifest.json").unlink(), id="manifest gone (a partial folder)"),
    ],
)
def test_a_tampered_mirror_is_refused_and_rebuilt(private_python, cache, tamper):
    """A cached mirror that is not root's own or is writable by others is never used: it is removed
    (with what was planted in it) and built again, root's own and 0755."""
    from attnscore.sandbox import runtime

    _build(private_python, cache)
    [name] = _cached(cache)
    top = cache / name
    (top / "planted.py").write_text("import os\n")
    tamper(top)
    _forget_held()
    again = _build(private_python, cache)
    assert len(runtime.BUILDS) == 2 and _cached(cache) == [name]
    assert not (top / "planted.py").exists()
    assert (os.stat(top).st_uid, stat_mode(os.stat(top)), stat_mode(os.stat(top / "0"))) == (0, 0o755, 0o755)
    assert again.problems == () and all(copy.startswith(str(top) + "/") for _, copy in again.mirrors)


@pytest.mark.slow
def test_a_folder_planted_by_a_worker_uid_under_the_mirrors_name_is_replaced(private_python, cache):
    """A worker uid that creates the mirror's folder first (with a manifest naming the right key and
    its own module in place of the standard library) does not get it used; a planted link is removed
    without touching what it points to."""
    from attnscore.sandbox import runtime

    path, _, outermost = runtime.mirror_sources(str(private_python), 64000, 64000)
    interpreter, key = runtime.mirror_key(str(private_python), path, outermost)
    name = f"attnscore-mirror-{interpreter}-{key}"
    planted = cache / name
    (planted / "0" / "evil").mkdir(parents=True)
    (planted / "manifest.json").write_text(
        json.dumps({"format": runtime._FORMAT, "key": key, "mirrors": [[outermost[0], "0/evil"]]})
    )
    for p in (planted, planted / "0", planted / "0" / "evil", planted / "manifest.json"):
        os.chown(p, 64000, 64000)
    assert runtime.valid_mirrors(str(planted), key) is None
    got = _build(private_python, cache)
    assert len(runtime.BUILDS) == 1 and os.stat(planted).st_uid == 0
    assert not (planted / "0" / "evil").exists() and all("/evil" not in copy for _, copy in got.mirrors)
    # a link in its place: removed, its target untouched
    target = Path(tempfile.mkdtemp(prefix="attnscore-test-target-"))
    (target / "keep").write_text("x")
    try:
        _forget_held()
        shutil.rmtree(planted)
        planted.symlink_to(target)
        _build(private_python, cache)
        assert len(runtime.BUILDS) == 2 and not planted.is_symlink() and planted.is_dir()
        assert (target / "keep").read_text() == "x"
    finally:
        shutil.rmtree(target)


@pytest.mark.slow
def test_two_graders_starting_at_once_build_the_mirror_once(private_python, cache):
    """Four processes asking for the mirror at the same moment: one builds it, all get the same one."""
    import multiprocessing

    from attnscore.sandbox import runtime

    runtime._interpreter_path(str(private_python))  # nothing cached across processes: just warm the disk
    context = multiprocessing.get_context("fork")
    start = context.Barrier(4)
    answers = Path(tempfile.mkdtemp(prefix="attnscore-test-answers-"))

    def ask(number: int) -> None:
        start.wait()
        got = _build(private_python, cache)
        (answers / str(number)).write_text(json.dumps([len(runtime.BUILDS), got.mirrors]))
        os._exit(0)

    workers = [context.Process(target=ask, args=(n,)) for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
    got = [json.loads((answers / str(n)).read_text()) for n in range(4)]
    shutil.rmtree(answers)
    got = [(builds, tuple(map(tuple, mirrors))) for builds, mirrors in got]
    assert sorted(builds for builds, _ in got) == [0, 0, 0, 1]
    assert len({mirrors for _, mirrors in got}) == 1 and len(_cached(cache)) == 1


def test_a_build_killed_half_way_is_swept_and_the_cache_is_not(private_python, cache):
    """A build folder of a grader that was killed is removed by the sweep of dead runs; the cached
    mirror is never swept (its name is no run's)."""
    from attnscore.sandbox import folders, runtime
    from attnscore.sandbox.removal import sweep_stale

    _build(private_python, cache)
    [name] = _cached(cache)
    code = "from attnscore.sandbox.removal import run_prefix; print(run_prefix('runtime'))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    half = cache / (dead + "x")
    (half / "0" / "python").mkdir(parents=True)
    (half / "0" / "python" / "os.py").write_text("")
    assert sweep_stale(str(cache), folders._RUN_FOLDERS, lambda uid: uid == 0) == []
    assert not half.exists() and _cached(cache) == [name]
    assert runtime.valid_mirrors(str(cache / name), runtime.mirror_key(str(private_python), *_outer(private_python))[1])


def _outer(python: Path):
    from attnscore.sandbox import runtime

    path, _, outermost = runtime.mirror_sources(str(python), 64000, 64000)
    return path, outermost


def test_without_a_root_only_lock_folder_nothing_is_cached(private_python, cache, monkeypatch):
    """A lock folder others may write: no cache (a private mirror for this process instead)."""
    from attnscore.sandbox import runtime

    open_locks = Path(tempfile.mkdtemp(prefix="attnscore-test-openlocks-"))
    os.chmod(open_locks, 0o777)
    monkeypatch.setattr(runtime, "_LOCK_FOLDER", str(open_locks))
    try:
        got = _build(private_python, cache)
        assert runtime.BUILDS == [] and _cached(cache) == []
        assert got.mirrors and all(Path(copy).parts[3].startswith("attnscore-runtime-") for _, copy in got.mirrors)
    finally:
        shutil.rmtree(open_locks)


@pytest.mark.slow
def test_a_grader_never_waits_for_another_ones_end(private_python, cache, monkeypatch):
    """The same interpreter cached in another temporary folder has its own lock (a grader holding
    /tmp's mirror does not block a grader with another TMPDIR); and a mirror found unsound while
    another live grader holds it shared gives this grader a private mirror instead of a wait."""
    from attnscore.sandbox import runtime

    other = Path(tempfile.mkdtemp(prefix="attnscore-test-cache2-"))
    os.chmod(other, 0o755)
    try:
        held = _build(private_python, cache)  # held shared by this process from now on
        elsewhere = _build(private_python, other)
        assert len(runtime.BUILDS) == 2 and all(c.startswith(str(other) + "/") for _, c in elsewhere.mirrors)
        [name] = _cached(cache)
        os.chmod(cache / name, 0o777)  # unsound now, while this "grader" still holds it
        monkeypatch.setattr(runtime, "_BUILD_WAIT_S", 0.0)
        private = _build(private_python, cache)
        assert len(runtime.BUILDS) == 2 and private.mirrors != held.mirrors
        assert all(Path(copy).parts[3].startswith("attnscore-runtime-") for _, copy in private.mirrors)
    finally:
        shutil.rmtree(other, ignore_errors=True)
