"""Built cases kept on disk, so that a cold grading run does not draw its inputs again.

Building a spec's cases (:func:`attnscore.check.cases.build_cases`: every property's inputs drawn
with hypothesis, their golden values and allowed errors) takes 0.4–1.5 s and depends only on the
spec file, the dtype, the base seed and the code that builds them, never on a submission. A
grading run (``attnscore grade``, one process per Gradescope or PrairieLearn submission) loads
them from ``$XDG_CACHE_HOME/attnscore/cases`` (default ``~/.cache/attnscore/cases``) instead, in a
few milliseconds, and stores what it had to build.

An entry's key is a SHA-256 of everything the cases are made of: the spec file's bytes and path
(cases carry ``file:line`` locations), the path and bytes of a spec's own reference file(s)
(``function.reference``, ``function.reference_check``: an edited reference gets a new key), the
dtype, the seed, the identity (path, size, mtime) of
every source file of the installed attnscore package, and the versions of Python, numpy,
hypothesis and torch. Anything else changes nothing the cases hold, so a stale entry is never read:
a changed spec or grader gets a new key, and the old entry ages out (the folder keeps the
:data:`KEEP` most recently used entries).

The entries are pickles, read by the grader only, so they are trusted exactly as far as the
grader's own files: the folders are made ``0700`` and used only when they and the entry are the
grader's own (its effective uid), writable by nobody else and no symbolic links (checked on the
open file, ``O_NOFOLLOW``); otherwise nothing is cached and the cases are built as before.
Entries are written to a private temporary file and renamed into place, so a run killed while
writing leaves no half entry (and a sweep removes its temporary file later). Student code never
reaches the folder: the sandboxed worker writes only in its own working folder (landlock) and,
as root, runs under a uid of its own.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import stat
import sys
import time
from pathlib import Path

from attnscore.check.cases import Case, build_cases
from attnscore.maths import lazy_hypothesis
from attnscore.spec.model import Spec

__all__ = ["cached_cases", "cache_folder", "KEEP"]

FORMAT = 1  # bump when what an entry holds changes shape
KEEP = 64  # entries kept; older ones (by last use) are removed when a new one is stored
_SUFFIX = ".cases"
_STALE_TEMP_S = 3600.0  # a temporary file older than this belongs to a run that died


def cache_folder() -> Path:
    """Where entries live: ``$XDG_CACHE_HOME/attnscore/cases``, else ``~/.cache/attnscore/cases``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attnscore" / "cases"


def cached_cases(spec: Spec, dtype: str, seed: int | None = None, *, use_cache: bool = True) -> list[Case]:
    """``build_cases(spec, dtype, seed)``, read from the cache when an entry for exactly these
    inputs and this code is there, else built and stored. Never raises for the cache itself: a
    folder that is missing, unsafe or full, or an unreadable entry, only means building the cases.
    Without ``use_cache`` the cases are built and the cache is neither read nor written: a caller
    that may or may not cache (``attnscore grade`` caches, a library call does not) asks here either way.

    Raises:
        SpecError: what :func:`build_cases` raises (no inputs can be drawn for a property).
    """
    key = _key(spec, dtype, seed) if use_cache else None
    folder = _open_folder() if key is not None else None
    try:
        if folder is not None and key is not None:
            found = _read(folder, key)
            if found is not None:
                return found
        cases = build_cases(spec, dtype, seed)
        if folder is not None and key is not None:
            _store(folder, key, cases)
        return cases
    finally:
        if folder is not None:
            os.close(folder)


def _key(spec: Spec, dtype: str, seed: int | None) -> str | None:
    """The entry's name for these cases; None when the spec has no file to key it by."""
    path = getattr(spec, "path", None)
    if not path:
        return None
    try:
        spec_bytes = Path(path).read_bytes()
        # a spec's own reference file(s): an edited reference must never reuse golden values
        references = [[str(f), hashlib.sha256(Path(f).read_bytes()).hexdigest()] for f in _reference_files(spec)]
    except OSError:
        return None
    made_of = [
        FORMAT,
        str(path),
        os.path.abspath(path),
        hashlib.sha256(spec_bytes).hexdigest(),
        references,
        dtype,
        seed,
        _code_identity(),
    ]
    return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()[:40]


def _reference_files(spec: Spec) -> tuple[str, ...]:
    """A spec's own reference file(s) (``function.reference``), which its golden values come from."""
    return tuple(getattr(spec, "reference_files", ()))


@functools.cache
def _code_identity() -> str:
    """A digest of the grader's code: every source file of the attnscore package (path, size,
    mtime) and the versions of what builds cases. Made once per process (a few milliseconds)."""
    import numpy

    root = Path(__file__).resolve().parents[1]
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".yaml", ".json")):
                info = os.stat(os.path.join(folder, name))
                files.append([os.path.relpath(os.path.join(folder, name), root), info.st_size, info.st_mtime_ns])
    versions = [sys.version, numpy.__version__, lazy_hypothesis.version(), _torch_version()]
    return hashlib.sha256(json.dumps([str(root), files, versions]).encode()).hexdigest()


def _torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:  # pragma: no cover - torch is a core dependency
        return "none"


def _own(info: os.stat_result, kind: int, others: int = 0o077) -> bool:
    """Of ``kind`` (a ``stat.S_IF*``), the grader's own, and with none of the ``others`` mode bits
    (default: readable and writable by nobody else)."""
    return stat.S_IFMT(info.st_mode) == kind and info.st_uid == os.geteuid() and not info.st_mode & others


def _open_folder() -> int | None:
    """An open descriptor of the cache folder, made ``0700`` when missing; None when it is not a
    private folder of the grader's own, or the ``attnscore`` folder holding it is not the grader's
    own or is writable by others (who could then swap the cache folder)."""
    folder = cache_folder()
    try:
        folder.parent.parent.mkdir(parents=True, exist_ok=True)
        for level in (folder.parent, folder):
            try:
                os.mkdir(level, 0o700)
            except FileExistsError:
                pass
        parent = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if not _own(os.fstat(parent), stat.S_IFDIR, others=0o022):
                return None
            fd = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError:
        return None
    if not _own(os.fstat(fd), stat.S_IFDIR):
        os.close(fd)
        return None
    return fd


def _read(folder: int, key: str) -> list[Case] | None:
    """The entry ``key`` when it is sound (the grader's own regular file, private), else None."""
    try:
        fd = os.open(key + _SUFFIX, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    try:
        if not _own(os.fstat(fd), stat.S_IFREG):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            entry = pickle.load(f)
    except Exception:  # noqa: BLE001 - a damaged entry is only a miss; it is stored again
        return None
    finally:
        os.close(fd)
    if not (isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("cases"), list)):
        return None
    try:
        os.utime(key + _SUFFIX, dir_fd=folder, follow_symlinks=False)  # last use, for ageing out
    except (OSError, NotImplementedError):
        pass
    return entry["cases"]


def _store(folder: int, key: str, cases: list[Case]) -> None:
    """Write the entry through a private temporary file renamed into place; then age out the oldest."""
    try:
        data = pickle.dumps({"key": key, "cases": cases}, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - cases holding something unpicklable are simply not cached
        return
    temp = f".{key}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
        os.rename(temp, key + _SUFFIX, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        _unlink(folder, temp)
        return
    finally:
        os.close(fd)
    _age_out(folder)


def _age_out(folder: int) -> None:
    """Keep the :data:`KEEP` most recently used entries, and remove temporary files of dead runs."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    entries = []
    now = time.time()
    for name in names:
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            continue
        if name.endswith(".tmp") and now - info.st_mtime > _STALE_TEMP_S:
            _unlink(folder, name)
        elif name.endswith(_SUFFIX):
            entries.append((info.st_mtime, name))
    for _, name in sorted(entries, reverse=True)[KEEP:]:
        _unlink(folder, name)


def _unlink(folder: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except OSError:
        pass
