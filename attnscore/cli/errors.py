"""The errors a command stops on: each class carries its exit code and the lines it shows.

Exit codes (``docs/commands.md``): 0 every case passed, 1 some case failed, 2 a usage error or an
invalid spec, 3 an internal error or a grading machine that failed. Commands raise these classes;
the entry point (:class:`attnscore.cli.LazyGroup`) turns every other exception into one of them,
once (:func:`command_error`), and click shows it on stderr and exits with its code. Nothing
below is a traceback: an internal error's traceback goes to a private log file
(:func:`write_error_log`), and its one line names that file.

Example:
    >>> error = BadInput("nope.py: no such file")
    >>> error.exit_code, error.lines()
    (2, ['Error: nope.py: no such file'])
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

import click

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERNAL",
    "CommandError",
    "BadUsage",
    "BadInput",
    "InvalidSpec",
    "MachineFailure",
    "InternalError",
    "command_error",
    "error_log_folder",
    "write_error_log",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class CommandError(click.ClickException):
    """An error a command stops on: :meth:`lines` on stderr, then exit :attr:`exit_code`."""

    exit_code = EXIT_USAGE

    def lines(self) -> list[str]:
        """What is shown on stderr, one string a line."""
        return [f"Error: {self.format_message()}"]

    def show(self, file: IO[Any] | None = None) -> None:
        for line in self.lines():
            click.echo(line, file=file, err=file is None)


class BadUsage(click.UsageError, CommandError):
    """An option or argument that cannot be used as given (exit 2), shown as click shows its own
    usage errors: the command's usage line, its ``--help`` hint, then ``Error: MESSAGE``."""

    exit_code = EXIT_USAGE

    def show(self, file: IO[Any] | None = None) -> None:
        click.UsageError.show(self, file)


class BadInput(CommandError):
    """Something the user named that cannot be used, found while the command works: a missing
    submission, a gradebook or scheduler that cannot be used (exit 2, one line, no usage)."""

    exit_code = EXIT_USAGE


class InvalidSpec(CommandError):
    """A spec (or, with ``kind="assignment"``, an assignment) that does not load: one located line
    per problem, then a count, "invalid assignment (2 problems)" (exit 2).

    ``problems`` are :class:`attnscore.spec.located.SpecProblem` (any object whose ``str`` is the
    located line ``FILE:LINE:COL: PATH: expected ..., found ...``).
    """

    exit_code = EXIT_USAGE

    def __init__(self, problems: list[Any], kind: str = "spec") -> None:
        self.problems = list(problems)
        count = len(self.problems)
        super().__init__(f"invalid {kind} ({count} problem{'s' * (count != 1)})")

    def lines(self) -> list[str]:
        return [*map(str, self.problems), f"Error: {self.format_message()}"]


class MachineFailure(CommandError):
    """The grading machine cannot do or did not do its part: the sandbox cannot run here, or a
    grader error while grading (exit 3). Not the student's fault, and not a usage error."""

    exit_code = EXIT_INTERNAL


class InternalError(CommandError):
    """A surprise: an exception no command expected (exit 3). The line names the exception and
    the private log holding its whole traceback (``log``; None when none could be written)."""

    exit_code = EXIT_INTERNAL

    def __init__(self, exc: BaseException, log: Path | None) -> None:
        self.log = log
        attach = f"please report this and attach {log}" if log else "please report this"
        super().__init__(f"internal error: {type(exc).__name__}: {_one_line(exc)} ({attach}; nothing was written)")


def command_error(exc: Exception, write_log: Any = None) -> CommandError:
    """The :class:`CommandError` an exception raised by a command's work stands for.

    A :class:`~attnscore.spec.located.SpecError` is an :class:`InvalidSpec`, a
    :class:`~attnscore.submission.files.SubmissionError` and an instructor's reference that fails on
    a drawn input (``ReferenceFailed``) a :class:`BadInput`; anything else is an
    :class:`InternalError` whose traceback ``write_log`` (default :func:`write_error_log`) keeps.
    A :class:`CommandError` is returned as it is.
    """
    from attnscore.spec.located import SpecError
    from attnscore.submission.files import SubmissionError

    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, SpecError):
        return InvalidSpec(exc.problems, exc.kind)
    if isinstance(exc, SubmissionError):
        return BadInput(str(exc))
    if _reference_failed(exc):  # the instructor's reference file, on inputs no worked example has
        return BadInput(
            f"the spec's reference failed on a drawn input (fix the reference file; attnscore verify "
            f"SPEC runs it on every case): {_one_line(exc)}"
        )
    return InternalError(exc, (write_log or write_error_log)(exc))


def _reference_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is an instructor's reference failing
    (:class:`attnscore.maths.families.instructor.ReferenceFailed`); no spec with a reference was
    loaded, and torch is not imported, when that module is not."""
    module = sys.modules.get("attnscore.maths.families.instructor")
    return module is not None and isinstance(exc, module.ReferenceFailed)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's text on one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_log_folder() -> Path:
    """Where internal-error logs go: ``$XDG_CACHE_HOME/attnscore/errors`` (default
    ``~/.cache/attnscore/errors``), a folder only its owner can enter."""
    import os

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "attnscore" / "errors"


def write_error_log(exc: BaseException) -> Path | None:
    """Write the full traceback of an internal error to a new file only its owner can read (0600);
    its path, or None when neither the cache folder nor the temp folder can take it.

    The file holds the command line, the versions of attnscore, Python and torch, and the chained
    traceback, so that a user can attach it to a report. It goes to :func:`error_log_folder`
    (made 0700), or to the temp folder when that cannot be written. Never raises.
    """
    import os
    import platform
    import tempfile
    import time
    import traceback
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("attnscore")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        ours = "unknown"
    torch = sys.modules.get("torch")
    try:
        trace = "".join(traceback.format_exception(exc))
    except RecursionError:  # a chain or a stack too deep to format whole
        trace = "".join(traceback.format_exception(exc, limit=200, chain=False))
    text = (
        f"attnscore {ours} internal error at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
        f"command: {' '.join(sys.argv)}\n"
        f"python {platform.python_version()} on {platform.platform()}; "
        f"torch {getattr(torch, '__version__', 'not loaded')}; pid {os.getpid()}\n\n{trace}"
    )
    name = f"internal-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-"
    for folder in (error_log_folder(), Path(tempfile.gettempdir())):
        try:
            if folder != Path(tempfile.gettempdir()):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix=name, suffix=".log", dir=folder)  # 0600, a new file
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
                out.write(text)
            return Path(path)
        except OSError:
            continue
    return None
