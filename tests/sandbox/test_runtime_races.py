"""The transient "the temporary folder /tmp is not readable by uid 64000" (seen once while /tmp was
mode 1777), provoked by forcing the two interleavings that gave it (attnscore.sandbox.runtime).

1. The readability check ran as the first worker uid without holding it: another grader claiming
   that uid (or releasing it) kills every process of the uid, the check's shell too, and a check
   that gives no answer counted every copy as unreadable. The check now runs as a uid this grader
   holds (:func:`attnscore.sandbox.uids.held_uid`).
2. Going from the exclusive lock (the mirror just built) to the shared one lets go of the lock for
   a moment: a grader on another installation may remove the new mirror as stale right then, and
   the runtime pointed at a folder that was gone. It now looks again under the shared lock.

Both need root (the worker drops to another uid only then) and an interpreter the worker uid
cannot read: the ``private_python`` and ``cache`` fixtures of tests/test_runtime.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attnscore.sandbox import runtime, uids
from attnscore.sandbox.limits import Limits
from tests.sandbox.test_runtime import _build, _cached, cache, private_python  # noqa: F401 - fixtures used by name

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the worker drops privileges only when the grader is root")


def _another_grader_acts_on(uid: int, holding: set[int]) -> None:
    """What another grader on the machine may do to worker uid ``uid`` at any moment (in a forked
    process): claim it as a runner starts, or release it as a runner ends; both kill every process
    of the uid (:func:`attnscore.sandbox.uids.kill_uid`). A uid this grader holds (``holding``) it
    cannot claim: its claim (the real one) takes another uid and kills nothing of ours."""
    context = multiprocessing.get_context("fork")

    def act() -> None:
        try:
            if uid in holding:
                _, lock = uids.claim_uid(Limits(uid=uid))
                os.close(lock)
            else:  # free, or another grader's: claimed or released any moment now
                uids.kill_uid(uid)
        finally:
            os._exit(0)

    grader = context.Process(target=act)
    grader.start()
    grader.join(timeout=120)
    assert grader.exitcode == 0


@pytest.fixture
def checks_interleaved(monkeypatch):
    """Every readability check (a shell run as another uid) is held at its start until another
    grader has acted on the check's uid (:func:`_another_grader_acts_on`): the interleaving of a
    check with a runner starting or ending elsewhere. Returns the uids the checks ran as."""
    real_run = subprocess.run
    gate = Path(tempfile.mkdtemp(prefix="attnscore-test-gate-"))
    os.chmod(gate, 0o755)  # the check's uid looks for the go file in it
    ran_as: list[int] = []
    holding: set[int] = set()
    real_held_uid = uids.held_uid

    @contextlib.contextmanager
    def held_uid(first_uid: int):
        with real_held_uid(first_uid) as uid:
            holding.add(uid)
            try:
                yield uid
            finally:
                holding.discard(uid)

    def run(argv, **kwargs):
        if kwargs.get("user") is None or list(argv[:2]) != ["/bin/sh", "-c"]:
            return real_run(argv, **kwargs)
        go = gate / f"go-{len(ran_as)}"
        ran_as.append(kwargs["user"])
        held = f'while [ ! -e "{go}" ]; do sleep 0.01; done; {argv[2]}'
        options = {k: v for k, v in kwargs.items() if k not in ("capture_output", "timeout", "check")}
        check = subprocess.Popen(
            ["/bin/sh", "-c", held, *argv[3:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options
        )
        assert uids.alive_as(kwargs["user"])  # the check runs as that uid, waiting at its start
        _another_grader_acts_on(kwargs["user"], holding)
        go.touch()
        out, err = check.communicate(timeout=60)
        return subprocess.CompletedProcess(argv, check.returncode, out, err)

    class Subprocess:  # runtime's own view of subprocess: other modules' processes run as ever
        def __getattr__(self, name: str) -> object:
            return run if name == "run" else getattr(subprocess, name)

    monkeypatch.setattr(runtime, "subprocess", Subprocess())
    monkeypatch.setattr(runtime, "held_uid", held_uid, raising=False)
    yield ran_as
    for name in os.listdir(gate):
        os.unlink(gate / name)
    os.rmdir(gate)


def test_a_grader_claiming_the_check_uid_meanwhile_does_not_fail_the_runtime(
    private_python,  # noqa: F811
    cache,  # noqa: F811
    checks_interleaved,
):
    """Another grader acts on the check's uid while each check runs: every check still answers (it
    runs as a uid this grader holds, which no other grader claims), the mirror is readable and
    nothing is blamed on /tmp."""
    built = _build(private_python, cache)
    assert built.problems == ()
    assert built.mirrors and all(copy.startswith(f"{cache}/attnscore-mirror-") for _, copy in built.mirrors)
    assert len(checks_interleaved) == 2  # the interpreter's path, then the mirror
    # what preflight asks next, under the same interleaving
    assert runtime.unreadable_by_workers(tuple(copy for _, copy in built.mirrors), Limits().uid) == ()
    assert len(checks_interleaved) == 3


def test_the_check_uid_is_held_while_it_runs_and_released_after(private_python, cache):  # noqa: F811
    """held_uid: nobody else can claim the uid while a check holds it; it is free again afterwards."""
    with uids.held_uid(Limits().uid) as uid:
        lock = os.open(f"/tmp/attnscore-uid-locks/{uid}", os.O_RDWR | os.O_CLOEXEC)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(lock)
    lock = os.open(f"/tmp/attnscore-uid-locks/{uid}", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(lock)


def test_a_mirror_removed_while_its_lock_changes_hands_is_never_handed_out(private_python, cache, monkeypatch):  # noqa: F811
    """The builder's exclusive lock becomes a shared one in two steps (flock lets go first); a grader
    on another installation removes the new mirror as stale right then: this grader gets a mirror
    that exists (a private one), never the removed folder."""
    real_flock = fcntl.flock
    removed: list[str] = []

    def flock(fd, operation):
        if operation == fcntl.LOCK_SH and runtime.BUILDS and not removed:
            real_flock(fd, fcntl.LOCK_UN)  # the conversion's first step
            [built] = runtime.BUILDS
            interpreter = Path(built).name.split("-")[2]
            # the other grader's mirror of the same interpreter is another key: ours looks stale to it
            runtime._remove_older(str(cache), interpreter, f"attnscore-mirror-{interpreter}-other")
            removed.append(built)
            assert not os.path.exists(built)
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    got = _build(private_python, cache)
    assert removed and got.problems == ()
    assert got.mirrors and all(os.path.exists(copy) for _, copy in got.mirrors)
    assert all(not copy.startswith(removed[0]) for _, copy in got.mirrors)
    assert _cached(cache) == []  # the removed one is not back; the private one is this process's own


def test_no_free_worker_uid_to_check_as_is_one_line_before_grading(monkeypatch):
    """Every worker uid taken: preflight says in one line that the interpreter could not be checked
    (and why), instead of guessing from a check run as a uid another grader holds."""
    from attnscore.sandbox import checks

    def taken(first_uid: int):
        raise RuntimeError("all 64 sandbox uids are in use by other workers")

    monkeypatch.setattr(runtime, "held_uid", taken)
    line = checks.preflight(Limits(bwrap=False))
    assert line == (
        f"the worker's interpreter {sys.executable} could not be checked: "
        "all 64 sandbox uids are in use by other workers"
    )
