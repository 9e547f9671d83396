"""seccomp: the worker gives up network sockets, with no namespaces and no privileges needed.

Landlock's TCP rules check ``bind`` and ``connect`` only: an MPTCP socket or a TCP Fast Open
``sendto(..., MSG_FASTOPEN)`` reaches a listener without either. So the worker also installs a
seccomp filter that refuses ``socket()`` for every family but ``AF_UNIX`` (``EACCES``): no TCP,
UDP, MPTCP, raw or packet sockets at all, on any kernel since 3.5. The filter is inherited by
every thread and process the worker starts afterwards.

Runs inside the worker before torch and the submission are imported. Constants from
``include/uapi/linux/seccomp.h``, ``filter.h``, ``audit.h`` and the architectures' syscall tables.
"""

from __future__ import annotations

import ctypes
import errno
import platform

__all__ = ["deny_network"]

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_AF_UNIX = 1
# machine -> (AUDIT_ARCH_*, socket syscall number, syscall numbers >= this are another ABI (x32))
_ARCHES = {
    "x86_64": (0xC000003E, 41, 0x40000000),
    "aarch64": (0xC00000B7, 198, None),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def _program(arch: int, socket_nr: int, other_abi: int | None) -> list[tuple[int, int, int, int]]:
    deny = _RET_ERRNO | errno.EACCES
    code = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _RET_ALLOW), (_LD_W_ABS, 0, 0, 0)]
    if other_abi is not None:  # x32 system calls on x86_64: refuse the whole ABI
        code += [(_JGE_K, 0, 1, other_abi), (_RET_K, 0, 0, deny)]
    code += [
        (_JEQ_K, 1, 0, socket_nr),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_W_ABS, 0, 0, 16),  # args[0] (the address family), low 32 bits
        (_JEQ_K, 0, 1, _AF_UNIX),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, deny),
    ]
    return code


def deny_network() -> bool:
    """Refuse ``socket()`` outside ``AF_UNIX`` for this process and its future children.

    Returns False (and changes nothing) on an architecture without a table here or where seccomp
    is unavailable.

    Raises:
        OSError: seccomp is available but the filter could not be installed.
    """
    table = _ARCHES.get(platform.machine())
    if table is None:
        return False
    code = _program(*table)
    filters = (_Filter * len(code))(*[_Filter(*instruction) for instruction in code])
    program = _Program(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        err = ctypes.get_errno()
        if err == errno.EINVAL:  # a kernel built without seccomp filters
            return False
        raise OSError(err, "prctl(PR_SET_SECCOMP) failed")
    return True
