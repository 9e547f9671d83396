"""Per-worker control groups (cgroup v2): a CPU share, a memory bound and a process count that
hold for everything a worker starts, however many threads or processes, and for memory that
``RLIMIT_AS`` does not see (memfds and tmpfs files written with ``write()``, the page cache).

Where the grader can make cgroups (:func:`find_base`: a cgroup v2 hierarchy, the ``cpu``,
``memory`` and ``pids`` controllers enabled for the children of a cgroup it may write, as for
a root grader in the root cgroup or any grader started in a delegated cgroup, e.g. ``systemd-run
--scope -p Delegate=yes``), each worker gets one of its own (:func:`make`): ``cpu.max`` one CPU,
``cpu.weight`` the default (so ten busy threads get one worker's share, not ten), ``memory.max``
and ``memory.swap.max``, ``pids.max``. The worker joins it itself (:func:`join`) before the
submission is read; :func:`remove` kills what is left in it and removes it. Elsewhere (cgroup
v1 only, no delegation) :func:`find_base` says why, and the sandbox falls back to what
:func:`attnscore.sandbox.launch.protections` names.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

__all__ = ["Base", "find_base", "make", "join", "remove"]

_CONTROLLERS = ("cpu", "memory", "pids")
_PERIOD_US = 100_000


@dataclass(frozen=True)
class Base:
    """A cgroup v2 folder under which worker cgroups can be made (``path``)."""

    path: str


def _unified_mount(mounts: str) -> str | None:
    """Where the cgroup v2 hierarchy is mounted, from ``/proc/self/mounts`` text."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return fields[1]
    return None


def _own_cgroup(self_cgroup: str) -> str | None:
    """This process's cgroup v2 path (``0::/path``), from ``/proc/self/cgroup`` text."""
    for line in self_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _enabled(folder: str) -> set[str]:
    return set(_read(os.path.join(folder, "cgroup.subtree_control")).split())


def find_base(mounts: str | None = None, self_cgroup: str | None = None) -> Base | str:
    """Where this grader can make worker cgroups, or one line saying why it cannot.

    ``mounts`` and ``self_cgroup`` are the texts of ``/proc/self/mounts`` and
    ``/proc/self/cgroup`` (read when None). Tried in order: this process's own cgroup, when it is
    the hierarchy's root (which may hold processes and enable controllers for its children; they
    are enabled here if they are not yet); its parent, when this process sits in a leaf of a
    delegated subtree whose parent has the controllers enabled for its children.
    """
    mounts = _read("/proc/self/mounts") if mounts is None else mounts
    self_cgroup = _read("/proc/self/cgroup") if self_cgroup is None else self_cgroup
    root = _unified_mount(mounts)
    if root is None:
        return "no cgroup v2 hierarchy mounted (cgroup v1 only)"
    own = _own_cgroup(self_cgroup)
    if own is None:
        return "this process is in no cgroup v2 group"
    folder = os.path.normpath(os.path.join(root, own.lstrip("/")))
    available = set(_read(os.path.join(folder, "cgroup.controllers")).split())
    missing = [c for c in _CONTROLLERS if c not in available]
    if missing:
        return f"cgroup v2 controller(s) {', '.join(missing)} not available to {folder}"
    candidates = [folder] if own == "/" else []
    candidates.append(os.path.dirname(folder) if own != "/" else folder)
    for candidate in dict.fromkeys(candidates):
        if not os.access(candidate, os.W_OK):
            continue
        enabled = _enabled(candidate)
        if candidate == folder and own == "/" and not set(_CONTROLLERS) <= enabled:
            with contextlib.suppress(OSError):
                with open(os.path.join(candidate, "cgroup.subtree_control"), "w") as f:
                    f.write(" ".join(f"+{c}" for c in _CONTROLLERS))
            enabled = _enabled(candidate)
        if set(_CONTROLLERS) <= enabled:
            return Base(candidate)
    return (
        f"cannot make cgroups under {folder} (not writable, or cpu/memory/pids not enabled for its children): "
        "start the grader in a delegated cgroup (systemd-run --scope -p Delegate=yes)"
    )


def make(base: Base, name: str, memory_bytes: int | None, processes: int, cpus: float = 1.0) -> str | None:
    """Make the worker cgroup ``name`` under ``base`` with its bounds; its path, or None when it
    could not be made (nothing is left then).

    ``memory_bytes``: ``memory.max`` (None: no bound, e.g. a GPU worker); ``processes``:
    ``pids.max``; ``cpus``: ``cpu.max``, in CPUs.
    """
    path = os.path.join(base.path, name)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        remove(path)
        try:
            os.mkdir(path, 0o755)
        except OSError:
            return None
    except OSError:
        return None
    settings = {
        "cpu.max": f"{int(cpus * _PERIOD_US)} {_PERIOD_US}",
        "pids.max": str(processes),
        **({"memory.max": str(memory_bytes), "memory.swap.max": "0"} if memory_bytes is not None else {}),
    }
    for file, value in settings.items():
        try:
            with open(os.path.join(path, file), "w") as f:
                f.write(value)
        except OSError:
            if file != "memory.swap.max":  # no swap accounting: memory.max still holds
                remove(path)
                return None
    return path


def join(path: str) -> None:
    """Move the calling process into the cgroup ``path`` (in the worker, before the submission is
    read; everything it starts afterwards is in it too). Raises OSError when it cannot."""
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b"0\n")
    finally:
        os.close(fd)


def remove(path: str) -> None:
    """Kill every process left in the cgroup ``path`` (``cgroup.kill``) and remove it; never raises."""
    with contextlib.suppress(OSError):
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # busy while the killed processes are being reaped
            if not _read(os.path.join(path, "cgroup.procs")).strip():
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                return
            os.sched_yield()
