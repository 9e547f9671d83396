"""One live worker process as the grader sees it: started (forked from the template, or a fresh
``python -I``, in bubblewrap or not, as the runner's :class:`~attnscore.sandbox.plan.SandboxPlan`
says), its request and reply pipes, the capped capture of its output, and how it ended."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attnscore.boundary import wire
from attnscore.boundary.verdict import Verdict
from attnscore.sandbox import bwrap, gpu, machine, uids
from attnscore.sandbox.clock import OwnTime, ProcessReadings
from attnscore.sandbox.folders import SHARED_BYTES, worker_lib
from attnscore.sandbox.processes import BOOTSTRAP, cpu_seconds, limit_child, rlimits, scrubbed_env
from attnscore.sandbox.template import TemplateChild, TemplateError

if TYPE_CHECKING:
    from attnscore.sandbox.worker_host import WorkerHost

__all__ = ["ENDED", "TIMED_OUT", "Ended", "Heard", "Malformed", "TimedOut", "WorkerProcess"]


@dataclass(frozen=True)
class TimedOut:
    """No whole reply came before the deadline."""


@dataclass(frozen=True)
class Ended:
    """The reply pipe reached its end of file: the worker is gone (or closed it)."""


@dataclass(frozen=True)
class Malformed:
    """Bytes on the reply pipe that are no message (:class:`attnscore.boundary.wire.WireError`: ``problem``)."""

    problem: str


TIMED_OUT, ENDED = TimedOut(), Ended()

_PIPE_BYTES = 1 << 16
"""How much one read of the reply pipe asks for: a pipe's whole buffer (64 KiB on Linux), so a
read never takes less than is there, and its buffer stays on the heap (a request of 1 MiB made
every read map and unmap fresh memory: three system calls per reply, for at most 64 KiB)."""
Heard = wire.Reply | TimedOut | Ended | Malformed
"""What :meth:`WorkerProcess.receive` returns: a reply of the protocol, or what came instead."""


class WorkerProcess:
    """One live worker process, its pipes, and the capped capture of its output."""

    def __init__(self, runner: WorkerHost) -> None:
        """Start a worker for ``runner``'s submission as ``runner.plan`` says: forked from
        ``runner.template`` when there is one (a template that fails to fork, when not required,
        leaves the runner on fresh interpreters from then on, with the plan and protections line
        that say so), else a fresh ``python -I``, in its own ``bwrap`` where the plan uses one.

        Raises:
            TemplateError: the template could not fork the worker and the plan requires it.
        """
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.out_r, out_w = os.pipe()
        os.set_blocking(self.out_r, False)
        self.out_open = True  # until the output pipe's end of file: a closed pipe is never polled again
        self.wakeups = 0  # times receive() woke up: a worker that closed its output must not spin the grader
        self.runner = runner
        self.buffer = b""
        setup: dict[str, object] = {}
        try:
            proc: subprocess.Popen[bytes] | TemplateChild | None = None
            if runner.template is not None:
                try:
                    proc = runner.template.fork((req_r, resp_w, out_w, runner.shared))
                    setup = _fork_request(runner, int(_drop(runner)))
                except TemplateError:
                    if runner.plan.template_required:
                        raise
                    runner.template = None  # the template died: fresh interpreters from now on
                    runner.plan = runner.plan.without_template()
                    runner.protections = runner.plan.protections
            if proc is None:
                proc = _start_fresh(runner, req_r, resp_w, out_w)
                setup = _fresh_setup(runner)
        finally:
            os.close(req_r)
            os.close(resp_w)
            os.close(out_w)
        self.proc: subprocess.Popen[bytes] | TemplateChild = proc
        # the first line on its request pipe, read by the worker itself: its command line and the
        # template's memory never hold a student's file name (a neighbour could read them)
        self.send({"type": "setup", **setup})
        # bwrap reports a child killed by a signal as an exit code of 128 + signal; the template
        # reports the worker's own status
        self.bwrap = runner.plan.bwrap and not isinstance(proc, TemplateChild)
        uids.remember_worker(self.proc.pid)
        self.readings = ProcessReadings(self.proc.pid)  # what its call clocks read, kept open

    def send(self, message: dict[str, object]) -> bool:
        try:
            data = wire.dumps(message)
            written = os.write(self.req_w, data)  # a request fits the pipe's buffer: one write, as a rule
            if written < len(data):
                view = memoryview(data)[written:]
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

    def receive(self, deadline: float | OwnTime) -> Heard:
        """The next reply (:func:`attnscore.boundary.wire.decode_reply`), or :data:`TIMED_OUT`,
        :data:`ENDED` or :class:`Malformed`; ``deadline``: a monotonic time, or the worker's own
        time (:class:`~attnscore.sandbox.clock.OwnTime`)."""
        own = deadline if isinstance(deadline, OwnTime) else None
        until = deadline if not isinstance(deadline, OwnTime) else 0.0
        while b"\n" not in self.buffer:
            remaining = (own.deadline if own is not None else until) - time.monotonic()
            if remaining <= 0:
                if own is None or own.extend() <= time.monotonic():
                    return TIMED_OUT
                continue
            watched = [self.resp_r, self.out_r] if self.out_open else [self.resp_r]
            ready, _, _ = select.select(watched, [], [], remaining)
            self.wakeups += 1
            if self.out_r in ready:
                self.drain_output()
            if self.resp_r not in ready:
                continue
            chunk = os.read(self.resp_r, _PIPE_BYTES)
            if not chunk:
                return ENDED
            self.buffer += chunk
            if len(self.buffer) > wire.MAX_MESSAGE_BYTES:
                return Malformed(f"a message longer than {wire.MAX_MESSAGE_BYTES} bytes")
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return wire.decode_reply(wire.loads(line))
        except wire.WireError as exc:
            return Malformed(str(exc))

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
        self.readings.close()
        uids.forget_worker(self.proc.pid)
        for fd in (self.req_w, self.resp_r, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def exit_description(self) -> tuple[Verdict, str]:
        """``(verdict, text)`` saying how the worker ended."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return Verdict.CRASHED, "stopped answering"
        if self.bwrap and code > 128:  # bwrap reports a child killed by a signal as 128 + signal
            code = -(code - 128)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if -code == signal.SIGXCPU:
                return (
                    Verdict.TIMEOUT,
                    f"was stopped by {name}: it used up its {cpu_seconds(self.runner.limits)} s of CPU time",
                )
            verdict = Verdict.MEMORY_LIMIT if -code == signal.SIGKILL else Verdict.CRASHED
            return verdict, f"was killed by {name}"
        return Verdict.CRASHED, f"exited with code {code} (os._exit, sys.exit outside a call, or a fatal error)"


def _drop(runner: WorkerHost) -> str:
    """The uid the worker drops to, as its argument: -1 for none (the grader is not root)."""
    return str(runner.uid) if runner.plan.drops_uid else "-1"


def _config(runner: WorkerHost) -> dict[str, object]:
    """The worker's CONFIG (:mod:`attnscore.boundary.worker`): its mirrors, the folders it never
    reads, its Landlock and seccomp, the shared inputs and its device."""
    plan = runner.plan
    mirrors = [] if plan.bwrap else [list(pair) for pair in runner.runtime.mirrors]
    return {
        "mirrors": mirrors,
        "deny": bwrap.denied(runtime_mirrors=mirrors),
        "landlock": plan.landlock,
        "seccomp": plan.seccomp,
        "inputs_fd": runner.shared,
        "inputs_bytes": SHARED_BYTES,
        "device": gpu.worker_device(plan.device),
        "device_files": gpu.device_nodes(plan.device),
    }


def _fresh_setup(runner: WorkerHost) -> dict[str, object]:
    """A fresh worker's setup line (:func:`attnscore.boundary.worker.read_setup`): its submission's
    folder as the worker sees it, the entry file, the function (``""`` for an assignment, whose
    calls each name theirs: ``functions`` then lists them, for choosing the entry file) and the
    calls to trap."""
    return {
        "folder": "/sandbox/submission" if runner.plan.bwrap else runner.private,
        "entry": runner.entry or "",
        "function": runner.function,
        "traps": list(runner.traps),
        **({"functions": list(runner.functions)} if runner.functions else {}),
    }


def _fork_request(runner: WorkerHost, uid: int) -> dict[str, object]:
    """What a worker forked from the template reads first on its request pipe (the template never
    sees it, :mod:`attnscore.sandbox.template`): its fresh setup, uid, folders, limits and config."""
    plan, limits = runner.plan, runner.limits
    return {
        **_fresh_setup(runner),
        # the template (inside bwrap or not) sees the submission's private copy at its own path;
        # only a fresh bwrap binds it at /sandbox/submission
        "folder": runner.private,
        "uid": uid,
        "workdir": runner.workdir,
        "disk_bytes": limits.disk_bytes if plan.disk == "tmpfs" else 0,
        "env": scrubbed_env(runner.workdir, plan.device),
        "rlimits": rlimits(plan),
        "cgroup": runner.cgroup or "",
        "config": {k: v for k, v in _config(runner).items() if k not in ("mirrors", "inputs_fd")},
    }


def _start_fresh(runner: WorkerHost, req_r: int, resp_w: int, out_w: int) -> subprocess.Popen[bytes]:
    """A fresh ``python -I`` worker (in a ``bwrap`` of its own where the plan uses bubblewrap)."""
    plan, limits, lib = runner.plan, runner.limits, worker_lib()
    if plan.bwrap:
        disk = limits.disk_bytes if plan.disk == "tmpfs" else None  # else checked after each call
        command = [
            *bwrap.fresh_prefix(runner.private, runner.workdir, lib, plan.device, disk, plan.drops_uid),
            sys.executable,
            "-I",
            "-u",
            "-c",
            BOOTSTRAP,
            "/sandbox/lib",
        ]
        cwd, home = "/", "/sandbox/work"
    else:
        command = [runner.runtime.executable, "-I", "-u", "-c", BOOTSTRAP, lib]
        cwd, home = runner.workdir, runner.workdir
    command += [  # nothing of the submission: its folder and file come on the request pipe
        str(req_r),
        str(resp_w),
        _drop(runner),
        json.dumps(_config(runner)),
    ]
    bound = None
    if not plan.bwrap and plan.drops_uid and plan.disk == "tmpfs":
        bound = (runner.workdir, runner.uid, machine.libc())
    group = runner.cgroup
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=out_w,
        stderr=out_w,
        cwd=cwd,
        env=scrubbed_env(home, plan.device),
        pass_fds=(req_r, resp_w, runner.shared),
        start_new_session=True,
        preexec_fn=lambda: limit_child(plan, bound, group),
        close_fds=True,
    )
