"""Cleaning untrusted text once, at the boundary, before any reporter sees it.

Text that comes from a submission (its printed output, exception messages) may be huge, not
UTF-8, or full of terminal escapes. :func:`clean_text` decodes it as UTF-8 (bad bytes become
U+FFFD), removes ANSI escape sequences and control characters other than newline and tab, and
truncates it with a note saying how much was cut.
"""

from __future__ import annotations

import re

__all__ = ["clean_text", "cut", "shown_list"]

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


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note saying how many more there were; what a
    worker writes in a message is cut here, where it is made, so that no description (however long
    a submission makes it) can make a reply the grader refuses.

    >>> cut("abcdef", 3)
    'abc [... 3 more characters]'
    """
    if len(text) <= limit:
        return text
    more = len(text) - limit
    return f"{text[:limit]} [... {more} more character{'s' * (more != 1)}]"


def shown_list(items: list[str], most: int = 12, each: int = 80) -> str:
    """``items`` joined by commas: at most ``most`` of them, each cut to ``each`` characters, then
    how many more there are.

    >>> shown_list(["a", "b", "c"], most=2)
    'a, b and 1 more'
    >>> shown_list([])
    ''
    """
    shown = [cut(str(item), each) for item in items[:most]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
