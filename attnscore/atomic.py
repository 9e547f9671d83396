"""Atomic file writing: a file appears complete, with the usual permissions, or not at all.

Every output attnscore writes (grade reports, practice problems and answer keys) goes through
:func:`write_atomic`: a temporary file in the target's folder, flushed to disk, given mode
``0666`` less the umask (what a shell redirection gives; ``mkstemp``'s own ``0600`` would hide
reports from the course's other staff), then renamed over the target. The temporary file's name
is short and bounded whatever the target's (``.`` + at most 32 characters of the target's name +
``.`` + 8 random characters + ``.tmp``, at most 50 bytes), so a target whose name is as long as
the file system allows (``NAME_MAX``, 255 bytes) can still be written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_TEMP_STEM_CHARS = 32


def _stem(name: str) -> str:
    """At most 32 characters of ``name`` that encode to at most 32 bytes (whatever its script)."""
    stem = name[:_TEMP_STEM_CHARS]
    while len(stem.encode("utf-8", "surrogateescape")) > _TEMP_STEM_CHARS:
        stem = stem[:-1]
    return stem


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    The folder is created when missing. The file gets mode ``0666 & ~umask``. The temporary
    file's name is at most 50 bytes long, so any ``path`` the file system accepts can be written.

    Raises:
        OSError: the folder cannot be created or the file cannot be written (the temporary file
            is removed; an existing ``path`` is left as it was).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     target = Path(folder) / "reports" / "results.json"
        ...     write_atomic(target, b"{}")
        ...     write_atomic(target, b'{"score": 1}')  # replaces the file whole
        ...     target.read_bytes(), sorted(p.name for p in target.parent.iterdir())
        (b'{"score": 1}', ['results.json'])
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{_stem(target.name)}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
