"""bubblewrap: whether it can run here, and the arguments of the two sandboxes it builds.

A fresh worker gets one ``bwrap`` of its own (:func:`fresh_prefix`: new PID, network, IPC, UTS and
cgroup namespaces, a read-only view of only what Python and torch need, the submission read-only,
an empty writable working folder); a root grader's worker template runs inside one ``bwrap``
(:func:`template_prefix`: the same view, no PID namespace, so the pids it reports are the
grader's). Specs, golden values and the grader's own code are in neither view.
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from attnscore.sandbox import cgroup, gpu, machine
from attnscore.sandbox.folders import PROJECT

__all__ = [
    "UNSHARE",
    "UNSHARE_TEMPLATE",
    "bwrap_available",
    "denied",
    "executable",
    "fresh_prefix",
    "readonly_roots",
    "sizes_tmpfs",
    "template_prefix",
    "view",
]

# No user namespace when the grader is root: the worker then drops to a real unprivileged uid.
UNSHARE = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try") + (
    () if os.geteuid() == 0 else ("--unshare-user",)
)
# Around the worker template (root graders only): no PID namespace, so that the pids the template
# reports are the grader's, which it signals, waits for and sweeps by uid.
UNSHARE_TEMPLATE = ("--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")


@functools.cache
def executable() -> str | None:
    """The absolute path of ``bwrap`` on the grader's PATH (the worker is started with a scrubbed
    PATH, so the sandbox always runs the file it found here)."""
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else None


def _probe(*args: str) -> subprocess.CompletedProcess[str] | None:
    """``bwrap`` run here with ``args`` (its output captured, 20 s at most), or None where there is
    no ``bwrap`` or it cannot be run."""
    exe = executable()
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, errors="replace", timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None


@functools.cache
def bwrap_available() -> bool:
    """Whether ``bwrap`` is installed and can create the namespaces the sandbox uses."""
    done = _probe(*UNSHARE, "--die-with-parent", "--ro-bind", "/", "/", "true")
    return done is not None and done.returncode == 0


@functools.cache
def sizes_tmpfs() -> bool:
    """Whether this ``bwrap`` knows ``--size`` (0.5 on; before it, a tmpfs cannot be bounded)."""
    done = _probe("--help")
    return done is not None and "--size" in done.stdout + done.stderr


def denied(runtime_mirrors: list[list[str]]) -> list[str]:
    """Folders the worker must never read: this project and its installed packages (which hold the
    reference, bundled specs and golden-value code), also as seen through a readable mirror."""
    package = PROJECT / "attnscore"
    own = {os.path.realpath(package), os.path.abspath(package)}
    # A source checkout is denied whole; an installed package only itself (never all of site-packages).
    if (PROJECT / "pyproject.toml").is_file():
        own.add(str(PROJECT))
    seen = set(own)
    for original, copy in runtime_mirrors:
        seen |= {copy + p[len(original) :] for p in own if p.startswith(original.rstrip("/") + "/")}
    return sorted(seen)


def readonly_roots() -> list[str]:
    """What the interpreter and its packages need, outside /usr and /lib*."""
    roots = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)))
    }
    for entry in site.getsitepackages() + [p for p in sys.path if "site-packages" in p or "dist-packages" in p]:
        if os.path.isdir(entry):
            roots.add(os.path.realpath(entry))
    roots.add(os.path.abspath(sys.prefix))
    # Drop entries covered by another entry or by the system folders bound anyway.
    system = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
    kept: list[str] = []
    for root in sorted(roots):
        if any(root == s or root.startswith(s + "/") for s in system):
            continue
        if any(root.startswith(k + "/") for k in kept):
            continue
        kept.append(root)
    return kept


def view(unshare: tuple[str, ...], device: str, tmp_bytes: int | None = None) -> list[str]:
    """bwrap's arguments for the namespaces ``unshare`` and the view every worker gets: a new
    ``/proc``, ``/dev`` (with ``device``'s GPU nodes, none for the CPU) and ``/tmp`` (a tmpfs of at
    most ``tmp_bytes`` when given), the system folders and the interpreter's folders read-only
    (bound after the new ``/tmp``: an interpreter or virtual environment under ``/tmp`` stays
    visible), attnscore's own installed files hidden."""
    args = [
        executable() or "bwrap",
        *unshare,
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *(["--size", str(tmp_bytes)] if tmp_bytes else []),
        "--tmpfs",
        "/tmp",
        *gpu.bwrap_device_args(gpu.device_nodes(device)),
    ]
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        args += ["--ro-bind-try", system, system]
    for etc in (
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/localtime",
        "/etc/passwd",
        "/etc/group",
    ):
        args += ["--ro-bind-try", etc, etc]
    roots = readonly_roots()
    parents = sorted({str(p) for root in roots for p in Path(root).parents if str(p) != "/"})
    for parent in parents:  # folders bwrap creates are private unless made with --perms
        args += ["--perms", "0755", "--dir", parent]
    for root in roots:
        args += ["--ro-bind", root, root]
    for hidden in denied([]):  # the grader's own installed packages, when inside a bound folder
        if any(hidden.startswith(root.rstrip("/") + "/") for root in roots) and os.path.isdir(hidden):
            args += ["--tmpfs", hidden]
    return args


def fresh_prefix(
    submission: str,
    workdir: str,
    lib: str,
    device: str = "cpu",
    disk_bytes: int | None = None,
    drops_uid: bool = False,
) -> list[str]:
    """bwrap's arguments for one fresh worker; ``submission`` is the private folder of the
    submission's files, ``workdir`` its working folder, ``lib`` the worker modules. With
    ``disk_bytes``, the working folder (and ``/tmp``) is a tmpfs of that size instead of
    ``workdir``; with ``drops_uid`` (a root grader), one the worker's own uid may write."""
    args = view(UNSHARE, device, disk_bytes)  # /tmp bounded too, before the interpreter's folders are bound
    if disk_bytes:
        # a root grader's worker drops to its own uid inside: the folder must let it write
        perms = "1777" if drops_uid else "0700"
        work = ["--perms", perms, "--size", str(disk_bytes), "--tmpfs", "/sandbox/work"]
    else:
        work = ["--bind", workdir, "/sandbox/work"]
    args += [
        "--perms",
        "0755",
        "--dir",
        "/sandbox",
        "--ro-bind",
        lib,
        "/sandbox/lib",
        "--ro-bind",
        submission,
        "/sandbox/submission",
        *work,
        "--chdir",
        "/sandbox/work",
        "--setenv",
        "HOME",
        "/sandbox/work",
        "--setenv",
        "TMPDIR",
        "/sandbox/work",
    ]
    return args + ["--"]


def template_prefix(stage: str, lib: str) -> list[str]:
    """bwrap's arguments around the worker template (root graders, CPU): the view of
    :func:`view` without a PID namespace, ``/dev/shm`` and ``/tmp`` only root may write,
    the worker modules ``lib`` read-only and the staging folder ``stage`` (each submission's
    private copy and working folder, made by the grader) at their own paths. The folders above
    them (the temporary folder, maybe a private one such as ``TMPDIR=$HOME/tmp``) are made 0755
    in the view, where bwrap would make them 0700 and no worker uid could reach its folders."""
    args = view(UNSHARE_TEMPLATE, "cpu")
    base = machine.cgroup_base()
    if isinstance(base, cgroup.Base):  # its workers join their cgroups (made by the grader) before they drop to a uid
        args += ["--bind", base.path, base.path]
    made = set(args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("--dir", "--tmpfs", "--ro-bind-try"))
    parents = sorted({str(p) for folder in (lib, stage) for p in Path(folder).parents if str(p) != "/"} - made)
    return [
        *args,
        "--perms",
        "0755",
        "--tmpfs",
        "/dev/shm",
        *(arg for parent in parents for arg in ("--perms", "0755", "--dir", parent)),
        "--ro-bind",
        lib,
        lib,
        "--bind",
        stage,
        stage,
        "--chdir",
        "/",
        "--",
    ]
