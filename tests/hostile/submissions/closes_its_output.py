"""Attack: closes its stdout and stderr at import, then answers right (its first two calls after
a short sleep): the grader must not spin on the closed output pipe (it burnt 28.8 s of CPU on a
class)."""
import os
import time

os.close(1)
os.close(2)
_calls = [0]


def scores(q, keys):
    _calls[0] += 1
    if _calls[0] <= 2:
        time.sleep(0.3)
    return keys @ q
