"""Starting worker processes: the limits a fresh worker is given between fork and exec, its
environment, the interpreter it runs, and this grader's worker templates (one per interpreter and
sandbox shape, started on first use and shared by grader processes forked after it)."""

from __future__ import annotations

import os
import resource
import signal
import sys
import tempfile
import threading
from typing import Any

from attnscore.boundary import kernel_objects
from attnscore.boundary.template_server import bound_folder, lower_priority
from attnscore.sandbox import cgroup, gpu
from attnscore.sandbox.bwrap import template_prefix
from attnscore.sandbox.folders import sweep_dead_runs, worker_lib
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.plan import SandboxPlan, TemplateShape, ask_ahead, resolve, template_shape
from attnscore.sandbox.removal import remove_tree, run_prefix
from attnscore.sandbox.runtime import WorkerRuntime, worker_runtime
from attnscore.sandbox.template import TemplateError, WorkerTemplate

__all__ = [
    "BOOTSTRAP",
    "WORKER_PATH",
    "cpu_seconds",
    "limit_child",
    "rlimits",
    "runtime_for",
    "scrubbed_env",
    "template_for",
    "warm_template",
]

BOOTSTRAP = "; ".join(
    (
        "import sys",
        "sys.path.insert(0, sys.argv[1])",
        "del sys.argv[1]",
        "from attnscore.boundary.worker import main",
        "main(sys.argv[1:])",
    )
)


WORKER_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The worker's ``PATH``: where ``torch.compile`` finds its C++ compiler (``g++``)."""


def rlimits(plan: SandboxPlan) -> list[tuple[int, int, int]]:
    """``(resource, soft, hard)`` for every limit a worker gets (both paths); a GPU worker gets no
    address-space limit (:attr:`SandboxPlan.address_limit`)."""
    limits = plan.limits
    memory = [(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes)]
    return [
        *(memory if plan.address_limit else []),
        (resource.RLIMIT_CPU, cpu_seconds(limits), cpu_seconds(limits) + 5),
        (resource.RLIMIT_NPROC, limits.processes, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]


def cpu_seconds(limits: Limits) -> int:
    """A worker's CPU seconds: ``cpu_s`` and the compile allowance (``compile_s``)."""
    return int(limits.cpu_s + max(0.0, limits.compile_s) + 0.999)


def limit_child(
    plan: SandboxPlan, bound: tuple[str, int, Any] | None = None, group: str | None = None
) -> None:  # between fork and exec
    """Set the worker's rlimits and CPU share; with ``group``, join that cgroup first; with
    ``bound`` (``(workdir, uid, libc)``, a root grader), put a tmpfs of ``plan.limits.disk_bytes`` at
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
        if bound_folder(workdir, uid, plan.limits.disk_bytes, libc):
            os.chdir(workdir)  # Popen entered the folder below the mount
    for which, soft, hard in rlimits(plan):
        resource.setrlimit(which, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead of killing


def scrubbed_env(home: str, device: str | None = None) -> dict[str, str]:
    """The worker's whole environment; with ``device``, the GPU it may see (:func:`gpu.worker_env`).

    ``home`` is the worker's private working folder (removed with the worker): its home, its
    temporary folder and the caches of ``torch.compile`` (Inductor's and Triton's), so nothing
    compiled for one submission is where another can find it. Inductor compiles in the worker's
    own process (one compile thread: no pool of subprocesses outside the worker's limits), and
    takes the vector instructions the CPU reports as usable (``TORCHINDUCTOR_VEC_ISA_OK``): its
    own check would start the interpreter again, which the worker's user may not be able to
    execute (an interpreter under root's 0700 home is read through a mirror). It precompiles no
    headers (``TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS``): torch's preprocessed headers alone
    are larger than a worker's file and disk limits."""
    cache = os.path.join(home, ".cache")
    return {
        **(gpu.worker_env(device) if device is not None else {}),
        "PATH": WORKER_PATH,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "XDG_CACHE_HOME": cache,
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "torchinductor"),
        "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "TORCHINDUCTOR_VEC_ISA_OK": "1",
        "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
    }


def runtime_for(plan: SandboxPlan | TemplateShape) -> WorkerRuntime:
    """The interpreter workers run: through a readable mirror when they drop to another uid
    outside bubblewrap (inside it, the view's own folders are readable)."""
    if plan.drops_uid and not plan.bwrap:
        return worker_runtime(uid=plan.limits.uid)
    return WorkerRuntime(sys.executable, ())


_TEMPLATES: dict[tuple[int, str, tuple[tuple[str, str], ...], bool], WorkerTemplate | str] = {}
_TEMPLATES_LOCK = threading.Lock()


def _start_template(runtime: WorkerRuntime, bwrap: bool) -> WorkerTemplate:
    """A new worker template for ``runtime`` (it loads torch while the grader goes on); with
    ``bwrap``, inside one bubblewrap sandbox with a staging folder for the submissions."""
    lib, config, env = worker_lib(), {"mirrors": [list(m) for m in runtime.mirrors]}, scrubbed_env("/")
    if not bwrap:
        return WorkerTemplate(runtime.executable, lib, config, env)
    sweep_dead_runs()
    stage = tempfile.mkdtemp(prefix=run_prefix("stage"))
    os.chmod(stage, 0o711)  # slots reach their own folders in it, and list nothing
    try:
        return WorkerTemplate(
            runtime.executable, lib, config, env, prefix=tuple(template_prefix(stage, lib)), stage=stage
        )
    except OSError:
        remove_tree(stage)
        raise


def template_for(runtime: WorkerRuntime, required: bool, bwrap: bool = False) -> WorkerTemplate | None:
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
    the limits do not use a template, or not ``wait``: then the first submission finds out).

    Without ``wait`` (a command's first step) the template starts after bubblewrap's probe alone
    (:func:`~attnscore.sandbox.plan.template_shape`), and the machine's slower probes run side by
    side in the background (:func:`~attnscore.sandbox.plan.ask_ahead`) while this process goes on.
    The template is always started from the calling thread: bubblewrap's ``--die-with-parent``
    ends it with the thread that started it."""
    if wait:
        plan: SandboxPlan | TemplateShape = resolve(limits)
    else:
        ask_ahead()
        plan = template_shape(limits)
    if not plan.template:
        return None
    try:
        template = template_for(runtime_for(plan), required=True, bwrap=plan.bwrap)
        if wait and template is not None:
            template.wait_ready()
    except TemplateError as exc:
        return str(exc)
    return None
