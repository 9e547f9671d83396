"""Attack: builds a 3,000-deep folder chain (with a link to / at the bottom) in its working folder,
and where it may, in /tmp too, then answers right: removing it must not crash the grader."""
import os

DEPTH = 3000


def _chain(top):
    start = os.open(".", os.O_RDONLY)
    try:
        os.chdir(top)
        for _ in range(DEPTH):
            os.mkdir("d")
            os.chdir("d")
        try:
            os.symlink("/", "root")
            open("file", "w").write("x")
        except OSError:
            pass
        print("chain: built in", "the working folder" if top == "." else top)
    except OSError as exc:
        print("chain:", type(exc).__name__)
    finally:
        os.fchdir(start)
        os.close(start)


_chain(".")  # at import, too: every start of the worker leaves one behind
for shared in ("/tmp", "/dev/shm"):
    try:
        os.mkdir(f"{shared}/attnscore-attack-deep-{os.getpid()}")
        _chain(f"{shared}/attnscore-attack-deep-{os.getpid()}")
    except OSError:
        pass


def scores(q, keys):
    return keys @ q
