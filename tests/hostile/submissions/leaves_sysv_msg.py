"""Attack: sends every call's inputs to a System V message queue with a fixed key and prints, at
import, the messages already queued (putting them back): a copy graded after it under the same
uid would show the earlier copy's hidden inputs. Right answers."""

import ctypes
import errno

_KEY, _SIZE = 0x61747332, 4000
_libc = ctypes.CDLL(None, use_errno=True)


class _Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * _SIZE)]


def _error() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "error")


def _send(ident: int, text: bytes) -> None:
    message = _Message(1, text[: _SIZE - 1])
    _libc.msgsnd(ident, ctypes.byref(message), len(message.mtext) + 1, 0o4000)  # IPC_NOWAIT


def _open():
    found = _libc.msgget(_KEY, 0o666)
    ident = found if found >= 0 else _libc.msgget(_KEY, 0o1666 | 0o2000)  # IPC_CREAT | IPC_EXCL
    if ident < 0:
        return -1, _error()
    if found < 0:
        return ident, "new"
    texts, message = [], _Message()
    while _libc.msgrcv(ident, ctypes.byref(message), _SIZE, 0, 0o4000) >= 0 and len(texts) < 100:
        texts.append(message.mtext)
    for text in texts:
        _send(ident, text)
    return ident, "found " + b" ".join(texts).decode(errors="replace")


QUEUE, STATE = _open()
print("msg:", STATE)


def _token(a) -> str:
    return "_".join(f"{float(x):g}" for x in a.flatten().tolist())


def scores(q, keys):
    if QUEUE >= 0:
        _send(QUEUE, f"{_token(q)} {_token(keys)}".encode())
    return keys @ q
