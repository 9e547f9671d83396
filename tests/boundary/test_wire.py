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
