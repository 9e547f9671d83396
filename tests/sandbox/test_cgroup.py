"""Per-worker cgroups (attnscore.sandbox.cgroup): where they can be had, what they bound, the fallback."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.boundary.template_server import WORKER_NICE
from attnscore.sandbox import cgroup, launch, machine
from attnscore.sandbox.launch import Limits, SandboxRunner

V1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}


def _hierarchy(root: Path, own: str, controllers: str, enabled: dict[str, str]) -> str:
    """A cgroup v2 tree in ``root`` (folders and interface files only); the mounts text naming it."""
    folder = root / own.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers)
    for path, text in enabled.items():
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/") / "cgroup.subtree_control").write_text(text)
    return f"{V1}cgroup2 {root} cgroup2 rw,nosuid 0 0\n"


def test_cgroup_v1_only_is_said():
    """No cgroup2 mount: one line saying so (this machine's case)."""
    assert cgroup.find_base(mounts=V1, self_cgroup="1:cpu:/\n") == "no cgroup v2 hierarchy mounted (cgroup v1 only)"


def test_a_root_grader_in_the_root_cgroup_makes_groups_there(tmp_path):
    """In the hierarchy's root with the controllers enabled for children: the base is the root."""
    mounts = _hierarchy(tmp_path, "/", "cpuset cpu io memory pids", {"/": "cpu memory pids"})
    assert cgroup.find_base(mounts=mounts, self_cgroup="0::/\n") == cgroup.Base(str(tmp_path))


def test_a_delegated_leaf_makes_groups_beside_itself(tmp_path):
    """In a leaf of a delegated subtree (the parent enables the controllers): the base is the parent."""
    own = "/user.slice/attnscore.scope/grader"
    mounts = _hierarchy(tmp_path, own, "cpu memory pids", {"/user.slice/attnscore.scope": "cpu io memory pids"})
    found = cgroup.find_base(mounts=mounts, self_cgroup=f"1:cpu:/\n0::{own}\n")
    assert found == cgroup.Base(str(tmp_path / "user.slice" / "attnscore.scope"))


@pytest.mark.parametrize(
    ("controllers", "enabled", "reason"),
    [
        pytest.param("cpu io", {}, "cgroup v2 controller(s) memory, pids not available to ", id="controllers missing"),
        pytest.param(
            "cpu memory pids", {"/a": "io"}, "cannot make cgroups under ", id="not delegated: nothing enabled"
        ),
    ],
)
def test_why_no_cgroup_can_be_had(tmp_path, controllers, enabled, reason):
    """Controllers missing, or not enabled for the children of the parent: one line saying why."""
    mounts = _hierarchy(tmp_path, "/a/b", controllers, enabled)
    found = cgroup.find_base(mounts=mounts, self_cgroup="0::/a/b\n")
    assert isinstance(found, str) and found.startswith(reason), found
    if "delegated" in found:
        assert found.endswith("start the grader in a delegated cgroup (systemd-run --scope -p Delegate=yes)")


def test_a_worker_group_gets_one_cpu_its_memory_and_processes(tmp_path):
    """make() writes cpu.max (one CPU), memory.max and no swap, pids.max; a GPU worker gets no memory bound."""
    base = cgroup.Base(str(tmp_path))
    path = cgroup.make(base, "w1", 4 * 1024**3, 256)
    assert path == str(tmp_path / "w1")
    read = {name: (Path(path) / name).read_text() for name in sorted(os.listdir(path))}
    assert read == {
        "cpu.max": "100000 100000", "memory.max": str(4 * 1024**3), "memory.swap.max": "0", "pids.max": "256"
    }  # fmt: skip
    gpu = cgroup.make(base, "w2", None, 64, cpus=2)
    assert sorted(os.listdir(gpu)) == ["cpu.max", "pids.max"] and (Path(gpu) / "cpu.max").read_text() == "200000 100000"


def test_a_group_that_cannot_be_made_is_none(tmp_path):
    """A base that is not there: no group, nothing raised."""
    assert cgroup.make(cgroup.Base(str(tmp_path / "missing")), "w", None, 1) is None


def test_the_protections_line_names_the_bound_that_holds(monkeypatch):
    """With a cgroup: one CPU, memory (memfds too) and processes per worker; without: the fallback and why."""
    monkeypatch.setattr(machine, "cgroup_base", lambda: cgroup.Base("/sys/fs/cgroup"))
    line = launch.protections(Limits(bwrap=False))
    assert "cgroup v2 per worker: 1 CPU, memory 4 GiB (memfds and tmpfs too), 256 processes" in line
    monkeypatch.setattr(machine, "cgroup_base", lambda: "no cgroup v2 hierarchy mounted (cgroup v1 only)")
    monkeypatch.setattr(machine, "autogroups", lambda: True)
    line = launch.protections(Limits(bwrap=False))
    assert f"cpu: its own session's CPU share (autogroup), nice {WORKER_NICE} (no cgroup: no cgroup v2" in line
    monkeypatch.setattr(machine, "autogroups", lambda: False)
    assert f"cpu: nice {WORKER_NICE} (no cgroup: " in launch.protections(Limits(bwrap=False))


PRIORITY = """\
import os
import torch


def scores(q, keys):
    return torch.tensor([float(os.getpriority(os.PRIO_PROCESS, 0)), float(os.getpid())], dtype=torch.float64)
"""


@pytest.mark.slow
@pytest.mark.parametrize("template", [pytest.param(True, id="template"), pytest.param(False, id="fresh")])
def test_without_a_cgroup_the_worker_runs_niced_before_the_submission_loads(tmp_path, monkeypatch, template):
    """No cgroup: the submission finds itself at nice WORKER_NICE already (set in the worker, not by it)."""
    monkeypatch.setattr(machine, "cgroup_base", lambda: "no cgroup v2 hierarchy mounted (cgroup v1 only)")
    path = tmp_path / "priority.py"
    path.write_text(PRIORITY)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=30.0, bwrap=False, template=template)) as runner:
        outcome = runner.call(ARGS, "float64")
    assert not isinstance(outcome, CallFailure), outcome
    assert outcome.array.tolist()[0] == WORKER_NICE


@pytest.mark.slow
@pytest.mark.parametrize("template", [pytest.param(True, id="template"), pytest.param(False, id="fresh")])
def test_with_a_cgroup_the_worker_joins_it_before_the_submission_loads(tmp_path, monkeypatch, template):
    """With a cgroup base, each runner makes its own group, the worker writes itself into its
    cgroup.procs before the submission runs (not niced then), and the group goes with the runner."""
    base = tmp_path / "cgroups"
    base.mkdir()
    monkeypatch.setattr(machine, "cgroup_base", lambda: cgroup.Base(str(base)))
    path = tmp_path / "priority.py"
    path.write_text(PRIORITY)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=30.0, bwrap=False, template=template)) as runner:
        group = Path(runner.cgroup)
        assert group.parent == base and (group / "pids.max").read_text() == "256"
        (group / "cgroup.procs").write_text("")  # the kernel's file; a plain one here
        outcome = runner.call(ARGS, "float64")
        joined = (group / "cgroup.procs").read_text()
    assert not isinstance(outcome, CallFailure), outcome
    assert outcome.array.tolist()[0] == 0.0 and joined == "0\n"
    assert runner.cgroup is None
