"""The worker's runtime: an interpreter whose modules the unprivileged worker user can read.

When the grader runs as root without bubblewrap, the worker starts as root (so the interpreter
and torch load from wherever they are installed), then drops to an unprivileged uid before the
submission is imported. Anything imported after that drop, by the submission or lazily by torch
(``xml``, ``encodings.idna``, ``torch.fx.experimental.symbolic_shapes``...), is read as that uid.
Python is often installed where that uid cannot read (pyenv under root's 0700 home directory,
the usual layout of root-run containers such as Gradescope's), and no list of modules to import
before the drop can cover what a correct submission may import.

So the worker gets a *readable view* of its module search path: every ``sys.path`` entry of the
interpreter that the worker uid cannot read is mirrored, file by file, as hard links (a copy when
the temporary folder is on another filesystem) into a private temporary folder whose directories
that uid may enter; the worker then searches the mirror instead of the original. Nothing outside
that temporary folder changes: no permission of the installation is touched. The interpreter's C
header folders (``sysconfig``'s ``include``, which ``torch.compile``'s C++ backend compiles against)
are mirrored the same way, and the worker's ``sysconfig`` then names the copy. The mirror is built
once per interpreter and kept for the next runs (``attnscore-mirror-*``, root's own and writable by
nobody else, validated in O(1) per run and rebuilt when the installation changed or the folder was
tampered with; see the comment above :func:`mirror_key`). Files the
installation itself keeps private (mode 0600) stay private, and the check before grading
(:func:`attnscore.sandbox.launch.preflight`) then says which module cannot be read and how to fix it.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from attnscore.sandbox.removal import remove_tree, run_prefix
from attnscore.sandbox.uids import held_uid

__all__ = [
    "WorkerRuntime",
    "mirror_sources",
    "through_mirrors",
    "worker_runtime",
    "unreadable_by",
    "unreadable_by_workers",
    "mirror_key",
    "valid_mirrors",
]

# Directories that hold another environment's packages: mirrored only when they are themselves
# on the worker's path (the base interpreter's site-packages under a venv is not).
_PACKAGE_DIRS = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class WorkerRuntime:
    """What the sandboxed worker runs.

    Attributes:
        executable: the interpreter started (as root, before the privilege drop).
        path: that interpreter's ``sys.path`` under ``-I`` (what the worker would search); only
            looked up when the worker drops privileges.
        mirrors: ``(original, readable copy)`` pairs: the worker replaces each original prefix of
            its module paths (and of its C headers' folders) with the copy. Empty when the worker
            can read everything.
        problems: why some of the path could not be made readable (empty when all is well).
        headers: the interpreter's C header folders (``sysconfig``'s ``include`` and
            ``platinclude``, those that exist): what ``torch.compile``'s C++ backend (Inductor)
            compiles against, mirrored like the path when the worker cannot read them.
    """

    executable: str
    path: tuple[str, ...]
    mirrors: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()


_FACTS = (
    "import json, sys, sysconfig; "
    "print(json.dumps([sys.path, [sysconfig.get_path(n) for n in ('include', 'platinclude')]]))"
)


def _interpreter_facts(executable: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(sys.path, C header folders)`` of ``executable -I`` (run once per interpreter), existing
    entries only; the header folders are ``sysconfig``'s ``include`` and ``platinclude``."""
    done = subprocess.run(
        [executable, "-I", "-c", _FACTS],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        check=True,
    )
    entries, headers = json.loads(done.stdout.strip().splitlines()[-1])

    def existing(paths: list[object]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in paths if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p)))

    return tuple(p for p in entries if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p)), existing(headers)


def _interpreter_path(executable: str) -> tuple[str, ...]:
    """``sys.path`` of ``executable -I`` (run once per interpreter), existing entries only."""
    return _interpreter_facts(executable)[0]


def _readable_as(paths: tuple[str, ...], uid: int, gid: int) -> tuple[bool, ...] | None:
    """Whether user ``uid`` (group ``gid``, no supplementary groups) can read and enter each of
    ``paths``, as the kernel decides it (ACLs included): asked of ``test -r/-x`` run as that user.
    None when the check gave no answer (its process failed to start, or was killed)."""
    script = 'for p; do if [ -r "$p" ] && { [ ! -d "$p" ] || [ -x "$p" ]; }; then echo 1; else echo 0; fi; done'
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", script, "sh", *paths],
            capture_output=True,
            text=True,
            timeout=60,
            user=uid,
            group=gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    answers = done.stdout.split()
    if done.returncode != 0 or len(answers) != len(paths):
        return None
    return tuple(a == "1" for a in answers)


def unreadable_by(paths: tuple[str, ...], uid: int, gid: int) -> tuple[str, ...]:
    """The entries of ``paths`` that user ``uid`` (group ``gid``, no supplementary groups) cannot
    read and enter, as the kernel decides it (ACLs included): asked of ``test -r/-x`` run as that user.

    ``uid`` must be one this grader holds (a runner's own worker uid, or :func:`unreadable_by_workers`):
    the check runs as that uid, and a grader claiming or releasing it kills its every process.
    A check that gives no answer counts every entry as unreadable (the mirror is harmless).
    Only meaningful when this process may switch users (it is root); otherwise returns ``()``.
    """
    if os.geteuid() != 0 or not paths:
        return ()
    answers = _readable_as(paths, uid, gid)
    if answers is None:
        return tuple(paths)  # could not ask: assume the worst, the mirror is harmless
    return tuple(p for p, ok in zip(paths, answers, strict=True) if not ok)


def unreadable_by_workers(paths: tuple[str, ...], first_uid: int) -> tuple[str, ...]:
    """:func:`unreadable_by` as a worker uid (from ``first_uid`` on, its own group) held for the
    check (:func:`attnscore.sandbox.uids.held_uid`), so that no other grader kills the check by
    claiming or releasing that uid meanwhile. Worker uids own nothing and belong to no group, so
    any of them reads what the others read.

    Raises:
        RuntimeError: no worker uid is free (:func:`attnscore.sandbox.uids.claim_uid`).
    """
    if os.geteuid() != 0 or not paths:
        return ()
    with held_uid(first_uid) as uid:
        return unreadable_by(paths, uid, uid)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _mirror_tree(source: str, target: str, keep: frozenset[str]) -> None:
    """Recreate ``source`` at ``target``: directories 0755 (0700 where the original is closed to
    other users), files as hard links (their own modes).

    Nested package directories (``site-packages``) are skipped unless they are in ``keep``.
    """
    os.makedirs(target, exist_ok=True)
    os.chmod(target, 0o755)
    for folder, dirs, files in os.walk(source):
        relative = os.path.relpath(folder, source)
        out = target if relative == "." else os.path.join(target, relative)
        kept = []
        for name in sorted(dirs):
            full = os.path.join(folder, name)
            if name in _PACKAGE_DIRS and full not in keep:
                continue
            if os.path.islink(full):
                os.symlink(os.readlink(full), os.path.join(out, name))
                continue
            os.mkdir(os.path.join(out, name))
            # A folder the installation keeps from other users stays kept: only the ancestors that
            # blocked the way (root's 0700 home) are left behind by the mirror.
            private = not os.stat(full).st_mode & stat.S_IXOTH
            os.chmod(os.path.join(out, name), 0o700 if private else 0o755)
            kept.append(name)
        dirs[:] = kept
        for name in files:
            full = os.path.join(folder, name)
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(full), os.path.join(out, name))
            elif stat.S_ISREG(mode):
                _link_or_copy(full, os.path.join(out, name))


def mirror_sources(executable: str, uid: int, gid: int) -> tuple[tuple[str, ...], tuple[str, ...], list[str]]:
    """``(sys.path, header folders, outermost blocked)`` of the interpreter ``executable`` for a worker
    of user ``uid``: what user cannot read among its module path, its C header folders and the
    interpreter's own file (which ``torch.compile`` starts again to probe the CPU's vector
    instructions), outermost first (nested entries come along with their mirror)."""
    path, headers = _interpreter_facts(executable)
    binary = os.path.realpath(executable)
    candidates = tuple(dict.fromkeys(path + headers + ((binary,) if os.path.isfile(binary) else ())))
    # Every check runs as a worker uid this grader holds meanwhile (held_uid), never as one another
    # grader may claim or release meanwhile: either kills every process of the uid, the check's too.
    with held_uid(uid) as probe:
        blocked = unreadable_by(candidates, probe, probe if gid == uid else gid)
    return path, headers, [p for p in sorted(blocked) if not any(p.startswith(q + os.sep) for q in blocked if q != p)]


def _build(executable: str, uid: int, gid: int, cache: str | None = None) -> WorkerRuntime:
    path, headers, outermost = mirror_sources(executable, uid, gid)
    if not outermost:
        return WorkerRuntime(executable, path, headers=headers)
    folder = tempfile.gettempdir() if cache is None else cache
    found = _cached_mirrors(executable, path, outermost, folder)
    problems: list[str] = []
    if found is not None:
        mirrors = found
    else:  # no safe cache to be had here: a private mirror for this process, removed when it exits
        root = tempfile.mkdtemp(prefix=run_prefix("runtime"), dir=folder)
        atexit.register(remove_tree, root)
        mirrors, problems = _make_mirrors(root, outermost, path)
    copies = tuple(copy for _, copy in mirrors)
    if copies:
        with held_uid(uid) as probe:
            answers = _readable_as(copies, probe, probe if gid == uid else gid)
        if answers is None:
            problems.append(
                f"could not check that uid {uid} can read the readable copy of the interpreter in {folder}: "
                "the check run as that uid gave no answer; try again"
            )
        elif not all(answers):
            problems.append(
                f"the temporary folder {folder} is not readable by uid {uid}; set TMPDIR to a folder it can enter"
            )
    return WorkerRuntime(executable, path, tuple(mirrors), tuple(problems), headers)


def _make_mirrors(root: str, outermost: list[str], path: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[str]]:
    """Mirror each of ``outermost`` under ``root`` (as ``root/N/basename``); ``(mirrors, problems)``."""
    os.chmod(root, 0o755)
    mirrors: list[tuple[str, str]] = []
    problems: list[str] = []
    for original in outermost:
        copy = os.path.join(root, str(len(mirrors)), os.path.basename(original) or "root")
        try:
            os.makedirs(os.path.dirname(copy))
            os.chmod(os.path.dirname(copy), 0o755)
            if os.path.isdir(original):
                _mirror_tree(original, copy, frozenset(path))
            else:
                _link_or_copy(original, copy)
        except OSError as exc:
            problems.append(f"could not make a readable copy of {original}: {exc.strerror or exc}")
            continue
        mirrors.append((original, copy))
    return mirrors, problems


# ------------------------------------------------------------------ the mirror, built once per interpreter
#
# The mirror is kept between grader runs in the temporary folder as ``attnscore-mirror-<E>-<K>``:
# ``E`` names the interpreter, ``K`` hashes what the mirror was made from (the interpreter's path,
# the identity -- device, inode, modification and change times -- of the interpreter and of every
# folder on its module path, this format and attnscore's version). A run validates it in O(1): the
# folder and its manifest are root's own, writable by nobody else, not links, and the manifest names
# the same key; each mirror's top folders likewise. Only root can change anything below a folder
# made that way, so a worker uid can neither plant files in it nor swap it (a planted or tampered
# folder fails the check: it is removed and built again). Builds happen in a run-named folder
# (``attnscore-runtime-<run>-``, swept when its run is gone, so a build killed half-way leaves
# nothing for good) renamed into place when complete, under an exclusive lock of the key's lock file
# (in the root-only lock folder), so two graders starting at once build it once; a grader holds a
# shared lock while it uses a mirror, and an older mirror of the same interpreter is removed only
# when nobody holds it. What a pip install changes is seen through the site folder's times; a file
# rewritten in place is the same inode, which the hard link shows as it is.

_FORMAT = 1
_LOCK_FOLDER = "/tmp/attnscore-uid-locks"  # root-only, shared with the sandbox's uid locks
_MANIFEST = "manifest.json"
_BUILD_WAIT_S = 120.0  # how long a grader waits for another one's build before making its own mirror
_HELD: list[int] = []  # lock files this process holds shared (kept open until it exits)
BUILDS: list[str] = []  # the mirrors this process built (a record for tests and benchmarks)


def _identity(path: str) -> list[int]:
    """Device, inode, modification and change times of a folder; a file's (the interpreter, which
    the mirror hard-links, and so changes its change time) without the change time."""
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        return [info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns]
    return [info.st_dev, info.st_ino, info.st_mtime_ns]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("attnscore")
    except Exception:  # noqa: BLE001 - not installed as a distribution: the format alone
        return "unknown"


def mirror_key(executable: str, path: tuple[str, ...], outermost: list[str]) -> tuple[str, str]:
    """``(interpreter name, key)`` of the mirror of ``outermost`` (see the comment above).

    Raises:
        OSError: one of the folders is gone.
    """
    exe = os.path.realpath(executable)
    made_of = [
        _FORMAT,
        _version(),
        exe,
        _identity(exe),
        list(path),
        [[p, _identity(p)] for p in outermost],
        [[p, _identity(p)] for p in path],
    ]
    digest = hashlib.sha256(json.dumps(made_of).encode()).hexdigest()
    return hashlib.sha256(exe.encode()).hexdigest()[:12], digest[:32]


def _safe_folder(info: os.stat_result) -> bool:
    """Root's own and writable by nobody else."""
    return info.st_uid == 0 and not info.st_mode & 0o022


def _lock_name(cached: str) -> str:
    """The lock file's name for the cached folder ``cached``: one per folder (the same interpreter
    cached in two temporary folders has two locks, so a grader holding one never blocks the other)."""
    return "mirror-" + hashlib.sha256(os.path.abspath(cached).encode()).hexdigest()[:32]


def _lock_file(name: str) -> int | None:
    """An open lock file ``name`` in the root-only lock folder, or None when that folder is not
    root's own (then nothing is cached)."""
    try:
        os.mkdir(_LOCK_FOLDER, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(_LOCK_FOLDER)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        return None
    try:
        return os.open(os.path.join(_LOCK_FOLDER, name), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None


def valid_mirrors(folder: str, key: str) -> list[tuple[str, str]] | None:
    """The mirrors of the cached ``folder`` when it is sound and was made for ``key``, else None.

    Sound: ``folder``, its manifest and each mirror's two top levels are root's own, writable by
    nobody else and not symbolic links; the manifest says ``key``. O(number of mirrors).
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _safe_folder(os.fstat(fd)):
            return None
        manifest = os.open(_MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            info = os.fstat(manifest)
            if not stat.S_ISREG(info.st_mode) or not _safe_folder(info) or info.st_size > 1 << 20:
                return None
            said = json.loads(os.read(manifest, 1 << 20).decode())
        finally:
            os.close(manifest)
        if not isinstance(said, dict) or said.get("format") != _FORMAT or said.get("key") != key:
            return None
        mirrors = []
        for original, relative in said.get("mirrors", []):
            number, name = relative.split("/")
            if not number.isdigit() or name in ("", ".", ".."):
                return None
            for part in (number, relative):
                if not _safe_folder(os.stat(part, dir_fd=fd, follow_symlinks=False)):
                    return None
            mirrors.append((str(original), os.path.join(folder, relative)))
        return mirrors
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    finally:
        os.close(fd)


def _cached_mirrors(
    executable: str, path: tuple[str, ...], outermost: list[str], folder: str
) -> list[tuple[str, str]] | None:
    """The mirrors of ``outermost`` from the cache in ``folder``, built first when missing,
    stale or unsound; None when no cache can be kept safely (no root-only lock folder, a folder
    that cannot be removed, a build that failed): the caller then makes a private one."""
    import fcntl

    try:
        interpreter, key = mirror_key(executable, path, outermost)
    except OSError:
        return None
    name = f"attnscore-mirror-{interpreter}-{key}"
    cached = os.path.join(folder, name)
    lock = _lock_file(_lock_name(cached))
    if lock is None:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
        found = valid_mirrors(cached, key)
        waited_until = time.monotonic() + _BUILD_WAIT_S
        while found is None:
            try:  # one builder; the others find it built once it holds the lock shared again
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # another grader builds it, or uses an unsound one it validated before: never
                # wait for that grader's end (a private mirror for this process instead)
                if time.monotonic() > waited_until:
                    os.close(lock)
                    return None
                fcntl.flock(lock, fcntl.LOCK_SH)
                time.sleep(0.05)
                found = valid_mirrors(cached, key)
                continue
            found = valid_mirrors(cached, key)
            if found is None:
                found = _build_cache(cached, key, outermost, path, folder)
                if found is None:
                    os.close(lock)
                    return None
                _remove_older(folder, interpreter, name)
            fcntl.flock(lock, fcntl.LOCK_SH)
            # Going from the exclusive lock to the shared one lets go of the lock for a moment
            # (flock's conversion is not atomic), in which a grader on an older or newer
            # installation may take this mirror for stale and remove it (and its lock file): look
            # again under the shared lock; if it went, a private mirror for this process instead.
            found = valid_mirrors(cached, key)
            if found is None:
                os.close(lock)
                return None
    except OSError:
        os.close(lock)
        return None
    _HELD.append(lock)  # held shared until this process exits: nobody removes it meanwhile
    return found


def _build_cache(
    cached: str, key: str, outermost: list[str], path: tuple[str, ...], folder: str
) -> list[tuple[str, str]] | None:
    """Build the mirror into a run-named folder, then rename it to ``cached`` (what was there,
    unsound or stale, removed first). The caller holds the key's lock exclusively."""
    if os.path.lexists(cached) and remove_tree(cached) is not None:
        return None
    build = tempfile.mkdtemp(prefix=run_prefix("runtime"), dir=folder)
    mirrors, problems = _make_mirrors(build, outermost, path)
    if problems:
        remove_tree(build)
        return None
    relative = [[original, os.path.relpath(copy, build)] for original, copy in mirrors]
    manifest = os.path.join(build, _MANIFEST)
    with open(manifest, "x") as f:
        json.dump({"format": _FORMAT, "key": key, "mirrors": relative}, f)
    os.chmod(manifest, 0o444)
    try:
        os.rename(build, cached)
    except OSError:
        remove_tree(build)
        return None
    BUILDS.append(cached)
    return [(original, os.path.join(cached, rel)) for original, rel in relative]


def _remove_older(folder: str, interpreter: str, keep: str) -> None:
    """Remove the mirrors of the same interpreter made for an older key that nobody holds: each is
    renamed to a run-named folder first (so nobody finds it half removed), then removed."""
    import fcntl

    try:
        names = os.listdir(folder)
    except OSError:
        return
    for other in names:
        if not other.startswith(f"attnscore-mirror-{interpreter}-") or other == keep:
            continue
        lock = _lock_file(_lock_name(os.path.join(folder, other)))
        if lock is None:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue  # in use by a grader that still runs on it
        try:
            info = os.lstat(os.path.join(folder, other))
            if stat.S_ISDIR(info.st_mode) and info.st_uid == 0:
                doomed = tempfile.mkdtemp(prefix=run_prefix("runtime"), dir=folder)
                os.rename(os.path.join(folder, other), doomed)
                remove_tree(doomed)
            os.unlink(os.path.join(_LOCK_FOLDER, _lock_name(os.path.join(folder, other))))
        except OSError:
            pass
        finally:
            os.close(lock)


@functools.cache
def worker_runtime(executable: str | None = None, uid: int = 64000, gid: int | None = None) -> WorkerRuntime:
    """The runtime for workers started from ``executable`` (default: this interpreter) that drop
    to ``uid``; built once per grader process and removed when it exits.

    When this process is not root there is no privilege drop and nothing is mirrored.

    What the worker user can read is asked as a worker uid from ``uid`` on that this grader holds
    meanwhile (:func:`attnscore.sandbox.uids.held_uid`).

    Raises:
        subprocess.CalledProcessError, OSError: ``executable`` cannot be started at all.
        RuntimeError: no worker uid is free to ask as (:func:`attnscore.sandbox.uids.claim_uid`).
    """
    executable = executable or sys.executable
    if os.geteuid() != 0:
        return WorkerRuntime(executable, ())
    return _build(executable, uid, uid if gid is None else gid)


def through_mirrors(path: str, mirrors: tuple[tuple[str, str], ...]) -> str:
    """``path`` as the worker's user reaches it: through the readable copy of the first of
    ``mirrors`` (``(original, copy)`` pairs) that holds it, else unchanged."""
    for original, copy in mirrors:
        if path == original or path.startswith(original.rstrip("/") + "/"):
            return copy + path[len(original) :]
    return path
