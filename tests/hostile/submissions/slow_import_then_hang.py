"""Attack: an import that takes most of the setup time, then calls that hang, so that every case
would pay for a fresh import."""
import time

time.sleep(6)


def scores(q, keys):
    while True:
        pass
