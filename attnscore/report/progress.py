"""The progress bar of a grading run: count, submissions per second, elapsed time and ETA.

Drawn with rich on standard error; silent when that is not a terminal (pipes, CI logs), so
redirected output holds only results.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["grading_progress"]


class _RateColumn(ProgressColumn):
    """Submissions graded per second (rich's own speed column counts bytes)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.2f}/s", style="progress.data.speed")


def grading_progress(console: Console) -> Progress:
    """A progress bar with count, rate, elapsed time and ETA on ``console``; disabled when
    ``console`` is not a terminal."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
