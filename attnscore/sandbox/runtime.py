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
that temporary folder changes: no permission of the installation is touched. Files the
installation itself keeps private (mode 0600) stay private, and the check before grading
(:func:`attnscore.sandbox.launch.preflight`) then says which module cannot be read and how to fix it.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from attnscore.sandbox.removal import remove_tree, run_prefix

__all__ = ["WorkerRuntime", "through_mirrors", "worker_runtime", "unreadable_by"]

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
            its module paths with the copy. Empty when the worker can read everything.
        problems: why some of the path could not be made readable (empty when all is well).
    """

    executable: str
    path: tuple[str, ...]
    mirrors: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()


def _interpreter_path(executable: str) -> tuple[str, ...]:
    """``sys.path`` of ``executable -I`` (run once per interpreter), existing entries only."""
    done = subprocess.run(
        [executable, "-I", "-c", "import sys, json; print(json.dumps(sys.path))"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        check=True,
    )
    entries = json.loads(done.stdout.strip().splitlines()[-1])
    return tuple(p for p in entries if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p))


def unreadable_by(paths: tuple[str, ...], uid: int, gid: int) -> tuple[str, ...]:
    """The entries of ``paths`` that user ``uid`` (group ``gid``, no supplementary groups) cannot
    read and enter, as the kernel decides it (ACLs included): asked of ``test -r/-x`` run as that user.

    Only meaningful when this process may switch users (it is root); otherwise returns ``()``.
    """
    if os.geteuid() != 0 or not paths:
        return ()
    script = 'for p; do if [ -r "$p" ] && { [ ! -d "$p" ] || [ -x "$p" ]; }; then echo 1; else echo 0; fi; done'
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
    answers = done.stdout.split()
    if done.returncode != 0 or len(answers) != len(paths):
        return tuple(paths)  # could not ask: assume the worst, the mirror is harmless
    return tuple(p for p, ok in zip(paths, answers, strict=True) if ok != "1")


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


def _build(executable: str, uid: int, gid: int) -> WorkerRuntime:
    path = _interpreter_path(executable)
    blocked = unreadable_by(path, uid, gid)
    if not blocked:
        return WorkerRuntime(executable, path)
    # Mirror only the outermost blocked entries; nested ones come along (when kept).
    outermost = [p for p in sorted(blocked) if not any(p.startswith(q + os.sep) for q in blocked if q != p)]
    root = tempfile.mkdtemp(prefix=run_prefix("runtime"))
    atexit.register(remove_tree, root)
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
    still = unreadable_by(tuple(copy for _, copy in mirrors), uid, gid)
    if still:
        problems.append(
            f"the temporary folder {tempfile.gettempdir()} is not readable by uid {uid}; "
            "set TMPDIR to a folder it can enter"
        )
    return WorkerRuntime(executable, path, tuple(mirrors), tuple(problems))


@functools.cache
def worker_runtime(executable: str | None = None, uid: int = 64000, gid: int | None = None) -> WorkerRuntime:
    """The runtime for workers started from ``executable`` (default: this interpreter) that drop
    to ``uid``; built once per grader process and removed when it exits.

    When this process is not root there is no privilege drop and nothing is mirrored.

    Raises:
        subprocess.CalledProcessError, OSError: ``executable`` cannot be started at all.
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
