"""Attack: writes every call's input values into a System V semaphore set with a fixed key (one
value per semaphore, 2x + 1000) and prints, at import, the values already there: a copy graded
after it under the same uid would show the earlier copy's hidden inputs. Right answers."""

import ctypes
import errno

_KEY, _COUNT = 0x61747333, 64
_SETVAL, _GETALL = 16, 13
_libc = ctypes.CDLL(None, use_errno=True)


def _error() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "error")


def _open():
    found = _libc.semget(_KEY, _COUNT, 0o666)
    ident = found if found >= 0 else _libc.semget(_KEY, _COUNT, 0o1666 | 0o2000)  # IPC_CREAT | IPC_EXCL
    if ident < 0:
        return -1, _error()
    if found < 0:
        return ident, "new"
    values = (ctypes.c_ushort * _COUNT)()
    _libc.semctl(ident, 0, _GETALL, values)
    return ident, "found " + " ".join(f"{(v - 1000) / 2:g}" for v in values if v)


SET, STATE = _open()
print("sem:", STATE)
SLOT = [0]


def scores(q, keys):
    if SET >= 0:
        for x in [*q.flatten().tolist(), *keys.flatten().tolist()]:
            _libc.semctl(SET, SLOT[0] % _COUNT, _SETVAL, ctypes.c_int(int(round(2 * float(x))) + 1000))
            SLOT[0] += 1
    return keys @ q
