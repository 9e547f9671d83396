"""The failure record: redacted once, written and read by one codec derived from its fields."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.verdict import Verdict
from attnscore.report.codec import ADDED, CodecError, decode, encode, finite_or_word, number_from_word
from attnscore.report.failure import EntryMismatch, Failure, Mismatch, ShrunkFrom, Withheld
from attnscore.report.feedback import failure_data, failure_text, summary_line
from attnscore.report.redact import WITHHELD_CHECK, redact
from attnscore.report.results import CaseResult

REPORT = Path(__file__).resolve().parents[2] / "attnscore" / "report"
SECRET = "31.4159"  # stands for any hidden input, expected value or submission text


def _failure(**fields: object) -> Failure:
    base: dict[str, object] = {
        "verdict": Verdict.WRONG_VALUE,
        "case_id": "example:e",
        "kind": "example",
        "title": "t",
        "location": "s.yaml:3",
        "hidden": True,
        "function": "scores",
        "dtype": "float32",
        "args": {"q": [31.4159, "nan"]},  # as judging records them (json_array)
        "layouts": {"q": "sliced"},
    }
    base.update(fields)
    return Failure(**base)  # type: ignore[arg-type]


def _mismatch(verdict: Verdict = Verdict.WRONG_VALUE) -> Mismatch:
    return Mismatch(
        verdict,
        entries=(EntryMismatch((1,), 31.4159, 2.0, 29.4159, 1e-6),),
        detail=f"out has shape ({SECRET},)" if verdict is Verdict.WRONG_SHAPE else "",
        wrong=1,
        total=2,
        tolerance="close",
        got_dtype="float32",
        dtype="float32",
    )


def test_visible_failure_is_left_as_it_is():
    """Redacting a visible case changes nothing."""
    f = _failure(hidden=False, mismatch=_mismatch(), explanation=SECRET, hint=SECRET)
    assert redact(f) == f


def test_hidden_failure_keeps_only_what_may_be_shown():
    """A hidden case loses its inputs, numbers and texts, and keeps the verdict, diagnosis and corner."""
    f = _failure(
        mismatch=_mismatch(Verdict.WRONG_SHAPE),
        verdict=Verdict.WRONG_SHAPE,
        hint=SECRET,
        explanation=SECRET,
        shrunk_from=ShrunkFrom(2, 20, 9),
        diagnosis={"id": "m", "message": "why"},
        corner="fully_masked_row",
    )
    r = redact(f)
    assert (r.args, r.layouts, r.dtype, r.hint, r.explanation, r.shrunk_from) == (None, None, "", "", "", None)
    assert r.mismatch == Withheld(Verdict.WRONG_SHAPE, "out")
    assert (r.verdict, r.diagnosis, r.corner, r.hidden) == (Verdict.WRONG_SHAPE, f.diagnosis, f.corner, True)
    assert r.layout_text == ""


@pytest.mark.parametrize(
    ("exception", "detail"),
    [
        ("KeyError", "raised KeyError (its message is not shown for a hidden case)"),
        ("SecretError", "raised an exception of its own class (its type and message are not shown for a hidden case)"),
        ("", "your code raised an exception (details are not shown for a hidden case)"),
    ],
)
def test_hidden_exception_keeps_a_builtin_type_only(exception, detail):
    """A builtin exception's type stays; the message and a class the submission wrote go."""
    r = redact(_failure(verdict=Verdict.EXCEPTION, detail=f"raised {exception}: {SECRET}", exception=exception))
    assert (r.detail, r.exception) == (detail, exception if exception == "KeyError" else "")


def test_hidden_property_check_says_it_does_not_hold():
    """A property check's own words (which may quote values) become the withheld sentence."""
    r = redact(_failure(kind="property", check=f"out[0] = {SECRET}"))
    assert (r.check, r.detail) == ("", WITHHELD_CHECK)
    assert summary_line(r) == WITHHELD_CHECK


def test_disclosed_and_grader_words_are_kept():
    """A failure said before any hidden input ran, and a timeout's own words, are shown as they are."""
    load = _failure(verdict=Verdict.FUNCTION_MISSING, detail="no function scores", disclosed=True)
    slow = _failure(verdict=Verdict.TIMEOUT, detail="exceeded the time limit of 2 s")
    assert redact(load).detail == "no function scores" and redact(slow).detail == "exceeded the time limit of 2 s"


def test_second_causes_are_redacted_too():
    """A hidden failure's second cause loses its inputs as well."""
    r = redact(_failure(corner="c", other_causes=(_failure(beside="c", mismatch=_mismatch()),)))
    assert r.other_causes[0].args is None and isinstance(r.other_causes[0].mismatch, Withheld)


_texts = st.sampled_from(["", SECRET, f"raised SecretError: {SECRET}", "plain words"])
_failures = st.builds(
    _failure,
    verdict=st.sampled_from([v for v in Verdict if v is not Verdict.PASSED]),
    hidden=st.booleans(),
    mismatch=st.one_of(st.none(), st.sampled_from(list(Verdict)).map(_mismatch)),
    check=_texts,
    detail=_texts,
    exception=st.sampled_from(["", "ValueError", "SecretError"]),
    hint=_texts,
    explanation=_texts,
    disclosed=st.booleans(),
    scope=st.sampled_from(["call", "submission"]),
    shrunk_from=st.one_of(st.none(), st.just(ShrunkFrom(1, 2, 31))),
)


@settings(max_examples=150, deadline=None)
@given(_failures)
def test_redact_is_idempotent(failure):
    """Redacting a redacted failure gives the same failure, so renderers may redact again."""
    once = redact(failure)
    assert redact(once) == once
    assert failure_text(once) == failure_text(failure) and failure_data(once) == failure_data(failure)


# call-failure verdicts whose detail may hold the submission's own words
_SUBMISSION_WORDS = {Verdict.EXCEPTION, Verdict.BAD_RETURN_TYPE, Verdict.MEMORY_LIMIT, Verdict.FUNCTION_MISSING}


@settings(max_examples=150, deadline=None)
@given(_failures)
def test_no_rendering_of_a_redacted_hidden_case_holds_its_secrets(failure):
    """Whatever a hidden, undisclosed failure holds, its text, JSON and record after redact hold none of it
    (a timeout's or crash's detail is the grader's own words, and shown)."""
    failure = dataclasses.replace(failure, hidden=True, disclosed=False)
    if failure.mismatch is None and not failure.check and failure.verdict not in _SUBMISSION_WORDS:
        failure = dataclasses.replace(failure, detail="exceeded the time limit of 2 s")
    r = redact(failure)
    for out in (failure_text(failure), json.dumps(failure_data(failure)), json.dumps(encode(r))):
        assert SECRET not in out and "SecretError" not in out


def _reads_hidden(path: Path) -> list[int]:
    """Lines of ``path`` that read an attribute named ``hidden``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "hidden")


def test_only_redact_decides_what_a_hidden_case_shows():
    """No reporter reads ``hidden``; feedback reads it only to say the words "hidden case" and to
    prefer a visible case as a group's lead."""
    readers = {p.name: _reads_hidden(p) for p in sorted(REPORT.glob("*.py")) if _reads_hidden(p)}
    assert set(readers) == {"redact.py", "feedback.py"}, readers
    assert len(readers["feedback.py"]) == 2, readers["feedback.py"]


def test_counterexample_of_a_hidden_case_is_none():
    """CaseResult.counterexample goes through redact: a hidden case has none, a visible one its args."""
    hidden = _failure()
    case = CaseResult("example:e", "example", "t", Verdict.WRONG_VALUE, Fraction(0), Fraction(1), "hidden", "l", hidden)
    visible = dataclasses.replace(case, failure=dataclasses.replace(hidden, hidden=False), visibility="visible")
    assert case.counterexample is None and visible.counterexample == hidden.args


def test_record_keys_are_the_fields():
    """The codec writes one key per field, so a field added to Failure travels without new code."""
    f = _failure(mismatch=_mismatch(), shrunk_from=ShrunkFrom(1, 2, 3), other_causes=(_failure(args=None),))
    data = encode(f)
    assert list(data) == [x.name for x in dataclasses.fields(Failure)]
    assert list(data["mismatch"]) == [x.name for x in dataclasses.fields(Mismatch)]
    assert data["args"] == {"q": [31.4159, "nan"]}  # NaN as a word: strict JSON
    assert encode(_failure(args={"q": [float("-inf")]}))["args"] == {"q": ["-inf"]}
    back = decode(Failure, json.loads(json.dumps(data, allow_nan=False)), "f")
    assert back == f


def test_codec_round_trips_non_finite_entries_and_withheld():
    """NaN and ±inf cross as words and come back; a Withheld comparison reads back as one."""
    m = Mismatch(Verdict.NON_FINITE, entries=(EntryMismatch((0,), math.nan, -math.inf, math.inf, None),))
    data = json.loads(json.dumps(encode(m), allow_nan=False))
    assert data["entries"][0] | {"got": None} == {
        "index": [0],
        "got": None,
        "expected": "-inf",
        "error": "inf",
        "allowed": None,
        "exact": False,
    }
    back = decode(Mismatch, data, "m").entries[0]
    assert math.isnan(back.got) and back.expected == -math.inf and back.error == math.inf
    w = redact(_failure(mismatch=m))
    assert decode(Failure, encode(w), "f").mismatch == Withheld(Verdict.NON_FINITE, "out")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": "no"}, "f.hidden: expected bool, found str"),
        ({"call": True}, "f.call: expected int, found bool"),
        ({"verdict": "great"}, "f.verdict: expected one of 'passed', "),
        ({"mismatch": {"verdict": "wrong_value"}}, "f.mismatch.entries: expected a value, found none"),
        ({"mismatch": {**encode(_mismatch()), "entries": [{"index": [0], "got": "lots"}]}}, "f.mismatch.entries[0]"),
        ({"set_aside": ["a", 3]}, "f.set_aside[1]: expected str, found int"),
        ({"args": [1]}, "f.args: expected dict, found list"),
    ],
)
def test_bad_data_names_the_field(change, message):
    """Data that does not read as the record is one error naming the path, what was expected and found."""
    data = {**encode(_failure()), **change}
    with pytest.raises(CodecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode(Failure, data, "f")


def test_fields_added_later_may_be_absent():
    """Only fields marked ADDED may be missing (older records); any other missing key is an error."""
    data = encode(_failure(corner="c", property_held=True))
    added = [f.name for f in dataclasses.fields(Failure) if f.metadata == ADDED]
    assert added == [
        "corner",
        "set_aside",
        "other_causes",
        "beside",
        "property_held",
        "by_name",
        "corner_found",
        "advice",
        "for_students",
        "module",
    ]
    old = {k: v for k, v in data.items() if k not in added}
    assert decode(Failure, old, "f") == _failure()
    with pytest.raises(CodecError, match="f.title: expected a value, found none"):
        decode(Failure, {k: v for k, v in data.items() if k != "title"}, "f")


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_one_non_finite_encoder_round_trips_every_float(x):
    """finite_or_word and number_from_word are inverse on every float, NaN and ±inf included."""
    back = number_from_word(json.loads(json.dumps(finite_or_word(x), allow_nan=False)))
    assert (math.isnan(back) and math.isnan(x)) or back == x


def test_non_finite_words_are_spelled_once_in_report():
    """The words "nan", "inf", "-inf" are written as string literals only in the codec (and the
    batch table's short code "nan" for the non-finite verdict, which is no number)."""
    spelled = {
        p.name
        for p in REPORT.glob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in ("nan", "inf", "-inf")
    }
    assert spelled == {"codec.py", "text.py"}
