"""The sandbox plan: every isolation decision for a submission, made once from the options and the machine.

:class:`attnscore.sandbox.limits.Limits` says what is asked for (``bwrap``, ``template``,
``landlock``, ``seccomp``: ``None`` where the machine has it, ``True`` required, ``False`` never;
``device``); the machine says what it has (bubblewrap that can make namespaces, a root grader,
the kernel's Landlock ABI, a tmpfs working folder, cgroup v2). :func:`resolve` puts both together
into a frozen :class:`SandboxPlan`, which everything that starts, limits or describes a worker
reads; nothing below it asks the options or the machine again. Its :attr:`SandboxPlan.protections`
is the one line naming the active layers, reported with every result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from attnscore.boundary import kernel_objects, landlock
from attnscore.boundary.template_server import WORKER_NICE
from attnscore.sandbox import bwrap, cgroup, gpu, machine, uids
from attnscore.sandbox.limits import Limits

__all__ = ["SandboxPlan", "TemplateShape", "ask_ahead", "protections", "resolve", "template_shape", "use_template"]


@dataclass(frozen=True)
class SandboxPlan:
    """How one submission's workers are sandboxed on this machine (see :func:`resolve`).

    Attributes:
        limits: the options the plan was resolved from (the resource limits are read from it).
        bwrap: workers run inside bubblewrap (a fresh ``bwrap`` each, or the template's one).
        template: workers are forked from the worker template
            (:mod:`attnscore.sandbox.template`), else each is a fresh ``python -I``.
        template_required: ``Limits(template=True)``: a template that cannot start is an error,
            not a fallback to fresh interpreters.
        landlock_abi: the Landlock ABI the worker confines itself with; 0 for none.
        seccomp: the worker refuses itself network sockets, System V / POSIX IPC and keyrings.
        drops_uid: the grader is root, so each worker runs as a uid of its own
            (:mod:`attnscore.sandbox.uids`).
        address_limit: the worker gets ``RLIMIT_AS`` and the memfd refusal: not on a GPU
            (:func:`attnscore.sandbox.gpu.keeps_address_limit`).
        disk: how ``limits.disk_bytes`` holds: ``"tmpfs"`` (a size-bound tmpfs working folder:
            bwrap's own per fresh worker, or a mount namespace a root grader's worker makes) or
            ``"checked"`` (the folder's usage measured after the import and each call).
        cgroups: where the workers' cgroup v2 groups are made, or why there are none.
        protections: one line naming the layers above, for results and the CLI.
    """

    limits: Limits
    bwrap: bool
    template: bool
    template_required: bool
    landlock_abi: int
    seccomp: bool
    drops_uid: bool
    address_limit: bool
    disk: str
    cgroups: cgroup.Base | str
    protections: str = ""

    @property
    def device(self) -> str:
        """Where the calls run: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
        return self.limits.device

    @property
    def landlock(self) -> bool:
        """The worker confines itself with Landlock."""
        return self.landlock_abi > 0

    def without_template(self) -> SandboxPlan:
        """The plan once the template could not start (and was not required): fresh workers, a
        fresh ``bwrap`` each where bubblewrap is used (so the disk bound is decided again)."""
        return _finish(self.limits, self.bwrap, False, self.drops_uid, self.address_limit)


def resolve(limits: Limits | None = None) -> SandboxPlan:
    """Decide every layer for ``limits`` on this machine (asked each time: nothing is cached here
    but the machine's own probes).

    Raises:
        RuntimeError: ``Limits(bwrap=True)`` where bubblewrap is not installed or cannot create
            namespaces; ``Limits(template=True)`` where bubblewrap is used and the template cannot
            be (a grader that is not root, or a GPU): pass ``bwrap=False`` too.
    """
    limits = limits or Limits()
    _wait_for_asked()
    return _finish(limits, *_first_decisions(limits))


@dataclass(frozen=True)
class TemplateShape:
    """What starting a worker template needs of the plan (:func:`template_shape`): whether workers
    are forked from one (``template``), inside bubblewrap (``bwrap``), dropping to a uid of their
    own (``drops_uid``), and the options they came from (``limits``)."""

    limits: Limits
    bwrap: bool
    template: bool
    drops_uid: bool


def template_shape(limits: Limits | None = None) -> TemplateShape:
    """The decisions of :func:`resolve` that starting the worker template needs, asked of the
    machine without its slow probes (the working folder's tmpfs and the IPC namespace, each a
    short child process, which only the rest of the plan needs): bubblewrap's own probe only.

    Raises:
        RuntimeError: as :func:`resolve`.
    """
    limits = limits or Limits()
    use_bwrap, template, drops_uid, _ = _first_decisions(limits)
    return TemplateShape(limits, use_bwrap, template, drops_uid)


_ASKED: list[threading.Thread] = []
_ASKED_LOCK = threading.Lock()


def _slow_probes() -> list[Callable[[], bool]]:
    """The machine's probes that each start a child process and wait for it: the tmpfs working
    folder and the IPC namespace, asked only of a root grader (for anyone else both answer at once)."""
    return [machine.mounts_work_folder, kernel_objects.ipc_namespaces_available] if uids.drops_privileges() else []


def ask_ahead() -> None:
    """Ask the machine's slow probes now, side by side, each in a background thread that waits for
    its child process, while this process goes on (a command that starts the worker template first,
    which needs only :func:`template_shape`, then imports and loads the spec meanwhile). Every
    probe keeps its answer for the process (``functools.cache``): :func:`resolve` waits for the
    threads asked here, then reads the answers; a probe answered before is not asked again. A
    probe that fails in its thread is asked again by :func:`resolve`, where its error is seen."""
    with _ASKED_LOCK:
        for probe in _slow_probes():
            if _answered(probe):
                continue
            # not a daemon: a command that ends early still lets its probes finish and remove their
            # scratch folders (the interpreter waits for them at exit; each takes about 0.1 s)
            thread = threading.Thread(target=_quietly, args=(probe,), name="attnscore-probe", daemon=False)
            thread.start()
            _ASKED.append(thread)


def _answered(probe: Callable[[], bool]) -> bool:
    """Whether ``probe`` (a ``functools.cache`` function) has its answer already."""
    info = getattr(probe, "cache_info", None)
    return info is not None and info().currsize > 0


def _quietly(probe: Callable[[], bool]) -> None:
    try:
        probe()
    except Exception:  # noqa: BLE001 - asked again by resolve, in the caller's thread: raised there
        pass


def _wait_for_asked() -> None:
    """Wait for the probes :func:`ask_ahead` started (none: at once), so that each is asked once."""
    with _ASKED_LOCK:
        asked = list(_ASKED)
        _ASKED.clear()
    for thread in asked:
        thread.join()


def use_template(limits: Limits) -> bool:
    """Whether workers are forked from the worker template (see :class:`Limits`).

    With bubblewrap the template runs inside one ``bwrap`` when the grader is root and grades on
    the CPU (each worker then still drops to a uid of its own); otherwise each worker is a fresh
    ``bwrap``: without root every worker would share one uid, and a GPU worker needs its own
    device nodes.

    Raises:
        RuntimeError: as :func:`resolve`.
    """
    return _first_decisions(limits)[1]


def protections(limits: Limits | None = None) -> str:
    """One line naming the isolation layers active on this machine, for results and the CLI
    (:attr:`SandboxPlan.protections`)."""
    return resolve(limits).protections


def _first_decisions(limits: Limits) -> tuple[bool, bool, bool, bool]:
    """``(bwrap, template, drops_uid, address_limit)``: the options that decide the others."""
    use_bwrap = _bwrap(limits)
    drops_uid = uids.drops_privileges()
    address_limit = gpu.keeps_address_limit(limits.device)
    return use_bwrap, _template(limits, use_bwrap, drops_uid, address_limit), drops_uid, address_limit


def _bwrap(limits: Limits) -> bool:
    if limits.bwrap is False:
        return False
    available = bwrap.bwrap_available()
    if limits.bwrap and not available:
        raise RuntimeError("Limits(bwrap=True) but bwrap is not installed or cannot create namespaces")
    return available


def _template(limits: Limits, use_bwrap: bool, drops_uid: bool, address_limit: bool) -> bool:
    if limits.template is False:
        return False
    if use_bwrap and not (drops_uid and address_limit):
        if limits.template:
            raise RuntimeError(
                "Limits(template=True) with bubblewrap needs a grader running as root and device cpu; "
                "pass bwrap=False too"
            )
        return False
    return True


def _finish(limits: Limits, use_bwrap: bool, template: bool, drops_uid: bool, address_limit: bool) -> SandboxPlan:
    """The plan with the decisions that follow from the first ones, and its protections line."""
    if use_bwrap and not template:
        disk = "tmpfs" if bwrap.sizes_tmpfs() else "checked"
    else:
        disk = "tmpfs" if machine.mounts_work_folder() else "checked"
    plan = SandboxPlan(
        limits=limits,
        bwrap=use_bwrap,
        template=template,
        template_required=bool(limits.template),
        landlock_abi=landlock.abi_version() if limits.landlock is not False else 0,
        seccomp=limits.seccomp is not False,
        drops_uid=drops_uid,
        address_limit=address_limit,
        disk=disk,
        cgroups=machine.cgroup_base(),
    )
    return replace(plan, protections=_describe(plan))


def _describe(plan: SandboxPlan) -> str:
    """The protections line of ``plan``."""
    limits, abi = plan.limits, plan.landlock_abi
    if plan.bwrap and plan.template:
        first = "bwrap around the worker template: no network, read-only fs without specs, PIDs of the machine"
    elif plan.bwrap:
        first = "bwrap: no network, own PIDs, read-only fs without specs"
    elif abi:
        first = "no bwrap: shared PID namespace"
    else:
        first = "no bwrap and no landlock: a readable filesystem"
    layers = [first]
    if abi:
        scope = ["fs without specs"] + (["no tcp"] if abi >= 4 else []) + (["no signals out"] if abi >= 6 else [])
        layers.append(f"landlock v{abi}: {', '.join(scope)}")
    if plan.drops_uid:
        layers.append(f"a uid of its own per worker ({limits.uid}-{limits.uid + uids.UID_SLOTS - 1})")
        layers.append(_kernel_objects_layer(plan))
    elif abi >= 6:
        layers.append("same uid as the grader (signals to it blocked by landlock)")
    else:
        layers.append("same uid as the grader (not root: the worker could signal the grader)")
    if plan.seccomp:
        memfds = ", memfds" if plan.address_limit else ""
        layers.append(f"seccomp: no network sockets, SysV/POSIX IPC, keyrings{memfds}")
    start = "forked from a clean worker template" if plan.template else "python -I"
    layers.append(_resource_layers(plan))
    if plan.address_limit:
        memory = "memory (address space; memfds refused)" if plan.seccomp else "memory (address space)"
        layers.append(f"rlimits (cpu, {memory}, processes, files); scrubbed env; {start}; process group kill")
    else:
        _, index = gpu.parse_device(limits.device)
        layers.append(f"GPU {index or 0} only (CUDA_VISIBLE_DEVICES; TF32 off)")
        layers.append(
            f"rlimits (cpu, processes, files; no address-space limit on a GPU worker); scrubbed env; {start}; "
            "process group kill"
        )
    return "; ".join(layers)


def _kernel_objects_layer(plan: SandboxPlan) -> str:
    """What keeps the kernel objects of one worker (System V IPC, POSIX queues, keyrings) from the
    next one (:mod:`attnscore.boundary.kernel_objects`); the grader is root."""
    fresh_bwrap = plan.bwrap and not plan.template
    own = "an IPC namespace per worker" if fresh_bwrap or kernel_objects.ipc_namespaces_available() else ""
    return ", ".join(filter(None, (own, "its IPC objects and keys removed with its uid's processes")))


def _resource_layers(plan: SandboxPlan) -> str:
    """The protections line's part on shares of the machine: the CPU share and memory (a cgroup
    v2 group per worker, else the fallbacks) and how the working folder's size holds."""
    limits, base = plan.limits, plan.cgroups
    if isinstance(base, cgroup.Base):
        memory = f", memory {limits.memory_bytes / 1024**3:g} GiB" if plan.address_limit else ""
        share = f"cgroup v2 per worker: 1 CPU{memory} (memfds and tmpfs too), {limits.processes} processes"
    else:
        session = "its own session's CPU share (autogroup), " if machine.autogroups() else ""
        share = f"cpu: {session}nice {WORKER_NICE} (no cgroup: {base}; memfds outside the memory limit)"
    disk = f"{limits.disk_bytes / 1024**2:g} MiB"
    if plan.disk == "tmpfs":
        return f"{share}; disk: a {disk} tmpfs working folder"
    files = f"files {limits.file_bytes / 1024**2:g} MiB each"
    return f"{share}; disk: working folder checked after each call ({disk}; {files})"
