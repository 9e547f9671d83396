"""The worker template: a clean, pre-started process that forks one sandboxed worker per submission.

Starting a worker as a fresh interpreter costs an interpreter start plus ``import torch`` (about
a second); forking a process that has already imported them costs a few milliseconds. The
template is that process:

- it is started by the grader (:class:`WorkerTemplate`) like a fresh worker: ``python -I``, a
  scrubbed environment, the private folder of worker modules only (no reference, specs, golden
  values or grader code; its argv and environment name none of them), the readable mirrors of
  :mod:`attnscore.sandbox.runtime`; it imports torch and numpy and the worker modules, and then
  only waits for requests. **It never runs submitted code and never receives a spec, a case,
  an expected value or anything of a submission**: a request is a fixed word with the worker's
  descriptors; the child reads its setup (the submission's folder, entry file and function name,
  its uid, working folder and limits) from its own request pipe, so no student's name or folder
  ever passes through the template's memory, which every later child inherits.
- for each request it forks a child that, before the submission is read, applies everything
  the fresh-process path applies (:func:`_become_worker`): its own session and process group,
  its own IPC namespace and session keyring (:func:`attnscore.boundary.kernel_objects.isolate`),
  every descriptor closed but its pipes, stdin ``/dev/null``, stdout/stderr to the grader's
  capture pipe, the resource limits, a scrubbed environment, its private working folder, then
  (:mod:`attnscore.boundary.worker`) Landlock, seccomp, the drop to the slot's own uid, and only
  then the import of the submission. Each submission therefore starts from a fresh copy of the
  clean template: whatever it does to its process (patch torch, set globals, leave threads,
  exhaust memory, exit) is gone with that child and never reaches the next one.
- it reaps its children (it is a child subreaper, so escaped grandchildren are reaped too) and
  reports each worker's exit status to the grader on that worker's own status socket, in the
  form of :attr:`subprocess.Popen.returncode` (negative: killed by that signal).

Protocol: the grader and the template share a ``SOCK_SEQPACKET`` socket pair; each request is one
datagram, the word ``fork`` (:data:`attnscore.boundary.template_server.FORK`), carrying five
descriptors (request pipe, response pipe, output pipe, shared input memory, status socket). The
answer (``{"pid": N}`` or ``{"error": "..."}``) and later ``{"code": N}`` arrive on the status
socket. Several grader processes (``--jobs``) may share one template: every message is one
datagram, and each answer goes to the requester's own socket.

With bubblewrap, a root grader starts the template itself inside one ``bwrap`` (``prefix``): no
network, IPC or UTS of the machine's, and a read-only filesystem view without specs, golden
values or grader code, holding the worker modules and one staging folder (``stage``) where the
grader lays out each submission's private copy and working folder. The workers it forks share
that view, and still each get everything above (a uid of their own, Landlock, seccomp). A
grader that is not root, or grades on a GPU, starts a fresh ``bwrap`` per worker instead (see
:func:`attnscore.sandbox.plan.use_template`).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from typing import Any

__all__ = ["WorkerTemplate", "TemplateChild", "TemplateError"]

from attnscore.boundary.template_server import FORK, MAX_MESSAGE


class TemplateError(RuntimeError):
    """The worker template could not be started or stopped answering."""


class TemplateChild:
    """A worker forked by the template, as much like :class:`subprocess.Popen` as the sandbox
    needs: ``pid``, ``returncode`` and ``wait(timeout)`` (its exit status comes from the template)."""

    def __init__(self, pid: int, status: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        try:  # a handle on this very process: a signal through it never reaches a reused pid
            self._pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._pidfd = -1

    def kill(self) -> None:
        """SIGKILL the worker itself (also before it has made its own process group)."""
        try:
            if self._pidfd >= 0:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            elif self.returncode is None:
                os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def _release(self) -> None:
        self._status.close()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (negative: killed by that signal).

        Raises:
            subprocess.TimeoutExpired: not ended within ``timeout`` seconds.
        """
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._status], [], [], remaining)
            if not ready:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            try:
                data = self._status.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:  # the template is gone (killed with the grader): the worker went with it
                self.returncode = -signal.SIGKILL
            else:
                try:
                    message = json.loads(data)
                except ValueError:
                    continue
                if "code" not in message:
                    continue
                self.returncode = int(message["code"])
            self._release()
            return self.returncode


_BOOTSTRAP = "; ".join(
    (
        "import sys",
        "sys.path.insert(0, sys.argv[1])",
        "from attnscore.boundary.template_server import serve",
        "import json",
        "serve(int(sys.argv[2]), json.loads(sys.argv[3]))",
    )
)


class WorkerTemplate:
    """The grader's handle on one template (see the module docstring): started at once, ready
    when it has loaded torch (:meth:`wait_ready`, also called by the first :meth:`fork`).

    ``prefix`` is put before the interpreter's command line (a ``bwrap ... --`` that confines the
    template and every worker it forks); ``stage`` is the folder, visible at the same path inside
    it, where the grader lays out the submissions and working folders (the template removes it
    when it stops).

    Raises:
        OSError: the interpreter could not be started at all.
    """

    def __init__(
        self,
        executable: str,
        lib: str,
        config: dict[str, Any],
        env: dict[str, str],
        timeout_s: float = 120,
        prefix: tuple[str, ...] = (),
        stage: str | None = None,
    ):
        self.owner = os.getpid()
        self.stage = stage
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = os.memfd_create("attnscore-template-log", os.MFD_CLOEXEC)
        try:
            self.proc = subprocess.Popen(
                [*prefix, executable, "-I", "-u", "-c", _BOOTSTRAP, lib, str(theirs.fileno()), json.dumps(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd="/",
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            theirs.close()
        self._log, self._timeout_s, self._ready = log, timeout_s, False
        self._ready_lock = threading.Lock()
        self.failure: str | None = None
        self.threads = 0
        atexit.register(self.close)

    def wait_ready(self) -> None:
        """Wait until the template has loaded torch (the grader does other work meanwhile).

        Raises:
            TemplateError: it did not start (it said why, or died), or runs more than one thread.
        """
        with self._ready_lock:
            if self._ready:
                return
            if self.failure is None:
                self.failure = self._read_ready()
                self._ready = self.failure is None
            if self.failure is not None:
                raise TemplateError(self.failure)

    def _read_ready(self) -> str | None:
        ready, _, _ = select.select([self.control], [], [], self._timeout_s)
        data = self.control.recv(MAX_MESSAGE) if ready else b""
        said = os.pread(self._log, 4000, 0).decode("utf-8", "replace").strip().splitlines()
        os.close(self._log)
        if not data:
            self.close()
            return f"the worker template did not start: {said[-1] if said else 'no answer'}"
        self.threads = int(json.loads(data).get("ready", 0))
        if self.threads != 1:
            self.close()
            return f"the worker template runs {self.threads} threads after importing torch; forking needs 1"
        return None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        """Whether the template still runs (also asked by grader processes forked from its owner)."""
        if self.failure is not None:
            return False
        if os.getpid() == self.owner:
            return self.proc.poll() is None
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except (OSError, IndexError):
            return False

    def fork(self, fds: tuple[int, int, int, int], timeout_s: float = 30) -> TemplateChild:
        """Fork one worker: ``fds`` are its request pipe's read end, response pipe's write end,
        output pipe's write end and the shared input memory (the caller closes its copies). The
        request names nothing: the caller writes the worker's setup (its submission's folder and
        file, uid, limits) on its request pipe, which only the child reads
        (:func:`attnscore.boundary.worker.read_setup`), so the template never holds it.

        Raises:
            TemplateError: the template did not start, did not answer within ``timeout_s`` or
                could not fork.
        """
        self.wait_ready()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self.control, [FORK], [*fds, theirs.fileno()])
        except OSError as exc:
            mine.close()
            raise TemplateError(f"the worker template is gone: {exc}") from exc
        finally:
            theirs.close()
        ready, _, _ = select.select([mine], [], [], timeout_s)
        data = mine.recv(MAX_MESSAGE) if ready else b""
        answer = json.loads(data) if data else {}
        if "pid" not in answer:
            mine.close()
            raise TemplateError(answer.get("error", "the worker template did not answer"))
        return TemplateChild(int(answer["pid"]), mine)

    def close(self) -> None:
        """Stop the template (only the process that started it does); workers it forked die with it."""
        if os.getpid() != self.owner:
            return
        try:
            self.control.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5 if self._ready else 0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.stage is not None:
            from attnscore.sandbox.removal import remove_tree  # grader side only: not a worker module

            remove_tree(self.stage)
