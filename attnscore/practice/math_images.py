"""Maths as PNG images (matplotlib's mathtext), for platforms that do not typeset LaTeX themselves.

Canvas shows ``\\(...\\)`` as maths only when its MathJax picks the text up; an image always shows.
:func:`math_png` draws one inline or display expression of the toolkit's LaTeX: everything
mathtext reads, plus the two environments the worked solutions use, ``aligned`` (rows aligned
on ``&``) and ``bmatrix`` (a bracketed grid). The PNG is byte-reproducible (no date, no software
tag) for a given matplotlib version.

Example:
    >>> img = math_png("q \\\\cdot k = -1")
    >>> img.data[:8] == b"\\x89PNG\\r\\n\\x1a\\n", img.width_px > img.height_px > 0
    (True, True)
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser

__all__ = ["MathImage", "math_png", "MathImageError"]

_SIZE = 12.0  # font size in points
_DPI = 150  # pixels per inch of the PNG (displayed at 96 CSS px per inch, so sharp on hi-dpi screens)
_PAD = 1.5  # points around the drawing
_ROW_GAP = 4.0  # points between rows of aligned/bmatrix
_COL_GAP = 10.0  # points between matrix columns
_AXIS = 0.25 * _SIZE  # height of the maths axis above the baseline (where a matrix is centred)


class MathImageError(ValueError):
    """The LaTeX cannot be drawn by mathtext (the message names the expression and the reason)."""


@dataclass(frozen=True)
class MathImage:
    """A rendered expression.

    Attributes:
        data: PNG bytes.
        width_px, height_px: display size in CSS pixels (the PNG has ``_DPI / 96`` times more).
        depth_px: CSS pixels below the baseline, for ``vertical-align: -depth_px`` inline.
    """

    data: bytes
    width_px: float
    height_px: float
    depth_px: float


_PARSER = MathTextParser("path")
_PROP = FontProperties(size=_SIZE, math_fontfamily="cm")


@dataclass(frozen=True)
class _Box:
    width: float
    ascent: float
    descent: float
    items: tuple[tuple[float, float, str], ...]  # (x, baseline y, mathtext) relative to the box origin
    lines: tuple[tuple[tuple[float, float], tuple[float, float]], ...] = ()


def _text(latex: str, whole: str) -> _Box:
    latex = latex.strip()
    if not latex:
        return _Box(0.0, 0.0, 0.0, ())
    try:
        width, height, depth, _, _ = _PARSER.parse(f"${latex}$", dpi=72, prop=_PROP)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
        raise MathImageError(f"mathtext cannot draw {whole!r}: {first}") from None
    return _Box(width, height - depth, depth, ((0.0, 0.0, f"${latex}$"),))


def _hbox(boxes: list[_Box]) -> _Box:
    x, items, lines = 0.0, [], []
    for b in boxes:
        items += [(x + ix, iy, s) for ix, iy, s in b.items]
        lines += [((x + a[0], a[1]), (x + c[0], c[1])) for a, c in b.lines]
        x += b.width
    return _Box(
        x,
        max((b.ascent for b in boxes), default=0.0),
        max((b.descent for b in boxes), default=0.0),
        tuple(items),
        tuple(lines),
    )


def _grid(rows: list[list[_Box]], align: list[str], col_gap: float) -> tuple[_Box, float]:
    """Rows of cells; ``align[j]`` is ``"r"``, ``"l"`` or ``"c"``.

    Returns the box (its baseline is the first row's) and its total height.
    """
    ncol = max(len(r) for r in rows)
    widths = [max((r[j].width for r in rows if j < len(r)), default=0.0) for j in range(ncol)]
    items, y = [], 0.0
    for i, row in enumerate(rows):
        ascent = max((c.ascent for c in row), default=_SIZE * 0.7)
        if i:
            y -= ascent + _ROW_GAP
        x = 0.0
        for j, cell in enumerate(row):
            shift = {"r": widths[j] - cell.width, "c": (widths[j] - cell.width) / 2}.get(
                align[min(j, len(align) - 1)], 0.0
            )
            items += [(x + shift + ix, y + iy, s) for ix, iy, s in cell.items]
            x += widths[j] + col_gap
        y -= max((c.descent for c in row), default=_SIZE * 0.2)
    first_ascent = max((c.ascent for c in rows[0]), default=_SIZE * 0.7)
    width = sum(widths) + col_gap * (ncol - 1)
    return _Box(width, first_ascent, -y, tuple(items)), first_ascent - y


def _matrix(body: str, whole: str) -> _Box:
    rows = [[_text(cell, whole) for cell in row.split("&")] for row in re.split(r"\\\\", body) if row.strip()]
    grid, height = _grid(rows, ["c"], _COL_GAP)
    bracket = 3.0
    # centre the grid on the maths axis
    top = height / 2 + _AXIS
    shift = top - grid.ascent
    items = tuple((x + bracket + 2, y + shift, s) for x, y, s in grid.items)
    w = grid.width + 2 * bracket + 4
    bottom = top - height
    left = (((bracket, top), (0.0, top)), ((0.0, top), (0.0, bottom)), ((0.0, bottom), (bracket, bottom)))
    right = (((w - bracket, top), (w, top)), ((w, top), (w, bottom)), ((w, bottom), (w - bracket, bottom)))
    return _Box(w, top + 1, -bottom + 1, items, left + right)


_BMATRIX = re.compile(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", re.S)
_ALIGNED = re.compile(r"\s*\\begin\{aligned\}(.*)\\end\{aligned\}\s*", re.S)


def _layout(latex: str) -> _Box:
    if re.search(r"\\(begin|end)\{(?!aligned\}|bmatrix\})", latex):
        raise MathImageError(f"mathtext cannot draw {latex!r}: only the aligned and bmatrix environments are supported")
    m = _ALIGNED.fullmatch(latex)
    if m:
        rows = []
        for row in re.split(r"\\\\", m.group(1)):
            if row.strip():
                lhs, _, rhs = row.partition("&")
                rows.append([_text(lhs, latex), _text(rhs, latex)])
        return _grid(rows, ["r", "l"], 0.0)[0]
    boxes, last = [], 0
    for mm in _BMATRIX.finditer(latex):
        boxes += [_text(latex[last : mm.start()], latex), _matrix(mm.group(1), latex)]
        last = mm.end()
    boxes.append(_text(latex[last:], latex))
    return _hbox(boxes)


def math_png(latex: str) -> MathImage:
    """Draw LaTeX maths (without ``$`` delimiters) as a PNG with a transparent background.

    Raises:
        MathImageError: mathtext cannot read ``latex`` (unknown command, unbalanced braces,
            an environment other than ``aligned``/``bmatrix``).
    """
    box = _layout(latex)
    width = box.width + 2 * _PAD
    height = box.ascent + box.descent + 2 * _PAD
    fig = Figure(figsize=(width / 72, height / 72))
    FigureCanvasAgg(fig)
    ox, oy = _PAD, _PAD + box.descent  # baseline of the box, in points from the bottom left
    for x, y, s in box.items:
        fig.text((ox + x) / width, (oy + y) / height, s, fontproperties=_PROP, va="baseline", ha="left", color="black")
    for (x0, y0), (x1, y1) in box.lines:
        fig.add_artist(
            Line2D(
                [(ox + x0) / width, (ox + x1) / width],
                [(oy + y0) / height, (oy + y1) / height],
                transform=fig.transFigure,
                linewidth=0.8,
                color="black",
            )
        )
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, transparent=True, metadata={"Software": None})
    px = 96 / 72
    # float(): matplotlib's extents are numpy floats, whose repr ("np.float64(12.3)") must not reach a page.
    return MathImage(
        buf.getvalue(),
        round(float(width) * px, 1),
        round(float(height) * px, 1),
        round(float(box.descent + _PAD) * px, 1),
    )
