"""Removing folders a submission could have written, without recursion and without following links.

``shutil.rmtree`` recurses once per folder level: a submission that builds a folder chain a few
thousand levels deep makes it raise :class:`RecursionError` (not an :class:`OSError`, so
``ignore_errors=True`` does not catch it), and the chain's paths are longer than ``PATH_MAX``.
:func:`remove_tree` walks the tree bottom-up with an explicit stack instead, one open folder at a
time, every step relative to the folder above it (``dir_fd``), never following a symbolic link,
never leaving the file system it started on; it returns what it could not remove instead of
raising. :func:`sweep_stale` removes the folders of grader runs that are gone, named by
:func:`run_prefix`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterable

__all__ = ["remove_tree", "tree_usage", "run_prefix", "run_is_alive", "sweep_stale"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_REPORTED = 3  # problems named in the returned text; the count is always complete


def _open_dir(name: str, dir_fd: int | None) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a symbolic link; a
    folder its owner made unreadable (mode 0000, when the grader is not root) is given 0700 first."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        if dir_fd is None:
            raise
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise
        os.chmod(name, stat.S_IMODE(info.st_mode) | 0o700, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _make_writable(fd: int) -> None:
    """Let the folder open as ``fd`` be emptied by its owner (a submission may chmod it 0500)."""
    with contextlib.suppress(OSError):
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)


def _listing(fd: int) -> tuple[list[str], list[str]]:
    """``(files, folders)`` of the open folder ``fd``; symbolic links are files here."""
    files: list[str] = []
    folders: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            (folders if is_folder else files).append(entry.name)
    return files, folders


class _Level:
    """One open level of the walk: its identity, its name in the level above, the subfolders left."""

    __slots__ = ("dev", "ino", "name", "folders")

    def __init__(self, info: os.stat_result, name: str, folders: list[str]) -> None:
        self.dev, self.ino, self.name, self.folders = info.st_dev, info.st_ino, name, folders


def remove_tree(path: str | os.PathLike[str]) -> str | None:
    """Remove ``path`` and everything below it, bottom-up, without recursion; never raises.

    A symbolic link (at ``path`` or anywhere below it) is removed itself, never followed; a folder
    on another file system (a mount point) is left alone; folders a submission made unwritable
    to their owner (mode 0500 or 0000) are made writable first. Only one folder is open at a
    time, so a chain of any depth needs neither recursion nor a descriptor per level, and no path
    longer than one name is ever built.

    Returns:
        None when ``path`` is gone (or was never there), else one line saying how many entries
        could not be removed and the first few reasons.

    Example:
        >>> import tempfile, pathlib
        >>> top = pathlib.Path(tempfile.mkdtemp())
        >>> deep = top.joinpath(*["d"] * 50); deep.mkdir(parents=True); _ = (deep / "f").write_text("x")
        >>> remove_tree(top), top.exists()
        (None, False)
    """
    path = os.fspath(path)
    parent, name = os.path.split(os.path.normpath(os.path.abspath(path)))
    problems: list[str] = []
    try:
        parent_fd = _open_dir(parent, None)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"could not remove {path}: {exc.strerror or exc}"
    try:
        _remove_below(parent_fd, name, problems)
    except Exception as exc:  # noqa: BLE001 - a walk that goes wrong is a problem to report, never a crash
        problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        os.close(parent_fd)
    if not problems:
        return None
    shown = "; ".join(problems[:_MAX_REPORTED])
    more = f" (and {len(problems) - _MAX_REPORTED} more)" if len(problems) > _MAX_REPORTED else ""
    return f"could not remove {len(problems)} {'entry' if len(problems) == 1 else 'entries'} of {path}: {shown}{more}"


def _remove_below(top_parent: int, top_name: str, problems: list[str]) -> None:
    """Remove ``top_name`` in the open folder ``top_parent`` (see :func:`remove_tree`)."""
    try:
        info = os.stat(top_name, dir_fd=top_parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(top_name, dir_fd=top_parent)
        return
    device = info.st_dev
    stack: list[_Level] = []  # the open path from the top down; only the last level's fd is open
    fd = _enter(top_parent, top_name, device, stack, problems)
    if fd is None:
        return
    while True:
        level = stack[-1]
        while level.folders:  # descend into the next subfolder that can be entered
            child = level.folders.pop()
            child_fd = _enter(fd, child, device, stack, problems)
            if child_fd is not None:
                os.close(fd)
                fd = child_fd
                level = stack[-1]
        # every subfolder of this level is done: go up and remove it
        stack.pop()
        if not stack:
            os.close(fd)
            _rmdir(top_parent, top_name, problems)
            return
        above = stack[-1]
        try:
            up = _open_dir("..", fd)
            up_info = os.fstat(up)
        except OSError as exc:
            os.close(fd)
            problems.append(f"{level.name}: cannot go back up ({exc.strerror or exc})")
            return
        os.close(fd)
        if (up_info.st_dev, up_info.st_ino) != (above.dev, above.ino):  # moved while we walked: stop here
            os.close(up)
            problems.append(f"{above.name}: the folder moved during removal")
            return
        fd = up
        _rmdir(fd, level.name, problems)


def _enter(
    parent_fd: int,
    name: str,
    device: int,
    stack: list[_Level],
    problems: list[str],
) -> int | None:
    """Open the subfolder ``name``, remove its files and push it on ``stack``; its fd, or None."""
    try:
        fd = _open_dir(name, parent_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{name}: {exc.strerror or exc}")
        return None
    info = os.fstat(fd)
    if info.st_dev != device:
        os.close(fd)
        problems.append(f"{name}: another file system is mounted there")
        return None
    _make_writable(fd)
    try:
        files, folders = _listing(fd)
    except OSError as exc:
        os.close(fd)
        problems.append(f"{name}: cannot list it ({exc.strerror or exc})")
        return None
    for file in files:
        _remove(os.unlink, fd, file, problems)
    stack.append(_Level(info, name, folders))
    return fd


def _rmdir(parent_fd: int, name: str, problems: list[str]) -> None:
    _remove(os.rmdir, parent_fd, name, problems)


def _remove(remove: Callable[..., None], parent_fd: int, name: str, problems: list[str]) -> None:
    """``remove(name, dir_fd=parent_fd)`` (``os.unlink`` or ``os.rmdir``); an entry already gone is
    fine, any other failure is noted in ``problems``."""
    try:
        remove(name, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"{name}: {exc.strerror or exc}")


def tree_usage(path: str | os.PathLike[str], stop_above: int | None = None) -> int:
    """The bytes of disk that ``path`` and everything below it hold (allocated blocks, so sparse
    files count what they use, plus each folder's own blocks), walked like :func:`remove_tree`:
    without recursion, one folder open at a time, links not followed, one file system. With
    ``stop_above``, the walk ends as soon as the total exceeds it (the total returned is then
    only known to be larger). Entries that vanish or cannot be read count 0; never raises.

    Example:
        >>> import tempfile, pathlib
        >>> top = pathlib.Path(tempfile.mkdtemp()); _ = (top / "f").write_bytes(b"x" * 100_000)
        >>> tree_usage(top) >= 100_000, remove_tree(top)
        (True, None)
    """
    try:
        fd = _open_dir(os.fspath(path), None)
    except OSError:
        try:
            return os.stat(path, follow_symlinks=False).st_blocks * 512
        except OSError:
            return 0
    total = 0
    try:
        info = os.fstat(fd)
        device = info.st_dev
        files, folders = _usage_of_files(fd)
        total += info.st_blocks * 512 + files
        stack = [_Level(info, os.fspath(path), folders)]
        while stack:
            if stop_above is not None and total > stop_above:
                return total
            level = stack[-1]
            if level.folders:
                name = level.folders.pop()
                try:
                    child = _open_dir(name, fd)
                except OSError:
                    continue
                child_info = os.fstat(child)
                if child_info.st_dev != device:
                    os.close(child)
                    continue
                os.close(fd)
                fd = child
                total += child_info.st_blocks * 512
                files, folders = _usage_of_files(fd)
                total += files
                stack.append(_Level(child_info, name, folders))
                continue
            stack.pop()
            if not stack:
                return total
            up = _open_dir("..", fd)
            up_info = os.fstat(up)
            os.close(fd)
            fd = up
            if (up_info.st_dev, up_info.st_ino) != (stack[-1].dev, stack[-1].ino):
                return total  # moved while it was walked: what was counted so far
    except OSError:
        return total
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return total


def _usage_of_files(fd: int) -> tuple[int, list[str]]:
    """``(bytes the files of the open folder fd hold, the names of its subfolders)``."""
    used, folders = 0, []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                else:
                    used += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return used, folders


# ---------------------------------------------------------------- folders of runs that are gone


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def run_prefix(kind: str) -> str:
    """A temporary folder prefix naming this process as its owner:
    ``attnscore-<kind>-<pid namespace>.<pid>.<start time>-`` (see :func:`sweep_stale`)."""
    pid = os.getpid()
    return f"attnscore-{kind}-{_pid_namespace()}.{pid}.{_start_time(pid) or 0}-"


_OWNED = re.compile(r"attnscore-(?P<kind>[a-z]+)-(?P<ns>\d+)\.(?P<pid>\d+)\.(?P<start>\d+)-[^/]*")


def run_is_alive(name: str) -> bool | None:
    """Whether the run that made the folder ``name`` (see :func:`run_prefix`) still runs; None
    when that cannot be told (not such a name, or a run in another PID namespace)."""
    found = _OWNED.fullmatch(name)
    if found is None or found["ns"] != _pid_namespace():
        return None
    return _start_time(int(found["pid"])) == found["start"]


def sweep_stale(
    folder: str, kinds: Iterable[str], owners: Callable[[int], bool] = lambda uid: uid == os.geteuid()
) -> list[str]:
    """Remove the folders in ``folder`` that runs which are gone left behind: names made by
    :func:`run_prefix` for one of ``kinds`` whose process (same pid *and* start time, in this PID
    namespace) no longer runs, owned by a uid ``owners`` accepts. A live run's folder, a folder
    whose owner cannot be told, a symbolic link or anything else is never touched.

    Returns:
        One line per folder that could not be removed entirely (see :func:`remove_tree`).
    """
    wanted, problems = set(kinds), []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        found = _OWNED.fullmatch(name)
        if found is None or found["kind"] not in wanted or run_is_alive(name) is not False:
            continue
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or not owners(info.st_uid):
            continue
        problem = remove_tree(path)
        if problem is not None:
            problems.append(problem)
    return problems
