"""The LaTeX worksheet's layout, measured on the compiled documents of every family: pdflatex's log
has no over- or underfull lines, each figure is on its problem's page (``\\label`` pages in the aux
file), every numeric answer has its blank and a matrix's blanks are a grid."""

from __future__ import annotations

import re
import shutil
import subprocess
from fractions import Fraction as F

import pytest

from attnscore.practice.generators import featured_problems, generate_family
from attnscore.practice.problem import NumericAnswer, Question
from attnscore.practice.render_latex import _blank_rows, _display_latex, render_key_latex, render_worksheet_latex
from attnscore.practice.richtext import display, math
from attnscore.practice.worksheet import Worksheet
from tests.guards import HANG_GUARD_S

needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
SHEET = Worksheet("Practice", 1, None, "attnscore practice --count 10 --seed 1", with_solutions=True)
FAMILIES = [
    "multiple-choice",
    "one-score",
    "scaled-score",
    "score-matrix",
    "score-vector",
    "softmax-exact",
    "softmax-ranking",
]


def problems_of(family):
    """The featured problems and ten variants of seed 1 (seed 1 drew the widest score vectors)."""
    return featured_problems(family) + generate_family(family, 10, 1)[0]


@pytest.fixture(scope="module")
def compiled(families, tmp_path_factory) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(family, document) -> (LaTeX source, pdflatex log, aux file), each document compiled once."""
    out = {}
    for family_id in FAMILIES:
        problems = problems_of(families[family_id])
        for doc, render in (("worksheet", render_worksheet_latex), ("answer-key", render_key_latex)):
            folder = tmp_path_factory.mktemp(f"{family_id}-{doc}")
            tex = render(problems, SHEET)
            (folder / "doc.tex").write_text(tex, encoding="utf-8")
            done = subprocess.run(
                ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=HANG_GUARD_S,
            )
            log = (folder / "doc.log").read_text(errors="replace")
            assert done.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))
            out[family_id, doc] = (tex, log, (folder / "doc.aux").read_text(errors="replace"))
    return out


@pytest.mark.slow
@needs_pdflatex
@pytest.mark.parametrize("doc", ["worksheet", "answer-key"])
@pytest.mark.parametrize("family_id", FAMILIES)
def test_no_overfull_or_underfull_lines(compiled, family_id, doc):
    """No line of the document runs into the margin or is stretched past TeX's limit."""
    _, log, _ = compiled[family_id, doc]
    bad = [line for line in log.splitlines() if re.match(r"(Overfull|Underfull) \\hbox", line)]
    assert bad == []


@pytest.mark.slow
@needs_pdflatex
@pytest.mark.parametrize("family_id", FAMILIES)
def test_figures_on_their_problems_page(compiled, families, family_id):
    """Every figure is typeset on the page its problem's heading is on."""
    _, _, aux = compiled[family_id, "worksheet"]
    pages = dict(re.findall(r"\\newlabel\{((?:problem|figure)-\d+)\}\{\{[^}]*\}\{(\d+)\}", aux))
    figures = {k.split("-")[1]: v for k, v in pages.items() if k.startswith("figure-")}
    drawn = [str(n) for n, p in enumerate(problems_of(families[family_id]), start=1) if p.figure]
    assert sorted(figures) == sorted(drawn)
    assert {n: (pages[f"problem-{n}"], page) for n, page in figures.items() if pages[f"problem-{n}"] != page} == {}


@pytest.mark.slow
@needs_pdflatex
def test_some_figures_exist(compiled):
    """The families with 2-D vectors draw figures (the page check is not vacuous)."""
    assert sum(aux.count("{figure-") for _, _, aux in compiled.values()) >= 8


@pytest.mark.slow
@needs_pdflatex
@pytest.mark.parametrize("family_id", FAMILIES)
def test_every_numeric_answer_has_a_blank(compiled, families, family_id):
    """One blank per numeric answer, a one-answer part (a) included."""
    tex, _, _ = compiled[family_id, "worksheet"]
    answers = sum(len(q.numeric) for p in problems_of(families[family_id]) for q in p.questions)
    assert tex.count("\\rule{3em}{0.4pt}") == answers


def numeric_question(names):
    """A question whose blanks are named ``names``."""
    answers = tuple(NumericAnswer(n, math(n), F(1), 0) for n in names)
    return Question(part="a", prompt=(("text", "Compute."),), numeric=answers)


@pytest.mark.parametrize(
    ("names", "shape"),
    [
        pytest.param(["score"], [1], id="one answer: one blank"),
        pytest.param([f"S_{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3)], [3, 3, 3], id="3x3 matrix by rows"),
        pytest.param([f"S_{i}{j}" for i in (1, 2) for j in (1, 2, 3)], [3, 3], id="2x3 matrix by rows"),
        pytest.param([f"s_{j}" for j in range(1, 7)], [4, 2], id="six scores: four a row"),
        pytest.param([f"S_{i}{j}" for i in (1,) for j in range(1, 7)], [4, 2], id="a row wider than four"),
    ],
)
def test_blank_rows(names, shape):
    """Blanks are laid out by matrix row, at most four a row."""
    assert [len(r) for r in _blank_rows(numeric_question(names))] == shape


@pytest.mark.parametrize(
    ("content", "items"),
    [
        pytest.param(
            "q = [1,\\ 2], \\qquad k = [3,\\ 4]",
            ["$\\displaystyle q = [1,\\ 2],$", "$\\displaystyle k = [3,\\ 4]$"],
            id="two givens",
        ),
        pytest.param("Q = \\begin{bmatrix} 1 \\qquad 2 \\end{bmatrix}", None, id="qquad inside an environment"),
        pytest.param("w = {a \\qquad b}", None, id="qquad inside braces"),
        pytest.param("q \\cdot k = 1", None, id="no separator"),
    ],
)
def test_display_givens_break_between_items(content, items):
    """A display of qquad-separated givens becomes a centred line of items; anything else stays a display."""
    latex = _display_latex(display(content))
    if items is None:
        assert latex == f"\n\\[\n{content}\n\\]\n"
    else:
        assert latex.startswith("\n\\begin{center}\n") and latex.count("$\\displaystyle") == len(items)
        assert all(item in latex for item in items)
