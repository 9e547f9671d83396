"""Removing what a submission could have written (attnscore.sandbox.removal): any depth, no links followed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.sandbox.removal import remove_tree, run_is_alive, run_prefix, sweep_stale


def _chain(top: Path, depth: int, owner: int | None = None) -> None:
    """A folder chain ``depth`` deep below ``top``, built relative (its paths exceed PATH_MAX);
    with ``owner``, every entry belongs to that uid."""
    start = os.open(".", os.O_RDONLY)
    try:
        os.chdir(top)
        for _ in range(depth):
            os.mkdir("d")
            if owner is not None:
                os.chown("d", owner, owner)
            os.chdir("d")
        Path("file").write_text("x")
        if owner is not None:
            os.chown("file", owner, owner)
    finally:
        os.fchdir(start)
        os.close(start)


def test_a_chain_deeper_than_the_recursion_limit_is_removed(tmp_path):
    """A 3,000-deep chain (shutil.rmtree raises RecursionError on it) is removed; nothing is raised."""
    top = tmp_path / "work"
    top.mkdir()
    _chain(top, max(3000, sys.getrecursionlimit() + 100))
    assert remove_tree(top) is None
    assert not top.exists()


def test_links_are_removed_never_followed(tmp_path):
    """A link to a folder outside (at the top and deep below) goes; the folder it points to stays whole."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    top = tmp_path / "work"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "to_outside").symlink_to(outside)
    (top / "a" / "dangling").symlink_to(tmp_path / "nowhere")
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert remove_tree(top) is None
    assert remove_tree(link) is None
    assert not top.exists() and not link.is_symlink()
    assert (outside / "keep.txt").read_text() == "mine"


def test_folders_made_unwritable_or_unreadable_are_removed(tmp_path):
    """Folders of mode 0500 and 0000 (a submission's chmod) are removed too."""
    top = tmp_path / "work"
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "inner" / "f").write_text("x")
    (top / "closed").mkdir()
    (top / "closed" / "g").write_text("y")
    os.chmod(top / "locked" / "inner", 0o500)
    os.chmod(top / "locked", 0o500)
    os.chmod(top / "closed", 0o000)
    assert remove_tree(top) is None
    assert not top.exists()


def test_a_file_or_a_missing_path(tmp_path):
    """A plain file is unlinked; a path that is not there is already removed."""
    file = tmp_path / "f"
    file.write_text("x")
    assert remove_tree(file) is None and not file.exists()
    assert remove_tree(tmp_path / "missing") is None


def test_what_cannot_be_removed_is_reported_not_raised(tmp_path, monkeypatch):
    """A folder whose entries cannot be unlinked gives one line naming the count and a reason."""
    top = tmp_path / "work"
    (top / "sub").mkdir(parents=True)
    for name in ("a", "b", "c", "d"):
        (top / "sub" / name).write_text("x")
    real_unlink = os.unlink

    def refuse(path, *args, **kwargs):
        if kwargs.get("dir_fd") is not None and path in ("a", "b", "c", "d"):
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    problem = remove_tree(top)
    assert problem is not None
    # 4 files, then their folder and the top one: 6; the first 3 reasons are named
    assert problem.startswith(f"could not remove 6 entries of {top}: ")
    assert problem.count(": Operation not permitted") == 3 and problem.endswith("(and 3 more)")
    monkeypatch.undo()
    assert remove_tree(top) is None and not top.exists()


_trees = st.recursive(
    st.sampled_from(["file", "link", "empty"]),
    lambda children: st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), children, max_size=4),
    max_leaves=30,
)


def _build(folder: Path, tree: object, outside: Path) -> None:
    folder.mkdir()
    if not isinstance(tree, dict):
        return
    for name, sub in tree.items():
        if sub == "file":
            (folder / name).write_text(name)
        elif sub == "link":
            (folder / name).symlink_to(outside)
        else:
            _build(folder / name, sub, outside)


@settings(max_examples=40, deadline=None)
@given(tree=_trees)
def test_any_tree_is_removed_and_nothing_outside_it(tmp_path_factory, tree):
    """Any tree of files, folders and links to an outside folder is removed; the outside folder stays."""
    base = tmp_path_factory.mktemp("tree")
    outside = base / "outside"
    outside.mkdir()
    (outside / "keep").write_text("k")
    _build(base / "top", tree, outside)
    assert remove_tree(base / "top") is None
    assert sorted(os.listdir(base)) == ["outside"]
    assert os.listdir(outside) == ["keep"]


def _dead_prefix(kind: str) -> str:
    """The prefix run_prefix gives in a process that has ended since."""
    code = f"from attnscore.sandbox.removal import run_prefix; print(run_prefix({kind!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_sweeping_removes_dead_runs_only(tmp_path):
    """Folders of a run that ended go (deep ones too); this live run's, links, other kinds and foreign names stay."""
    dead = tmp_path / (_dead_prefix("worker") + "abc")
    dead.mkdir()
    _chain(dead, 2000)
    live = tmp_path / (run_prefix("worker") + "abc")
    live.mkdir()
    other_kind = tmp_path / (_dead_prefix("report") + "abc")
    other_kind.mkdir()
    foreign = tmp_path / "attnscore-worker-1.1.1-abc"  # another PID namespace: cannot be told
    foreign.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / (_dead_prefix("worker") + "link")
    link.symlink_to(target)
    assert run_is_alive(live.name) is True and run_is_alive(dead.name) is False
    assert run_is_alive(foreign.name) is None and run_is_alive("attnscore-worker-x") is None
    assert sweep_stale(str(tmp_path), ["worker"]) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other_kind.name, foreign.name, "target", link.name]
    )


def test_sweeping_leaves_folders_of_other_owners(tmp_path):
    """A dead run's folder owned by a uid the caller does not accept is left alone."""
    dead = tmp_path / (_dead_prefix("stage") + "x")
    dead.mkdir()
    assert sweep_stale(str(tmp_path), ["stage"], owners=lambda uid: False) == []
    assert dead.exists()
    assert sweep_stale(str(tmp_path), ["stage"]) == [] and not dead.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another uid")
def test_a_deep_chain_of_a_worker_uid_in_tmp_is_removed_when_that_uid_is_drawn(tmp_path):
    """What a killed grader's worker left in /tmp (3,000 deep) goes when a later runner draws its uid."""
    from attnscore.sandbox import uids
    from attnscore.sandbox.limits import Limits

    uid = 65300  # a range of its own: no other test's workers hold it
    litter = Path(f"/tmp/attnscore-test-deep-{os.getpid()}")
    litter.mkdir()
    os.chown(litter, uid, uid)
    _chain(litter, 3000, owner=uid)
    drawn, lock = uids.claim_uid(Limits(uid=uid))
    try:
        assert drawn == uid
        assert not litter.exists()
    finally:
        os.close(lock)
        remove_tree(litter)


def test_the_sandbox_sweeps_its_temporary_folder_once_per_process(tmp_path, monkeypatch):
    """A grader's first runner removes the stage, worker and submission folders of dead graders
    (a 2,000-deep chain in one of them) from its TMPDIR; a live grader's folder stays."""
    import tempfile

    from attnscore.sandbox import folders

    dead = [tmp_path / (_dead_prefix(kind) + "q") for kind in ("stage", "worker", "submission")]
    for folder in dead:
        folder.mkdir()
    _chain(dead[1], 2000)
    live = tmp_path / (run_prefix("stage") + "q")
    live.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(folders, "_SWEPT", set())
    folders.sweep_dead_runs()
    assert os.listdir(tmp_path) == [live.name]
    again = tmp_path / (_dead_prefix("worker") + "later")
    again.mkdir()
    folders.sweep_dead_runs()  # once per folder and process: a later leftover waits for the next grader
    assert again.exists()
