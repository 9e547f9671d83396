"""The sandbox: run an untrusted submission in a separate, limited worker process.

:class:`SandboxRunner` implements the :class:`attnscore.check.runner.Runner` protocol for a student's
file. The grading process never imports the submission. The layers, outermost first (see
the README's "Grading untrusted code" section for the threat model and what each one stops):

- **bubblewrap** (when ``bwrap`` is installed and can create namespaces): new PID, network, IPC,
  UTS and cgroup namespaces (no network at all; killing the sandbox kills every process in it),
  and a read-only view of only what Python and torch need (interpreter prefix, site-packages,
  ``/usr``, ``/lib*``, a minimal ``/etc``), the submission file read-only and an empty writable
  working directory. Specs, golden values and the grader's own code are not in that view.
- **another user**: when the grader runs as root, the worker drops to a uid of its own (one of
  ``Limits.uid`` to ``Limits.uid + 63``, 64000 on, held by a lock while it runs) after importing
  torch and before importing the submission, so it cannot signal the grader or another worker,
  write the grader's files, or fork past ``RLIMIT_NPROC``; when it ends, every process of that
  uid is killed. Without bubblewrap, module
  folders that user cannot read (Python under root's 0700 home) are searched through a readable
  mirror made of hard links (:mod:`attnscore.sandbox.runtime`), so whatever the grading environment can
  import, the worker can import too.
- **a clean process**: by default a fork of the **worker template**
  (:mod:`attnscore.sandbox.template`; ``docs/sandbox-template.md``), a ``python -I`` process
  started once per batch that has imported torch and numpy, holds no spec, case or expected value
  and never runs submitted code, so each submission starts from a fresh copy of it and nothing
  one submission does to its process reaches the next; the child applies every layer below
  before the submission is read. With bubblewrap, or ``Limits(template=False)``, a fresh
  ``python -I`` per worker instead. Either way: no user site, no ``PYTHON*`` variables, a
  scrubbed environment, an empty temporary working directory, stdin from /dev/null; its own
  session, so a timeout kills its whole process group; on top, orphans that escaped the group
  are swept.
- **resource limits**: address space, CPU seconds, processes, file size, open files, core dumps;
  wall time per call, for the import and for the whole submission.
- **plain data**: the worker gets only inputs, never expected values, and answers with strict,
  size-capped JSON (:mod:`attnscore.boundary.wire`) that the grader validates before comparing.

Each call has a wall-time limit; a hang, crash or memory blow-up becomes that call's verdict, the
worker is killed, and the next call starts a fresh one. A submission that fails to import fails
every call with the same verdict, without retrying.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import itertools
import json
import os
import re
import resource
import select
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnscore.boundary import kernel_objects, landlock, wire
from attnscore.boundary.calls import to_torch
from attnscore.boundary.layouts import strided_form
from attnscore.boundary.outputs import CallFailure, Outcome
from attnscore.boundary.template_server import WORKER_NICE, bound_folder, lower_priority
from attnscore.boundary.untrusted import clean_text
from attnscore.report.results import Verdict
from attnscore.sandbox import cgroup, gpu
from attnscore.sandbox.clock import OwnTime
from attnscore.sandbox.removal import remove_tree, run_is_alive, run_prefix, sweep_stale, tree_usage
from attnscore.sandbox.runtime import WorkerRuntime, unreadable_by, worker_runtime
from attnscore.sandbox.template import TemplateChild, TemplateError, WorkerTemplate
from attnscore.submission.files import Submission

__all__ = [
    "Limits",
    "SandboxRunner",
    "protections",
    "bwrap_available",
    "preflight",
    "spec_exposure",
    "use_template",
    "warm_template",
]

# The only verdicts a worker may report itself; anything else it sends counts as a crash.
_WORKER_VERDICTS = frozenset({Verdict.EXCEPTION.value, Verdict.BAD_RETURN_TYPE.value, Verdict.MEMORY_LIMIT.value})
# The verdicts a load_error may carry, by protocol state: before the worker says "importing" (only
# the worker has run: the machine's faults, or no file to import) and after it (the submission may
# have written the message itself: only verdicts that are the submission's own).
_LOAD_VERDICTS = {
    False: frozenset({Verdict.GRADER_ERROR.value, Verdict.FUNCTION_MISSING.value}),
    True: frozenset({Verdict.EXCEPTION.value, Verdict.FUNCTION_MISSING.value, Verdict.MEMORY_LIMIT.value}),
}
_ROOT = Path(__file__).resolve().parents[2]  # the folder holding attnscore/
# The only grader code the worker may see is the boundary package, copied whole into a private
# folder: the worker's `attnscore` package holds no reference implementation, specs or golden values.
_BOUNDARY = _ROOT / "attnscore" / "boundary"
_BOOTSTRAP = "; ".join(
    (
        "import sys",
        "sys.path.insert(0, sys.argv[1])",
        "del sys.argv[1]",
        "from attnscore.boundary.worker import main",
        "main(sys.argv[1:])",
    )
)
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,20}")
# No user namespace when the grader is root: the worker then drops to a real unprivileged uid.
_UNSHARE = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try") + (
    () if os.geteuid() == 0 else ("--unshare-user",)
)
# Around the worker template (root graders only): no PID namespace, so that the pids the template
# reports are the grader's, which it signals, waits for and sweeps by uid.
_UNSHARE_TEMPLATE = ("--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
_SHARED_BYTES = 64 * 1024**2  # the call inputs' shared memory (a sparse memfd; what is written is what costs)
_LIVE_WORKERS: set[int] = set()
_LIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's worker.

    Attributes:
        call_timeout_s: time for one call, seconds: the worker's own time
            (:mod:`attnscore.sandbox.clock`: wall time less what the machine kept it waiting for a
            CPU, at least the CPU time it used; at most 4 times the limit of wall time), so that a
            busy machine does not time out a call that fits.
        load_timeout_s: own time to start the worker and import the submission, seconds: one
            budget for all the starts of one submission (restarts after a timeout or crash).
        total_timeout_s: own time of the whole submission (its imports and calls; the grader's
            own work between calls does not count); calls after it is spent time out.
        memory_bytes: address-space limit of the worker (RLIMIT_AS).
        cpu_s: CPU seconds for one worker process (RLIMIT_CPU).
        processes: processes and threads of the worker's user (RLIMIT_NPROC; enforced when the
            worker runs as another user, i.e. when the grader is root).
        file_bytes: largest file the worker may write (RLIMIT_FSIZE).
        disk_bytes: all the worker may hold in its working folder together: a tmpfs of that size
            where a mount namespace can be had (bubblewrap, or a root grader), else the folder's
            usage checked after the import and after each call (see :func:`protections`).
        open_files: open file descriptors (RLIMIT_NOFILE).
        output_chars: how much of the submission's own output is kept for the report.
        uid: the first of 64 unprivileged uids (``uid`` to ``uid + 63``, none owned by an
            account) that workers run as when the grader is root: each live worker on the machine
            holds one of its own, so workers graded at the same time cannot signal, limit, trace
            or read one another, and killing every process of a worker's uid is safe.
        bwrap: use bubblewrap: ``None`` when available, ``True`` required, ``False`` never.
        landlock: the worker confines itself with Landlock (files, TCP, signals) when the
            kernel has it: ``None`` or ``True``; ``False`` never.
        seccomp: the worker refuses itself every socket but ``AF_UNIX`` (a seccomp filter):
            ``None`` or ``True``; ``False`` never.
        template: fork each worker from the pre-started worker template
            (:mod:`attnscore.sandbox.template`) instead of starting a fresh interpreter: ``None``
            when bubblewrap is not used (the template falls back to fresh interpreters if it
            cannot start), ``True`` required, ``False`` never (a fresh ``python -I`` per worker).
        device: where the submission's calls run: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. A GPU
            worker sees only GPU N (``CUDA_VISIBLE_DEVICES``; inside it the device is ``cuda:0``)
            and runs without ``memory_bytes`` (CUDA needs far more address space than it uses;
            see :mod:`attnscore.sandbox.gpu`). Check it first with :func:`attnscore.sandbox.gpu.device_problem`.
    """

    call_timeout_s: float = 5.0
    load_timeout_s: float = 30.0
    total_timeout_s: float = 300.0
    memory_bytes: int = 4 * 1024**3
    cpu_s: int = 120
    processes: int = 256
    file_bytes: int = 4 * 1024**2
    disk_bytes: int = 64 * 1024**2
    open_files: int = 256
    output_chars: int = 4000
    uid: int = 64000
    bwrap: bool | None = None
    landlock: bool | None = None
    seccomp: bool | None = None
    template: bool | None = None
    device: str = "cpu"


@functools.cache
def _bwrap_executable() -> str | None:
    """The absolute path of ``bwrap`` on the grader's PATH (the worker is started with a scrubbed
    PATH, so the sandbox always runs the file it found here)."""
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else None


@functools.cache
def bwrap_available() -> bool:
    """Whether ``bwrap`` is installed and can create the namespaces the sandbox uses."""
    exe = _bwrap_executable()
    if exe is None:
        return False
    try:
        done = subprocess.run(
            [exe, *_UNSHARE, "--die-with-parent", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def _bwrap_sizes_tmpfs() -> bool:
    """Whether this ``bwrap`` knows ``--size`` (0.5 on; before it, a tmpfs cannot be bounded)."""
    exe = _bwrap_executable()
    if exe is None:
        return False
    try:
        done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


def _use_bwrap(limits: Limits) -> bool:
    if limits.bwrap is False:
        return False
    available = bwrap_available()
    if limits.bwrap and not available:
        raise RuntimeError("Limits(bwrap=True) but bwrap is not installed or cannot create namespaces")
    return available


def _denied(runtime_mirrors: list[list[str]]) -> list[str]:
    """Folders the worker must never read: this project and its installed packages (which hold the
    reference, bundled specs and golden-value code), also as seen through a readable mirror."""
    package = _ROOT / "attnscore"
    own = {os.path.realpath(package), os.path.abspath(package)}
    # A source checkout is denied whole; an installed package only itself (never all of site-packages).
    if (_ROOT / "pyproject.toml").is_file():
        own.add(str(_ROOT))
    seen = set(own)
    for original, copy in runtime_mirrors:
        seen |= {copy + p[len(original) :] for p in own if p.startswith(original.rstrip("/") + "/")}
    return sorted(seen)


def use_template(limits: Limits) -> bool:
    """Whether workers are forked from the worker template (see :class:`Limits`).

    With bubblewrap the template runs inside one ``bwrap`` when the grader is root and grades on
    the CPU (each worker then still drops to a uid of its own); otherwise each worker is a fresh
    ``bwrap``: without root every worker would share one uid, and a GPU worker needs its own
    device nodes.

    Raises:
        RuntimeError: ``Limits(template=True)`` where bubblewrap is used and the template cannot
            be (a grader that is not root, or a GPU): pass ``bwrap=False`` too.
    """
    if limits.template is False:
        return False
    if _use_bwrap(limits) and not (_drops_privileges() and gpu.keeps_address_limit(limits.device)):
        if limits.template:
            raise RuntimeError(
                "Limits(template=True) with bubblewrap needs a grader running as root and device cpu; "
                "pass bwrap=False too"
            )
        return False
    return True


def _runtime(limits: Limits) -> WorkerRuntime:
    """The interpreter workers run: through a readable mirror when they drop to another uid
    outside bubblewrap (inside it, the view's own folders are readable)."""
    if _drops_privileges() and not _use_bwrap(limits):
        return worker_runtime(uid=limits.uid)
    return WorkerRuntime(sys.executable, ())


_TEMPLATES: dict[tuple[int, str, tuple[tuple[str, str], ...], bool], WorkerTemplate | str] = {}
_TEMPLATES_LOCK = threading.Lock()


def _start_template(runtime: WorkerRuntime, bwrap: bool) -> WorkerTemplate:
    """A new worker template for ``runtime`` (it loads torch while the grader goes on); with
    ``bwrap``, inside one bubblewrap sandbox with a staging folder for the submissions."""
    lib, config, env = _worker_lib(), {"mirrors": [list(m) for m in runtime.mirrors]}, _scrubbed_env("/")
    if not bwrap:
        return WorkerTemplate(runtime.executable, lib, config, env)
    _sweep_dead_runs()
    stage = tempfile.mkdtemp(prefix=run_prefix("stage"))
    os.chmod(stage, 0o711)  # slots reach their own folders in it, and list nothing
    try:
        return WorkerTemplate(
            runtime.executable, lib, config, env, prefix=tuple(_bwrap_template_prefix(stage, lib)), stage=stage
        )
    except OSError:
        remove_tree(stage)
        raise


def _template_for(runtime: WorkerRuntime, required: bool, bwrap: bool = False) -> WorkerTemplate | None:
    """This grader process's template for ``runtime`` (started on first use; a forked grader
    process shares its parent's); None, after one failed start, when not ``required``.

    Raises:
        TemplateError: it cannot start (or died) and ``required``.
    """
    key = (os.getpid(), runtime.executable, runtime.mirrors, bwrap)
    inherited = [t for k, t in _TEMPLATES.items() if k[1:] == key[1:] and isinstance(t, WorkerTemplate)]
    with _TEMPLATES_LOCK:
        found = _TEMPLATES.get(key) or (inherited[0] if inherited else None)
        if isinstance(found, WorkerTemplate) and found.failure is not None:
            found = found.failure  # it could not start: do not pay for a failed start per submission
        elif isinstance(found, WorkerTemplate) and not found.alive():
            found = None
        if found is None:
            try:
                found = _start_template(runtime, bwrap)
            except OSError as exc:
                found = f"the worker template could not be started: {exc}"
        _TEMPLATES[key] = found
    if isinstance(found, str):
        if required:
            raise TemplateError(found)
        return None
    return found


def warm_template(limits: Limits | None = None, wait: bool = True) -> str | None:
    """Start this process's worker template now (grader processes forked afterwards share it);
    with ``wait``, until it has loaded torch. Returns why it could not start, or None (also when
    the limits do not use a template, or not ``wait``: then the first submission finds out)."""
    limits = limits or Limits()
    if not use_template(limits):
        return None
    try:
        template = _template_for(_runtime(limits), required=True, bwrap=_use_bwrap(limits))
        if wait and template is not None:
            template.wait_ready()
    except TemplateError as exc:
        return str(exc)
    return None


def _use_landlock(limits: Limits) -> bool:
    return limits.landlock is not False and landlock.abi_version() > 0


def _drops_privileges() -> bool:
    return os.geteuid() == 0


def protections(limits: Limits | None = None) -> str:
    """One line naming the isolation layers active on this machine, for results and the CLI."""
    limits = limits or Limits()
    abi = landlock.abi_version() if _use_landlock(limits) else 0
    if _use_bwrap(limits) and use_template(limits):
        first = "bwrap around the worker template: no network, read-only fs without specs, PIDs of the machine"
    elif _use_bwrap(limits):
        first = "bwrap: no network, own PIDs, read-only fs without specs"
    elif abi:
        first = "no bwrap: shared PID namespace"
    else:
        first = "no bwrap and no landlock: a readable filesystem"
    layers = [first]
    if abi:
        scope = ["fs without specs"] + (["no tcp"] if abi >= 4 else []) + (["no signals out"] if abi >= 6 else [])
        layers.append(f"landlock v{abi}: {', '.join(scope)}")
    if _drops_privileges():
        layers.append(f"a uid of its own per worker ({limits.uid}-{limits.uid + _UID_SLOTS - 1})")
        layers.append(_kernel_objects_layer(limits))
    elif abi >= 6:
        layers.append("same uid as the grader (signals to it blocked by landlock)")
    else:
        layers.append("same uid as the grader (not root: the worker could signal the grader)")
    if limits.seccomp is not False:
        memfds = ", memfds" if gpu.keeps_address_limit(limits.device) else ""
        layers.append(f"seccomp: no network sockets, SysV/POSIX IPC, keyrings{memfds}")
    start = "forked from a clean worker template" if use_template(limits) else "python -I"
    layers.append(_resource_layers(limits))
    if gpu.keeps_address_limit(limits.device):
        memory = "memory (address space; memfds refused)" if limits.seccomp is not False else "memory (address space)"
        layers.append(f"rlimits (cpu, {memory}, processes, files); scrubbed env; {start}; process group kill")
    else:
        _, index = gpu.parse_device(limits.device)
        layers.append(f"GPU {index or 0} only (CUDA_VISIBLE_DEVICES; TF32 off)")
        layers.append(
            f"rlimits (cpu, processes, files; no address-space limit on a GPU worker); scrubbed env; {start}; "
            "process group kill"
        )
    return "; ".join(layers)


def _kernel_objects_layer(limits: Limits) -> str:
    """What keeps the kernel objects of one worker (System V IPC, POSIX queues, keyrings) from the
    next one (:mod:`attnscore.boundary.kernel_objects`); the grader is root."""
    fresh_bwrap = _use_bwrap(limits) and not use_template(limits)
    own = "an IPC namespace per worker" if fresh_bwrap or kernel_objects.ipc_namespaces_available() else ""
    return ", ".join(filter(None, (own, "its IPC objects and keys removed with its uid's processes")))


@functools.cache
def _worker_lib() -> str:
    """A private, read-only folder holding just the modules the worker runs (made once)."""
    _sweep_dead_runs()
    lib = tempfile.mkdtemp(prefix=run_prefix("workerlib"))
    atexit.register(remove_tree, lib)
    package = os.path.join(lib, "attnscore")
    os.makedirs(package)
    Path(package, "__init__.py").write_text('"""Worker-side subset: the boundary package only."""\n')
    shutil.copytree(_BOUNDARY, os.path.join(package, "boundary"), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for folder, _, files in os.walk(lib):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
    return lib


def _readonly_roots() -> list[str]:
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


def _bwrap_view(unshare: tuple[str, ...], device: str) -> list[str]:
    """bwrap's arguments for the namespaces ``unshare`` and the view every worker gets: a new
    ``/proc``, ``/dev`` (with ``device``'s GPU nodes, none for the CPU) and ``/tmp``, the system
    folders and the interpreter's folders read-only, attnscore's own installed files hidden."""
    args = [
        _bwrap_executable() or "bwrap",
        *unshare,
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
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
    roots = _readonly_roots()
    parents = sorted({str(p) for root in roots for p in Path(root).parents if str(p) != "/"})
    for parent in parents:  # folders bwrap creates are private unless made with --perms
        args += ["--perms", "0755", "--dir", parent]
    for root in roots:
        args += ["--ro-bind", root, root]
    for hidden in _denied([]):  # the grader's own installed packages, when inside a bound folder
        if any(hidden.startswith(root.rstrip("/") + "/") for root in roots) and os.path.isdir(hidden):
            args += ["--tmpfs", hidden]
    return args


def _bwrap_prefix(
    submission: str, workdir: str, lib: str, device: str = "cpu", disk_bytes: int | None = None
) -> list[str]:
    """bwrap's arguments for one fresh worker; ``submission`` is the private folder of the
    submission's files, ``workdir`` its working folder, ``lib`` the worker modules. With
    ``disk_bytes``, the working folder (and ``/tmp``) is a tmpfs of that size instead of
    ``workdir``."""
    args = _bwrap_view(_UNSHARE, device)
    if disk_bytes:
        # a root grader's worker drops to its own uid inside: the folder must let it write
        perms = "1777" if _drops_privileges() else "0700"
        args += ["--size", str(disk_bytes), "--tmpfs", "/tmp"]
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


def _bwrap_template_prefix(stage: str, lib: str) -> list[str]:
    """bwrap's arguments around the worker template (root graders, CPU): the view of
    :func:`_bwrap_view` without a PID namespace, ``/dev/shm`` and ``/tmp`` only root may write,
    the worker modules ``lib`` read-only and the staging folder ``stage`` (each submission's
    private copy and working folder, made by the grader) at their own paths. The folders above
    them (the temporary folder, maybe a private one such as ``TMPDIR=$HOME/tmp``) are made 0755
    in the view, where bwrap would make them 0700 and no worker uid could reach its folders."""
    view = _bwrap_view(_UNSHARE_TEMPLATE, "cpu")
    base = _cgroup_base()
    if isinstance(base, cgroup.Base):  # its workers join their cgroups (made by the grader) before they drop to a uid
        view += ["--bind", base.path, base.path]
    made = set(view[i + 1] for i, arg in enumerate(view[:-1]) if arg in ("--dir", "--tmpfs", "--ro-bind-try"))
    parents = sorted({str(p) for folder in (lib, stage) for p in Path(folder).parents if str(p) != "/"} - made)
    return [
        *view,
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


def _rlimits(limits: Limits) -> list[tuple[int, int, int]]:
    """``(resource, soft, hard)`` for every limit a worker gets (both paths); a GPU worker gets no
    address-space limit (:func:`attnscore.sandbox.gpu.keeps_address_limit`)."""
    memory = [(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes)]
    return [
        *(memory if gpu.keeps_address_limit(limits.device) else []),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 5),
        (resource.RLIMIT_NPROC, limits.processes, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]


def _limit_child(
    limits: Limits, bound: tuple[str, int, Any] | None = None, group: str | None = None
) -> None:  # between fork and exec
    """Set the worker's rlimits and CPU share; with ``group``, join that cgroup first; with
    ``bound`` (``(workdir, uid, libc)``, a root grader), put a tmpfs of ``limits.disk_bytes`` at
    its working folder (:func:`template.bound_folder`)."""
    kernel_objects.isolate()  # an IPC namespace (as root) and a session keyring of its own
    try:
        if not group:
            raise FileNotFoundError
        cgroup.join(group)
    except OSError:  # no group (or it vanished): the fallback share, never a failed start
        lower_priority()
    if bound is not None:
        workdir, uid, libc = bound
        if bound_folder(workdir, uid, limits.disk_bytes, libc):
            os.chdir(workdir)  # Popen entered the folder below the mount
    for which, soft, hard in _rlimits(limits):
        resource.setrlimit(which, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead of killing


@functools.cache
def _libc() -> Any:
    """libc, loaded in the grader (never first in a forked child)."""
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _mounts_work_folder() -> bool:
    """Whether a worker of this root grader can get a tmpfs working folder of its own (a mount
    namespace): tried once in a throwaway process."""
    if not _drops_privileges():
        return False
    probe = (
        "import sys, tempfile; sys.path.insert(0, sys.argv[1]); "
        "from attnscore.boundary.template_server import bound_folder; "
        "sys.exit(0 if bound_folder(tempfile.mkdtemp(), 0, 1 << 20) else 1)"
    )
    with tempfile.TemporaryDirectory() as scratch:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", probe, _worker_lib()],
                env={"TMPDIR": scratch, "PATH": "/usr/bin:/bin"},
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


_CGROUP_NUMBERS = itertools.count()


@functools.cache
def _cgroup_base() -> cgroup.Base | str:
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


def _autogroups() -> bool:
    """Whether the kernel gives each session its own CPU share (autogroup), as each worker has one."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def _resource_layers(limits: Limits) -> str:
    """The protections line's part on shares of the machine: the CPU share and memory (a cgroup
    v2 group per worker, else the fallbacks) and how the working folder's size holds."""
    base = _cgroup_base()
    if isinstance(base, cgroup.Base):
        memory = f", memory {limits.memory_bytes / 1024**3:g} GiB" if gpu.keeps_address_limit(limits.device) else ""
        share = f"cgroup v2 per worker: 1 CPU{memory} (memfds and tmpfs too), {limits.processes} processes"
    else:
        session = "its own session's CPU share (autogroup), " if _autogroups() else ""
        share = f"cpu: {session}nice {WORKER_NICE} (no cgroup: {base}; memfds outside the memory limit)"
    disk = f"{limits.disk_bytes / 1024**2:g} MiB"
    if _disk_bound(limits) == "tmpfs":
        return f"{share}; disk: a {disk} tmpfs working folder"
    files = f"files {limits.file_bytes / 1024**2:g} MiB each"
    return f"{share}; disk: working folder checked after each call ({disk}; {files})"


def _disk_bound(limits: Limits) -> str:
    """How ``limits.disk_bytes`` holds: ``"tmpfs"`` (a size-bound tmpfs working folder: bwrap's
    own per worker, or a mount namespace a root grader's worker makes) or ``"checked"`` (the
    folder's usage measured after the import and each call)."""
    if _use_bwrap(limits) and not use_template(limits):
        return "tmpfs" if _bwrap_sizes_tmpfs() else "checked"
    return "tmpfs" if _mounts_work_folder() else "checked"


def _scrubbed_env(home: str, device: str | None = None) -> dict[str, str]:
    """The worker's whole environment; with ``device``, the GPU it may see (:func:`gpu.worker_env`)."""
    return {
        **(gpu.worker_env(device) if device is not None else {}),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


@functools.cache
def _become_subreaper() -> bool:
    """Orphans of the worker (a grandchild that left its session) become the grader's children."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


_UID_SLOTS = 64


def _claim_uid(limits: Limits) -> tuple[int, int]:
    """A uid no other live worker on this machine holds, and the locked file that holds it.

    Locks live in a root-only folder of the temporary folder; a lock is released when its
    grader closes the runner or dies, so a crashed grader never keeps a uid. Before use, every
    process still running as the uid (left by a grader that was killed) is killed.

    Raises:
        RuntimeError: all uids are taken, or the lock folder is not root's own.
    """
    import fcntl
    import pwd

    folder = "/tmp/attnscore-uid-locks"  # one place for every grader on the machine, whatever its TMPDIR
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if info.st_uid != 0 or info.st_mode & 0o077 or not os.path.isdir(folder) or os.path.islink(folder):
        raise RuntimeError(f"{folder} must be a folder only root can use; remove it")
    for slot in range(_UID_SLOTS):
        uid = limits.uid + slot
        try:
            pwd.getpwuid(uid)
            continue  # a real account: never run a worker as it, never kill its processes
        except KeyError:
            pass
        fd = os.open(os.path.join(folder, str(uid)), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _kill_uid(uid)
        _remove_files_of(uid, keep=None)  # what a killed grader's worker of this uid left behind
        kernel_objects.remove_objects_of(uid)  # what a killed grader's worker left
        return uid, fd
    raise RuntimeError(f"all {_UID_SLOTS} sandbox uids are in use by other workers")


def _kill_uid(uid: int) -> None:
    """Kill every process running as ``uid`` (``kill(-1)`` sent as that uid, until none is left):
    no chain of new sessions or forks outruns it, and no process of another uid is touched."""
    if uid == 0 or not _alive_as(uid):  # nothing runs as it, so nothing can start as it: done
        return
    for _ in range(20):
        subprocess.run(
            ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null; true"],
            user=uid,
            group=uid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if not _alive_as(uid):
            return


_SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
# the run_prefix kinds of the sandbox's folders
_RUN_FOLDERS = ("stage", "worker", "submission", "workerlib", "runtime")


def _sweep_dead_runs(first_uid: int = Limits.uid) -> None:
    """Remove the staging, working and submission folders that grader runs which are gone left in
    this process's temporary folder (once per folder and process): a grader killed before its
    cleanup, or one whose cleanup a submission defeated, never leaves them for good. A live
    run's folder is never touched (:func:`attnscore.sandbox.removal.sweep_stale`)."""
    folder = tempfile.gettempdir()
    if folder in _SWEPT:
        return
    _SWEPT.add(folder)
    if _drops_privileges():

        def owned(uid: int) -> bool:
            return uid == 0 or first_uid <= uid < first_uid + _UID_SLOTS

        sweep_stale(folder, _RUN_FOLDERS, owned)
    else:
        sweep_stale(folder, _RUN_FOLDERS)


_SWEPT: set[str] = set()


def _remove_files_of(uid: int, keep: str | None) -> int:
    """Remove what ``uid`` left in the world-writable folders (where Landlock and bwrap, when
    present, already keep it from writing), except its working folder ``keep``; returns how many
    entries went. Folders of any depth go without recursion and links are never followed
    (:func:`attnscore.sandbox.removal.remove_tree`); what cannot go is left, never raised."""
    removed = 0
    kept = os.path.realpath(keep) if keep is not None else None
    for folder in _SHARED_WRITABLE:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
                if info.st_uid != uid or os.path.realpath(path) == kept:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    remove_tree(path)  # no recursion, no links followed: any depth a worker built
                else:
                    os.unlink(path)
                removed += 1
            except OSError:
                continue
    return removed


def _alive_as(uid: int) -> bool:
    """Whether a process (not a zombie) runs as ``uid`` (real, effective or saved).

    Read from ``/proc/PID/status``: the owner of ``/proc/PID`` is root for a process that made
    itself non-dumpable, so it cannot hide that way."""
    wanted = str(uid).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{entry}").st_uid
            if owner not in (uid, 0):
                continue
            with open(f"/proc/{entry}/status", "rb") as f:
                status = f.read()
        except OSError:
            continue
        at = status.find(b"\nUid:")
        if at < 0 or wanted not in status[at + 5 : status.find(b"\n", at + 5)].split()[:3]:
            continue
        at = status.find(b"\nState:")
        if status[at + 7 : at + 40].split()[:1] not in ([b"Z"], [b"X"]):
            return True
    return False


def _sweep_orphans(uid: int) -> int:
    """Kill and reap processes of ``uid`` reparented to the grader (escaped grandchildren)."""
    killed = 0
    me = os.getpid()
    for _ in range(100):
        victims = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
                owner = os.stat(f"/proc/{pid}").st_uid
            except (OSError, ValueError, IndexError):
                continue
            with _LIVE_LOCK:
                live = pid in _LIVE_WORKERS
            if ppid == me and owner == uid and not live:
                victims.append(pid)
        if not victims:
            break
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                killed += 1
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass
    return killed


def _shared_memory() -> int:
    """A descriptor of ``_SHARED_BYTES`` of memory-backed file (a memfd; an unlinked temporary
    file where memfd is missing), sparse: only what is written costs memory."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("attnscore-inputs", os.MFD_CLOEXEC)
    else:  # pragma: no cover - Linux has memfd
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, _SHARED_BYTES)
    return fd


def _lay_out(folder: str, files: tuple[tuple[str, bytes], ...], group: int | None = None) -> None:
    """Write the submission's files under ``folder``: folders 0755, files read-only (0444); with
    ``group`` (a worker's own gid, when the grader is root), owned by root and that group only:
    folders 0750, files 0440, so no other worker's uid can read them and the worker cannot
    change their modes."""
    folder_mode, file_mode = (0o755, 0o444) if group is None else (0o750, 0o440)
    made_folders = [folder]
    for relative, content in files:
        target = Path(folder, *relative.split("/"))
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            made = Path(folder, parent)
            if not made.is_dir():
                made.mkdir()
                made_folders.append(str(made))
        target.write_bytes(content)
        if group is not None:
            os.chown(target, 0, group)
        os.chmod(target, file_mode)
    for made_folder in made_folders:
        if group is not None:
            os.chown(made_folder, 0, group)
        os.chmod(made_folder, folder_mode)


def _installed(module: str, path: tuple[str, ...]) -> bool:
    """Whether ``module`` can be found on ``path`` (searched as files, nothing is imported)."""
    return _module_files(module, path) is not None


def _module_files(module: str, path: tuple[str, ...]) -> list[str] | None:
    """The files and package folders that make up ``module`` on ``path`` (each package on the way,
    then the module itself), or None when it is not found there (searched as files, nothing is
    imported)."""
    from importlib.machinery import PathFinder

    locations: list[str] | None = list(path)
    files: list[str] = []
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        if locations is None:
            return None
        found = PathFinder.find_spec(".".join(parts[:depth]), locations)
        if found is None:
            return None
        search = found.submodule_search_locations
        locations = list(search) if search is not None else None
        files += [p for p in (locations or []) if isinstance(p, str)]
        if isinstance(found.origin, str) and os.path.isabs(found.origin):
            files.append(found.origin)
    return files


def _environment_fault(runner: SandboxRunner, message: dict[str, object]) -> str | None:
    """Why a failure the worker reports is the grading machine's, not the student's; else None.

    The worker names the module a ``ModuleNotFoundError`` was about (``"module"``) or the file a
    ``PermissionError`` was about (``"file"``). When the worker runs as another user, a module that
    this grader's interpreter finds, or a file inside the interpreter's own folders, may be one the
    sandbox failed to provide. These clues come from the submission's process (it can raise
    ``ModuleNotFoundError(name="torch")`` itself), so they are never taken on its word: the grader
    asks the kernel itself whether the worker's user can read those files (through the readable
    mirror), and only files it cannot read make a grader error; else the student's exception.
    """
    path = runner.runtime.path
    if not path or runner.bwrap:
        return None
    mirrors = runner.runtime.mirrors
    module, file = message.get("module"), message.get("file")
    files = _module_files(module, path) if isinstance(module, str) and _MODULE_NAME.fullmatch(module) else None
    if files and unreadable_by(tuple(dict.fromkeys(_through(f, mirrors) for f in files)), runner.uid, runner.uid):
        return (
            f"module {module!r} is installed on the grading machine but the sandbox could not load it for your code; "
            "this is a problem of the grading machine, not of your code: please tell your instructor"
        )
    roots = path + tuple(copy for _, copy in mirrors)
    if (
        isinstance(file, str)
        and any(file == r or file.startswith(r.rstrip("/") + "/") for r in roots)
        and os.path.lexists(file)
        and unreadable_by((file,), runner.uid, runner.uid)
    ):
        return (
            "a file of the grading machine's Python installation could not be read by the sandbox; "
            "this is a problem of the grading machine, not of your code: please tell your instructor"
        )
    return None


def preflight(limits: Limits | None = None) -> str | None:
    """One line saying why no submission can be graded on this machine, or None when all is well.

    Checks, before the first submission runs, that a GPU worker's device nodes exist and that the
    unprivileged worker user can read every folder the worker searches for modules (through the
    readable mirror where needed).
    """
    limits = limits or Limits()
    if not gpu.keeps_address_limit(limits.device) and not gpu.device_nodes(limits.device):
        return f"--device {limits.device}: no NVIDIA device node (/dev/nvidiactl, /dev/nvidiaN) to give the worker"
    if not _drops_privileges() or _use_bwrap(limits):
        return None
    try:
        runtime = worker_runtime(uid=limits.uid)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the worker's interpreter {sys.executable} could not be started: {exc}"
    if runtime.problems:
        return runtime.problems[0]
    mapped = tuple(_through(p, runtime.mirrors) for p in runtime.path)
    blocked = unreadable_by(mapped, limits.uid, limits.uid)
    if blocked:
        return (
            f"the sandbox user (uid {limits.uid}) cannot read {blocked[0]}, part of the Python installation; "
            "make it readable by all users, install bubblewrap, or run attnscore as a user other than root"
        )
    return None


def spec_exposure(spec_path: str, limits: Limits | None = None) -> str | None:
    """A warning when a submission could read the spec file (and so its hidden expected values):
    neither bubblewrap nor Landlock confines the worker, and the worker's user may read the file."""
    limits = limits or Limits()
    if _use_bwrap(limits) or _use_landlock(limits):
        return None
    if _drops_privileges() and unreadable_by((os.path.abspath(spec_path),), limits.uid, limits.uid):
        return None
    who = f"uid {limits.uid}" if _drops_privileges() else "the grader's own user"
    return (
        f"submissions can read {spec_path} (no bubblewrap, no Landlock, and {who} may read it), "
        "so hidden cases are exposed: keep specs in a folder only the grader can read (chmod 700), "
        "or install bubblewrap"
    )


def _through(path: str, mirrors: tuple[tuple[str, str], ...]) -> str:
    for original, copy in mirrors:
        if path == original or path.startswith(original.rstrip("/") + "/"):
            return copy + path[len(original) :]
    return path


def _inspection(raw: object, names: list[str]) -> dict[str, list[str]] | None:
    """Validate the worker's inspection report: lists of known argument names, else None."""
    if not isinstance(raw, dict):
        return None
    out = {}
    for key in ("mutated", "aliased"):
        items = raw.get(key)
        if not isinstance(items, list) or not all(isinstance(i, str) and i in names for i in items):
            return None
        out[key] = list(dict.fromkeys(items))
    return out


class _Worker:
    """One live worker process, its pipes, and the capped capture of its output."""

    def __init__(self, runner: SandboxRunner) -> None:
        limits = runner.limits
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.out_r, out_w = os.pipe()
        os.set_blocking(self.out_r, False)
        self.out_open = True  # until the output pipe's end of file: a closed pipe is never polled again
        self.wakeups = 0  # times receive() woke up: a worker that closed its output must not spin the grader
        self.runner = runner
        self.buffer = b""
        lib = _worker_lib()
        drop = str(runner.uid) if _drops_privileges() else "-1"
        entry = runner.entry or ""
        if runner.bwrap:
            disk = limits.disk_bytes if _bwrap_sizes_tmpfs() else None  # else checked after each call
            command = [
                *_bwrap_prefix(runner.private, runner.workdir, lib, limits.device, disk),
                sys.executable,
                "-I",
                "-u",
                "-c",
                _BOOTSTRAP,
                "/sandbox/lib",
                "/sandbox/submission",
            ]
            cwd, home, mirrors = "/", "/sandbox/work", []
        else:
            runtime = runner.runtime
            command = [runtime.executable, "-I", "-u", "-c", _BOOTSTRAP, lib, runner.private]
            cwd, home, mirrors = runner.workdir, runner.workdir, [list(pair) for pair in runtime.mirrors]
        config = {
            "mirrors": mirrors,
            "deny": _denied(runtime_mirrors=mirrors),
            "landlock": _use_landlock(limits),
            "seccomp": limits.seccomp is not False,
            "inputs_fd": runner.shared,
            "inputs_bytes": _SHARED_BYTES,
            "device": gpu.worker_device(limits.device),
            "device_files": gpu.device_nodes(limits.device),
        }
        command += [entry, runner.function, str(req_r), str(resp_w), drop, json.dumps(config)]
        try:
            proc: subprocess.Popen[bytes] | TemplateChild | None = None
            if runner.template is not None:
                request = {
                    "folder": runner.private,
                    "entry": entry,
                    "function": runner.function,
                    "uid": int(drop),
                    "workdir": runner.workdir,
                    "disk_bytes": limits.disk_bytes if _disk_bound(limits) == "tmpfs" else 0,
                    "env": _scrubbed_env(runner.workdir, limits.device),
                    "rlimits": _rlimits(limits),
                    "cgroup": runner.cgroup or "",
                    "config": {k: v for k, v in config.items() if k not in ("mirrors", "inputs_fd")},
                }
                try:
                    proc = runner.template.fork(request, (req_r, resp_w, out_w, runner.shared))
                except TemplateError:
                    if limits.template:
                        raise
                    runner.template = None  # the template died: fresh interpreters from now on
                    runner.protections = protections(replace(limits, template=False))
            if proc is None:
                bound = None
                if not runner.bwrap and _drops_privileges() and _disk_bound(limits) == "tmpfs":
                    bound = (runner.workdir, runner.uid, _libc())
                group = runner.cgroup
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out_w,
                    stderr=out_w,
                    cwd=cwd,
                    env=_scrubbed_env(home, limits.device),
                    pass_fds=(req_r, resp_w, runner.shared),
                    start_new_session=True,
                    preexec_fn=lambda: _limit_child(limits, bound, group),
                    close_fds=True,
                )
        finally:
            os.close(req_r)
            os.close(resp_w)
            os.close(out_w)
        self.proc: subprocess.Popen[bytes] | TemplateChild = proc
        # bwrap reports a child killed by a signal as an exit code of 128 + signal; the template
        # reports the worker's own status
        self.bwrap = runner.bwrap and not isinstance(proc, TemplateChild)
        with _LIVE_LOCK:
            _LIVE_WORKERS.add(self.proc.pid)

    def send(self, message: dict[str, object]) -> bool:
        try:
            data = wire.dumps(message)
            view = memoryview(data)
            while view:
                view = view[os.write(self.req_w, view) :]
            return True
        except (BrokenPipeError, OSError):
            return False

    def drain_output(self) -> None:
        """Read what the submission printed so far (at most 4 MiB a time, so that a writer that
        keeps the pipe full cannot hold the grader past a deadline); keep the first bytes."""
        for _ in range(64):
            if not self.out_open:
                return
            try:
                chunk = os.read(self.out_r, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # every writer closed it (the worker closed its stdout and stderr): done with it
                self.out_open = False
                return
            self.runner.keep_output(chunk)

    def receive(self, deadline: float | OwnTime) -> dict[str, object] | str:
        """The next message, or ``"timeout"`` / ``"eof"`` / ``"malformed: ..."``; ``deadline``: a
        monotonic time, or the worker's own time (:class:`~attnscore.sandbox.clock.OwnTime`)."""
        while b"\n" not in self.buffer:
            remaining = (deadline.deadline if isinstance(deadline, OwnTime) else deadline) - time.monotonic()
            if remaining <= 0:
                if not isinstance(deadline, OwnTime) or deadline.extend() <= time.monotonic():
                    return "timeout"
                continue
            watched = [self.resp_r, self.out_r] if self.out_open else [self.resp_r]
            ready, _, _ = select.select(watched, [], [], remaining)
            self.wakeups += 1
            if self.out_r in ready:
                self.drain_output()
            if self.resp_r not in ready:
                continue
            chunk = os.read(self.resp_r, 1 << 20)
            if not chunk:
                return "eof"
            self.buffer += chunk
            if len(self.buffer) > wire.MAX_MESSAGE_BYTES:
                return f"malformed: a message longer than {wire.MAX_MESSAGE_BYTES} bytes"
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return wire.loads(line)
        except wire.WireError as exc:
            return f"malformed: {exc}"

    def kill(self) -> None:
        """Kill the worker's whole process group (and, in bwrap, its PID namespace); reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if isinstance(self.proc, TemplateChild):  # not yet a group of its own right after the fork
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
            pass
        self.drain_output()
        with _LIVE_LOCK:
            _LIVE_WORKERS.discard(self.proc.pid)
        for fd in (self.req_w, self.resp_r, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def exit_description(self) -> tuple[str, str]:
        """``(verdict, text)`` saying how the worker ended."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return Verdict.CRASHED.value, "stopped answering"
        if self.bwrap and code > 128:  # bwrap reports a child killed by a signal as 128 + signal
            code = -(code - 128)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if -code == signal.SIGXCPU:
                return (
                    Verdict.TIMEOUT.value,
                    f"was stopped by {name}: it used up its {self.runner.limits.cpu_s} s of CPU time",
                )
            verdict = Verdict.MEMORY_LIMIT.value if -code == signal.SIGKILL else Verdict.CRASHED.value
            return verdict, f"was killed by {name}"
        return Verdict.CRASHED.value, f"exited with code {code} (os._exit, sys.exit outside a call, or a fatal error)"


class SandboxRunner:
    """Runs calls of ``function`` from the file ``submission`` in a sandboxed worker.

    Use as a context manager; on exit it kills the worker and anything it started, and removes
    its temporary directories.
    """

    def __init__(
        self,
        submission: Submission | str | Path,
        function: str,
        limits: Limits | None = None,
        source: bytes | None = None,
        runtime: WorkerRuntime | None = None,
    ) -> None:
        """``submission``: a :class:`Submission` (files already read), or the path of one ``.py``
        file whose bytes are ``source`` (default: read it now). ``runtime``: the interpreter the
        worker runs (default: this one, through a readable mirror when needed)."""
        if not isinstance(submission, Submission):
            submission = Submission.from_file(Path(submission), source)
        self.submission = submission
        self.entry = submission.entry
        self.function = function
        self.limits = limits or Limits()
        self.device = self.limits.device  # the device the calls' inputs are on, for judging
        self.bwrap = _use_bwrap(self.limits)
        self.runtime = runtime or _runtime(self.limits)
        templated = use_template(self.limits)
        required = bool(self.limits.template)
        self.template = _template_for(self.runtime, required, bwrap=self.bwrap) if templated else None
        # A template that could not start means fresh workers (a fresh bwrap each, with bwrap)
        fresh = templated and self.template is None
        self.protections = protections(replace(self.limits, template=False) if fresh else self.limits)
        self.uid, self._uid_lock = self.limits.uid, -1
        if _drops_privileges():  # first: nothing to clean up if every uid is taken
            self.uid, self._uid_lock = _claim_uid(self.limits)
        self.cgroup = self._make_cgroup()
        stage = self.template.stage if self.template is not None else None  # inside the template's bwrap
        _sweep_dead_runs(self.limits.uid)
        self.workdir = tempfile.mkdtemp(prefix=run_prefix("worker"), dir=stage)
        # The worker reads a private copy of the files: the folder they came from (maybe next to
        # specs or other students' files) stays out of reach for another uid.
        self.private = tempfile.mkdtemp(prefix=run_prefix("submission"), dir=stage)
        self.cleanup_problem: str | None = None  # what close() could not remove: the student's note
        _lay_out(self.private, submission.files, self.uid if _drops_privileges() else None)
        # Call inputs live in memory shared with the worker: the grader reads them back after each
        # call, so whether the submission changed them in place is the grader's finding.
        self.shared = _shared_memory()
        if _drops_privileges():
            os.chown(self.workdir, self.uid, self.uid)
            _become_subreaper()
        os.chmod(self.workdir, 0o700)
        self.output = bytearray()
        self.output_dropped = 0
        self.worker: _Worker | None = None
        self.load_failure: CallFailure | None = None
        # The last call's inspection: inputs changed in place (read from the shared memory by this
        # process) and inputs the output shares memory with (the worker's own report).
        self.last_inspection: dict[str, list[str]] | None = None
        self.last_names: list[str] = []
        self.started = time.monotonic()
        self.calls = 0
        self.starts = 0
        self.setup_spent = 0.0
        self.spent = 0.0  # the submission's own time in imports and calls (the total limit's clock)

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._kill_worker()
        if self._uid_lock >= 0:  # the uid is free for the next worker once nothing of it runs
            os.close(self._uid_lock)
            self._uid_lock = -1
        if self.shared >= 0:
            os.close(self.shared)
            self.shared = -1
        if self.cgroup is not None:
            cgroup.remove(self.cgroup)
            self.cgroup = None
        problems = [p for p in (remove_tree(self.workdir), remove_tree(self.private)) if p is not None]
        if problems and self.cleanup_problem is None:
            self.cleanup_problem = "; ".join(problems)

    def keep_output(self, chunk: bytes) -> None:
        room = self.limits.output_chars * 4 - len(self.output)
        if room > 0:
            self.output += chunk[:room]
        self.output_dropped += max(0, len(chunk) - max(room, 0))

    def captured_output(self) -> bytes:
        """The submission's own stdout/stderr (raw bytes, capped, with a note if some was dropped)."""
        data = bytes(self.output)
        if self.output_dropped:
            data += f"\n[... {self.output_dropped} more bytes of output not kept]".encode()
        return data

    def output_text(self) -> str:
        """:meth:`captured_output` as a report shows it: cleaned, at most ``limits.output_chars``
        characters (:func:`attnscore.boundary.untrusted.clean_text`)."""
        return clean_text(self.captured_output(), self.limits.output_chars)

    @property
    def keywords(self) -> Mapping[str, object]:
        """Keyword arguments fixed on the submission's function: none (it is called with its inputs alone)."""
        return {}

    def _make_cgroup(self) -> str | None:
        """This submission's cgroup v2 group (one CPU, memory, processes), or None where there is
        none to be had (:func:`_cgroup_base`)."""
        base = _cgroup_base()
        if not isinstance(base, cgroup.Base):
            return None
        memory = self.limits.memory_bytes if gpu.keeps_address_limit(self.limits.device) else None
        name = f"{run_prefix('cgroup')}{next(_CGROUP_NUMBERS)}"
        return cgroup.make(base, name, memory, self.limits.processes)

    def _own_uid(self) -> int | None:
        """The uid only this runner's worker uses (the grader is root), else None."""
        return self.uid if _drops_privileges() else None

    def _kill_worker(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        if _drops_privileges():
            _kill_uid(self.uid)
            kernel_objects.remove_objects_of(self.uid)  # SysV IPC, POSIX queues, keyrings: they outlive processes
            if self.template is None:  # a template's workers' orphans go to the template, which reaps them
                _sweep_orphans(self.uid)
            _remove_files_of(self.uid, keep=self.workdir)

    def _start(self) -> CallFailure | None:
        """Start a worker and import the submission, within what is left of the setup budget.

        Every start of the submission's worker (the first, and each restart after a call that
        timed out or crashed) spends one budget of ``load_timeout_s``: a slow import followed by
        hanging calls cannot cost the grader a full import per case.
        """
        budget = self.limits.load_timeout_s - self.setup_spent
        if budget <= 0:
            return CallFailure(
                Verdict.TIMEOUT.value,
                f"not run: starting your code again would exceed its setup time of {self.limits.load_timeout_s:g} s "
                f"(importing it {self.starts} times took {self.setup_spent:.1f} s)",
            )
        if self.template is not None:  # the template's own start (loading torch) is not the submission's time
            try:
                self.template.wait_ready()
            except TemplateError:
                pass  # the fork below finds out again (and falls back to fresh interpreters unless required)
        began = time.monotonic()
        try:
            worker = _Worker(self)
        except TemplateError as exc:  # only with Limits(template=True): no fallback wanted
            self.load_failure = CallFailure(Verdict.GRADER_ERROR.value, f"the worker could not be started: {exc}")
            return self.load_failure
        self.worker = worker
        self.starts += 1
        clock = OwnTime(worker.proc.pid, budget, self._own_uid(), fresh=True, began=began)
        hello = worker.receive(clock)
        # Before "importing" only the worker has run: it alone may report the machine's faults.
        # From "importing" on the submission runs in the worker and may write replies itself.
        importing = isinstance(hello, dict) and hello.get("type") == "importing"
        if importing:
            hello = worker.receive(clock)
        self.setup_spent += clock.spent()
        self.spent += clock.spent()
        if importing and isinstance(hello, dict) and hello.get("type") == "ready":
            return self._disk_failure()
        if hello == "timeout":
            failure = CallFailure(
                Verdict.TIMEOUT.value,
                f"importing your file took longer than {self.limits.load_timeout_s:g} s"
                if self.starts == 1
                else f"importing your file again used up its setup time of {self.limits.load_timeout_s:g} s",
                "submission",
            )
        elif hello == "eof":
            verdict, text = worker.exit_description()
            if verdict == Verdict.MEMORY_LIMIT.value:
                verdict = Verdict.CRASHED.value
            failure = CallFailure(verdict, f"your file crashed while being imported: the process {text}", "submission")
        elif (
            isinstance(hello, dict)
            and hello.get("type") == "load_error"
            and hello.get("verdict") in _LOAD_VERDICTS[importing]
        ):
            failure = self._failure(hello, "submission")
        elif importing and isinstance(hello, dict) and hello.get("type") == "load_error":
            failure = CallFailure(
                Verdict.CRASHED.value,
                "the process running your file reported a failure of the grading machine while your file was being "
                "imported, which is not trusted (only the worker speaks before your code runs)",
                "submission",
            )
        else:
            failure = CallFailure(
                Verdict.CRASHED.value, "the worker sent an unexpected message while importing your file", "submission"
            )
        self._kill_worker()
        self.load_failure = failure
        return failure

    def _disk_failure(self) -> CallFailure | None:
        """The working folder holds more than ``disk_bytes`` (where no tmpfs bounds it, the worker
        writes the grader's own disk): the worker is killed, its files removed, and this and every
        later call fail with a memory-limit verdict that says so; else None."""
        limit = self.limits.disk_bytes
        if tree_usage(self.workdir, stop_above=limit) <= limit:
            return None
        self._kill_worker()
        try:
            for entry in os.listdir(self.workdir):
                remove_tree(os.path.join(self.workdir, entry))
        except OSError:
            pass
        self.load_failure = CallFailure(
            Verdict.MEMORY_LIMIT.value,
            f"your code wrote more than {limit / 1024**2:g} MiB into its working folder (the limit for all its "
            "files together), so it was stopped",
            "submission",
        )
        return self.load_failure

    def _share_inputs(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str]
    ) -> list[dict[str, Any]] | None:
        """Write each input's exact bytes (in the tested dtype) into the shared memory; the layout.

        An input with a memory layout is written as its view's storage, with the strides and
        storage offset the worker rebuilds the view with (``as_strided``)."""
        layout, offset = [], 0
        for name, array in args.items():
            kind = "bool" if array.dtype == np.bool_ else dtype
            item: dict[str, Any] = {"name": name, "dtype": kind, "shape": list(array.shape)}
            if name in layouts:
                form = strided_form(array, layouts[name])
                tensor = to_torch(form.storage, kind)
                item.update(strides=list(form.strides), storage_offset=form.offset, count=int(form.storage.size))
            else:
                tensor = to_torch(array, kind).contiguous().reshape(-1)
            raw = tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
            offset = -(-offset // 64) * 64
            if offset + len(raw) > _SHARED_BYTES:
                return None
            os.pwrite(self.shared, raw, offset)
            item.update(offset=offset, raw=raw)
            layout.append(item)
            offset += len(raw)
        return layout

    def _failure(self, message: dict[str, object], scope: str) -> CallFailure:
        """A failure the worker reported, as a verdict; the machine's faults become grader errors."""
        text = clean_text(str(message.get("message", "")), 2000)
        verdict = str(message["verdict"])
        if verdict == Verdict.EXCEPTION.value:
            fault = _environment_fault(self, message)
            if fault is not None:
                return CallFailure(Verdict.GRADER_ERROR.value, f"{text} ({fault})", scope)
            name = message.get("exception")
            exception = name if isinstance(name, str) and name.isidentifier() and len(name) <= 100 else ""
            return CallFailure(verdict, text, scope, exception)
        return CallFailure(verdict, text, scope)

    def call(self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str] | None = None) -> Outcome:
        """Make one call (inputs in ``layouts``, see :mod:`attnscore.boundary.layouts`); never raises for
        anything the submission does."""
        self.calls += 1
        if self.load_failure is not None:
            return self.load_failure
        if self.spent > self.limits.total_timeout_s:
            return CallFailure(
                Verdict.TIMEOUT.value,
                f"not run: the submission used up its total time limit of {self.limits.total_timeout_s:g} s",
            )
        if self.worker is None:
            failure = self._start()
            if failure is not None:
                return failure
        worker = self.worker
        if worker is None:  # pragma: no cover - _start set it
            return CallFailure(Verdict.GRADER_ERROR.value, "the worker could not be started")
        self.last_inspection = None
        self.last_names = list(args)
        layout = self._share_inputs(args, dtype, layouts or {})
        if layout is None:
            return CallFailure(Verdict.GRADER_ERROR.value, f"the inputs exceed the sandbox's {_SHARED_BYTES} bytes")
        request = {
            "type": "call",
            "id": self.calls,
            "dtype": dtype,
            "device": gpu.worker_device(self.limits.device),
            "names": list(args),
            "inputs": [{k: v for k, v in item.items() if k != "raw"} for item in layout],
        }
        reply: dict[str, object] | str = "eof"
        if worker.send(request):
            clock = OwnTime(worker.proc.pid, self.limits.call_timeout_s, self._own_uid())
            reply = worker.receive(clock)
            self.spent += clock.spent()
        outcome = self._outcome(reply, worker)
        disk = self._disk_failure()
        if disk is not None:
            return disk
        if not isinstance(outcome, CallFailure):
            # mutation: the grader's own reading of the shared memory, or the worker's inspection
            # at the moment the call returned (values, shape, strides; a claim of mutation only
            # costs the submission itself, a claim of none is never taken on the worker's word)
            claimed: dict[str, list[str]] = self.last_inspection or {"mutated": [], "aliased": []}
            seen = {i["name"] for i in layout if os.pread(self.shared, len(i["raw"]), i["offset"]) != i["raw"]}
            changed = [n for n in self.last_names if n in seen or n in claimed["mutated"]]
            self.last_inspection = {"mutated": changed, "aliased": claimed["aliased"]}
        if (
            isinstance(outcome, CallFailure)
            and outcome.verdict
            in (
                Verdict.TIMEOUT.value,
                Verdict.CRASHED.value,
                Verdict.MEMORY_LIMIT.value,
                Verdict.GRADER_ERROR.value,
            )
            or (isinstance(outcome, CallFailure) and gpu.restart_after(self.device, outcome.verdict, outcome.message))
        ):
            self._kill_worker()  # the next call starts a fresh worker (and a clean CUDA context)
        return outcome

    def _outcome(self, reply: dict[str, object] | str, worker: _Worker) -> Outcome:
        if reply == "timeout":
            return CallFailure(
                Verdict.TIMEOUT.value,
                f"the call took longer than {self.limits.call_timeout_s:g} s (an infinite loop, or far too slow)",
            )
        if reply == "eof":
            verdict, text = worker.exit_description()
            return CallFailure(verdict, f"the process running your code {text} during the call")
        if isinstance(reply, str):
            return CallFailure(Verdict.CRASHED.value, f"the process running your code sent a {reply}")
        if reply.get("id") != self.calls:
            return CallFailure(Verdict.CRASHED.value, "the process running your code answered out of turn")
        if reply.get("type") == "result":
            self.last_inspection = _inspection(reply.get("inspection"), self.last_names)
            try:
                return wire.decode_received(reply.get("value"))
            except wire.WireError as exc:
                return CallFailure(Verdict.BAD_RETURN_TYPE.value, f"the returned value could not be read back: {exc}")
        if reply.get("type") == "failure" and reply.get("verdict") == Verdict.GRADER_ERROR.value:
            # After the submission is imported, the worker speaks for it: a "grader error" it sends
            # cannot be told from a forged one, so it is never taken as the machine's fault.
            return CallFailure(
                Verdict.CRASHED.value,
                "the process running your code reported a failure of the grader, which is not trusted",
            )
        if reply.get("type") == "failure" and reply.get("verdict") in _WORKER_VERDICTS:
            return self._failure(reply, "call")
        return CallFailure(Verdict.CRASHED.value, "the process running your code sent an unexpected message")
