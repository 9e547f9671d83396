"""Attack: searches its own process memory for the file names of students graded before it.

At import it reads every readable mapping of /proc/self/maps (through /proc/self/mem where it may,
else by address with ctypes) and looks for names of the form ``zz_classmate_<8 hex digits>.py``
(the other files of the class). A worker forked from a template that once held an earlier
student's request could find them in memory it inherited. It prints what it found, then answers
right, so every case is graded."""

import ctypes
import re

_NEEDLE = "zz_class" + "mate_"  # never written out whole in this file's text
_NAME = re.compile(re.escape(_NEEDLE.encode()) + rb"[0-9a-f]{8}\.py")
_CHUNK = 1 << 20


def _regions():
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            span, perms = parts[0], parts[1]
            path = parts[5] if len(parts) > 5 else ""
            if "r" not in perms or path in ("[vvar]", "[vsyscall]", "[vvar_vclock]") or path.startswith("/dev/"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            yield start, end


def _search():
    found, scanned, how = set(), 0, "ctypes"
    try:
        mem = open("/proc/self/mem", "rb", buffering=0)
        how = "/proc/self/mem"
    except OSError:
        mem = None
    tail = b""
    for start, end in _regions():
        tail = b""
        for at in range(start, end, _CHUNK):
            size = min(_CHUNK, end - at)
            try:
                if mem is not None:
                    mem.seek(at)
                    data = mem.read(size)
                else:
                    data = ctypes.string_at(at, size)
            except (OSError, ValueError, OverflowError):
                break
            scanned += len(data)
            window = tail + data
            if _NEEDLE.encode() in window:
                found.update(m.group().decode() for m in _NAME.finditer(window))
            tail = data[-40:]
    return found, scanned, how


_found, _scanned, _how = _search()
print(
    f"classmates: found {len(_found)} ({', '.join(sorted(_found)) or 'none'}); scanned {_scanned >> 20} MiB via {_how}"
)


def scores(q, keys):
    return keys @ q
