"""Figures of 2-D queries and keys: byte-reproducible SVG (matplotlib) and TikZ (LaTeX).

The SVG writer fixes everything that would change between runs: the ``svg.hashsalt`` used for
element ids, the ``Date`` metadata (removed) and the text mode (glyphs as paths), so the same
arrows always give the same bytes. Each label (``k1 = [2, 1]``) is an SVG group ``label-<name>``,
placed at its arrow's tip where its box meets no other label and crosses no arrow: candidate
spots run around the tip, outward along the arrow first, at growing distances, and the first
free one is taken (:func:`_place_labels`); ``tests/practice/test_figure_layout.py`` measures the
boxes in Chromium.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Arrow

__all__ = ["svg_figure", "tikz_figure"]

_COLOURS = {"query": "#1f4e9c", "key": "#c0392b"}


def _extent(arrows: Sequence[Arrow]) -> int:
    return max(1, *(int(abs(c)) + 1 for a in arrows for c in (a.x, a.y)))


def svg_figure(arrows: Sequence[Arrow], title: str = "") -> bytes:
    """Draw the arrows from the origin as an SVG document (UTF-8 bytes, reproducible).

    Args:
        arrows: 2-D vectors; queries in blue, keys in red, each labelled at its tip.
        title: an optional caption above the axes.

    Raises:
        ValueError: ``arrows`` is empty.
    """
    if not arrows:
        raise ValueError("svg_figure needs at least one arrow, found none")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    lim = _extent(arrows)
    rc = {"svg.hashsalt": "attnscore-practice", "svg.fonttype": "path", "font.size": 10}
    with matplotlib.rc_context(rc):  # type: ignore[arg-type]
        fig, ax = plt.subplots(figsize=(3.2, 3.2))
        try:
            ax.axhline(0, color="#999999", linewidth=0.8)
            ax.axvline(0, color="#999999", linewidth=0.8)
            for a in arrows:
                ax.annotate(
                    "",
                    xy=(float(a.x), float(a.y)),
                    xytext=(0, 0),
                    arrowprops={"arrowstyle": "-|>", "color": _COLOURS.get(a.role, "#333333"), "linewidth": 2.0},
                )
            ax.set_xlim(-lim - 0.5, lim + 0.5)
            ax.set_ylim(-lim - 0.5, lim + 0.5)
            ax.set_aspect("equal")
            ax.set_xticks(range(-lim, lim + 1))
            ax.set_yticks(range(-lim, lim + 1))
            ax.grid(True, color="#eeeeee", linewidth=0.6)
            if title:
                ax.set_title(title)
            _place_labels(fig, ax, arrows)
            buf = io.BytesIO()
            fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
        finally:
            plt.close(fig)
    return buf.getvalue()


_RADII_PT = (5.0, 12.0, 22.0, 34.0)
_TURNS_DEG = (0, 45, -45, 90, -90, 135, -135, 180)


def _place_labels(fig: Any, ax: Any, arrows: Sequence[Arrow]) -> None:
    """Add each arrow's label at the first candidate spot whose box is free (display coordinates).

    A spot is free when its box (padded by 1.5 pt) overlaps no label placed before nor a tick
    label, crosses no arrow's shaft, and lies no nearer another arrow's tip than its own (a
    label never reads as another arrow's). Candidates: around the tip at :data:`_RADII_PT`, turning from the arrow's
    own direction by :data:`_TURNS_DEG`, the text aligned away from the tip. When none is free
    (many arrows in a small picture) the cheapest is taken: crossing a shaft costs most, then
    sitting nearer another tip, then the area shared with labels (tick labels count 1/100).
    """
    fig.canvas.draw()  # the tick labels get their places
    renderer = fig.canvas.get_renderer()
    to_display = ax.transData.transform
    origin = to_display((0.0, 0.0))
    shafts = [(origin, to_display((float(a.x), float(a.y)))) for a in arrows]
    points_to_px = fig.dpi / 72.0
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
    obstacles: list[tuple[float, ...]] = [(b.x0, b.y0, b.x1, b.y1) for b in ticks]
    placed: list[tuple[float, ...]] = []
    for a in arrows:
        x, y = float(a.x), float(a.y)
        colour = _COLOURS.get(a.role, "#333333")
        text = ax.text(
            x,
            y,
            f"{a.label} = [{format_exact(a.x)}, {format_exact(a.y)}]",
            color=colour,
            fontsize=9,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.0},
        )
        text.set_gid(f"label-{a.label}")
        heading = math.atan2(y, x) if (x, y) != (0.0, 0.0) else math.pi / 4
        best: tuple[float, tuple[float, float, str, str]] | None = None
        for radius in _RADII_PT:
            for turn in _TURNS_DEG:
                angle = heading + math.radians(turn)
                dx, dy = math.cos(angle), math.sin(angle)
                ha = "left" if dx > 0.3 else "right" if dx < -0.3 else "center"
                va = "bottom" if dy > 0.3 else "top" if dy < -0.3 else "center"
                spot = (radius * dx, radius * dy, ha, va)
                box = _box_at(text, spot, renderer, points_to_px)
                crowding = sum(_overlap(box, other) for other in placed) + sum(
                    _overlap(box, other) / 100 for other in obstacles
                )
                crossing = any(_crosses(box, start, end) for start, end in shafts)
                own = _distance(box, to_display((x, y)))
                misleading = any(
                    _distance(box, tip) < own for _, tip in shafts if tuple(tip) != tuple(to_display((x, y)))
                )
                cost = crowding + (1e6 if crossing else 0.0) + (1e4 if misleading else 0.0)
                if cost == 0:
                    best = (0.0, spot)
                    break
                if best is None or cost < best[0]:
                    best = (cost, spot)
            if best is not None and best[0] == 0.0:
                break
        assert best is not None
        placed.append(_box_at(text, best[1], renderer, points_to_px))


def _box_at(text: Any, spot: tuple[float, float, str, str], renderer: Any, points_to_px: float) -> tuple[float, ...]:
    """Move ``text`` to ``spot`` (offset in points from its anchor, alignment) and return its padded box."""
    from matplotlib.transforms import offset_copy

    dx, dy, ha, va = spot
    text.set_transform(offset_copy(text.axes.transData, fig=text.figure, x=dx, y=dy, units="points"))
    text.set_horizontalalignment(ha)
    text.set_verticalalignment(va)
    extent = text.get_window_extent(renderer)
    pad = 1.5 * points_to_px
    return (extent.x0 - pad, extent.y0 - pad, extent.x1 + pad, extent.y1 + pad)


def _distance(box: tuple[float, ...], point: Any) -> float:
    """How far ``point`` lies from ``box`` (0 inside it)."""
    dx = max(box[0] - point[0], 0.0, point[0] - box[2])
    dy = max(box[1] - point[1], 0.0, point[1] - box[3])
    return math.hypot(dx, dy)


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """The area two boxes ``(x0, y0, x1, y1)`` share (0 when disjoint)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _crosses(box: tuple[float, ...], start: Any, end: Any, steps: int = 64) -> bool:
    """Whether the segment ``start`` -> ``end`` passes through ``box`` (sampled along its length)."""
    for i in range(steps + 1):
        t = i / steps
        px, py = start[0] + t * (end[0] - start[0]), start[1] + t * (end[1] - start[1])
        if box[0] <= px <= box[2] and box[1] <= py <= box[3]:
            return True
    return False


def _t(x: Fraction) -> str:
    return format_exact(x) if x.denominator in (1, 2, 4, 5, 10) else f"{float(x):.4f}"


def tikz_figure(arrows: Sequence[Arrow]) -> str:
    """Draw the arrows as a TikZ picture (needs ``\\usepackage{tikz}``).

    Raises:
        ValueError: ``arrows`` is empty.
    """
    if not arrows:
        raise ValueError("tikz_figure needs at least one arrow, found none")
    lim = _extent(arrows)
    scale = format_exact(Fraction(2, lim)) if lim > 2 else "1"
    lines = [
        f"\\begin{{tikzpicture}}[scale={scale}, >=stealth]",
        f"  \\draw[step=1, very thin, gray!30] (-{lim},-{lim}) grid ({lim},{lim});",
        f"  \\draw[->, gray] (-{lim},0) -- ({lim},0);",
        f"  \\draw[->, gray] (0,-{lim}) -- (0,{lim});",
    ]
    for a in arrows:
        colour = "blue!70!black" if a.role == "query" else "red!75!black"
        name = a.label[0] + (f"_{{{a.label[1:]}}}" if len(a.label) > 1 else "")
        lines.append(
            f"  \\draw[->, very thick, {colour}] (0,0) -- ({_t(a.x)},{_t(a.y)}) "
            f"node[{'above right' if a.y >= 0 else 'below right'}, font=\\small] {{${name}$}};"
        )
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines)
