"""Landlock: the worker confines itself, with no namespaces and no privileges needed.

Linux's Landlock LSM (kernel 5.13 and later, also inside unprivileged containers where bubblewrap
cannot create namespaces) lets a process restrict what it, and every process it starts, may do:

- **files**: read only beneath the folders granted (the interpreter's module folders, ``/usr``,
  ``/lib*``, a few files of ``/etc``, the submission), write only in its own working folder. The
  specs, golden values, the grader's code and other students' files are out of reach even where
  their permission bits let any user read them.
- **TCP** (Landlock ABI 4 and later): no ``bind`` or ``connect`` at all.
- **signals and abstract UNIX sockets** (ABI 6 and later): nothing outside the worker's own
  domain can be signalled or reached (not the grader, not another student's worker).

Runs inside the worker (after the privilege drop, before the submission is imported). Uses only
the standard library (``ctypes``); the syscall numbers are the same on every Linux architecture.
Formula and constants: ``include/uapi/linux/landlock.h`` and the kernel's Landlock documentation.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

__all__ = ["abi_version", "confine"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may hold
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent, disabled or blocked (seccomp)."""
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def confine(read: list[str], write: list[str], files: Sequence[tuple[str, int]] = ()) -> str:
    """Restrict this process (and its future children) to reading beneath ``read``, writing
    beneath ``write``, the listed ``(file, rights)``, no TCP and no signals outside itself.

    Paths that do not exist are skipped. Returns a short description of what was applied
    (``"landlock v6: files, tcp, signals"``), or ``""`` when Landlock is not available.

    Raises:
        OSError: Landlock is available but the ruleset could not be applied.
    """
    abi = abi_version()
    if abi <= 0:
        return ""
    libc = _libc()
    handled_fs = _FS_BY_ABI.get(abi, (1 << 16) - 1)
    attr = _RulesetAttr(handled_fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        rules = [(p, READ) for p in read] + [(p, WRITE) for p in write] + list(files)
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights & handled_fs
                if not os.path.isdir(path):
                    allowed &= _FILE_RIGHTS
                beneath = _PathBeneathAttr(allowed, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), ctypes.c_uint32(0)) < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    parts = ["files"] + (["tcp"] if abi >= 4 else []) + (["signals"] if abi >= 6 else [])
    return f"landlock v{abi}: {', '.join(parts)}"
