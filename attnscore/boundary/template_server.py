"""The worker template's own process (the worker's side of :mod:`attnscore.sandbox.template`).

It runs inside the worker's world: it imports torch, numpy and this package's worker modules,
then forks one worker per request. See :mod:`attnscore.sandbox.template` for the protocol."""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

__all__ = ["serve", "bound_folder", "lower_priority", "WORKER_NICE", "MAX_MESSAGE", "FDS", "FORK"]

MAX_MESSAGE = 1 << 16
FDS = 5  # request pipe (read end), response pipe (write end), output pipe, shared inputs, status socket


def _limit(rlimits: list[list[int]]) -> None:
    for which, soft, hard in rlimits:
        resource.setrlimit(which, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead of killing


_CLONE_NEWNS, _MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x20000, 2, 4, 1 << 14, 1 << 18


def bound_folder(path: str, uid: int, size: int, libc: Any = None) -> bool:
    """Give the calling process a mount namespace of its own and, in it, a tmpfs of at most
    ``size`` bytes (and ``size // 4096`` entries) at ``path``, owned by ``uid``, mode 0700: all
    a worker writes in its working folder then fits in ``size``, and goes when it does. Needs
    root (``CAP_SYS_ADMIN``); returns False, changing nothing the worker depends on, where that
    cannot be had. ``libc``: a ``ctypes.CDLL(None, use_errno=True)`` loaded before a fork."""
    import ctypes

    libc = libc or ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing propagates to the machine
        return False
    options = f"size={size},nr_inodes={max(1024, size // 4096)},mode=0700,uid={uid},gid={uid}".encode()
    return libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0


WORKER_NICE = 5  # where no cgroup bounds a worker's CPU share


def lower_priority() -> None:
    """A worker's CPU priority where no cgroup bounds its share: nice :data:`WORKER_NICE` for its
    process and all it starts. (With autogroup, the kernel gives each worker's session one share
    of the machine whatever its thread count; the nice value orders its own threads.)"""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(WORKER_NICE, os.getpriority(os.PRIO_PROCESS, 0)))
    except OSError:
        pass


def _join_cgroup(path: str) -> None:
    """Move this process into the worker cgroup ``path`` (:mod:`attnscore.sandbox.cgroup`)."""
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b"0\n")
    finally:
        os.close(fd)


def _become_worker(fds: list[int], control: socket.socket, wake: int, libc: Any = None) -> None:
    """In the forked child: read its own request from its request pipe (the template never holds
    it: no student's name, folder or limits passes through the template's memory, which every
    later child inherits), then everything the fresh path applies before the submission is read,
    then :func:`attnscore.boundary.worker.serve`. Never returns (``os._exit``)."""
    code = 1
    try:
        from attnscore.boundary import kernel_objects, worker

        req_r, resp_w, out_w, shared_fd, status = fds
        requests = os.fdopen(req_r, "rb", buffering=1 << 16)
        request = worker.read_setup(requests)
        os.setsid()  # its own session and process group: a timeout kills the whole group
        try:  # its own CPU share, memory and process count, before anything else runs
            if not request.get("cgroup"):
                raise FileNotFoundError
            _join_cgroup(request["cgroup"])
        except OSError:  # no group (or it vanished): the fallback share
            lower_priority()
        kernel_objects.isolate()  # an IPC namespace (as root) and a session keyring of its own
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        os.close(status)
        os.close(wake)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        keep = {0, 1, 2, req_r, resp_w, shared_fd}
        for name in os.listdir("/proc/self/fd"):  # nothing of the template or of another worker
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        _limit(request["rlimits"])
        if request.get("disk_bytes"):  # root: a size-bound tmpfs working folder of its own
            bound_folder(request["workdir"], request["uid"], int(request["disk_bytes"]), libc)
        os.chdir(request["workdir"])
        os.environ.clear()
        os.environ.update(request["env"])
        config = dict(request["config"], inputs_fd=shared_fd)
        shared = worker.map_inputs(config)
        folder = request["folder"]
        if worker.confine_self(folder, config, resp_w):
            worker.serve(
                folder,
                request["entry"],
                request["function"],
                requests,
                resp_w,
                request["uid"],
                shared,
                str(config.get("device", "cpu")),
                traps=tuple(request.get("traps", ())),
                functions=tuple(request.get("functions", ())),
            )
        code = 0
    except BaseException:  # noqa: BLE001 - reported like a fresh worker's uncaught exception
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(code)


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _send_to(sock: int, message: dict[str, Any]) -> None:
    try:
        os.write(sock, json.dumps(message).encode())
    except OSError:
        pass


def serve(control_fd: int, config: dict[str, Any]) -> NoReturn:
    """The template's main loop (run by the bootstrap in a ``python -I`` process).

    ``config``: ``mirrors`` (see :mod:`attnscore.sandbox.runtime`). Prepares the module search,
    loads the runtime, says ``{"ready": threads}`` on the control socket, then forks one worker
    per request until every grader has closed its end of the control socket; then it kills the
    workers still running and ends its process at once (``os._exit(0)``): it never returns.
    """
    import ctypes

    from attnscore.boundary import kernel_objects, worker  # noqa: F401 - kernel_objects: loaded before any fork

    libc = ctypes.CDLL(None, use_errno=True)
    _ = (libc.unshare, libc.mount)  # looked up once, here: bound_folder uses them in every worker
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the template dies with the grader
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: escaped grandchildren are reaped here
    control = socket.socket(fileno=control_fd)
    worker.prepare(config)
    worker.load_runtime()
    del sys.path[0]  # the bootstrap's folder: the worker modules stay loaded, not importable by path
    threads = len(os.listdir("/proc/self/task"))
    gc.freeze()  # children never rescan (nor copy, by touching them) the objects torch's import made
    control.send(json.dumps({"ready": threads}).encode())
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}  # pid -> status socket
    while True:
        try:
            ready, _, _ = select.select([control.fileno(), wake_r], [], [])
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        _reap(children)
        if control.fileno() in ready:
            try:
                data, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, FDS)
            except OSError:
                data, fds = b"", []
            if not data:  # every grader is gone: so are its workers
                for pid in children:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                # Nothing is left to write or close (the template runs unbuffered, ``python -u``),
                # so it skips the interpreter's shutdown, which frees torch's objects one by one:
                # about 0.2 s at the end of every class run, while the grader waits for it to be gone.
                os._exit(0)
            _fork_one(data, fds, control, wake_r, children, libc)


FORK = b"fork"
"""The whole of a fork request's datagram: everything else about the worker (its submission's
folder and file, uid, limits, environment) reaches the child on its own request pipe."""


def _fork_one(
    data: bytes, fds: list[int], control: socket.socket, wake: int, children: dict[int, int], libc: Any = None
) -> None:
    if len(fds) != FDS or data != FORK:
        for fd in fds:
            os.close(fd)
        return
    status = fds[4]
    try:
        pid = os.fork()
    except OSError as exc:
        _send_to(status, {"error": f"the worker template could not fork a worker: {exc}"})
        for fd in fds:
            os.close(fd)
        return
    if pid == 0:  # pragma: no cover - the child; measured through the grader's tests
        _become_worker(fds, control, wake, libc)
    children[pid] = status
    _send_to(status, {"pid": pid})
    for fd in fds[:4]:
        os.close(fd)


def _reap(children: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = children.pop(pid, None)
        if sock is not None:
            _send_to(sock, {"code": _returncode(status)})
            os.close(sock)
