"""Kernel objects that outlive a worker: give each worker its own, and remove what a worker uid left.

Some kernel objects are not owned by a process and do not end with it: System V shared memory
segments, message queues and semaphore sets and POSIX message queues live as long as their IPC
namespace, and the user keyrings of a uid (``add_key``/``keyctl``) as long as the machine. A worker
uid is reused by the next submission graded on the machine (:func:`attnscore.sandbox.launch`'s
uid slots), so anything left there would carry one student's hidden inputs to the next one.
Three layers keep them apart, each enough on its own where it applies:

- the seccomp filter (:mod:`attnscore.boundary.seccomp`) refuses every system call that makes or
  uses these objects, in every sandbox shape (root or not, bubblewrap or not);
- :func:`isolate` (in the worker, before the privilege drop): a new IPC namespace of its own
  (where the process may make one: root, or inside bubblewrap as root), whose objects the kernel
  destroys with the last process in it, and a new anonymous session keyring, so no worker holds
  the grader's or the template's session keyring;
- :func:`remove_objects_of` (in the grader, after every process of the uid is killed): System V
  objects owned or created by the uid in the grader's IPC namespace, POSIX queues of the uid in a
  mounted ``mqueue`` file system, and the uid's user, user-session and persistent keyrings
  (cleared and invalidated by a short helper running as the uid).

Files the uid left in ``/dev/shm`` (POSIX shared memory and named semaphores are files there) are
removed with the rest of the shared folders by :func:`attnscore.sandbox.uids.files_removal`.
Constants from ``include/uapi/linux/ipc.h``, ``sched.h`` and ``keyctl.h``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "isolate",
    "remove_objects_of",
    "entries_of",
    "entries_named",
    "ipc_namespaces_available",
    "sysv_objects_of",
    "has_keys",
    "run_as",
]

_CLONE_NEWIPC = 0x08000000
_IPC_RMID = 0
_KEYCTL_GET_KEYRING_ID, _KEYCTL_JOIN_SESSION_KEYRING, _KEYCTL_CLEAR = 0, 1, 7
_KEYCTL_INVALIDATE, _KEYCTL_GET_PERSISTENT = 21, 22
_USER_RINGS = (-4, -5)  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
_KEYCTL_NR = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
_SYSV = ("shm", "msg", "sem")  # /proc/sysvipc/<kind>

# Loaded once, here: the worker side runs between fork and exec (a preexec function), where
# loading a library could deadlock on a lock another thread of the grader held at the fork.
_LIBC = ctypes.CDLL(None, use_errno=True)
_UNSHARE, _SYSCALL = _LIBC.unshare, _LIBC.syscall
_SHMCTL, _MSGCTL, _SEMCTL = _LIBC.shmctl, _LIBC.msgctl, _LIBC.semctl


def isolate() -> tuple[bool, bool]:
    """In the worker, before the privilege drop: enter a new IPC namespace and a new anonymous
    session keyring. Returns ``(own IPC namespace, own session keyring)``; a step that the process
    may not take (a grader that is not root, a container without ``CAP_SYS_ADMIN``) is skipped,
    and the seccomp filter still refuses the objects. Safe between fork and exec."""
    ipc = _UNSHARE(_CLONE_NEWIPC) == 0
    keys = _KEYCTL_NR is not None and _SYSCALL(_KEYCTL_NR, _KEYCTL_JOIN_SESSION_KEYRING, None) >= 0
    return ipc, keys


@functools.cache
def ipc_namespaces_available() -> bool:
    """Whether a worker started by this grader gets an IPC namespace of its own (asked once, of a
    short child process: root with ``CAP_SYS_ADMIN``, and no security module refusing it)."""
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x08000000) != 0)"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", probe],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def sysv_objects_of(uid: int) -> list[tuple[str, int]]:
    """``(kind, id)`` of every System V object (``shm``, ``msg``, ``sem``) in this process's IPC
    namespace that ``uid`` owns or created (an owner may hand a segment to another uid with
    ``IPC_SET``; its creator stays)."""
    found = []
    for kind in _SYSV:
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii", errors="replace") as f:
                header, *rows = f.read().splitlines()
        except OSError:
            continue
        columns = header.split()
        try:
            at_id = columns.index({"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind])
            at_uid, at_cuid = columns.index("uid"), columns.index("cuid")
        except ValueError:
            continue
        for row in rows:
            fields = row.split()
            try:
                if int(fields[at_uid]) == uid or int(fields[at_cuid]) == uid:
                    found.append((kind, int(fields[at_id])))
            except (IndexError, ValueError):
                continue
    return found


def has_keys(uid: int) -> bool:
    """Whether the kernel counts any key owned by ``uid`` (``/proc/key-users``)."""
    try:
        with open("/proc/key-users", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        head, _, rest = line.partition(":")
        if head.strip() == str(uid):
            keys = rest.split()[1].split("/")[0] if len(rest.split()) > 1 else "0"
            return keys != "0"
    return False


def _mqueue_folders() -> list[str]:
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return []
    return [fields[1] for fields in mounts if len(fields) > 2 and fields[2] == "mqueue"]


def _clear_own_keyrings() -> None:  # runs as the worker's uid, between fork and exec
    if _KEYCTL_NR is None:
        return
    # Serial numbers first: looking up one user keyring makes the other when it is missing, so
    # looking them up again after one is invalidated would make a new one.
    rings = [_SYSCALL(_KEYCTL_NR, _KEYCTL_GET_KEYRING_ID, spec, 0) for spec in _USER_RINGS]
    # The persistent keyring first: possessed (so open to this uid) only while linked into the user keyring
    rings.insert(0, _SYSCALL(_KEYCTL_NR, _KEYCTL_GET_PERSISTENT, -1, rings[0]))
    for ring in rings:
        if ring > 0:
            _SYSCALL(_KEYCTL_NR, _KEYCTL_CLEAR, ring)
            _SYSCALL(_KEYCTL_NR, _KEYCTL_INVALIDATE, ring)


def run_as(
    uid: int, argv: list[str], preexec_fn: Callable[[], None] | None = None, timeout: float | None = None
) -> None:
    """Run ``argv`` as ``uid`` (its own group, no supplementary groups) in ``/``, with a bare
    ``PATH``, no input and no output; ``preexec_fn`` runs after the switch to ``uid``.

    Raises:
        OSError, subprocess.SubprocessError: the process could not be started, or ran past ``timeout`` s.
    """
    subprocess.run(
        argv,
        user=uid,
        group=uid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=preexec_fn,
        check=False,
        timeout=timeout,
    )


def _remove_keys_of(uid: int) -> bool:
    """Clear and invalidate ``uid``'s user, user-session and persistent keyrings: keys linked
    nowhere else go with them (the kernel collects them)."""
    if _KEYCTL_NR is None or not has_keys(uid):
        return False
    try:
        run_as(uid, ["/bin/true"], preexec_fn=_clear_own_keyrings, timeout=30)  # after the switch: its own keyrings
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def entries_of(uid: int, folders: Iterable[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Each entry directly inside ``folders`` that ``uid`` owns, as its path and its ``lstat`` (links
    are never followed); a folder or an entry that cannot be read is passed over, never raised."""
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        yield from entries_named(uid, folder, names)


def entries_named(uid: int, folder: str, names: Iterable[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Each of ``names`` directly inside ``folder`` that exists and that ``uid`` owns, as its path
    and its ``lstat`` (links are never followed); an entry that cannot be read is passed over."""
    for name in names:
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if info.st_uid == uid:
            yield path, info


def remove_objects_of(uid: int) -> int:
    """Remove every kernel object ``uid`` left (see the module docstring); call it once nothing
    runs as ``uid`` any more. Returns how many System V objects and POSIX queues went (keys are
    collected by the kernel). Never raises; never touches uid 0."""
    if uid == 0 or os.geteuid() != 0:
        return 0
    removed = 0
    for kind, ident in sysv_objects_of(uid):
        if kind == "shm":
            done = _SHMCTL(ident, _IPC_RMID, None)
        elif kind == "msg":
            done = _MSGCTL(ident, _IPC_RMID, None)
        else:
            done = _SEMCTL(ident, 0, _IPC_RMID)
        removed += done == 0
    for path, info in entries_of(uid, _mqueue_folders()):
        if stat.S_ISDIR(info.st_mode):
            continue
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            continue
    _remove_keys_of(uid)
    return removed
