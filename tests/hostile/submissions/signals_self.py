"""Attack: ignores SIGTERM and signals its own process group at import, then answers right."""
import os
import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    os.killpg(os.getpgid(0), signal.SIGTERM)
except OSError as exc:
    print("killpg refused:", exc)


def scores(q, keys):
    return keys @ q
