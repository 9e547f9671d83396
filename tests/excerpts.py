"""Output excerpts of README.md and docs/*.md, made by real runs so that they cannot drift.

A page marks each generated block with one comment line right above its fence::

    <!-- excerpt: failing-case (make docs-excerpts) -->
    ```text
    ...the command's real output...
    ```

:data:`EXCERPTS` says, per name, which command makes it and which of its lines are shown.
``tests/test_excerpts.py`` reruns every command and compares its excerpt with each marked block,
after :func:`normalised` (only what truly varies between runs: timings, and the run of spaces
that a narrower timing column changes); ``make docs-excerpts`` (``python tests/excerpts.py``)
rewrites the blocks from fresh runs. Commands run in the repository root with this interpreter's
``attnscore``, inside this process (each distinct command once), with rich's plain output (not a
terminal: no colour, 140 columns).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"^<!-- excerpt: (?P<name>[\w-]+) \(make docs-excerpts\) -->$")


@dataclass(frozen=True)
class Excerpt:
    """One generated block: the command (after ``attnscore``), and which lines of what it printed.

    Attributes:
        argv: the arguments of ``attnscore``.
        select: the printed text -> the lines shown (default: all of stdout).
        stream: ``stdout`` or ``stderr``.
        prompt: show the command itself first, as ``$ attnscore ...``.
    """

    argv: tuple[str, ...]
    select: Callable[[str], str] = lambda text: text
    stream: str = "stdout"
    prompt: bool = False


def _between(start: str, stop: Callable[[str], bool]) -> Callable[[str], str]:
    """From the first line starting with ``start`` up to (not including) the first later line for
    which ``stop`` holds."""

    def select(text: str) -> str:
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        end = next((j for j in range(first + 1, len(lines)) if stop(lines[j])), len(lines))
        return "\n".join(lines[first:end])

    return select


def _upto_reproduce(text: str) -> str:
    """The first cause in full: its header line down to its ``Reproduce:`` line."""
    block = _between("example:two_by_two (", lambda line: not line.strip())(text)
    lines = block.splitlines()
    last = next(i for i, line in enumerate(lines) if line.startswith("Reproduce:"))
    return "\n".join(lines[: last + 1])


SCORE_MATRIX = "specs/score_matrix.yaml"
EXCERPTS: dict[str, Excerpt] = {
    "class-scores": Excerpt(("grade", "examples/submissions/scores", "--spec", "specs/dot_product_scores.yaml")),
    "class-score-matrix": Excerpt(("grade", "examples/submissions/score_matrix", "--spec", SCORE_MATRIX)),
    "failing-case": Excerpt(
        ("grade", "examples/submissions/score_matrix/keys_not_transposed.py", "--spec", SCORE_MATRIX),
        _between("example:two_by_two (", lambda line: not line.strip()),
    ),
    "failing-case-full": Excerpt(
        ("grade", "examples/submissions/score_matrix/keys_not_transposed.py", "--spec", SCORE_MATRIX),
        _upto_reproduce,
    ),
    "one-bug-seven-cases": Excerpt(
        ("grade", "examples/submissions/score_matrix/scaled_by_sqrt_dk.py", "--spec", SCORE_MATRIX),
        _between("example:two_by_two (", lambda line: False),
    ),
    "usage-error": Excerpt(("grade", "x.py", "--spec", SCORE_MATRIX, "--format", "xml"), stream="stderr", prompt=True),
    "course-advice-only": Excerpt(
        (
            "grade",
            "examples/courses/cs336/submissions/scaled_dot_product_attention/correct_einops_masked_fill.py",
            "--spec",
            "examples/courses/cs336/scaled_dot_product_attention.yaml",
        ),
        _between("example:fully_masked_row (", lambda line: line.startswith("Why:")),
    ),
}


@functools.cache
def run(argv: tuple[str, ...]) -> tuple[str, str]:
    """``attnscore ARGV`` run once in the repository root, inside this process (click's runner, as
    the ``attnscore`` command calls :func:`attnscore.cli.main`; no new interpreter importing torch
    for each command): (stdout, stderr)."""
    from click.testing import CliRunner

    from attnscore.cli import main

    unset: dict[str, str | None] = dict.fromkeys(("COLUMNS", "LINES", "FORCE_COLOR", "TERM", "TTY_COMPATIBLE"))
    where = os.getcwd()
    os.chdir(ROOT)
    try:
        done = CliRunner(env=unset).invoke(main, list(argv), prog_name="attnscore")
    finally:
        os.chdir(where)
    if done.exit_code not in (0, 1, 2) or (done.exception is not None and not isinstance(done.exception, SystemExit)):
        raise RuntimeError(f"attnscore {' '.join(argv)} exited {done.exit_code}: {done.stderr[-2000:]}") from (
            done.exception
        )
    return done.stdout, done.stderr


def make(name: str) -> str:
    """The excerpt ``name`` from a real run, as a page shows it (no trailing spaces or blank lines)."""
    excerpt = EXCERPTS[name]
    stdout, stderr = run(excerpt.argv)
    text = excerpt.select(stdout if excerpt.stream == "stdout" else stderr)
    if excerpt.prompt:
        text = f"$ attnscore {' '.join(excerpt.argv)}\n{text}"
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


_TIMING = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?: ?s\b)")


def normalised(text: str) -> str:
    """``text`` with what varies between runs made equal: durations (``19.3s``, ``(7.1 s)``) become
    ``TIME``, and each run of spaces one space (a timing column one character narrower shifts the
    columns after it). Everything else, every count, verdict and message, must match."""
    lines = (" ".join(_TIMING.sub("TIME", line).split()) for line in text.splitlines())
    return "\n".join(line for line in lines)


@dataclass(frozen=True)
class Block:
    """A marked block of a page: its excerpt name, the page, and the line span of its contents."""

    name: str
    page: Path
    start: int  # index of the first line after the opening fence
    end: int  # index of the closing fence
    text: str


def blocks(page: Path) -> list[Block]:
    """The marked blocks of ``page``, in order.

    Raises:
        ValueError: a marker not followed by a fence, or a fence never closed (named by page and line).
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise ValueError(f"{page.name}:{i + 1}: expected a ``` fence after the excerpt marker")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page.name}:{i + 2}: the fence after the excerpt marker is never closed")
        found.append(Block(match["name"], page, i + 2, end, "\n".join(lines[i + 2 : end])))
    return found


def all_blocks() -> list[Block]:
    """Every marked block of README.md and docs/*.md."""
    return [block for page in PAGES for block in blocks(page)]


def write() -> list[str]:
    """Rewrite every marked block from a fresh run; the names of the blocks that changed."""
    changed = []
    for page in PAGES:
        found = blocks(page)
        if not found:
            continue
        lines = page.read_text(encoding="utf-8").splitlines()
        for block in reversed(found):  # from the end, so earlier spans stay valid
            fresh = make(block.name)
            if fresh != block.text:
                changed.append(f"{page.relative_to(ROOT)}: {block.name}")
            lines[block.start : block.end] = fresh.splitlines()
        page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


if __name__ == "__main__":
    for line in write() or ["every excerpt was already up to date"]:
        print(line)
