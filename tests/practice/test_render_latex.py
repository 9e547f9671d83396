"""LaTeX documents: copyable commands, maths in headings, real minus signs, outline fonts, pdflatex."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.cli import main
from attnscore.practice.generators import featured_problems, fixed_problem, generate_family
from attnscore.practice.render_latex import (
    COMMAND_WIDTH,
    command_latex,
    heading_latex,
    render_key_latex,
    render_worksheet_latex,
)
from attnscore.practice.richtext import escape_latex
from attnscore.practice.worksheet import Worksheet
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs" / "practice"
SHEET = Worksheet("Practice", 0, None, "attnscore practice --q 0,1 --k 0,-1 --format latex")

# What a reader copies from the typeset command block: the TeX escapes undone, one line per line.
_UNTEX = [
    (r"\textbackslash{}", "\\"),
    (r"\textquotesingle{}", "'"),
    (r"\textasciigrave{}", "`"),
    (r"\textquotedbl{}", '"'),
    (r"\textasciitilde{}", "~"),
    (r"\textasciicircum{}", "^"),
    (r"\textless{}", "<"),
    (r"\textgreater{}", ">"),
    ("-{}", "-"),
    ("\\ ", " "),
    *[("\\" + c, c) for c in "&%$#_{}"],
]


def copied_command(tex: str) -> str:
    """The "Regenerate with" command as a reader copies it from the typeset document (shell text)."""
    block = tex.split("Regenerate with:", 1)[1].split("\\end{flushleft}", 1)[0]
    body = block.split("\\begin{flushleft}\\ttfamily\n", 1)[1]
    lines = []
    for line in body.strip("\n").split("\n"):
        line = line.removeprefix("\\hspace*{2em}").removesuffix("\\\\")
        assert "--" not in line, f"a -- ligature would print an en-dash: {line!r}"
        for code, char in _UNTEX:
            line = line.replace(code, char)
        lines.append(line)
    return "\n".join(lines)


def _shell_words(text: str) -> list[str]:
    """Words of a shell command line, with backslash-newline continuations removed as sh does."""
    return shlex.split(text.replace("\\\n", ""))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _outside_math(tex: str) -> str:
    """The prose of a LaTeX document: inline ``$...$``, display ``\\[...\\]`` and TikZ removed."""
    tex = re.sub(r"\\\[.*?\\\]", " ", tex, flags=re.S)
    tex = re.sub(r"\\begin\{tikzpicture\}.*?\\end\{tikzpicture\}", " ", tex, flags=re.S)
    return re.sub(r"\$[^$]*\$", " ", tex)


@pytest.fixture(scope="module")
def all_problems(families):
    """Featured examples and two variants of every shipped family."""
    out = []
    for fam in families.values():
        out += featured_problems(fam) + generate_family(fam, 2, 5, "dana")[0]
    return out


def test_preamble_has_outline_fonts_and_t1(all_problems):
    """Both documents load Latin Modern in T1 encoding (outline fonts, copyable text)."""
    for tex in (render_worksheet_latex(all_problems, SHEET), render_key_latex(all_problems, SHEET)):
        assert "\\usepackage[T1]{fontenc}\n\\usepackage{lmodern}" in tex
        assert "\\pdfgentounicode=1" in tex


def test_key_prints_the_command_without_en_dash(example_key):
    """The command is in typewriter lines, every -- written -{}-{}, ending in no continuation."""
    assert "\\texttt{attnscore practice --q" not in example_key
    block = example_key.split("Regenerate with:", 1)[1].split("\\end{flushleft}", 1)[0]
    assert "attnscore\\ practice\\ -{}-{}q\\ 0,1\\ -{}-{}k\\ 0,-{}1\\ -{}-{}format\\ latex" in block
    assert copied_command(example_key) == "attnscore practice --q 0,1 --k 0,-1 --format latex"


@pytest.fixture()
def example_key(families):
    """The answer key of the worked example q=[0,1], k=[0,-1]."""
    return render_key_latex([fixed_problem(families["one-score"], (F(0), F(1)), [(F(0), F(-1))])], SHEET)


_WORD = st.text(alphabet="abcdefghij-_.'\" /$%&#{}~^\\<>`", min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(_WORD, min_size=1, max_size=12), width=st.integers(20, 100))
def test_command_round_trips_through_the_shell(words, width):
    """Any command, typeset and copied back, gives the same shell words; lines stay within the width."""
    command = shlex.join(["attnscore", "practice", *words])
    tex = "Regenerate with:" + command_latex(command, width)
    copied = copied_command(tex)
    assert _shell_words(copied) == shlex.split(command)
    lines = copied.split("\n")
    for i, line in enumerate(lines):
        indent = 4 if i > 1 else 0
        single = len(shlex.split(line.removesuffix(" \\"))) <= 2  # one word (or option + value) may overflow
        assert single or indent + len(line) <= width, (line, width)
        assert line.endswith(" \\") == (i < len(lines) - 1)


def test_long_command_breaks_between_options():
    """A long command is broken before an option, never between an option and its value."""
    command = (
        "attnscore practice one-score softmax-exact scaled-score --count 300 --seed 123456789 "
        "--student alice.smith --featured --format latex --with-solutions"
    )
    lines = copied_command("Regenerate with:" + command_latex(command)).split("\n")
    assert len(lines) == 3 and all(len(line) <= COMMAND_WIDTH for line in lines)
    assert lines[1].startswith("--count 300") and "--student alice.smith" in lines[1]


@pytest.mark.parametrize("width", [0, 19, -5])
def test_command_width_too_small(width):
    """A width below 20 characters is refused with the value in the message."""
    with pytest.raises(ValueError, match=f"width must be >= 20 characters, found {width}"):
        command_latex("attnscore practice", width)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            ["one-score", "softmax-exact", "--count", "3", "--seed", "9", "--student", "bob", "--with-solutions"],
            id="variants with student and solutions",
        ),
        pytest.param(["--q", "0,1", "--k", "0,-1", "--k", "-1,1"], id="fixed vectors with negative entries"),
        pytest.param(
            ["score-matrix", "--count", "2", "--seed", "4", "--featured", "--families-dir", str(SPECS)],
            id="featured, with --families-dir",
        ),
    ],
)
def test_printed_command_reproduces_the_output(tmp_path, args):
    """The command copied from answer-key.tex, run in a shell, writes byte-identical files."""
    first = CliRunner().invoke(main, ["practice", *args, "--format", "latex", "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    copied = copied_command((tmp_path / "a" / "answer-key.tex").read_text())
    assert copied.startswith("attnscore practice ")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", f"{copied} --out {shlex.quote(str(tmp_path / 'b'))}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


@pytest.mark.parametrize(
    ("title", "latex"),
    [
        pytest.param("the score matrix Q K^T", "the score matrix $QK^\\top$", id="product and transpose"),
        pytest.param("divide by the square root of d_k", "divide by the square root of $d_k$", id="subscript"),
        pytest.param("scale by √d_k", "scale by $\\sqrt{d_k}$", id="square root"),
        pytest.param("width d_model", "width $d_{model}$", id="long subscript braced"),
        pytest.param("W_{Q} and x^2", "$W_{Q}$ and $x^2$", id="braced subscript, power"),
        pytest.param("A Q K^T", "A $QK^\\top$", id="the article A is a word"),
        pytest.param("snake_case names", "snake\\_case names", id="underscore inside a word is prose"),
        pytest.param("x_\\input{y}", "x\\_\\textbackslash{}input\\{y\\}", id="no command injection"),
        pytest.param("Scores & 100%", "Scores \\& 100\\%", id="prose escaped"),
    ],
)
def test_heading_latex(title, latex):
    """Maths tokens in titles are typeset as maths; everything else is escaped prose."""
    assert heading_latex(title) == latex


def test_headings_of_shipped_families(families):
    """The score-matrix and scaled-score headings typeset QK^T and d_k as maths."""
    problems = [featured_problems(families[f])[0] for f in ("score-matrix", "scaled-score")]
    tex = render_worksheet_latex(problems, SHEET)
    assert "the score matrix $QK^\\top$}" in tex
    assert "divide by the square root of $d_k$}" in tex
    assert "Q K^T" not in tex and "d\\_k" not in tex


@pytest.mark.parametrize(
    ("prose", "latex"),
    [
        pytest.param("-0.1235 becomes -0.124", "$-$0.1235 becomes $-$0.124", id="leading minus"),
        pytest.param("score (-1), x=-3, -.5", "score ($-$1), x=$-$3, $-$.5", id="after ( = and space"),
        pytest.param("one-score v1-2 a-1", "one-score v1-2 a-1", id="hyphens in words and ranges stay"),
        pytest.param("−2", "$-$2", id="unicode minus"),
    ],
)
def test_prose_minus_signs(prose, latex):
    """A hyphen before a number in prose is typeset as a minus sign."""
    assert escape_latex(prose) == latex


def test_no_hyphen_minus_in_prose(all_problems):
    """Outside maths, no number in either document is preceded by a hyphen used as a minus."""
    sheet = Worksheet("Practice", 5, "dana", "attnscore practice --seed 5 --student dana", with_solutions=True)
    for tex in (render_worksheet_latex(all_problems, sheet), render_key_latex(all_problems, sheet)):
        prose = _outside_math(tex)
        assert not re.findall(r"(?<![\w.\-{}\\])-\.?[0-9]", prose)
        assert "$-$0.1235" in tex  # the rounding rule's example


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("doc", ["worksheet.tex", "answer-key.tex"])
def test_pdflatex_compiles(tmp_path, doc):
    """Worksheet and answer key of every family compile with pdflatex without errors or bitmap fonts."""
    result = CliRunner().invoke(
        main,
        ["practice", "--families-dir", str(SPECS), "--count", "2", "--seed", "3", "--featured"]
        + ["--format", "latex", "--with-solutions", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    log = (tmp_path / doc.replace(".tex", ".log")).read_text(errors="replace")
    assert done.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
    assert (tmp_path / doc.replace(".tex", ".pdf")).stat().st_size > 1000
    assert ".pk" not in log and "mktexpk" not in log, "a bitmap font was used"
    assert "Missing character" not in log
    if doc == "answer-key.tex" and shutil.which("pdftotext"):
        _check_pdf_command(tmp_path)


def _check_pdf_command(out: Path) -> None:
    """The command as text copied from the PDF runs in a shell and rewrites the same .tex files."""
    text = subprocess.run(
        ["pdftotext", "answer-key.pdf", "-"], cwd=out, capture_output=True, text=True, timeout=HANG_GUARD_S, check=True
    ).stdout
    lines = text.split("Regenerate with:", 1)[1].strip().split("\n")
    command = []
    for line in lines:
        command.append(line.strip())
        if not line.rstrip().endswith("\\"):
            break
    copied = "\n".join(command)
    assert "–" not in copied and "—" not in copied and "’" not in copied, copied
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    again = out / "again"
    done = subprocess.run(
        ["bash", "-c", f"{copied} --out {shlex.quote(str(again))}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, (copied, done.stderr)
    for name in ("worksheet.tex", "answer-key.tex"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
