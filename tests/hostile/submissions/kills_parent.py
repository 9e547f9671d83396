"""Attack: tries to kill the process that started it, then answers right."""
import os
import signal


def scores(q, keys):
    for target in (os.getppid(), 1):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError as exc:
            print("kill", target, "refused:", exc)
    return keys @ q
