"""A worker uid's clean mark: a runner that left nothing of its uid says so; any other claim searches."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from attnscore.sandbox import uids
from attnscore.sandbox.launch import Limits
from attnscore.sandbox.runner import SandboxRunner

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="worker uids exist only when the grader is root")

_UID = 65400  # a range of its own: no other test's workers hold it
_LOCKS = Path("/tmp/attnscore-uid-locks")


def _litter(uid: int) -> Path:
    """A file of ``uid`` in /tmp, as a killed grader's worker would leave it."""
    path = Path(f"/tmp/attnscore-test-mark-{os.getpid()}")
    path.write_text("left")
    os.chown(path, uid, uid)
    return path


def test_a_runner_that_left_nothing_marks_its_uid_clean_and_a_claim_unmarks_it(tmp_path):
    source = tmp_path / "sub.py"
    source.write_text("def scores(q, keys):\n    return keys @ q\n")
    with SandboxRunner(source, "scores", Limits(uid=_UID)) as runner:
        runner.call({"q": np.ones(2), "keys": np.ones((3, 2))}, "float64")
        uid = runner.uid
        assert (_LOCKS / str(uid)).read_bytes() == b""  # held: not clean
    assert (_LOCKS / str(uid)).read_bytes() == uids._clean_mark()
    drawn, lock = uids.claim_uid(Limits(uid=uid))
    try:
        assert drawn == uid and os.pread(lock, 64, 0) == b""
    finally:
        os.close(lock)  # released without a mark: as a grader killed while it held the uid


@pytest.mark.parametrize("mark", [b"", b"clean 00000000-0000-0000-0000-000000000000", b"clean"])
def test_a_uid_without_this_boots_clean_mark_is_searched_when_claimed(mark):
    """No mark (a grader killed while holding it), a mark of an earlier boot or a torn one: what
    the uid left goes when it is claimed."""
    (_LOCKS / str(_UID)).parent.mkdir(mode=0o700, exist_ok=True)
    drawn, lock = uids.claim_uid(Limits(uid=_UID))
    assert drawn == _UID
    os.pwrite(lock, mark, 0)
    os.close(lock)
    litter = _litter(_UID)
    try:
        drawn, lock = uids.claim_uid(Limits(uid=_UID))
        os.close(lock)
        assert drawn == _UID and not litter.exists()
    finally:
        litter.unlink(missing_ok=True)


def test_a_runner_that_could_not_remove_its_files_leaves_no_mark(tmp_path, monkeypatch):
    source = tmp_path / "sub.py"
    source.write_text("def scores(q, keys):\n    return keys @ q\n")
    monkeypatch.setattr(uids, "files_removal", lambda uid, keep, watch=None: (0, 1))
    with SandboxRunner(source, "scores", Limits(uid=_UID)) as runner:
        runner.call({"q": np.ones(2), "keys": np.ones((3, 2))}, "float64")
        uid = runner.uid
    assert (_LOCKS / str(uid)).read_bytes() == b""
