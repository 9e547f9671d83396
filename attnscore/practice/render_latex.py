"""LaTeX worksheets and answer keys (standalone ``article`` documents; figures in TikZ).

The documents compile with ``pdflatex`` (Latin Modern fonts in T1 encoding, so the PDF has
outline fonts and copyable text). Three details keep the printed text honest:

- the "Regenerate with" command is typeset by :func:`command_latex`: typewriter lines of at
  most :data:`COMMAND_WIDTH` characters joined by shell line continuations (`` \\``), every
  ``-`` written ``-{}`` so ``--count`` never becomes an en-dash, quotes as straight quotes;
  copying it from the PDF and pasting it into a shell runs it;
- maths in headings (``Q K^T``, ``d_k`` in a family title) is typeset as maths
  (:func:`heading_latex`);
- a minus sign in prose (``-0.1235``) is a real minus (``$-$``), not a hyphen.

And four keep the page in shape (``tests/practice/test_latex_layout.py`` compiles every family and
reads the log and the aux file):

- a problem with a figure keeps its heading, statement and figure in one unbreakable block, so
  the figure is never on the page after its problem (labels ``problem-N`` and ``figure-N`` in
  the aux file say on which page each landed);
- every numeric answer has its blank, laid out as a grid (one row per matrix row ``S_ij``, at
  most four blanks a row) that never wraps;
- a display of givens separated by ``\\qquad`` (``q = [...], \\qquad k_1 = [...]``) is a centred
  line of items that TeX breaks between items when it is wider than the text;
- ``\\emergencystretch`` (1.5em) lets TeX loosen a paragraph whose long inline formula would
  otherwise stick out by a fraction of a point: no line runs into the margin.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from attnscore.practice.figures import tikz_figure
from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import Rich, escape_latex, to_latex
from attnscore.practice.worksheet import Worksheet

__all__ = [
    "render_worksheet_latex",
    "render_key_latex",
    "braces_balanced",
    "command_latex",
    "heading_latex",
    "COMMAND_WIDTH",
]

_LETTERS = "ABCDEFGH"

_PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage{textcomp}
\usepackage{amsmath,amssymb}
\usepackage{tikz}
\usepackage[margin=2.5cm]{geometry}
\setlength{\emergencystretch}{1.5em}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.6em}
\ifdefined\pdfgentounicode\IfFileExists{glyphtounicode.tex}{\input{glyphtounicode}\pdfgentounicode=1}{}\fi
\begin{document}
"""


#: Longest line of the typeset "Regenerate with" command, in characters (the text block holds
#: about 80 typewriter characters at 11pt, so 64 leaves room for the continuation and indent).
COMMAND_WIDTH = 64

_COMMAND_SPECIAL = {
    "\\": r"\textbackslash{}",
    "-": "-{}",  # no -- ligature: an en-dash cannot be pasted into a shell
    "'": r"\textquotesingle{}",
    "`": r"\textasciigrave{}",
    '"': r"\textquotedbl{}",
    " ": "\\ ",  # every space printed, none stretched or dropped
    **{c: "\\" + c for c in "&%$#_{}"},
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def _command_groups(command: str) -> list[str]:
    """Shell words of ``command``, each option kept with its value (``--count 10``)."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: keep the text as one group rather than guess
        return [command]
    groups = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" not in w and i + 1 < len(words) and not words[i + 1].startswith("--"):
            groups.append(shlex.join(words[i : i + 2]))
            i += 2
        else:
            groups.append(shlex.quote(w))
            i += 1
    return groups


def command_latex(command: str, width: int = COMMAND_WIDTH) -> str:
    """A shell command as copyable LaTeX: typewriter lines within the margin, shell continuations.

    The command is split between shell words (an option stays with its value) into lines of at
    most ``width`` characters (a single longer word keeps its own line); every line but the last
    ends in `` \\`` so that the copied text runs as one command. Hyphens are written ``-{}`` (no
    en-dash ligature), quotes are straight, every space is printed.

    Raises:
        ValueError: ``width`` is below 20.

    Example:
        >>> print(command_latex("attnscore practice --count 5"))
        \\begin{flushleft}\\ttfamily
        attnscore\\ practice\\ -{}-{}count\\ 5
        \\end{flushleft}
    """
    if width < 20:
        raise ValueError(f"width must be >= 20 characters, found {width}")
    lines: list[str] = []
    for group in _command_groups(command):
        indent = 4 if len(lines) > 1 else 0  # 2em is about 4 typewriter characters
        if lines and indent + len(lines[-1]) + 1 + len(group) + 2 <= width:
            lines[-1] += " " + group
        else:
            lines.append(group)
    body = [
        ("\\hspace*{2em}" if i else "") + "".join(_COMMAND_SPECIAL.get(c, c) for c in line)
        for i, line in enumerate(lines)
    ]
    joined = (r"\ \textbackslash{}\\" + "\n").join(body)
    return "\\begin{flushleft}\\ttfamily\n" + joined + "\n\\end{flushleft}"


# A maths token in plain prose: optional √, bare capitals (``Q K^T``), then a letter with at least
# one sub- or superscript (``d_k``, ``K^T``, ``W_{Q}``); never inside a word (``snake_case``);
# "A" and "I" are words, not matrices.
_MATH_TOKEN = re.compile(r"(?<![\w\\])(√?)((?:[B-HJ-Z] )*[A-Za-z](?:[_^](?:[A-Za-z0-9]+|\{[A-Za-z0-9]+\}))+)(?![\w{])")


def _token_math(root: str, token: str) -> str:
    body = re.sub(r"(?<=[A-Z]) (?=[A-Z])", "", token)  # Q K^T -> QK^T
    body = re.sub(r"([_^])([A-Za-z0-9]{2,})", r"\1{\2}", body)  # d_model -> d_{model}
    body = re.sub(r"\^(?:T|\{T\})(?![A-Za-z0-9])", r"^\\top", body)  # transpose
    return f"$\\sqrt{{{body}}}$" if root else f"${body}$"


def heading_latex(title: str) -> str:
    """A heading (family title) as LaTeX: prose escaped, maths tokens typeset as maths.

    ``"the score matrix Q K^T"`` becomes ``the score matrix $QK^\\top$``, ``"root of d_k"`` becomes
    ``root of $d_k$`` and ``"√d_k"`` becomes ``$\\sqrt{d_k}$``. Only letters, digits, ``_``, ``^``
    and braces are ever read as maths, so a teacher's title cannot inject LaTeX commands.
    """
    out, last = [], 0
    for m in _MATH_TOKEN.finditer(title):
        out += [escape_latex(title[last : m.start()]), _token_math(m.group(1), m.group(2))]
        last = m.end()
    out.append(escape_latex(title[last:]))
    return "".join(out)


_MATRIX_ENTRY = re.compile(r"_(\d)(\d)$")
_BLANKS_PER_ROW = 4


def _blank_rows(q: Question) -> list[list[str]]:
    """The blanks of ``q`` as rows: a matrix's entries (names ``S_ij``) by row ``i``, else four a row."""
    cells = [f"{to_latex(a.label)} = \\rule{{3em}}{{0.4pt}}" for a in q.numeric]
    entries = [_MATRIX_ENTRY.search(a.name) for a in q.numeric]
    if len(q.numeric) > 1 and all(entries):
        rows: dict[str, list[str]] = {}
        for cell, match in zip(cells, entries, strict=True):
            assert match is not None
            rows.setdefault(match.group(1), []).append(cell)
        if all(len(r) <= _BLANKS_PER_ROW for r in rows.values()):
            return list(rows.values())
    return [cells[i : i + _BLANKS_PER_ROW] for i in range(0, len(cells), _BLANKS_PER_ROW)]


def _blanks(q: Question) -> list[str]:
    """A tabular of ``q``'s blanks (rows never wrap: each row is at most four short cells)."""
    rows = _blank_rows(q)
    width = max(len(r) for r in rows)
    body = [" & ".join(r) + " \\\\" for r in rows]
    tabular = [f"\\begin{{tabular}}{{@{{}}{'l' * width}@{{}}}}", *body, "\\end{tabular}"]
    return ["\\par\\smallskip{\\renewcommand{\\arraystretch}{1.8}%", *tabular, "}"]  # room to write


def _question(q: Question) -> list[str]:
    lines = [f"\\item[({q.part})] {to_latex(q.prompt)}"]
    if q.numeric:
        lines += _blanks(q)
    if q.choice is not None:
        lines.append("\\begin{itemize}")
        lines += [f"  \\item[{_LETTERS[i]}.] {to_latex(o)}" for i, o in enumerate(q.choice.options)]
        lines.append("\\end{itemize}")
    return lines


# \subsection*'s own space above, then a block that cannot break across pages.
_KEEP_TOGETHER = (
    "\\par\\addvspace{3.25ex plus 1ex minus .2ex}\\noindent\\begin{minipage}{\\linewidth}\\setlength{\\parskip}{0.6em}"
)


def _past(source: str, i: int, depth: int) -> tuple[int, int]:
    """The position after the character at ``i`` of LaTeX ``source`` and the brace depth there
    (``depth`` before it): an escaped pair (``\\{``, ``\\}``, ``\\q``) is passed whole."""
    c = source[i]
    if c == "\\":
        return i + 2, depth
    return i + 1, depth + (c == "{") - (c == "}")


def _split_top_level(content: str, separator: str) -> list[str]:
    """``content`` split at each ``separator`` (a command such as ``\\qquad``) outside braces and
    environments."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(content):
        if content.startswith("\\begin{", i):
            depth += 1
        elif content.startswith("\\end{", i):
            depth -= 1
        if depth == 0 and content.startswith(separator, i):
            parts.append(content[start:i])
            i += len(separator)
            start = i
            continue
        i, depth = _past(content, i, depth)
    parts.append(content[start:])
    return [p.strip() for p in parts]


def _display_latex(rich: Rich) -> str:
    """Like :func:`to_latex`, but a display of ``\\qquad``-separated givens becomes a centred
    paragraph of display-style items that TeX breaks between items, never inside one."""
    out = []
    for style, content in rich:
        items = _split_top_level(content, "\\qquad") if style == "display" else []
        if len(items) > 1:
            typeset = "\\qquad ".join(f"$\\displaystyle {item}$" for item in items)
            out.append(f"\n\\begin{{center}}\n{typeset}\n\\end{{center}}\n")
        else:
            out.append(to_latex(((style, content),)))
    return "".join(out)


def _solution(p: Problem) -> list[str]:
    return ["\\paragraph{Worked solution.}"] + [_display_latex(para) + "\n" for para in p.solution]


def render_worksheet_latex(problems: Sequence[Problem], sheet: Worksheet) -> str:
    """The worksheet as a complete LaTeX document (TikZ figures for 2-D vectors)."""
    lines = [_PREAMBLE, f"\\section*{{{heading_latex(sheet.title)}}}"]
    who = f"Student: {escape_latex(sheet.student)} \\quad " if sheet.student else ""
    lines += [
        f"{who}Seed: {sheet.base_seed} \\quad {len(problems)} problem(s)\n",
        escape_latex(sheet.rounding) + "\n",
    ]
    for number, p in enumerate(problems, start=1):
        if p.figure:  # heading, statement and figure in one block: the figure stays with its problem
            lines.append(_KEEP_TOGETHER)
        lines.append(f"\\subsection*{{Problem {number}. {heading_latex(p.title)}}}\\label{{problem-{number}}}")
        if p.intro:
            lines.append(escape_latex(p.intro) + "\n")
        lines += [_display_latex(para) + "\n" for para in p.statement]
        if p.figure:
            lines += ["\\begin{center}", tikz_figure(p.figure), f"\\label{{figure-{number}}}", "\\end{center}"]
            lines.append("\\end{minipage}\\par")
        lines.append("\\begin{itemize}")
        for q in p.questions:
            lines += _question(q)
        lines.append("\\end{itemize}")
        if sheet.with_solutions:
            lines += _solution(p)
    lines.append("\\end{document}")
    return "\n".join(lines) + "\n"


def render_key_latex(problems: Sequence[Problem], sheet: Worksheet) -> str:
    """The answer key as a complete LaTeX document: seeds, answers, worked solutions."""
    lines = [_PREAMBLE, f"\\section*{{Answer key: {heading_latex(sheet.title)}}}"]
    lines += [
        "Regenerate with:",
        command_latex(sheet.command) + "\n",
        escape_latex(sheet.rounding) + "\n",
    ]
    for number, p in enumerate(problems, start=1):
        lines.append(f"\\subsection*{{Problem {number}. {heading_latex(p.title)}}}")
        if p.index is None:
            lines.append(f"Fixed problem (family {escape_latex(p.family_id)} v{p.family_version}).\n")
        else:
            who = f", student {escape_latex(p.student)}" if p.student else ""
            lines.append(
                f"Variant {p.index} of family {escape_latex(p.family_id)} v{p.family_version} "
                f"(base seed {p.base_seed}{who}); numbers seed {p.seed}.\n"
            )
        lines.append("\\begin{itemize}")
        for q in p.questions:
            for a in q.numeric:
                exact = f" (exactly ${format_exact(a.exact)}$)" if a.rounded else ""
                lines.append(
                    f"  \\item[({q.part})] {to_latex(a.label)} $= \\mathbf{{{a.key}}}${exact}; accepted "
                    f"within $\\pm {format_exact(a.tolerance)}$"
                )
            if q.choice is not None:
                c = q.choice
                lines.append(
                    f"  \\item[({q.part})] \\textbf{{{_LETTERS[c.correct]}.}} {to_latex(c.options[c.correct])}"
                )
        lines.append("\\end{itemize}")
        lines += _solution(p)
    lines.append("\\end{document}")
    return "\n".join(lines) + "\n"


def braces_balanced(source: str) -> bool:
    """Whether every unescaped ``{`` in LaTeX ``source`` has its ``}`` (``\\{`` and ``\\}`` are skipped)."""
    depth, i = 0, 0
    while i < len(source):
        i, depth = _past(source, i, depth)
        if depth < 0:
            return False
    return depth == 0
