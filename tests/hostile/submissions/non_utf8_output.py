"""Attack: writes invalid UTF-8, NUL bytes and terminal escapes, then answers right."""
import sys


def scores(q, keys):
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\xff\xfe\x80 bad bytes \x00 \x1b[31mred\x1b[0m \x1b]0;title\x07 </testcase>&\n")
    sys.stdout.buffer.flush()
    return keys @ q
