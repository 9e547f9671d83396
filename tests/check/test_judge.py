"""Judging one case: the failure record it produces, as data."""

from __future__ import annotations

import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.judge import example_position, judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec("specs/dot_product_scores.yaml")


@pytest.fixture(scope="module")
def cases(spec):
    return {c.id: c for c in build_cases(spec, "float32")}


def test_passing_case_has_no_failure(spec, cases):
    """A right implementation passes with full points and no failure record."""
    result = judge_case(
        spec, cases["example:aligned_perpendicular_partial"], InProcessRunner(lambda q, k: k @ q), "float32"
    )
    assert result.passed and result.failure is None and result.points == result.max_points and result.message == ""


def test_wrong_value_record_holds_entries_counts_and_diagnosis(spec, cases):
    """A wrong value is recorded with the call's arguments, the worst entries, counts, tolerance,
    explanation and the diagnosed mistake."""
    case = cases["example:aligned_perpendicular_partial"]
    result = judge_case(spec, case, InProcessRunner(lambda q, k: (k @ q) * 2), "float32")
    failure = result.failure
    assert result.verdict is Verdict.WRONG_VALUE is failure.verdict
    assert (failure.case_id, failure.kind, failure.location, failure.hidden) == (
        case.id,
        "example",
        case.location,
        False,
    )
    assert failure.args == {"q": [1.0, 0.0], "keys": [[1.0, 0.0], [0.0, 1.0], [0.699999988079071, 0.699999988079071]]}
    assert (failure.mismatch.wrong, failure.mismatch.total) == (2, 3)
    worst = failure.mismatch.entries[0]
    assert (worst.index, worst.got, worst.expected, worst.error) == ((0,), 2.0, 1.0, 1.0)
    assert worst.allowed is not None and worst.allowed < 1e-5 and worst.exact is False
    assert failure.mismatch.entries[1].index == (2,)  # perpendicular entry 0 is right: not listed
    assert failure.explanation.startswith("Score j is q · keys[j]")
    assert (failure.example, failure.examples, failure.call) == (1, 1, 1)
    assert failure.shrunk_from is None and failure.size == 8


def test_exception_record_keeps_type_and_text(spec, cases):
    """An exception is recorded with its type name and its text; no parsing of the text."""

    def broken(q, keys):
        raise KeyError("boom")

    failure = judge_case(spec, cases["example:anti_aligned"], InProcessRunner(broken), "float32").failure
    assert failure.verdict is Verdict.EXCEPTION
    assert (failure.exception, failure.detail, failure.mismatch) == ("KeyError", "raised KeyError: 'boom'", None)
    assert failure.args == {"q": [0.0, 1.0], "keys": [[0.0, -1.0]]}


def test_wrong_shape_record(spec, cases):
    """A wrong shape is a mismatch with its own sentence and no entries."""
    failure = judge_case(
        spec, cases["example:anti_aligned"], InProcessRunner(lambda q, k: (k @ q).reshape(1, 1)), "float32"
    ).failure
    assert failure.verdict is Verdict.WRONG_SHAPE
    assert failure.mismatch.detail == "out has shape (1, 1), expected shape (1,)"
    assert failure.mismatch.entries == ()


def test_property_failure_records_position_and_hint(spec, cases):
    """A failing property records which generated input failed and the property's likely cause."""
    case = cases["property:scores_not_normalised"]
    result = judge_case(spec, case, InProcessRunner(lambda q, k: torch.softmax(k @ q, dim=-1)), "float32")
    failure = result.failure
    assert failure.kind == "property" and failure.statement == case.statement
    assert (failure.example, failure.examples) == example_position(case, result.calls)
    assert failure.hint.startswith("your scores sum to 1")
    assert failure.diagnosis is not None and failure.diagnosis["id"] == "softmax_applied"


def test_hidden_case_record_is_complete_and_its_text_is_not(spec, cases):
    """A hidden case's record holds what judging found; only the rendered text hides it."""
    case = cases["example:three_dims_mixed_signs"]
    result = judge_case(spec, case, InProcessRunner(lambda q, k: (k @ q) + 1), "float32")
    assert result.failure.hidden and result.failure.mismatch.entries[0].expected in (1.5, -2.0, -4.0, 6.0)
    assert result.counterexample is None
    assert "inputs and expected values, shape and dtype are not shown" in result.message
    for secret in ("1.5", "-2", "-4", "6", "2.5"):
        assert secret not in result.message
