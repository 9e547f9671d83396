"""`attnscore practice`: outputs, reproducibility, exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main

SPECS = Path(__file__).resolve().parents[2] / "specs" / "practice"


def run(*args: str):
    """Invoke the CLI with the shipped families folder."""
    return CliRunner().invoke(main, ["practice", "--families-dir", str(SPECS), *args])


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_worked_example_in_markdown(tmp_path):
    """--q 0,1 --k 0,-1 writes a worksheet with an SVG figure and a key with -1 and the solution."""
    result = run("--q", "0,1", "--k", "0,-1", "--out", str(tmp_path), "--with-solutions")
    assert result.exit_code == 0, result.output
    files = _tree(tmp_path)
    assert set(files) == {"worksheet.md", "answer-key.md", "figures/one-score-v2-fixed-01.svg"}
    assert "(b) The score is negative, so the key is anti-aligned" in files["worksheet.md"].decode()
    assert "= **-1**" in files["answer-key.md"].decode()


def test_worked_example_in_latex(tmp_path):
    """The same example in LaTeX has a TikZ figure and the key."""
    assert run("--q", "0,1", "--k", "0,-1", "--format", "latex", "--out", str(tmp_path)).exit_code == 0
    assert "\\begin{tikzpicture}" in (tmp_path / "worksheet.tex").read_text()
    assert "\\mathbf{-1}" in (tmp_path / "answer-key.tex").read_text()


@pytest.mark.parametrize("fmt", ["md", "latex", "json", "moodle-xml", "qti", "prairielearn"])
def test_same_arguments_byte_identical(tmp_path, fmt):
    """Two runs with the same arguments write byte-identical folders; the key carries the seeds."""
    args = [
        "one-score",
        "softmax-ranking",
        "--count",
        "3",
        "--seed",
        "42",
        "--student",
        "alice",
        "--format",
        fmt,
    ]
    assert run(*args, "--out", str(tmp_path / "a")).exit_code == 0
    assert run(*args, "--out", str(tmp_path / "b")).exit_code == 0
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert a == b and a
    if fmt == "prairielearn":  # randomised questions: each variant comes from PrairieLearn's seed, no fixed key
        assert not any(k.startswith("answer-key") for k in a)
        assert {"questions/one-score/server.py", "questions/softmax-ranking/server.py"} <= set(a)
    else:
        key = next(v for k, v in a.items() if k.startswith("answer-key")).decode()
        assert "--student alice" in key or '"student": "alice"' in key or r"-{}-{}student\ alice" in key
    assert not list((tmp_path / "a").rglob("*.tmp"))


def test_acceptance_rate_is_printed(tmp_path):
    """Generation reports each family's acceptance rate and the rejection reasons."""
    result = run("score-vector", "--count", "50", "--out", str(tmp_path), "--format", "json")
    assert result.exit_code == 0
    assert "score-vector: 50 variant(s), acceptance " in result.output and "rejected:" in result.output


@pytest.mark.slow
def test_verify_is_clean_and_quick():
    """--verify --count 50 passes and prints a per-family summary."""
    result = run("--verify", "--count", "50")
    assert result.exit_code == 0, result.output
    assert "verify: OK: 7 families, 350 variants" in result.output


def test_list():
    """--list shows every family with its kind."""
    result = run("--list")
    assert result.exit_code == 0 and "one-score" in result.output and "multiple_choice" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--format", "xml", "--out", "x"],
            "Invalid value for '--format': 'xml' is not one of",
            id="unknown format",
        ),
        pytest.param(
            ["nope", "--out", "x"],
            "unknown family 'nope'; known families: multiple-choice",
            id="unknown family",
        ),
        pytest.param(["--count", "3"], "missing --out DIR", id="no output folder"),
        pytest.param(
            ["--q", "0,x", "--k", "0,-1", "--out", "x"],
            "Invalid value for '--q': expected comma-separated",
            id="bad query",
        ),
        pytest.param(["--q", "0,1", "--k", "0,-1,2", "--out", "x"], "same width d_k", id="widths differ"),
        pytest.param(["--k", "0,1", "--out", "x"], "--k needs --q", id="key without query"),
        pytest.param(["--student", "a b", "--out", "x"], "Invalid value for '--student'", id="bad student id"),
        pytest.param(["--count", "0", "--out", "x"], "Invalid value for '--count'", id="count zero"),
        pytest.param(
            ["--q", "1,0", "--k", "0,1", "--k", "0,-1", "--out", "x"],
            "degenerate problem (zero answer)",
            id="degenerate fixed numbers",
        ),
    ],
)
def test_usage_errors(args, message):
    """User mistakes exit 2 with the reason on stderr and no traceback."""
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_invalid_family_file_exits_2_in_one_line(tmp_path):
    """A broken family file gives exit 2 and one line naming file:line:col and the field."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\nversion: 1\nkind: one_score\ntitle: T\nplaces: many\n")
    result = CliRunner().invoke(main, ["practice", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line]
    assert lines == [f"Error: {bad}:5:9: places: expected an integer from 0 to 6, found string 'many'"]


def test_list_states_capacity():
    """--list prints each family's capacity (distinct variants)."""
    result = run("--list")
    line = next(x for x in result.output.splitlines() if x.startswith("one-score"))
    assert "capacity 2.2e+08" in line


@pytest.mark.parametrize("verify", [pytest.param([], id="generate"), pytest.param(["--verify"], id="verify")])
def test_count_above_capacity_is_a_usage_error(tmp_path, verify):
    """Asking for more variants than a family has is refused in one line (exit 2), not repeated."""
    family = tmp_path / "tiny.yaml"
    family.write_text(
        "id: tiny\nversion: 1\nkind: one_score\ntitle: Tiny\nd_k: [2]\nvalues: {min: 0, max: 1, step: 1}\n",
        encoding="utf-8",
    )
    result = run(str(family), "--count", "10", "--out", str(tmp_path / "out"), *verify)
    assert result.exit_code == 2
    assert (
        "Error: tiny: --count 10 asks for more variants than the family's capacity of 9 distinct variants, "
        "so some would repeat; lower --count" in result.output
    )
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
