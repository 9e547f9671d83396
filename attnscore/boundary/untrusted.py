"""Cleaning untrusted text once, at the boundary, before any reporter sees it.

Text that comes from a submission (its printed output, exception messages) may be huge, not
UTF-8, or full of terminal escapes. :func:`clean_text` decodes it as UTF-8 (bad bytes become
U+FFFD), removes ANSI escape sequences and control characters other than newline and tab, and
truncates it with a note saying how much was cut.
"""

from __future__ import annotations

import re

__all__ = ["clean_text"]

_ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_text(raw: bytes | str, limit: int = 4000) -> str:
    """Return ``raw`` as clean, printable UTF-8 text of at most ``limit`` characters (plus a note)."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    if len(text) > limit:
        cut = len(text) - limit
        text = text[:limit] + f"\n[... {cut} more character{'s' * (cut != 1)} not shown]"
    return text
