"""IPython syntax in a notebook cell rewritten as Python by IPython's own transforms, one logical line
at a time (the cell tokenised once), in time linear in the cell's length."""

from __future__ import annotations

import re
from typing import Any

from IPython.core.inputtransformer2 import HelpEnd, TokenTransformBase, TransformerManager, make_tokens_by_line

from attnscore.submission.notebook_bounds import (
    MAX_IPYTHON_LINES,
    MAX_TOKENISED,
    MAX_TRANSFORMS_PER_LINE,
    NotebookError,
)

__all__ = ["ipython_to_python"]

# A line that may hold IPython syntax: an escape (% ! ?) first, a help ? last, or `x = !cmd` / `x = %magic`.
_MAYBE_IPYTHON = re.compile(r"^[ \t]*[%!?]|\?[ \t]*$|=[ \t]*[%!]", re.MULTILINE)
_TRANSFORMS = TransformerManager()


def ipython_to_python(cell: str, budget: list[int] | None = None) -> str:
    """``cell`` with IPython syntax rewritten as Python, in time linear in its length.

    The result is what ``TransformerManager().transform_cell`` gives, but the cell is tokenised once
    and each logical line that holds IPython syntax is transformed on its own (IPython's own loop
    tokenises the whole cell again after every transform, and gives up after 500 of them).

    Raises:
        NotebookError: a logical line that needs more than a handful of transforms, or more
            lines with IPython syntax or characters to tokenise than ``budget`` (``[lines,
            characters]``, decreased) allows (no cell).
    """
    budget = budget if budget is not None else [MAX_IPYTHON_LINES, MAX_TOKENISED]
    lines = (cell if cell.endswith("\n") else cell + "\n").splitlines(keepends=True)
    transforms: list[Any] = [*_TRANSFORMS.cleanup_transforms, *_TRANSFORMS.line_transforms]
    finders: list[Any] = list(_TRANSFORMS.token_transformers)
    for transform in transforms:
        lines = transform(lines)
    if not _MAYBE_IPYTHON.search("".join(lines)):
        return "".join(lines)
    out: list[str] = []
    done = 0  # physical lines of `lines` already in `out`
    while done < len(lines):
        base, restart, changed = done, None, False
        budget[1] -= sum(len(line) for line in lines[base:])
        if budget[1] < 0:
            raise NotebookError(
                "its IPython syntax leaves too many quotes or brackets open to read "
                f"(more than {MAX_TOKENISED} characters to tokenise in the notebook)"
            )
        for group in make_tokens_by_line(lines[base:]):
            if not group:
                continue
            first = base + min(t.start[0] for t in group) - 1
            last = base + max(t.end[0] for t in group)  # exclusive, 0-based
            if first < done or last > len(lines) or last <= first:
                continue
            found = [f for f in (finder.find([group]) for finder in finders) if f]
            changed = bool(found)  # whether the last logical line read in this pass was transformed
            if not found:
                out += lines[done:last]
                done = last
                continue
            budget[0] -= 1
            if budget[0] < 0:
                raise NotebookError(
                    f"expected at most {MAX_IPYTHON_LINES} lines of IPython syntax (magics, ! commands, ? help) "
                    "in the notebook, found more"
                )
            # An escape takes its line and the lines a backslash continues it onto; a help `?` the
            # whole logical line. Tokens after that are read again (a quote in a shell command
            # does not open a string over the lines that follow).
            chosen = min(found, key=TokenTransformBase.sortby)  # the one IPython would apply first
            start = min(max(base + int(chosen.start_line), first), last - 1)
            start, end = (first, last) if isinstance(chosen, HelpEnd) else (start, start + 1)
            while end < len(lines) and lines[end - 1].rstrip("\r\n").endswith("\\"):
                end += 1
            out += lines[done:start] + _transform_line(chosen, lines[start:end], start - base, start + 1)
            done = end
            if end < last:
                restart = end
                break
        if restart is None and changed and done < len(lines):
            restart = done  # the tokeniser stopped in a transformed line (an open quote): read on after it
        if restart is None:
            break
    return "".join(out + lines[done:])


def _transform_line(chosen: Any, part: list[str], shift: int, line: int) -> list[str]:
    """One logical line's physical lines ``part`` after the transform ``chosen`` (found ``shift``
    lines further down the text it was found in) and any IPython's loop would apply after it."""
    for name in ("start_line", "q_line"):
        if isinstance(getattr(chosen, name, None), int):
            setattr(chosen, name, getattr(chosen, name) - shift)
    try:
        part = chosen.transform(part)
    except SyntaxError:  # IPython skips a transform that cannot apply
        pass
    for _ in range(MAX_TRANSFORMS_PER_LINE):
        changed, part = _TRANSFORMS.do_one_token_transform(part)
        if not changed:
            return part
    raise NotebookError(
        f"line {line} holds more IPython syntax than can be read (more than {MAX_TRANSFORMS_PER_LINE} escapes)"
    )
