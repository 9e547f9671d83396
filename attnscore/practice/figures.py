"""Figures of 2-D queries and keys: byte-reproducible SVG (matplotlib) and TikZ (LaTeX).

The SVG writer fixes everything that would change between runs: the ``svg.hashsalt`` used for
element ids, the ``Date`` metadata (removed) and the text mode (glyphs as paths), so the same
arrows always give the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from fractions import Fraction

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
                x, y = float(a.x), float(a.y)
                colour = _COLOURS.get(a.role, "#333333")
                ax.annotate(
                    "",
                    xy=(x, y),
                    xytext=(0, 0),
                    arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 2.0},
                )
                ax.text(
                    x * 1.08 + 0.12,
                    y * 1.08 + 0.12,
                    f"{a.label} = [{format_exact(a.x)}, {format_exact(a.y)}]",
                    color=colour,
                    fontsize=9,
                )
            ax.set_xlim(-lim - 0.5, lim + 0.5)
            ax.set_ylim(-lim - 0.5, lim + 0.5)
            ax.set_aspect("equal")
            ax.set_xticks(range(-lim, lim + 1))
            ax.set_yticks(range(-lim, lim + 1))
            ax.grid(True, color="#eeeeee", linewidth=0.6)
            if title:
                ax.set_title(title)
            buf = io.BytesIO()
            fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
        finally:
            plt.close(fig)
    return buf.getvalue()


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
