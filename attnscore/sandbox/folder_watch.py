"""The names linked into a few folders since a moment: what a worker uid may have left there.

When a worker ends, the grader removes what its uid left in the world-writable folders
(:func:`attnscore.sandbox.uids.files_removal`). Listing those folders and reading the owner of
every entry costs a few microseconds an entry, and ``/tmp`` holds hundreds. A uid that held
nothing there when its runner claimed it can only own entries that were linked into the folders
since: each one was made there (``open(O_CREAT)``, ``mkdir``, ``mknod``, ``symlink``, ``link``:
``IN_CREATE``) or renamed into it (``IN_MOVED_TO``), and the kernel reports every such event on
the folder's inotify watch (``inotify(7)``), whatever mount or path the process used, unless its
queue overflowed (``IN_Q_OVERFLOW``) or the folder itself went (deleted, moved, unmounted). Then,
or when a watch could not be set up, :meth:`FolderWatch.names` says it cannot tell (None) and the
folders are listed in full. Constants from ``include/uapi/linux/inotify.h``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Iterable

__all__ = ["FolderWatch"]

_IN_MOVED_TO, _IN_CREATE = 0x00000080, 0x00000100
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x00000400, 0x00000800
_IN_UNMOUNT, _IN_Q_OVERFLOW, _IN_IGNORED = 0x00002000, 0x00004000, 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_WATCHED = _IN_CREATE | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
_LOST = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_Q_OVERFLOW | _IN_IGNORED
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name, NUL padded

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _INIT, _ADD = _libc.inotify_init1, _libc.inotify_add_watch
    _ADD.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    _AVAILABLE = True
except (OSError, AttributeError):  # pragma: no cover - a libc without inotify: the folders are listed
    _AVAILABLE = False


class FolderWatch:
    """An inotify watch on ``folders``, begun now: :meth:`names` gives every name linked directly
    into each folder since, or None when that cannot be known. Close it (:meth:`close`).

    A folder that does not exist now is watched as absent: it must still be absent when asked
    (a folder made meanwhile could hold anything)."""

    def __init__(self, folders: Iterable[str]) -> None:
        self.folders = tuple(folders)
        self.fd = -1
        self.broken = False  # an event was lost or a watch could not be set: names() says None
        self.wds: dict[int, str] = {}
        self.absent: list[str] = []
        self.seen: dict[str, set[str]] = {folder: set() for folder in self.folders}
        if not _AVAILABLE:
            self.broken = True
            return
        fd = _INIT(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            self.broken = True
            return
        self.fd = fd
        for folder in self.folders:
            wd = _ADD(fd, os.fsencode(folder), _WATCHED)
            if wd >= 0:
                self.wds[wd] = folder
            elif ctypes.get_errno() == errno.ENOENT:
                self.absent.append(folder)
            else:
                self.broken = True

    def _drain(self) -> None:
        """Read every event queued so far; note the names, and whether anything was lost."""
        while self.fd >= 0 and not self.broken:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self.broken = True
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].split(b"\0", 1)[0]
                at += _EVENT.size + length
                if mask & _LOST or wd not in self.wds:
                    self.broken = True
                    return
                if mask & (_IN_CREATE | _IN_MOVED_TO) and name:
                    self.seen[self.wds[wd]].add(os.fsdecode(name))

    def names(self) -> dict[str, set[str]] | None:
        """Each folder's names linked into it since the watch began (some may be gone again), or
        None when the watch cannot say: its queue overflowed, a folder went or appeared, or a
        watch could not be set up."""
        self._drain()
        if self.broken or any(os.path.lexists(folder) for folder in self.absent):
            return None
        return {folder: set(names) for folder, names in self.seen.items()}

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.broken = True
