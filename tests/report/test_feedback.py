"""The failure record and its one renderer: text, JSON, Gradescope and pytest, hidden-case rules."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import pytest
from rich.console import Console

from attnscore.report.failure import EntryMismatch, Failure, Mismatch, ShrunkFrom, array_of, json_array, size_of
from attnscore.report.feedback import (
    cause_groups,
    failure_data,
    failure_text,
    pytest_text,
    reproduction,
    summary_line,
)
from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import submission_to_json
from attnscore.report.results import CaseResult, SubmissionResult, Verdict
from attnscore.report.text import submission_text

# Values that appear only in the hidden case's inputs, expected values, returned values and the
# submission's own words: none may be rendered.
SECRETS = ("3.25", "-7.5", "11.125", "42.5", "19.75", "SecretError", "leaky message")


def _value_mismatch(expected: float = 11.125, got: float = 42.5) -> Mismatch:
    entry = EntryMismatch((0,), got, expected, abs(got - expected), 1e-6)
    return Mismatch(
        Verdict.WRONG_VALUE,
        wrong=1,
        total=2,
        entries=(entry,),
        tolerance="close",
        got_dtype="float32",
        dtype="float32",
    )


def _failure(**fields: object) -> Failure:
    base: dict[str, object] = {
        "verdict": Verdict.WRONG_VALUE,
        "case_id": "example:two_keys",
        "kind": "example",
        "title": "two keys",
        "location": "specs/s.yaml:12",
        "hidden": False,
        "function": "scores",
        "dtype": "float32",
        "args": {"q": [3.25, -7.5], "keys": [[1.0, 0.0], [0.0, 1.0]]},
        "mismatch": _value_mismatch(),
    }
    base.update(fields)
    return Failure(**base)  # type: ignore[arg-type]


def _hidden_failures() -> list[Failure]:
    hidden = {"hidden": True, "explanation": "q · k = 3.25 - 7.5 = 11.125", "hint": "you returned 19.75"}
    return [
        _failure(case_id="example:a", **hidden),
        _failure(
            case_id="example:b",
            verdict=Verdict.EXCEPTION,
            mismatch=None,
            detail="raised SecretError: leaky message 3.25",
            exception="SecretError",
            **hidden,
        ),
        _failure(
            case_id="property:c",
            kind="property",
            statement="rows need not sum to one",
            mismatch=None,
            check="out[0] = 42.5, expected 11.125",
            **hidden,
        ),
        _failure(
            case_id="example:d",
            verdict=Verdict.NON_FINITE,
            mismatch=Mismatch(
                Verdict.NON_FINITE, wrong=1, total=2, entries=(EntryMismatch((1,), float("nan"), 11.125),)
            ),
            **hidden,
        ),
        _failure(
            case_id="example:e",
            verdict=Verdict.BAD_RETURN_TYPE,
            mismatch=None,
            detail="returned a str '3.25'",
            **hidden,
        ),
    ]


def _result(failures: list[Failure]) -> SubmissionResult:
    cases = tuple(
        CaseResult(
            f.case_id,
            f.kind,
            f.title,
            f.verdict,
            Fraction(0),
            Fraction(1),
            "hidden" if f.hidden else "visible",
            f.location,
            f,
        )
        for f in failures
    )
    return SubmissionResult("sub.py", "s", 1, "specs/s.yaml", "scores", cases, "float32", "cpu", 1, 0.5)


def _rendered(result: SubmissionResult) -> dict[str, str]:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - closed with console
    console.print(submission_text(result))
    return {
        "text": console.export_text(),
        "json": json.dumps(submission_to_json(result), allow_nan=False),
        "gradescope": json.dumps(gradescope_results(result), allow_nan=False),
        "pytest": "\n".join(pytest_text(c.failure) for c in result.cases if c.failure is not None),
        "message": "\n".join(c.message for c in result.cases),
    }


@pytest.mark.parametrize("fmt", ["text", "json", "gradescope", "pytest", "message"])
def test_hidden_case_renders_no_input_expected_or_submission_text(fmt):
    """A hidden case's rendered feedback, in every format, holds no input, expected or returned
    value and no text the submission wrote."""
    out = _rendered(_result(_hidden_failures()))[fmt]
    for secret in SECRETS:
        assert secret not in out, (fmt, secret)
    assert "Reproduce" not in out and "Why:" not in out


def test_hidden_case_keeps_what_is_safe():
    """A hidden case still says what it checks, the verdict's reason and a builtin exception's type."""
    a, b, c, d, e = (failure_text(f) for f in _hidden_failures())
    assert a.splitlines() == [
        "Hidden worked example: two keys (specs/s.yaml:12)",
        "out has wrong values (hidden case: its inputs and expected values, shape and dtype are not shown)",
    ]
    assert b.splitlines()[1] == (
        "raised an exception of its own class (its type and message are not shown for a hidden case)"
    )
    builtin = _failure(
        hidden=True, verdict=Verdict.EXCEPTION, mismatch=None, detail="raised KeyError: 3.25", exception="KeyError"
    )
    assert failure_text(builtin).splitlines()[1] == "raised KeyError (its message is not shown for a hidden case)"
    assert c.splitlines()[1:] == [
        "Failed on a hidden generated input 1 of 1.",
        "the property does not hold on this input (details are not shown for a hidden case)",
    ]
    assert d.splitlines()[1] == (
        "out has NaN or infinite entries where it should not; look for a division by zero, an overflow or "
        "a log/sqrt of a bad value (hidden case: its inputs and expected values, shape and dtype are not shown)"
    )
    assert "returned something that is not one numeric result" in e


def test_visible_failure_text_is_rendered_from_the_record():
    """A visible worked example shows statement and location once, the worst entry, the diagnosis,
    the explanation and one paste-ready reproduction (the only place the inputs appear)."""
    failure = _failure(
        diagnosis={"id": "abs_scores", "message": "your scores are absolute values"},
        explanation="q · k = -1.",
    )
    assert failure_text(failure).splitlines() == [
        "Worked example: two keys (specs/s.yaml:12)",
        "1 of 2 entries of out are wrong (close):",
        "  out[0] = 42.5, expected 11.125 (|error| 31.4 > allowed 1e-06)",
        "Known mistake (abs_scores): your scores are absolute values",
        "Why: q · k = -1.",
        "Reproduce: scores(torch.tensor([3.25, -7.5], dtype=torch.float32), "
        "torch.tensor([[1, 0], [0, 1]], dtype=torch.float32))",
    ]
    assert pytest_text(failure).startswith("wrong value: Worked example: two keys (specs/s.yaml:12)\n")


def test_shrunk_counterexample_says_where_it_came_from():
    """A shrunk property counterexample names the original input and both sizes, truthfully."""
    failure = _failure(
        kind="property",
        statement="scores are raw",
        example=3,
        examples=20,
        args={"q": [0.0], "keys": [[1.0]]},
        shrunk_from=ShrunkFrom(3, 20, 12),
    )
    lines = failure_text(failure).splitlines()
    assert lines[:2] == [
        "Property: scores are raw (specs/s.yaml:12)",
        "Counterexample: shrunk by hypothesis from generated input 3 of 20 (12 entries) to 2 entries.",
    ]
    data = failure_data(failure)
    assert data["shrunk_from"] == {"example": 3, "examples": 20, "size": 12, "how": "hypothesis"}
    assert data["size"] == 2
    drawn = dataclasses.replace(failure, example=9, shrunk_from=ShrunkFrom(3, 20, 12, "drawn"))
    assert failure_text(drawn).splitlines()[1] == (
        "Counterexample: generated input 9 of 20 (2 entries), the smallest that fails this way; "
        "the first to fail was input 3 (12 entries)."
    )
    assert failure_data(drawn)["shrunk_from"]["how"] == "drawn" and failure_data(drawn)["example"] == 9


def test_json_carries_the_record_fields():
    """JSON reports carry the record: args, worst entries, counts, tolerance, diagnosis, reproduction."""
    failure = _failure(
        diagnosis={"id": "m", "message": "why"}, args={"q": json_array([float("nan"), 1.0]), "keys": [[True]]}
    )
    data = json.loads(json.dumps(failure_data(failure), allow_nan=False))
    assert data["args"] == {"q": ["nan", 1.0], "keys": [[True]]}
    assert data["mismatch"]["wrong"] == 1 and data["mismatch"]["total"] == 2
    assert data["mismatch"]["entries"] == [
        {"index": [0], "got": 42.5, "expected": 11.125, "error": 31.375, "allowed": 1e-06, "exact": False}
    ]
    assert data["diagnosis"] == {"id": "m", "message": "why"}
    assert data["reason"] == "1 of 2 entries of out are wrong"
    assert data["reproduce"].startswith("scores(torch.tensor([float('nan'), 1], dtype=torch.float32)")


def test_json_array_round_trip_and_size():
    """Arguments survive the trip to nested lists and back, NaN, ±inf and bools included."""
    values = [[float("nan"), float("inf")], [-float("inf"), 0.5]]
    back = array_of(json_array(values))
    assert json_array(values) == [["nan", "inf"], ["-inf", 0.5]]
    assert back.dtype.name == "float64" and back[1, 1] == 0.5 and back[0, 1] == float("inf")
    assert array_of([[True, False]]).dtype.name == "bool"
    assert size_of({"q": [1, 0], "keys": [[1, 0], [0, 1]]}) == 6 and size_of(None) == 0


def test_reproduction_builds_views_and_keywords():
    """A transposed argument is rebuilt as a view; fixed keywords are passed on."""
    failure = _failure(args={"K": [[1.0, 2.0], [3.0, 4.0]]}, layouts={"K": "transposed"}, keywords={"is_causal": True})
    assert reproduction(failure) == ("scores(torch.tensor([[1, 3], [2, 4]], dtype=torch.float32).mT, is_causal=True)")


def test_cause_groups_collapse_one_cause():
    """Cases with one diagnosis form one group led by the smallest visible counterexample; an
    undiagnosed wrong value stands alone; a submission-wide failure is left to the report."""
    mistake = {"id": "m", "message": "why"}
    big = _failure(case_id="example:big", diagnosis=mistake, args={"q": [1.0, 2.0, 3.0]})
    small = _failure(case_id="example:small", diagnosis=mistake, args={"q": [1.0]})
    hidden = _failure(case_id="example:hidden", diagnosis=mistake, hidden=True, args={"q": []})
    alone = _failure(case_id="example:alone")
    wide = _failure(case_id="example:wide", scope="submission", mismatch=None, detail="cannot import")
    groups = cause_groups([big, alone, small, hidden, wide])
    assert [(g.cause, g.lead.case_id, [o.case_id for o in g.others]) for g in groups] == [
        ("known mistake m", "example:small", ["example:big", "example:hidden"]),
        ("wrong value", "example:alone", []),
    ]


def test_exceptions_of_one_type_are_one_cause():
    """Exceptions of one type group together; each case's one line keeps its own message."""
    one = _failure(case_id="a", verdict=Verdict.EXCEPTION, mismatch=None, detail="raised E: x", exception="E")
    two = _failure(case_id="b", verdict=Verdict.EXCEPTION, mismatch=None, detail="raised E: y", exception="E")
    (group,) = cause_groups([one, two])
    assert group.cause == "raised E" and summary_line(group.others[0]) == "raised E: y"


def test_text_report_lists_every_case_and_explains_each_cause_once():
    """The text report keeps a row per case with verdict and points, the known mistake once and one
    line per other case with the same cause."""
    mistake = {"id": "m", "message": "your scores are absolute values"}
    failures = [_failure(case_id=f"example:c{i}", diagnosis=mistake, args={"q": [1.0] * (i + 1)}) for i in range(3)]
    text = _rendered(_result(failures))["text"]
    assert text.count("Known mistake (m)") == 1 and text.count("Reproduce:") == 1
    assert "Same cause (known mistake m) in 2 more cases:" in text
    assert "  example:c2 (wrong value, specs/s.yaml:12): 1 of 2 entries of out are wrong" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("example:c")]
    assert [row for row in rows if row[-1] == "0/1"] == [[f"example:c{i}", "wrong", "value", "0/1"] for i in range(3)]


def test_gradescope_points_a_repeated_cause_to_its_lead():
    """On Gradescope every test has its own output; a repeated cause points to the test explaining it."""
    mistake = {"id": "m", "message": "why"}
    failures = [_failure(case_id="example:a", diagnosis=mistake), _failure(case_id="example:b", diagnosis=mistake)]
    tests = gradescope_results(_result(failures))["tests"]
    assert tests[0]["name"] == "example:a: two keys" and "Known mistake (m): why" in tests[0]["output"]
    assert tests[1]["output"] == (
        "wrong value: 1 of 2 entries of out are wrong (specs/s.yaml:12)\n"
        "Same cause as example:a (known mistake m): see that test."
    )
