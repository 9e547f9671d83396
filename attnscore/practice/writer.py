"""Write outputs safely: every file appears complete or not at all (temp file, then rename)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

from attnscore.atomic import write_atomic

__all__ = ["write_atomic", "write_outputs", "zip_bytes"]


def write_outputs(out_dir: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write every ``relative path -> bytes`` entry under ``out_dir`` atomically; return the paths in order.

    Raises:
        ValueError: a relative path escapes ``out_dir``.
        OSError: a file cannot be written.
    """
    root = out_dir.resolve()
    written = []
    for rel in sorted(files):
        target = (root / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"output path {rel!r} escapes the output folder {out_dir}")
        write_atomic(target, files[rel])
        written.append(target)
    return written


def zip_bytes(entries: Mapping[str, bytes]) -> bytes:
    """A byte-reproducible zip archive: sorted names, fixed 1980-01-01 timestamps, mode 0644."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[name])
    return buf.getvalue()
