"""Attack: leaves a double-forked, detached child that outlives the call, then answers right."""
import os
import time


def scores(q, keys):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1000)
        os._exit(0)
    os.wait()
    return keys @ q
