"""Attack: appends every call's inputs to a System V shared memory segment with a fixed key and
prints, at import, what the segment already held: a copy graded after it under the same uid (next
in the batch, or in a later grader run) would show the earlier copy's hidden inputs. Right answers."""

import ctypes
import errno

_KEY, _SIZE = 0x61747331, 1 << 16
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p


def _error() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "error")


def _open():
    found = _libc.shmget(_KEY, _SIZE, 0o666)
    ident = found if found >= 0 else _libc.shmget(_KEY, _SIZE, 0o1666 | 0o2000)  # IPC_CREAT | IPC_EXCL
    if ident < 0:
        return None, _error()
    address = _libc.shmat(ident, None, 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        return None, _error()
    segment = (ctypes.c_char * _SIZE).from_address(address)
    return segment, f"found {segment.value.decode(errors='replace')}" if found >= 0 else "new"


SEGMENT, STATE = _open()
print("shm:", STATE)


def _token(a) -> str:
    return "_".join(f"{float(x):g}" for x in a.flatten().tolist())


def scores(q, keys):
    if SEGMENT is not None:
        SEGMENT.value = (SEGMENT.value + f" {_token(q)} {_token(keys)}".encode())[: _SIZE - 1]
    return keys @ q
