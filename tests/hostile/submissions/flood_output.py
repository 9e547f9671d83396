"""Attack: writes 40 MB to stdout and stderr on its first call, then answers right."""
import sys

calls = []


def scores(q, keys):
    if not calls:
        line = "x" * 1023 + "\n"
        for _ in range(20_000):
            sys.stdout.write(line)
            sys.stderr.write(line)
    calls.append(1)
    return keys @ q
