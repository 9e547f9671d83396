"""Tests for the class spreadsheet (attnscore.report.spreadsheet): no text cell runs as a formula."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from tests.classdata import class_rows

_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _cells(rows) -> list[list[str]]:
    data = grades_csv(rows).encode(CSV_ENCODING)
    return list(csv.reader(io.StringIO(data.decode(CSV_ENCODING), newline="")))


def _runs_as_formula(cell: str) -> bool:
    return cell.lstrip(" \t\r\n").startswith(_STARTS)


@pytest.mark.parametrize(
    "error",
    [
        '=HYPERLINK("http://x.example","ok")',
        "+1+cmd|' /C calc'!A0",
        "  =1+1",
        "\n@SUM(A1)",
        "\uff1d1+1",
        "-2+3",
    ],
)
def test_error_text_from_a_submission_is_not_a_formula(error):
    """A submission-level error whose text is a formula (after spaces, or full-width) is defused."""
    student, result = class_rows()[0]
    table = _cells([(student, replace(result, error=error))])
    cell = table[1][3]
    first = error.splitlines()[0] if error.splitlines() else ""
    assert cell == (f"'{first}" if first.lstrip(" \t\r\n").startswith(_STARTS) else first)
    assert not _runs_as_formula(cell)


@given(st.text(min_size=1, max_size=20))
def test_no_student_name_or_error_runs_as_a_formula(text):
    """Whatever the name and error text, no cell of the CSV starts (after blanks) with a formula sign."""
    _, result = class_rows()[0]
    table = _cells([(text, replace(result, error=text))])
    assert all(not _runs_as_formula(cell) for row in table[1:] for cell in row)
