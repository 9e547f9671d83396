"""The uids workers run as (a root grader only): claiming one of 64, and clearing what a uid left.

When the grader is root, every worker drops to a uid of its own (``Limits.uid`` to
``Limits.uid + 63``, none owned by an account), held by a lock while its runner lives, so
workers graded at the same time cannot signal, limit, trace or read one another. When a worker
ends, every process of its uid is killed (:func:`kill_uid`), the orphans reparented to the
grader are reaped (:func:`sweep_orphans`), and what it left in the world-writable folders goes
(:func:`files_removal`); before a uid is used, the same is done for what a killed grader's
worker of that uid left.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import stat
import threading
from collections.abc import Iterator

from attnscore.boundary import kernel_objects
from attnscore.sandbox.folder_watch import FolderWatch
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.removal import remove_tree

__all__ = [
    "SHARED_WRITABLE",
    "UID_SLOTS",
    "alive_as",
    "become_subreaper",
    "claim_clean_uid",
    "claim_uid",
    "drops_privileges",
    "forget_worker",
    "held_uid",
    "files_removal",
    "kill_uid",
    "mark_clean",
    "remember_worker",
    "sweep_orphans",
]

UID_SLOTS = 64
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
"""The world-writable folders a worker uid may leave entries in (removed when it ends)."""
_LIVE_WORKERS: set[int] = set()  # pids of this grader's live workers: never swept as orphans
_LIVE_LOCK = threading.Lock()


def drops_privileges() -> bool:
    """Whether workers drop to a uid of their own: the grader is root."""
    return os.geteuid() == 0


def remember_worker(pid: int) -> None:
    """``pid`` is a live worker of this grader (:func:`sweep_orphans` leaves it alone)."""
    with _LIVE_LOCK:
        _LIVE_WORKERS.add(pid)


def forget_worker(pid: int) -> None:
    """``pid`` is no longer a live worker."""
    with _LIVE_LOCK:
        _LIVE_WORKERS.discard(pid)


def claim_uid(limits: Limits) -> tuple[int, int]:
    """:func:`claim_clean_uid` without whether the uid was found clean."""
    uid, fd, _ = claim_clean_uid(limits)
    return uid, fd


def claim_clean_uid(limits: Limits) -> tuple[int, int, bool]:
    """A uid no other live worker on this machine holds, the locked file that holds it, and whether
    nothing of the uid is left: no process runs as it and it owns no entry of the shared folders
    (its last runner marked it clean, or every process and entry found now went).

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
    for slot in range(UID_SLOTS):
        uid = limits.uid + slot
        fd = os.open(os.path.join(folder, str(uid)), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:  # asked of a free slot only (the account database is slow to ask)
            pwd.getpwuid(uid)
            os.close(fd)
            continue  # a real account: never run a worker as it, never kill its processes
        except KeyError:
            pass
        clean = os.pread(fd, 64, 0) == _clean_mark()
        if not clean:  # its last runner did not find it clean: what a killed grader's worker left
            gone = kill_uid(uid)
            clean = files_removal(uid, keep=None)[1] == 0 and gone
        os.ftruncate(fd, 0)  # not clean from now on, until a runner that ends finds it so (mark_clean)
        kernel_objects.remove_objects_of(uid)  # what a killed grader's worker left
        return uid, fd, clean
    raise RuntimeError(f"all {UID_SLOTS} sandbox uids are in use by other workers")


@contextlib.contextmanager
def held_uid(first_uid: int) -> Iterator[int]:
    """A worker uid (from ``first_uid`` on) claimed for a short check run as a worker would run, such
    as whether a worker can read the interpreter (:func:`attnscore.sandbox.runtime.unreadable_by`).

    The check's process must run as a uid this grader holds: a uid nobody holds is one any other
    grader on the machine may claim (or release) at any moment, and claiming and releasing kill
    every process of the uid (:func:`kill_uid`), the check's too. Released, with whatever still
    runs as it, when the block ends.

    Raises:
        RuntimeError: all uids are taken, or the lock folder is not root's own (:func:`claim_uid`).
    """
    uid, lock = claim_uid(Limits(uid=first_uid))
    try:
        yield uid
    finally:
        try:
            kill_uid(uid)
        finally:
            os.close(lock)


def kill_uid(uid: int) -> bool:
    """Kill every process running as ``uid`` (``kill(-1)`` sent as that uid, until none is left):
    no chain of new sessions or forks outruns it, and no process of another uid is touched.
    Returns whether none is left (False only when 20 rounds of killing left one running)."""
    if uid == 0 or not alive_as(uid):  # nothing runs as it, so nothing can start as it: done
        return True
    for _ in range(20):
        kernel_objects.run_as(uid, ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null; true"])
        if not alive_as(uid):
            return True
    return False


def files_removal(uid: int, keep: str | None, watch: FolderWatch | None = None) -> tuple[int, int]:
    """Remove what ``uid`` left in the world-writable folders (where Landlock and bwrap, when
    present, already keep it from writing), except its working folder ``keep``; returns
    ``(entries removed, entries that could not go)``. Folders of any depth go without recursion
    and links are never followed (:func:`attnscore.sandbox.removal.remove_tree`); what cannot go
    is left, never raised. With ``watch`` (begun on :data:`SHARED_WRITABLE` when the uid owned
    nothing there, before anything ran as it), only the names linked into the folders since are
    looked at; where the watch cannot say (:meth:`FolderWatch.names` is None), every entry."""
    removed = left = 0
    kept = os.path.realpath(keep) if keep is not None else None
    for path, info in _entries_of(uid, watch):
        try:
            if os.path.realpath(path) == kept:
                continue
            if stat.S_ISDIR(info.st_mode):
                if remove_tree(path) is not None:  # no recursion, no links followed: any depth a worker built
                    left += 1
                    continue
            else:
                os.unlink(path)
            removed += 1
        except OSError:
            left += 1
    return removed, left


def _entries_of(uid: int, watch: FolderWatch | None) -> Iterator[tuple[str, os.stat_result]]:
    """Each entry of ``uid`` directly inside the shared folders, with its ``lstat``: among the names
    ``watch`` saw linked there, or (no watch, or one that cannot say) all of them."""
    names = watch.names() if watch is not None else None
    if names is None:
        yield from kernel_objects.entries_of(uid, SHARED_WRITABLE)
        return
    for folder, seen in names.items():
        yield from kernel_objects.entries_named(uid, folder, sorted(seen))


@functools.cache
def _clean_mark() -> bytes:
    """What a uid's lock file holds while the uid is clean (:func:`mark_clean`): a word and this
    boot's id, so that a mark written before the machine restarted counts for nothing."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            boot = f.read().strip()
    except OSError:
        boot = b""
    return b"clean " + boot if boot else b"clean, unknown boot"


def mark_clean(lock: int) -> None:
    """Mark the uid held by ``lock`` (:func:`claim_uid`'s file) clean, just before releasing it: call
    only once every process of the uid is gone (:func:`kill_uid` returned True) and every file it
    left went (:func:`files_removal` left none, its working folder removed). Nothing can run as a
    uid nobody holds, so its next claim needs no search for what it left: the mark says there is
    nothing. A grader killed while it holds the uid leaves no mark (the claim removed it), and the
    next claim searches and removes as before."""
    os.pwrite(lock, _clean_mark(), 0)


def alive_as(uid: int) -> bool:
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
            fd = os.open(f"/proc/{entry}/status", os.O_RDONLY | os.O_CLOEXEC)
            try:
                status = os.read(fd, 8192)  # State and Uid are near the top, before any long Groups line
            finally:
                os.close(fd)
        except OSError:
            continue
        at = status.find(b"\nUid:")
        if at < 0 or wanted not in status[at + 5 : status.find(b"\n", at + 5)].split()[:3]:
            continue
        at = status.find(b"\nState:")
        if status[at + 7 : at + 40].split()[:1] not in ([b"Z"], [b"X"]):
            return True
    return False


def sweep_orphans(uid: int) -> int:
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


@functools.cache
def become_subreaper() -> bool:
    """Orphans of the worker (a grandchild that left its session) become the grader's children,
    so that :func:`sweep_orphans` finds them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False
