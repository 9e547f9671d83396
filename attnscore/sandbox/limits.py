"""The options of one submission's sandbox: its resource limits and which isolation layers to ask for.

The tri-state options (``bwrap``, ``landlock``, ``seccomp``, ``template``: ``None`` for "where the
machine has it", ``True`` required, ``False`` never) are decided once, with the machine's own
answers, into a :class:`attnscore.sandbox.plan.SandboxPlan`; nothing else reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


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
        compile_s: own time the submission's ``torch.compile`` compilations may take in all, over
            and above each call's ``call_timeout_s`` (and the setup time of the import): a cold
            compilation takes seconds, which must not time out a correct call. The worker says
            when each compilation starts and ends (Dynamo's callbacks); the time in between is
            taken from this allowance, and a call that runs out of it while compiling times out
            saying so. Compilation time still counts towards ``total_timeout_s``, and the
            worker's ``cpu_s`` is raised by this much.
        memory_bytes: address-space limit of the worker (RLIMIT_AS).
        cpu_s: CPU seconds for one worker process (RLIMIT_CPU).
        processes: processes and threads of the worker's user (RLIMIT_NPROC; enforced when the
            worker runs as another user, i.e. when the grader is root).
        file_bytes: largest file the worker may write (RLIMIT_FSIZE).
        disk_bytes: all the worker may hold in its working folder together: a tmpfs of that size
            where a mount namespace can be had (bubblewrap, or a root grader), else the folder's
            usage checked after the import and after each call (see :func:`attnscore.sandbox.plan.protections`).
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
    compile_s: float = 120.0
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
