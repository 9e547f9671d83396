"""Markdown worksheets and answer keys (math as ``$...$``, figures as linked SVG files).

Example:
    >>> from attnscore.practice.families import parse_family_text
    >>> from attnscore.practice.generators import fixed_problem
    >>> fam = parse_family_text("id: demo\\nversion: 1\\nkind: one_score\\ntitle: Demo\\n", "demo.yaml")[0]
    >>> p = fixed_problem(fam, [Fraction(0), Fraction(1)], [[Fraction(0), Fraction(-1)]])
    >>> "**-1**" in render_key_md([p], Worksheet("Demo", 0, None, "attnscore practice"))
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction  # noqa: F401  (used by the docstring example)

from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import escape_markdown, to_markdown
from attnscore.practice.worksheet import Worksheet

__all__ = ["render_worksheet_md", "render_key_md"]

_LETTERS = "ABCDEFGH"


def _question_md(q: Question) -> list[str]:
    lines = [f"**({q.part})** {to_markdown(q.prompt)}", ""]
    if q.numeric and len(q.numeric) > 1:
        lines += [", ".join(f"{to_markdown(a.label)} = ____" for a in q.numeric), ""]
    if q.choice is not None:
        lines += [f"- **{_LETTERS[i]}.** {to_markdown(o)}" for i, o in enumerate(q.choice.options)] + [""]
    return lines


def _solution_md(p: Problem) -> list[str]:
    out = ["**Worked solution.**", ""]
    for para in p.solution:
        out += [to_markdown(para).strip("\n"), ""]
    return out


def render_worksheet_md(problems: Sequence[Problem], sheet: Worksheet, figures: Mapping[str, str] | None = None) -> str:
    """The worksheet: header, rounding rule, then each problem with its parts (no answers).

    Args:
        problems: the problems in order.
        sheet: header data; with ``sheet.with_solutions`` each problem is followed by its solution.
        figures: problem uid -> relative path of its SVG figure (problems without one get none).
    """
    figures = figures or {}
    lines = [f"# {escape_markdown(sheet.title)}", ""]
    who = f"Student: {escape_markdown(sheet.student)} · " if sheet.student else ""
    lines += [
        f"{who}Seed: {sheet.base_seed} · {len(problems)} problem(s)",
        "",
        escape_markdown(sheet.rounding),
        "",
    ]
    for number, p in enumerate(problems, start=1):
        lines += ["---", "", f"## Problem {number}. {escape_markdown(p.title)}", ""]
        if p.intro:
            lines += [escape_markdown(p.intro), ""]
        for para in p.statement:
            lines += [to_markdown(para).strip("\n"), ""]
        if p.uid in figures:
            lines += [f"![Figure for problem {number}: the query and key vectors]({figures[p.uid]})", ""]
        for q in p.questions:
            lines += _question_md(q)
        if sheet.with_solutions:
            lines += _solution_md(p)
    return "\n".join(lines).rstrip("\n") + "\n"


def _variant_line(p: Problem) -> str:
    if p.index is None:
        return f"Fixed problem (family `{p.family_id}` v{p.family_version}); not drawn from a seed."
    student = f", student `{p.student}`" if p.student else ""
    return (
        f"Variant {p.index} of family `{p.family_id}` v{p.family_version} "
        f"(base seed {p.base_seed}{student}); "
        f"numbers seed `{p.seed}`."
    )


def render_key_md(problems: Sequence[Problem], sheet: Worksheet) -> str:
    """The answer key: per problem, its seed, every answer (exact and as keyed) and the worked solution."""
    lines = [f"# Answer key: {escape_markdown(sheet.title)}", ""]
    lines += [f"Regenerate with: `{sheet.command}`", "", escape_markdown(sheet.rounding), ""]
    for number, p in enumerate(problems, start=1):
        lines += ["---", "", f"## Problem {number}. {escape_markdown(p.title)}", "", _variant_line(p), ""]
        for q in p.questions:
            for a in q.numeric:
                exact = "" if not a.rounded else f" (exactly {format_exact(a.exact)})"
                lines.append(
                    f"- ({q.part}) {to_markdown(a.label)} = **{a.key}**{exact}; accepted within "
                    f"±{format_exact(a.tolerance)}"
                )
            if q.choice is not None:
                c = q.choice
                lines.append(f"- ({q.part}) **{_LETTERS[c.correct]}.** {to_markdown(c.options[c.correct])}")
        lines.append("")
        lines += _solution_md(p)
    return "\n".join(lines).rstrip("\n") + "\n"
