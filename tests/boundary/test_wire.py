"""Tests for the grader/worker wire format (attnscore.boundary.wire): every hostile reply is a WireError."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary import wire


def test_round_trip_keeps_every_bit():
    """NaN, infinities and signed zeros survive encoding and decoding."""
    array = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], dtype=np.float32)
    line = wire.dumps({"type": "x", "value": wire.encode_array(array)})
    name, back = wire.decode_array(wire.loads(line.rstrip(b"\n"))["value"])
    assert name == "float32"
    assert back.tobytes() == array.tobytes()


@pytest.mark.parametrize(
    "line, text",
    [
        pytest.param(
            b'{"v": 1, "id": ' + b"9" * 5000 + b"}", "integers of at most 20 digits, found one of 5000", id="huge int"
        ),
        pytest.param(b"[" * 5000 + b"]" * 5000, "at most 1000 objects and arrays", id="deep nesting"),
        pytest.param(
            b'{"v": 1, "x": [' + b"{}," * 2000 + b"{}]}", "at most 1000 objects and arrays", id="many objects"
        ),
        pytest.param(b'{"v": 1, "x": [' + b"1," * 200_000 + b"1]}", "at most 100000 items", id="many items"),
        pytest.param(b'{"v": 1, "x": NaN}', "strict JSON, found the token NaN", id="NaN token"),
        pytest.param(b"\xff\xfe", "unparseable bytes (UnicodeDecodeError)", id="not utf-8"),
        pytest.param(b'{"v": 1, "x": 1e999999}', None, id="float overflow is inf, still valid JSON"),
        pytest.param(b'["v", 1]', "expected a JSON object, found list", id="not an object"),
        pytest.param(b'{"v": 2}', "expected wire version 1, found '2'", id="other version"),
    ],
)
def test_hostile_lines_are_wire_errors(line, text):
    """Whatever a worker sends, loads returns a message or raises WireError: never another exception."""
    if text is None:
        assert wire.loads(line)["x"] == float("inf")
        return
    with pytest.raises(wire.WireError, match=text.replace("(", r"\(").replace(")", r"\)")):
        wire.loads(line)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300)
    | st.recursive(st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)).map(
        lambda v: json.dumps(v).encode()
    )
)
def test_loads_never_raises_anything_but_wire_error(line):
    """Arbitrary bytes and arbitrary JSON: a dict of version 1, or WireError."""
    try:
        obj = wire.loads(line)
    except wire.WireError:
        return
    assert isinstance(obj, dict) and obj.get("v") == 1


GRADER_LINES = [
    wire.Proceed(3, "call"),
    wire.CallRequest(
        7, "float64", "cpu", ("q", "keys"), ({"name": "q", "dtype": "float64", "shape": [4], "offset": 0},)
    ),
    wire.CallRequest(
        2,
        "float32",
        "cpu",
        ("Q", "K", "mask"),
        (),
        by_name=("mask",),
        options=(("scale", 0.5), ("window_size", (2, 1)), ("name", "x"), ("flag", None)),
        trailing_nones=2,
        function="attention",
    ),
]


@pytest.mark.parametrize("message", GRADER_LINES, ids=lambda m: type(m).__name__)
def test_the_worker_reads_the_grader_s_lines_as_loads_does(message):
    line = wire.dumps(wire.encode_message(message))
    assert wire.bound_grader_lines()(line) == wire.loads(line)
    assert wire.bound_grader_lines()(line.rstrip(b"\n")) == wire.loads(line)


@pytest.mark.parametrize(
    "line, text",
    [
        pytest.param(b'{"v": 1, "x": NaN}\n', "strict JSON, found the token NaN", id="NaN token"),
        pytest.param(b'{"v": 1, "x": -Infinity}\n', "strict JSON, found the token -Infinity", id="infinity token"),
        pytest.param(b"\xff\xfe\n", "unparseable bytes (UnicodeDecodeError)", id="not utf-8"),
        pytest.param(b"\n", "unparseable bytes (StopIteration)", id="empty line"),
        pytest.param(b'{"v": 1, "x": [1, }\n', "unparseable bytes", id="broken"),
        pytest.param(b'{"v": 1} {"v": 1}\n', "one JSON message on the line, found more", id="two objects"),
        pytest.param(b'["v", 1]\n', "expected a JSON object, found list", id="not an object"),
        pytest.param(b'{"v": 2}\n', "expected wire version 1, found '2'", id="other version"),
        pytest.param(b'{"type": "proceed"}\n', "expected wire version 1, found 'None'", id="no version"),
    ],
)
def test_a_line_the_grader_never_writes_is_a_wire_error_for_the_worker(line, text):
    with pytest.raises(wire.WireError, match=text.replace("(", r"\(").replace(")", r"\)")):
        wire.bound_grader_lines()(line)


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=200)
    | st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(10**19), 10**19)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    ).map(lambda v: json.dumps(v).encode())
)
def test_the_worker_s_reader_agrees_with_loads_on_small_lines(line):
    """Where loads's caps do not apply (small lines, integers of at most 20 digits), both read the
    same object or both refuse."""
    try:
        expected = wire.loads(line)
    except wire.WireError:
        expected = None
    try:
        got = wire.bound_grader_lines()(line)
    except wire.WireError:
        got = None
    assert got == expected
