"""What a worker process and the reading of its replies need of the runner that owns them.

:class:`attnscore.sandbox.runner.SandboxRunner` is a :class:`WorkerHost`: it starts a
:class:`attnscore.sandbox.worker_process.WorkerProcess` for itself and turns its replies into
outcomes (:mod:`attnscore.sandbox.outcome`). Those two modules name only this protocol, so that
they do not import the runner that imports them.
"""

from __future__ import annotations

from typing import Protocol

from attnscore.sandbox.limits import Limits
from attnscore.sandbox.plan import SandboxPlan
from attnscore.sandbox.runtime import WorkerRuntime
from attnscore.sandbox.template import WorkerTemplate

__all__ = ["WorkerHost"]


class WorkerHost(Protocol):
    """The runner's state a worker start reads (and, when the template fails, changes: ``template``,
    ``plan``, ``protections``) and the reading of its replies reads (``calls``, ``last_names``, ...).

    Attributes:
        entry: the submission's entry file (relative), or None to let the worker choose.
        function: the graded function's name (``""``: each call names its own, an assignment).
        functions: an assignment's functions (for choosing the entry file), else empty.
        last_function: the function the current call names (``""``: :attr:`function`).
        traps: the dotted names of the calls the worker watches for (a spec's rules).
        limits: the submission's limits.
        runtime: the interpreter the worker runs.
        template: the worker template forks come from, or None for fresh interpreters.
        plan: every sandbox layer, decided once (:class:`attnscore.sandbox.plan.SandboxPlan`).
        protections: the plan's protections line, for results.
        uid: the worker's uid.
        cgroup: the submission's cgroup folder, or None.
        workdir, private: the worker's working folder and its private copy of the files.
        shared: the shared-memory file descriptor of the call inputs (-1 once closed).
        last_names: the parameter names of the current call.
        calls, starts: the calls made and the workers started so far.
        compiling_at_timeout: whether the last wait timed out during a compilation.
    """

    entry: str | None
    function: str
    functions: tuple[str, ...]
    last_function: str
    traps: tuple[str, ...]
    limits: Limits
    runtime: WorkerRuntime
    template: WorkerTemplate | None
    plan: SandboxPlan
    protections: str
    uid: int
    cgroup: str | None
    workdir: str
    private: str
    shared: int
    last_names: list[str]
    calls: int
    starts: int
    compiling_at_timeout: bool

    def keep_output(self, chunk: bytes) -> None:
        """Keep ``chunk`` of the worker's output (up to the output limit)."""
