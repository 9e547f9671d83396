"""The names linked into the shared folders since a uid was claimed (attnscore.sandbox.folder_watch)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from attnscore.boundary import kernel_objects
from attnscore.sandbox import uids
from attnscore.sandbox.folder_watch import FolderWatch
from attnscore.sandbox.launch import Limits
from attnscore.sandbox.runner import SandboxRunner


def test_every_way_of_linking_a_name_into_a_folder_is_seen(tmp_path):
    watched, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    watched.mkdir()
    elsewhere.mkdir()
    (watched / "before").write_text("x")
    (elsewhere / "moved").write_text("x")
    (elsewhere / "linked").write_text("x")
    watch = FolderWatch([str(watched)])
    try:
        (watched / "created").write_text("x")
        (watched / "folder").mkdir()
        (watched / "folder" / "deeper").write_text("x")  # below the folder: the folder's name is enough
        os.symlink("/", watched / "symlink")
        os.mkfifo(watched / "fifo")
        os.rename(elsewhere / "moved", watched / "renamed")
        os.link(elsewhere / "linked", watched / "hardlink")
        (watched / "gone").write_text("x")
        (watched / "gone").unlink()
        assert watch.names() == {str(watched): {"created", "folder", "symlink", "fifo", "renamed", "hardlink", "gone"}}
    finally:
        watch.close()
    assert watch.names() is None  # closed: it cannot say


def test_a_watch_that_lost_its_folder_or_saw_one_appear_cannot_say(tmp_path):
    kept, removed, later = tmp_path / "kept", tmp_path / "removed", tmp_path / "later"
    kept.mkdir()
    removed.mkdir()
    watch = FolderWatch([str(kept), str(later)])
    try:
        assert watch.names() == {str(kept): set(), str(later): set()}  # absent, and still absent
        later.mkdir()
        assert watch.names() is None
    finally:
        watch.close()
    watch = FolderWatch([str(removed)])
    try:
        removed.rmdir()
        assert watch.names() is None
    finally:
        watch.close()


@pytest.mark.slow
def test_an_overflowing_queue_makes_the_watch_unable_to_say(tmp_path):
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        most = int(f.read())
    if most > 50_000:
        pytest.skip(f"a queue of {most} events takes long to overflow")
    watch = FolderWatch([str(tmp_path)])
    try:
        for index in range(most + 10):
            (tmp_path / str(index)).mkdir()
        assert watch.names() is None
    finally:
        watch.close()


def test_a_file_with_a_name_in_two_folders_is_looked_up_in_each(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    watch = FolderWatch([str(one), str(two)])
    try:
        (two / "same").write_text("x")
        assert watch.names() == {str(one): set(), str(two): {"same"}}
    finally:
        watch.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="worker uids exist only when the grader is root")
def test_what_a_worker_left_in_tmp_goes_with_it_found_by_the_watch(tmp_path, monkeypatch):
    """Without bubblewrap or Landlock the worker's uid may write /tmp: its file there goes when the
    runner ends, found among the names the watch saw, with no listing of /tmp."""
    litter = f"/tmp/attnscore-test-watch-{os.getpid()}"
    source = tmp_path / "sub.py"
    source.write_text(f"open({litter!r}, 'w').write('left')\n\ndef scores(q, keys):\n    return keys @ q\n")
    listed: list[int] = []
    real = kernel_objects.entries_of

    def entries_of(uid, folders):
        if tuple(folders) == uids.SHARED_WRITABLE:
            listed.append(uid)
        return real(uid, folders)

    monkeypatch.setattr(kernel_objects, "entries_of", entries_of)
    try:
        with SandboxRunner(source, "scores", Limits(bwrap=False, landlock=False, uid=65500)) as runner:
            listed.clear()  # its claim may have looked (no clean mark yet): only its end counts here
            runner.call({"q": np.ones(2), "keys": np.ones((3, 2))}, "float64")
            assert os.stat(litter).st_uid == runner.uid
            watched = runner.folder_watch is not None
        assert not os.path.lexists(litter)
        assert watched and listed.count(runner.uid) == 0
    finally:
        if os.path.lexists(litter):
            os.unlink(litter)
