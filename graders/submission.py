"""Submissions: finding and checking the files to grade, before anything runs.

Only the path is checked here (exists, is a regular ``.py`` file, not too large); the file is
never imported or parsed in the grading process. A directory stands for every ``*.py`` file in it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SubmissionError", "MAX_SUBMISSION_BYTES", "find_submissions"]

MAX_SUBMISSION_BYTES = 1024 * 1024


class SubmissionError(ValueError):
    """A submission path cannot be graded (missing, not a .py file, too large...)."""


def _check_file(path: Path) -> Path:
    if not path.exists():
        raise SubmissionError(f"{path}: no such file")
    if not path.is_file():
        raise SubmissionError(
            f"{path}: expected a .py file, found {'a directory' if path.is_dir() else 'a special file'}"
        )
    if path.suffix != ".py":
        raise SubmissionError(f"{path}: expected a Python file ending in .py, found {path.suffix or 'no suffix'!r}")
    size = path.stat().st_size
    if size > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"{path}: expected at most {MAX_SUBMISSION_BYTES} bytes, found {size}")
    return path


def find_submissions(paths: list[str]) -> list[Path]:
    """Expand ``paths`` (files, or directories of ``*.py`` files, sorted by name) and check each.

    Raises:
        SubmissionError: a path is missing, not a .py file, too large, or a directory holds no
            ``.py`` file.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix == ".py" and p.is_file())
            if not files:
                raise SubmissionError(f"{path}: expected .py files in this directory, found none")
            found += [_check_file(p) for p in files]
        else:
            found.append(_check_file(path))
    return found
