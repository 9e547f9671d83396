"""What this machine offers the sandbox, asked once per grader process: a tmpfs working folder per
worker (a mount namespace, root only), a cgroup v2 hierarchy to make workers' groups in, the
kernel's per-session CPU share. The answers feed :func:`attnscore.sandbox.plan.resolve`; bubblewrap's
own probes are in :mod:`attnscore.sandbox.bwrap`, Landlock's in :mod:`attnscore.boundary.landlock`."""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import tempfile
from typing import Any

from attnscore.sandbox import cgroup
from attnscore.sandbox.folders import worker_lib
from attnscore.sandbox.removal import run_is_alive
from attnscore.sandbox.uids import drops_privileges

__all__ = ["autogroups", "cgroup_base", "libc", "mounts_work_folder"]


@functools.cache
def libc() -> Any:
    """libc, loaded in the grader (never first in a forked child)."""
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def mounts_work_folder() -> bool:
    """Whether a worker of this root grader can get a tmpfs working folder of its own (a mount
    namespace): tried once in a throwaway process."""
    if not drops_privileges():
        return False
    probe = (
        "import sys, tempfile; sys.path.insert(0, sys.argv[1]); "
        "from attnscore.boundary.template_server import bound_folder; "
        "sys.exit(0 if bound_folder(tempfile.mkdtemp(), 0, 1 << 20) else 1)"
    )
    with tempfile.TemporaryDirectory() as scratch:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", probe, worker_lib()],
                env={"TMPDIR": scratch, "PATH": "/usr/bin:/bin"},
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


@functools.cache
def cgroup_base() -> cgroup.Base | str:
    """Where this grader makes its workers' cgroups, or why it cannot (:func:`cgroup.find_base`);
    a root grader also removes the groups of grader runs that are gone."""
    base = cgroup.find_base()
    if isinstance(base, cgroup.Base):
        try:
            names = os.listdir(base.path)
        except OSError:
            names = []
        for name in names:
            if name.startswith("attnscore-cgroup-") and run_is_alive(name) is False:
                cgroup.remove(os.path.join(base.path, name))
    return base


def autogroups() -> bool:
    """Whether the kernel gives each session its own CPU share (autogroup), as each worker has one."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False
