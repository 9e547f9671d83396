"""seccomp: the worker gives up network sockets, kernel IPC, keyrings and memfds, with no
namespaces and no privileges needed.

Landlock's TCP rules check ``bind`` and ``connect`` only: an MPTCP socket or a TCP Fast Open
``sendto(..., MSG_FASTOPEN)`` reaches a listener without either. So the worker also installs a
seccomp filter that refuses ``socket()`` for every family but ``AF_UNIX`` (``EACCES``): no TCP,
UDP, MPTCP, raw or packet sockets at all, on any kernel since 3.5.

The same filter refuses (``EPERM``) the system calls that make or use kernel objects which outlive
the process and are keyed by uid or by IPC namespace, not by process: System V shared memory,
message queues and semaphore sets (``shm*``, ``msg*``, ``sem*``), POSIX message queues (``mq_*``)
and the kernel keyrings (``add_key``, ``request_key``, ``keyctl``: the user keyring of a reused
worker uid lives on after every process of the uid is gone). Landlock mediates none of them, so
without this a submission could leave a hidden input for the next one graded under the same uid.
It also refuses ``memfd_create`` where the process has an address-space limit (``RLIMIT_AS``):
memory written into a memfd with ``write()`` is not mapped, so it is not counted by that limit.
Neither torch's CPU path nor the worker needs any of these (the grader makes the inputs' memfd
and passes it in). System calls of another ABI (x32, and the i386 ABI that ``int 0x80`` reaches
from a 64-bit process) are refused whole: they would go around every rule above.

The filter is inherited by every thread and process the worker starts afterwards. Runs inside the
worker before the submission is imported. Constants from ``include/uapi/linux/seccomp.h``,
``filter.h``, ``audit.h`` and the architectures' syscall tables.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import resource

__all__ = ["deny_network", "confine", "REFUSED"]

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_AF_UNIX = 1

# The system calls refused outright (EPERM), by name: every use of System V IPC, POSIX message
# queues and the kernel keyrings. memfd_create is refused separately (see confine).
REFUSED = (
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "add_key",
    "request_key",
    "keyctl",
)
# machine -> (AUDIT_ARCH_*, syscall numbers >= this are another ABI (x32), {name: number})
_ARCHES: dict[str, tuple[int, int | None, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        0x40000000,
        {
            "socket": 41,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "shmdt": 67,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "semtimedop": 220,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "memfd_create": 319,
        },
    ),
    "aarch64": (
        0xC00000B7,
        None,
        {
            "socket": 198,
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "memfd_create": 279,
        },
    ),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def _program(arch: int, other_abi: int | None, numbers: dict[str, int], memfd: bool) -> list[tuple[int, int, int, int]]:
    """The BPF program: another architecture or ABI is refused; each refused call returns EPERM;
    ``socket`` is allowed for ``AF_UNIX`` only (EACCES); everything else is allowed."""
    refuse = _RET_ERRNO | errno.EPERM
    code = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, refuse),  # the i386 ABI (int 0x80) or any other: none of the rules would apply
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if other_abi is not None:  # x32 system calls on x86_64: refuse the whole ABI
        code += [(_JGE_K, 0, 1, other_abi), (_RET_K, 0, 0, refuse)]
    for name in (*REFUSED, *(("memfd_create",) if memfd else ())):
        code += [(_JEQ_K, 0, 1, numbers[name]), (_RET_K, 0, 0, refuse)]
    code += [
        (_JEQ_K, 1, 0, numbers["socket"]),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_W_ABS, 0, 0, 16),  # args[0] (the address family), low 32 bits
        (_JEQ_K, 0, 1, _AF_UNIX),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),
    ]
    return code


def _address_limited() -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def confine(memfd: bool | None = None) -> bool:
    """Install the filter of the module docstring for this process and its future children.

    Args:
        memfd: also refuse ``memfd_create``; ``None`` (the default): when the process has an
            address-space limit (``RLIMIT_AS``) for memfds to escape (a CPU worker; a GPU worker
            runs without one).

    Returns False (and changes nothing) on an architecture without a table here or where seccomp
    is unavailable.

    Raises:
        OSError: seccomp is available but the filter could not be installed.
    """
    table = _ARCHES.get(platform.machine())
    if table is None:
        return False
    code = _program(*table, memfd=_address_limited() if memfd is None else memfd)
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


def deny_network() -> bool:
    """The worker's call form of :func:`confine` (the whole filter, ``memfd`` decided by
    ``RLIMIT_AS``): the name is older than the filter's other rules.

    Raises:
        OSError: seccomp is available but the filter could not be installed.
    """
    return confine()
