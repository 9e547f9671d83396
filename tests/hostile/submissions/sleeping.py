"""Attack: sleeps far longer than the time limit."""
import time


def scores(q, keys):
    time.sleep(1000)
    return keys @ q
