"""What a notebook submission may hold, and the error when it holds more or cannot be read.

A notebook is student data read by the grader: reading it is bounded and can only fail as a
:class:`NotebookError` (that student's problem, never the class's), see :mod:`attnscore.submission.notebook`.
"""

from __future__ import annotations

__all__ = [
    "MAX_CODE_CHARS",
    "MAX_IPYTHON_LINES",
    "MAX_NOTEBOOK_BYTES",
    "MAX_TOKENISED",
    "MAX_TRANSFORMS_PER_LINE",
    "NotebookError",
]

MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024
"""Largest ``.ipynb`` file accepted, in bytes (outputs such as images count; they are ignored)."""

MAX_CODE_CHARS = 256 * 1024
"""Most characters of source over all code cells (a graded notebook holds definitions, not data;
reading this much, IPython syntax included, takes the grader a few seconds at most)."""

MAX_IPYTHON_LINES = 2000
"""Most logical lines with IPython syntax (magics, ``!`` commands, ``?`` help) in one notebook."""

MAX_TRANSFORMS_PER_LINE = 8
"""Most IPython transforms one logical line may need (one escape at its start, one help at its end)."""

MAX_TOKENISED = 2 * MAX_CODE_CHARS
"""Most characters tokenised for one notebook: each cell once, and again after a line with IPython
syntax whose quotes or brackets stay open (the rest of its cell is read again)."""


class NotebookError(ValueError):
    """A notebook cannot be converted: not JSON, not a valid nbformat 4 notebook, or over a bound
    (a code cell with a syntax error is skipped, not an error).

    Attributes:
        cell: the failing cell, counted from 1 over all cells (``None`` for the whole file).
        reason: what is wrong, without the cell.
    """

    def __init__(self, reason: str, cell: int | None = None) -> None:
        self.cell = cell
        self.reason = reason
        super().__init__(f"cell {cell}: {reason}" if cell is not None else reason)
