"""Rich text for problems: plain text and LaTeX math, escaped once per output format.

A :data:`Rich` value is a tuple of segments ``(kind, content)``:

- ``("text", s)``: prose; may come from a teacher's YAML file, so every writer escapes it for
  its own format (Markdown punctuation, LaTeX special characters, HTML/XML ``<`` and ``&``);
- ``("math", s)``: inline LaTeX math written by the toolkit (``q \\cdot k = -1``);
- ``("display", s)``: display math, on a line of its own.

The generators build problems once; :func:`to_markdown`, :func:`to_latex` and :func:`to_html`
turn the same value into each format.

Example:
    >>> to_markdown(text("Score ") + math("s_1"))
    'Score $s_1$'
"""

from __future__ import annotations

from xml.sax.saxutils import escape as _xml_escape

__all__ = [
    "Rich",
    "text",
    "math",
    "display",
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
}


def escape_latex(s: str) -> str:
    """Escape LaTeX special characters (and a few Unicode symbols) in prose."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in s)


def plain(rich: Rich) -> str:
    """The segments' contents joined, unescaped (for ids, tests and logs)."""
    return "".join(content for _, content in rich)


def to_markdown(rich: Rich) -> str:
    """Render as Markdown with ``$...$`` / ``$$...$$`` math (GitHub and MathJax read both)."""
    out = []
    for kind, content in rich:
        if kind == "text":
            out.append(escape_markdown(content))
        elif kind == "math":
            out.append(f"${content}$")
        else:
            out.append(f"\n\n$$\n{content}\n$$\n\n")
    return "".join(out)


def to_latex(rich: Rich) -> str:
    """Render as LaTeX: prose escaped, math in ``$...$`` or ``\\[ ... \\]``."""
    out = []
    for kind, content in rich:
        if kind == "text":
            out.append(escape_latex(content))
        elif kind == "math":
            out.append(f"${content}$")
        else:
            out.append(f"\n\\[\n{content}\n\\]\n")
    return "".join(out)


def to_html(rich: Rich) -> str:
    """Render as an HTML fragment: prose escaped, math as MathJax ``\\(...\\)`` / ``\\[...\\]``.

    The result is HTML *text*; XML writers escape it once more when they store it in an element.
    """
    out = []
    for kind, content in rich:
        if kind == "text":
            out.append(_xml_escape(content))
        elif kind == "math":
            out.append(f"\\({_xml_escape(content)}\\)")
        else:
            out.append(f"\\[{_xml_escape(content)}\\]")
    return "".join(out)
