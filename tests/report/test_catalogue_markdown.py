"""The catalogue tables of docs/catalogue.md are `attnscore specs --markdown` (report/catalogue_markdown.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.report.catalogue_markdown import cell, mistake_table, property_table

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "docs" / "catalogue.md"
HEADERS = [
    "| spec | function | worked examples | properties | points |",
    "| property | applies to | what it checks |",
    "| mistake | contracts | feedback |",
]


def generated_tables() -> list[str]:
    result = CliRunner().invoke(main, ["specs", "--markdown"])
    assert result.exit_code == 0, result.output
    return result.output.strip().split("\n\n")


def drift(document: str, table: str) -> str | None:
    """None when ``document`` holds ``table`` exactly (header to last row), else what differs."""
    lines = document.splitlines()
    header, *rows = table.splitlines()
    if header not in lines:
        return f"no table headed {header!r}"
    start = lines.index(header)
    found = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            break
        found.append(line)
    if found == rows:
        return None
    missing = [r for r in rows if r not in found]
    extra = [r for r in found if r not in rows]
    order = "" if missing or extra else " (same rows, another order)"
    return f"table {header!r}{order}: missing {missing}, not in the code {extra}"


def test_docs_catalogue_tables_are_the_generated_ones():
    """Each of the three tables in docs/catalogue.md equals the command's output, row for row."""
    tables = generated_tables()
    assert [t.splitlines()[0] for t in tables] == HEADERS
    document = CATALOGUE.read_text(encoding="utf-8")
    for table in tables:
        problem = drift(document, table)
        assert problem is None, f"docs/catalogue.md is out of date: paste `attnscore specs --markdown`\n{problem}"


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda rows: rows[:-1], id="a row missing"),
        pytest.param(lambda rows: rows + ["| `made_up` | score | nothing |"], id="an extra row"),
        pytest.param(lambda rows: [rows[0].replace("|", "¦", 2)] + rows[1:], id="a row edited"),
        pytest.param(lambda rows: rows[1:] + rows[:1], id="rows reordered"),
    ],
)
def test_drift_is_caught(edit):
    """The comparison fails for a missing, extra, edited or reordered row of the mistake table."""
    header, rule, *rows = mistake_table().splitlines()
    doctored = "\n".join(["# page", "", header, rule, *edit(rows), "", "after the table"])
    assert drift(doctored, mistake_table()) is not None
    assert drift("\n".join(["# page", "", mistake_table(), "", "after"]), mistake_table()) is None


def test_a_missing_table_is_named():
    """A page without the table says which header it looked for."""
    assert drift("# nothing here\n", property_table()) == "no table headed '| property | applies to | what it checks |'"


def test_pipes_in_cells_are_escaped():
    """`|q|·|k|` in a statement keeps every row at three columns (GitHub-flavoured Markdown)."""
    assert cell("|q|·|k|") == "\\|q\\|·\\|k\\|"
    for table in (property_table(), mistake_table()):
        for row in table.splitlines():
            assert row.replace("\\|", "").count("|") == 4, row
