"""Rich text for problems: plain text and LaTeX math, escaped once per output format.

A :data:`Rich` value is a tuple of segments ``(style, content)``:

- ``("text", s)``: prose; may come from a teacher's YAML file, so every writer escapes it for
  its own format (Markdown punctuation, LaTeX special characters, HTML/XML ``<`` and ``&``);
- ``("math", s)``: inline LaTeX math written by the toolkit (``q \\cdot k = -1``);
- ``("display", s)``: display math, on a line of its own;
- ``("form", places)``: how to give a numeric answer, worded for the output's answer field
  (:func:`answer_form`): "exactly or to 3 decimal places" where a fraction can be written
  (worksheets, JSON, PrairieLearn), "to 3 decimal places" where the platform's numeric field
  takes decimals only (Moodle numerical and cloze fields, Canvas numerical questions).

The generators build problems once; :func:`to_markdown`, :func:`to_latex` and :func:`to_html`
turn the same value into each format.

Example:
    >>> to_markdown(text("Score ") + math("s_1"))
    'Score $s_1$'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from xml.sax.saxutils import escape as _xml_escape

__all__ = [
    "Rich",
    "text",
    "math",
    "display",
    "answer_form",
    "plain",
    "to_markdown",
    "to_latex",
    "to_html",
    "escape_markdown",
    "escape_latex",
]

Segment = tuple[str, str]
Rich = tuple[Segment, ...]


def text(s: str) -> Rich:
    """A prose segment."""
    return (("text", s),)


def math(s: str) -> Rich:
    """An inline math segment (LaTeX source)."""
    return (("math", s),)


def display(s: str) -> Rich:
    """A display math segment (LaTeX source)."""
    return (("display", s),)


def answer_form(places: int) -> Rich:
    """How to give a numeric answer, rounded to ``places`` decimals; each writer words it for its field.

    Raises:
        ValueError: ``places`` is negative.

    Example:
        >>> to_markdown(answer_form(3)), to_html(answer_form(3), decimals_only=True)
        ('exactly or to 3 decimal places', 'to 3 decimal places')
    """
    if places < 0:
        raise ValueError(f"places must be >= 0, found {places}")
    return (("form", str(places)),)


def _form(places: str, decimals_only: bool) -> str:
    rounded = {"0": "to a whole number", "1": "to 1 decimal place"}.get(places, f"to {places} decimal places")
    return rounded if decimals_only else f"exactly or {rounded}"


_MD_SPECIAL = set("\\`*_[]<>#|$~")


def escape_markdown(s: str) -> str:
    """Backslash-escape the characters Markdown (CommonMark + GitHub math) would interpret."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in s)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "·": r"\textperiodcentered{}",
    "ᵀ": r"\textsuperscript{T}",
    "√": r"$\surd$",
    "×": r"$\times$",
    "≈": r"$\approx$",
    "°": r"\textdegree{}",
    "−": "$-$",
}

# A hyphen used as a minus sign: before a number, not inside a word or a range (``one-score``, ``1-2``).
_PROSE_MINUS = re.compile(r"(?<![\w.-])-(?=\.?[0-9])")


def escape_latex(s: str) -> str:
    """Escape LaTeX special characters (and a few Unicode symbols) in prose.

    A hyphen before a number (``-0.124``, ``(-1)``) is a minus sign and becomes ``$-$``; hyphens
    in words (``one-score``) stay hyphens.
    """
    return _PROSE_MINUS.sub("$-$", "".join(_LATEX_SPECIAL.get(c, c) for c in s))


def plain(rich: Rich) -> str:
    """The segments' contents joined, unescaped (for ids, tests and logs)."""
    return "".join(_form(content, False) if style == "form" else content for style, content in rich)


def _render(
    rich: Rich,
    escape: Callable[[str], str],
    inline: Callable[[str], str],
    display: Callable[[str], str],
    decimals_only: bool = False,
) -> str:
    """Prose through ``escape``, forms as written (:func:`_form`, ``decimals_only``), inline math
    through ``inline`` and display math through ``display`` (the formats differ only there)."""
    out = []
    for style, content in rich:
        if style == "text":
            out.append(escape(content))
        elif style == "form":
            out.append(_form(content, decimals_only))
        elif style == "math":
            out.append(inline(content))
        else:
            out.append(display(content))
    return "".join(out)


def _dollars(content: str) -> str:
    return f"${content}$"


def to_markdown(rich: Rich) -> str:
    """Render as Markdown with ``$...$`` / ``$$...$$`` math (GitHub and MathJax read both)."""
    return _render(rich, escape_markdown, _dollars, lambda content: f"\n\n$$\n{content}\n$$\n\n")


def to_latex(rich: Rich) -> str:
    """Render as LaTeX: prose escaped, math in ``$...$`` or ``\\[ ... \\]``."""
    return _render(rich, escape_latex, _dollars, lambda content: f"\n\\[\n{content}\n\\]\n")


def to_html(rich: Rich, decimals_only: bool = False) -> str:
    """Render as an HTML fragment: prose escaped, math as MathJax ``\\(...\\)`` / ``\\[...\\]``.

    ``decimals_only``: the answer field takes decimal numbers only (Moodle numerical, Canvas
    numerical), so :func:`answer_form` segments ask for decimals and never offer "exactly" (a
    fraction such as ``3/19`` would be rejected there).

    The result is HTML *text*; XML writers escape it once more when they store it in an element.
    """
    return _render(
        rich,
        _xml_escape,
        lambda content: f"\\({_xml_escape(content)}\\)",
        lambda content: f"\\[{_xml_escape(content)}\\]",
        decimals_only,
    )
