"""Rendering: the worked example reads well; every writer escapes for its format; bytes are reproducible."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction as F

import pytest

from attnscore.practice.command import FORMATS, build_outputs
from attnscore.practice.figures import svg_figure, tikz_figure
from attnscore.practice.generators import fixed_problem, generate_family
from attnscore.practice.render_latex import braces_balanced, render_key_latex, render_worksheet_latex
from attnscore.practice.render_md import render_key_md, render_worksheet_md
from attnscore.practice.richtext import escape_latex, escape_markdown, math, text, to_html
from attnscore.practice.worksheet import Worksheet

SHEET = Worksheet("Practice", 0, None, "attnscore practice --q 0,1 --k 0,-1")
NASTY = "R&D <b>50%</b> of #1 {x} ~ $5 \\ a_b^c *bold*"


@pytest.fixture()
def example(families):
    """The practice example of design.md: q=[0,1], k=[0,-1]."""
    return fixed_problem(families["one-score"], (F(0), F(1)), [(F(0), F(-1))])


def test_markdown_worksheet_reads_like_a_textbook_exercise(example):
    """The Markdown worksheet shows the vectors, the figure, both parts and the three sign options."""
    md = render_worksheet_md([example], SHEET, {example.uid: "figures/p1.svg"})
    for line in [
        "## Problem 1. One score: the dot product of a query and a key",
        "q = [0,\\ 1], \\qquad k = [0,\\ -1]",
        "![Figure for problem 1: the query and key vectors](figures/p1.svg)",
        "**(a)** Compute the score $q \\cdot k$.",
        "- **C.** Negative: the key is anti-aligned (more than 90°); it points away from what the query looks for.",
    ]:
        assert line in md
    assert "-1" not in md.split("**(a)**")[1]  # no answer in the worksheet


def test_markdown_key_has_answers_seed_line_and_solution(example):
    """The key gives -1 and C, the tolerance and the worked solution."""
    key = render_key_md([example], SHEET)
    assert "- (a) $q \\cdot k$ = **-1**; accepted within ±0.0005" in key
    assert "- (b) **C.** Negative" in key
    assert "q \\cdot k = 0 \\cdot 0 + 1 \\cdot (-1) = 0 + (-1) = -1" in key
    assert "Regenerate with: `attnscore practice --q 0,1 --k 0,-1`" in key


def test_latex_worksheet_and_key(example):
    """LaTeX output is a complete document with a TikZ figure, balanced braces and the key."""
    sheet = render_worksheet_latex([example], SHEET)
    key = render_key_latex([example], SHEET)
    assert sheet.startswith("\\documentclass") and sheet.rstrip().endswith("\\end{document}")
    assert "\\begin{tikzpicture}" in sheet and "\\item[(a)] Compute the score $q \\cdot k$." in sheet
    assert "$= \\mathbf{-1}$" in key
    assert braces_balanced(sheet) and braces_balanced(key)


@pytest.mark.parametrize(
    ("source", "balanced"),
    [("{a}{b{c}}", True), ("\\{ not a group", True), ("{open", False), ("close}", False), ("\\\\{x}", True)],
)
def test_braces_balanced(source, balanced):
    """Brace balance skips escaped braces."""
    assert braces_balanced(source) is balanced


def test_teacher_text_is_escaped_in_every_format(families):
    """A family intro full of special characters is escaped for Markdown, LaTeX and HTML/XML."""
    fam = replace(families["one-score"], intro=NASTY, title="Scores & <weights> 100%")
    p = generate_family(fam, 1, 0)[0][0]
    md = render_worksheet_md([p], SHEET)
    assert escape_markdown(NASTY) in md and "\\<b\\>" in md
    tex = render_worksheet_latex([p], SHEET)
    assert "R\\&D" in tex and "50\\%" in tex and "\\#1 \\{x\\}" in tex and "\\textbackslash{}" in tex
    assert braces_balanced(tex)
    for fmt in ("moodle-xml", "prairielearn", "qti"):
        files = build_outputs([p], replace(SHEET, title="Q&A <1>"), fmt)
        assert files  # parsing is checked in test_exports


@pytest.mark.parametrize(
    ("rich", "html"),
    [
        (text("a < b & c"), "a &lt; b &amp; c"),
        (math("x < y"), "\\(x &lt; y\\)"),
    ],
)
def test_html_escaping(rich, html):
    """HTML text and math are escaped once."""
    assert to_html(rich) == html


def test_escape_latex_table():
    """Each LaTeX special character gets its escape."""
    assert escape_latex("&%$#_{}~^\\") == "\\&\\%\\$\\#\\_\\{\\}\\textasciitilde{}\\textasciicircum{}\\textbackslash{}"


def test_svg_is_byte_reproducible(example):
    """The SVG figure has no date and is byte-identical across calls."""
    a, b = svg_figure(example.figure), svg_figure(example.figure)
    assert a == b and b"<dc:date>" not in a and a.startswith(b"<?xml")


def test_figures_refuse_empty_input():
    """A figure needs at least one arrow."""
    with pytest.raises(ValueError, match="at least one arrow"):
        tikz_figure(())


@pytest.mark.parametrize("fmt", FORMATS)
def test_outputs_are_byte_identical(families, fmt):
    """The same arguments give byte-identical files in every format."""
    problems = [p for fam in families.values() for p in generate_family(fam, 2, 11, "dana")[0]]
    a = build_outputs(problems, SHEET, fmt, figures=False)
    b = build_outputs(list(problems), SHEET, fmt, figures=False)
    assert a == b and a
