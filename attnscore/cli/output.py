"""Where a command's output goes: the console on stdout, report files written atomically, the exit.

A command that finishes its work exits through :func:`finish` (0 all passed, 1 some case failed);
one that cannot raises an :mod:`attnscore.cli.errors` class instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from attnscore.cli.errors import EXIT_FAILED, EXIT_OK, BadUsage

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["stdout_console", "check_output_path", "write_atomically", "finish"]


def stdout_console() -> Console:
    """A rich console on stdout; on pipes and files 140 columns wide (room for the tables) and no colour codes."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=140, color_system=None)
    return console


def check_output_path(path: str) -> None:
    """Fail early (before any work) when ``path`` cannot be written: its folder must exist.

    Raises:
        BadUsage: the folder of ``path`` does not exist.
    """
    parent = Path(path).parent
    if not parent.is_dir():
        raise BadUsage(f"cannot write {path}: the directory {parent} does not exist")


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`attnscore.atomic.write_atomic`): never a
    half-written file; mode 0666 less the umask, like a shell redirection."""
    from attnscore.atomic import write_atomic

    check_output_path(path)
    write_atomic(path, text.encode("utf-8"))


def finish(passed: bool) -> NoReturn:
    """End a command that did its work: exit 0 when everything passed, else 1."""
    sys.exit(EXIT_OK if passed else EXIT_FAILED)
