"""The folders and memory a worker is given: the worker modules, the submission's private copy,
the shared input memory, and the sweep of what dead grader runs left in the temporary folder."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from attnscore.sandbox.limits import Limits
from attnscore.sandbox.removal import remove_tree, run_prefix, sweep_stale
from attnscore.sandbox.uids import UID_SLOTS, drops_privileges

__all__ = ["PROJECT", "SHARED_BYTES", "lay_out", "shared_memory", "sweep_dead_runs", "worker_lib"]

PROJECT = Path(__file__).resolve().parents[2]  # the folder holding attnscore/
# The only grader code the worker may see is the boundary package, copied whole into a private
# folder: the worker's `attnscore` package holds no reference implementation, specs or golden values.
_BOUNDARY = PROJECT / "attnscore" / "boundary"
SHARED_BYTES = 64 * 1024**2  # the call inputs' shared memory (a sparse memfd; what is written is what costs)
# the run_prefix kinds of the sandbox's folders
_RUN_FOLDERS = ("stage", "worker", "submission", "workerlib", "runtime")
_SWEPT: set[str] = set()


@functools.cache
def worker_lib() -> str:
    """A private, read-only folder holding just the modules the worker runs (made once)."""
    sweep_dead_runs()
    lib = tempfile.mkdtemp(prefix=run_prefix("workerlib"))
    atexit.register(remove_tree, lib)
    package = os.path.join(lib, "attnscore")
    os.makedirs(package)
    Path(package, "__init__.py").write_text('"""Worker-side subset: the boundary package only."""\n')
    shutil.copytree(_BOUNDARY, os.path.join(package, "boundary"), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for folder, _, files in os.walk(lib):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
    return lib


def sweep_dead_runs(first_uid: int = Limits.uid) -> None:
    """Remove the staging, working and submission folders that grader runs which are gone left in
    this process's temporary folder (once per folder and process): a grader killed before its
    cleanup, or one whose cleanup a submission defeated, never leaves them for good. A live
    run's folder is never touched (:func:`attnscore.sandbox.removal.sweep_stale`)."""
    folder = tempfile.gettempdir()
    if folder in _SWEPT:
        return
    _SWEPT.add(folder)
    if drops_privileges():

        def owned(uid: int) -> bool:
            return uid == 0 or first_uid <= uid < first_uid + UID_SLOTS

        sweep_stale(folder, _RUN_FOLDERS, owned)
    else:
        sweep_stale(folder, _RUN_FOLDERS)


def shared_memory() -> int:
    """A descriptor of ``SHARED_BYTES`` of memory-backed file (a memfd; an unlinked temporary
    file where memfd is missing), sparse: only what is written costs memory."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("attnscore-inputs", os.MFD_CLOEXEC)
    else:  # pragma: no cover - Linux has memfd
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, SHARED_BYTES)
    return fd


def lay_out(folder: str, files: tuple[tuple[str, bytes], ...], group: int | None = None) -> None:
    """Write the submission's files under ``folder``: folders 0755, files read-only (0444); with
    ``group`` (a worker's own gid, when the grader is root), owned by root and that group only:
    folders 0750, files 0440, so no other worker's uid can read them and the worker cannot
    change their modes."""
    folder_mode, file_mode = (0o755, 0o444) if group is None else (0o750, 0o440)
    made_folders = [folder]
    for relative, content in files:
        target = Path(folder, *relative.split("/"))
        for parent in reversed(target.relative_to(folder).parents[:-1]):
            made = Path(folder, parent)
            if not made.is_dir():
                made.mkdir()
                made_folders.append(str(made))
        target.write_bytes(content)
        if group is not None:
            os.chown(target, 0, group)
        os.chmod(target, file_mode)
    for made_folder in made_folders:
        if group is not None:
            os.chown(made_folder, 0, group)
        os.chmod(made_folder, folder_mode)
