"""Attack: closes its stdout and stderr at import, then answers right after a short sleep: the
grader must not spin on the closed output pipe (it burnt 28.8 s of CPU on a class)."""
import os
import time

os.close(1)
os.close(2)


def scores(q, keys):
    time.sleep(0.2)
    return keys @ q
