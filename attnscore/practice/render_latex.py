"""LaTeX worksheets and answer keys (standalone ``article`` documents; figures in TikZ)."""

from __future__ import annotations

from collections.abc import Sequence

from attnscore.practice.figures import tikz_figure
from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import escape_latex, to_latex
from attnscore.practice.worksheet import Worksheet

__all__ = ["render_worksheet_latex", "render_key_latex", "braces_balanced"]

_LETTERS = "ABCDEFGH"

_PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc}
\usepackage[T1]{fontenc}
\usepackage{textcomp}
\usepackage{amsmath,amssymb}
\usepackage{tikz}
\usepackage[margin=2.5cm]{geometry}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.6em}
\begin{document}
"""


def _question(q: Question) -> list[str]:
    lines = [f"\\item[({q.part})] {to_latex(q.prompt)}"]
    if q.numeric and len(q.numeric) > 1:
        lines.append(", ".join(f"{to_latex(a.label)} = \\rule{{2.5em}}{{0.4pt}}" for a in q.numeric))
    if q.choice is not None:
        lines.append("\\begin{itemize}")
        lines += [f"  \\item[{_LETTERS[i]}.] {to_latex(o)}" for i, o in enumerate(q.choice.options)]
        lines.append("\\end{itemize}")
    return lines


def _solution(p: Problem) -> list[str]:
    return ["\\paragraph{Worked solution.}"] + [to_latex(para) + "\n" for para in p.solution]


def render_worksheet_latex(problems: Sequence[Problem], sheet: Worksheet) -> str:
    """The worksheet as a complete LaTeX document (TikZ figures for 2-D vectors)."""
    lines = [_PREAMBLE, f"\\section*{{{escape_latex(sheet.title)}}}"]
    who = f"Student: {escape_latex(sheet.student)} \\quad " if sheet.student else ""
    lines += [
        f"{who}Seed: {sheet.base_seed} \\quad {len(problems)} problem(s)\n",
        escape_latex(sheet.rounding) + "\n",
    ]
    for number, p in enumerate(problems, start=1):
        lines.append(f"\\subsection*{{Problem {number}. {escape_latex(p.title)}}}")
        if p.intro:
            lines.append(escape_latex(p.intro) + "\n")
        lines += [to_latex(para) + "\n" for para in p.statement]
        if p.figure:
            lines += ["\\begin{center}", tikz_figure(p.figure), "\\end{center}"]
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
    lines = [_PREAMBLE, f"\\section*{{Answer key: {escape_latex(sheet.title)}}}"]
    lines += [
        f"Regenerate with: \\texttt{{{escape_latex(sheet.command)}}}\n",
        escape_latex(sheet.rounding) + "\n",
    ]
    for number, p in enumerate(problems, start=1):
        lines.append(f"\\subsection*{{Problem {number}. {escape_latex(p.title)}}}")
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
    depth = 0
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0
