"""The sandbox: run an untrusted submission in a separate, limited worker process.

:class:`SandboxRunner` implements the :class:`attnscore.runner.Runner` protocol for a student's
file. The grading process never imports the submission. The worker (:mod:`graders.worker`):

- is a fresh ``python -I`` process (no user site, no ``PYTHON*`` variables, no script dir on the
  path) with a scrubbed environment and an empty temporary working directory;
- runs in its own session, so a timeout kills its whole process group;
- gets resource limits: address space, CPU seconds, file size, open files;
- receives only inputs over a pipe and sends back plain JSON (:mod:`graders.wire`).

Each call has a wall-time limit; a hang, crash or memory blow-up becomes that call's verdict, the
worker is killed, and the next call starts a fresh one. A submission that fails to import fails
every call with the same verdict, without retrying.
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnscore.outputs import CallFailure, Outcome
from attnscore.results import Verdict
from graders import wire

__all__ = ["Limits", "SandboxRunner"]

# The only verdicts a worker may report itself; anything else it sends counts as a crash.
_WORKER_VERDICTS = frozenset({Verdict.EXCEPTION.value, Verdict.BAD_RETURN_TYPE.value, Verdict.MEMORY_LIMIT.value,
                              Verdict.GRADER_ERROR.value})
_ROOT = str(Path(__file__).resolve().parent.parent)
_BOOTSTRAP = "import sys; sys.path.insert(0, sys.argv[1]); del sys.argv[1]; from graders.worker import main; main(sys.argv[1:])"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's worker.

    Attributes:
        call_timeout_s: wall time for one call, seconds.
        load_timeout_s: wall time to start the worker and import the submission, seconds.
        total_timeout_s: wall time for the whole submission; calls after it is spent time out.
        memory_bytes: address-space limit of the worker (RLIMIT_AS).
        cpu_s: CPU seconds for one worker process (RLIMIT_CPU).
        file_bytes: largest file the worker may write, its captured output included (RLIMIT_FSIZE).
        open_files: open file descriptors (RLIMIT_NOFILE).
        output_chars: how much of the submission's own output is kept for the report.
    """

    call_timeout_s: float = 5.0
    load_timeout_s: float = 60.0
    total_timeout_s: float = 300.0
    memory_bytes: int = 4 * 1024**3
    cpu_s: int = 120
    file_bytes: int = 4 * 1024**2
    open_files: int = 256
    output_chars: int = 4000


def _limit_child(limits: Limits) -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead of killing


def _scrubbed_env(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
    }


class _Worker:
    """One live worker process and its pipes."""

    def __init__(self, submission: Path, function: str, limits: Limits, workdir: str, output_path: str) -> None:
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.buffer = b""
        with open(output_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _BOOTSTRAP, _ROOT, str(submission), function, str(req_r), str(resp_w)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                env=_scrubbed_env(workdir), pass_fds=(req_r, resp_w), start_new_session=True,
                preexec_fn=lambda: _limit_child(limits), close_fds=True,
            )
        os.close(req_r)
        os.close(resp_w)

    def send(self, message: dict[str, object]) -> bool:
        try:
            data = wire.dumps(message)
            view = memoryview(data)
            while view:
                view = view[os.write(self.req_w, view):]
            return True
        except (BrokenPipeError, OSError):
            return False

    def receive(self, deadline: float) -> dict[str, object] | str:
        """The next message, or ``"timeout"`` / ``"eof"`` / ``"malformed: ..."``."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            ready, _, _ = select.select([self.resp_r], [], [], remaining)
            if not ready:
                return "timeout"
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
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with code {code} (os._exit, sys.exit outside a call, or a fatal error)"


class SandboxRunner:
    """Runs calls of ``function`` from the file ``submission`` in a sandboxed worker.

    Use as a context manager; it removes its temporary directory and kills the worker on exit.
    """

    def __init__(self, submission: str | Path, function: str, limits: Limits | None = None) -> None:
        self.submission = Path(submission).resolve()
        self.function = function
        self.limits = limits or Limits()
        self.workdir = tempfile.mkdtemp(prefix="attnscore-worker-")
        self.output_path = os.path.join(tempfile.mkdtemp(prefix="attnscore-output-"), "output.txt")
        self.worker: _Worker | None = None
        self.load_failure: CallFailure | None = None
        self.started = time.monotonic()
        self.calls = 0

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def captured_output(self) -> bytes:
        """The submission's own stdout/stderr (raw bytes, capped), then the file is removed."""
        try:
            with open(self.output_path, "rb") as f:
                data = f.read(self.limits.output_chars * 4)
        except OSError:
            data = b""
        shutil.rmtree(os.path.dirname(self.output_path), ignore_errors=True)
        return data

    def _start(self) -> CallFailure | None:
        worker = _Worker(self.submission, self.function, self.limits, self.workdir, self.output_path)
        deadline = time.monotonic() + self.limits.load_timeout_s
        hello = worker.receive(deadline)
        if isinstance(hello, dict) and hello.get("type") == "ready":
            self.worker = worker
            return None
        if hello == "timeout":
            failure = CallFailure(Verdict.TIMEOUT.value,
                                  f"importing your file took longer than {self.limits.load_timeout_s:g} s")
        elif hello == "eof":
            failure = CallFailure(Verdict.CRASHED.value, f"your file crashed while being imported: the process {worker.exit_description()}")
        elif isinstance(hello, dict) and hello.get("type") == "load_error" and hello.get("verdict") in (
                Verdict.EXCEPTION.value, Verdict.FUNCTION_MISSING.value, Verdict.MEMORY_LIMIT.value):
            failure = CallFailure(str(hello["verdict"]), str(hello.get("message", ""))[:2000])
        else:
            failure = CallFailure(Verdict.CRASHED.value, "the worker sent an unexpected message while importing your file")
        worker.kill()
        self.load_failure = failure
        return failure

    def call(self, args: Mapping[str, np.ndarray], dtype: str) -> Outcome:
        """Make one call; never raises for anything the submission does."""
        self.calls += 1
        if self.load_failure is not None:
            return self.load_failure
        if time.monotonic() - self.started > self.limits.total_timeout_s:
            return CallFailure(Verdict.TIMEOUT.value,
                               f"not run: the submission used up its total time limit of {self.limits.total_timeout_s:g} s")
        if self.worker is None:
            failure = self._start()
            if failure is not None:
                return failure
        assert self.worker is not None
        worker = self.worker
        request = {"type": "call", "id": self.calls, "dtype": dtype, "device": "cpu",
                   "args": [wire.encode_array(a, dtype) for a in args.values()]}
        reply = worker.receive(time.monotonic() + self.limits.call_timeout_s) if worker.send(request) else "eof"
        outcome = self._outcome(reply, worker)
        if isinstance(outcome, CallFailure) and outcome.verdict in (Verdict.TIMEOUT.value, Verdict.CRASHED.value,
                                                                    Verdict.MEMORY_LIMIT.value, Verdict.GRADER_ERROR.value):
            worker.kill()
            self.worker = None
        return outcome

    def _outcome(self, reply: dict[str, object] | str, worker: _Worker) -> Outcome:
        if reply == "timeout":
            return CallFailure(Verdict.TIMEOUT.value, f"the call took longer than {self.limits.call_timeout_s:g} s "
                                                      "(an infinite loop, or far too slow)")
        if reply == "eof":
            description = worker.exit_description()
            verdict = Verdict.MEMORY_LIMIT if "SIGKILL" in description else Verdict.CRASHED
            return CallFailure(verdict.value, f"the process running your code {description} during the call")
        if isinstance(reply, str):
            return CallFailure(Verdict.CRASHED.value, f"the process running your code sent a {reply}")
        if reply.get("id") != self.calls:
            return CallFailure(Verdict.CRASHED.value, "the process running your code answered out of turn")
        if reply.get("type") == "result":
            try:
                return wire.decode_received(reply.get("value"))
            except wire.WireError as exc:
                return CallFailure(Verdict.BAD_RETURN_TYPE.value, f"the returned value could not be read back: {exc}")
        if reply.get("type") == "failure" and reply.get("verdict") in _WORKER_VERDICTS:
            return CallFailure(str(reply["verdict"]), str(reply.get("message", ""))[:2000])
        return CallFailure(Verdict.CRASHED.value, "the process running your code sent an unexpected message")
