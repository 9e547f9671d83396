"""The typed wire messages (attnscore.boundary.wire): one encoder, one decoder, every reply a message."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary import wire
from attnscore.boundary.outputs import Received
from attnscore.boundary.verdict import Verdict

VALUE = Received("tensor", "float32", "cpu", np.array([1.0, 0.0], dtype=np.float32))


def _line(obj: dict) -> wire.Reply:
    """``obj`` through the wire as the worker writes it, decoded as the grader reads it."""
    return wire.decode_reply(wire.loads(wire.dumps(obj).rstrip(b"\n")))


@pytest.mark.parametrize(
    "message, sent",
    [
        pytest.param(wire.Importing(), {"type": "importing"}, id="importing"),
        pytest.param(wire.Ready(), {"type": "ready"}, id="ready"),
        pytest.param(
            wire.LoadError(Verdict.FUNCTION_MISSING, "no function"),
            {"type": "load_error", "verdict": "function_missing", "message": "no function"},
            id="load error without clues",
        ),
        pytest.param(
            wire.LoadError(Verdict.EXCEPTION, "import failed", module="torch"),
            {"type": "load_error", "verdict": "exception", "message": "import failed", "module": "torch"},
            id="load error with a module clue",
        ),
        pytest.param(
            wire.CallFailed(3, Verdict.EXCEPTION, "raised ValueError: x", "ValueError", file="/x"),
            {
                "type": "failure",
                "id": 3,
                "verdict": "exception",
                "message": "raised ValueError: x",
                "exception": "ValueError",
                "file": "/x",
            },
            id="call failed",
        ),
        pytest.param(
            wire.CallRequest(1, "float32", "cpu", ("q", "keys"), ({"name": "q", "offset": 0},)),
            {
                "type": "call",
                "id": 1,
                "dtype": "float32",
                "device": "cpu",
                "names": ["q", "keys"],
                "inputs": [{"name": "q", "offset": 0}],
            },
            id="call request",
        ),
    ],
)
def test_each_message_is_the_object_it_has_always_been_on_the_wire(message, sent):
    """The encoder writes the same JSON objects the worker and grader exchanged as dicts."""
    assert wire.encode_message(message) == sent


def test_a_result_travels_as_an_encoded_value_and_comes_back_typed():
    """A result's value is encode_received's object on the wire and a Received again after decoding."""
    inspection = {"mutated": ["q"], "aliased": []}
    encoded = wire.encode_message(wire.CallResult(2, VALUE, inspection))
    assert encoded["value"] == wire.encode_received(VALUE) and encoded["inspection"] == inspection
    back = _line(encoded)
    assert isinstance(back, wire.CallResult) and back.id == 2 and back.inspection == inspection
    assert back.value.kind == "tensor" and back.value.array.tolist() == [1.0, 0.0]


_TEXT = st.text(max_size=40)
_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
_MESSAGES = st.one_of(
    st.builds(wire.Importing),
    st.builds(wire.Ready),
    st.builds(
        wire.LoadError,
        st.sampled_from(Verdict),
        _TEXT,
        st.one_of(st.just(""), _NAME),
        st.none() | _TEXT.filter(bool),
        st.none() | _TEXT.filter(bool),
    ),
    st.builds(
        wire.CallFailed,
        st.integers(1, 10**6),
        st.sampled_from(Verdict),
        _TEXT,
        st.one_of(st.just(""), _NAME),
        st.none() | _TEXT.filter(bool),
        st.none() | _TEXT.filter(bool),
    ),
)


@settings(max_examples=200, deadline=None)
@given(_MESSAGES)
def test_every_worker_message_decodes_to_itself(message):
    """decode_reply(encode_message(m)) == m for every message the worker can send."""
    assert _line(wire.encode_message(message)) == message


@pytest.mark.parametrize(
    "obj, expected",
    [
        pytest.param(
            {"type": "failure", "id": 1, "verdict": "passed", "message": "ok"},
            wire.CallFailed(1, Verdict.PASSED, "ok"),
            id="a verdict no worker may send decodes as itself (the grader refuses it)",
        ),
        pytest.param(
            {"type": "failure", "id": 1, "verdict": "nonsense", "message": "ok"},
            wire.CallFailed(1, None, "ok"),
            id="unknown verdict word",
        ),
        pytest.param(
            {"type": "failure", "id": 1, "verdict": ["exception"], "message": "ok"},
            wire.CallFailed(1, None, "ok"),
            id="unhashable verdict",
        ),
        pytest.param(
            {"type": "failure", "id": 1.0, "verdict": "exception", "message": 5, "exception": "not a name"},
            wire.CallFailed(1, Verdict.EXCEPTION, "5", ""),
            id="float id, number message, exception that is no identifier",
        ),
        pytest.param(
            {"type": "failure", "id": True, "verdict": "exception", "exception": "X" * 101, "module": 3},
            wire.CallFailed(1, Verdict.EXCEPTION, "", ""),
            id="bool id, long exception name, module that is no string",
        ),
        pytest.param(
            {"type": "failure", "id": "1", "verdict": "timeout"},
            wire.CallFailed(None, Verdict.TIMEOUT, ""),
            id="string id",
        ),
        pytest.param({"type": "result", "id": 1.5, "value": {}}, None, id="fractional id, unreadable value"),
        pytest.param({"type": "passed", "id": 4}, wire.Unexpected(4, "passed"), id="unknown type"),
        pytest.param({"type": ["ready"]}, wire.Unexpected(None, None), id="type that is no string"),
        pytest.param({"id": 2}, wire.Unexpected(2, None), id="no type"),
        pytest.param(
            {"type": "load_error", "id": 1, "verdict": "grader_error"},
            wire.LoadError(Verdict.GRADER_ERROR, "", id=1),
            id="load error with an id",
        ),
    ],
)
def test_decode_reply_turns_every_object_into_a_message(obj, expected):
    """Whatever object the worker sends decodes to a message (never raises); words outside the
    vocabulary decode as None, ids as the integer they equal."""
    got = wire.decode_reply(obj)
    if expected is None:
        assert isinstance(got, wire.UnreadableResult) and got.id is None
        assert got.problem.startswith("expected a kind in tensor")
    else:
        assert got == expected


def test_a_result_whose_value_cannot_be_read_is_unreadable_with_the_reason():
    """A result with a value of the wrong shape says why, for the bad-return-type verdict."""
    value = {**wire.encode_received(VALUE), "shape": [3]}
    got = wire.decode_reply({"type": "result", "id": 7, "value": value})
    assert got == wire.UnreadableResult(7, "expected 12 bytes for shape [3] float32, found 8")


def test_a_call_request_decodes_for_the_worker():
    """The worker reads the grader's request back as the CallRequest it was."""
    request = wire.CallRequest(5, "float64", "cuda:0", ("Q", "K"), ({"name": "Q"}, {"name": "K"}))
    line = wire.dumps(wire.encode_message(request)).rstrip(b"\n")
    assert wire.decode_call(wire.loads(line)) == request
    with pytest.raises(KeyError):
        wire.decode_call({"type": "call", "dtype": "float32", "inputs": []})


def test_the_encoder_is_bound_when_wire_is_imported(monkeypatch):
    """Patching wire's helpers afterwards (the submission runs in the worker's process) does not
    change what encode_message writes."""

    def patched(*_):
        raise AssertionError("the patched helper ran")

    result = wire.CallResult
    monkeypatch.setattr(wire, "encode_received", patched)
    monkeypatch.setattr(wire, "CallResult", None)
    encoded = wire.encode_message(result(1, VALUE))
    assert encoded["type"] == "result" and encoded["value"]["data"] == "AACAPwAAAAA="


def _call_line(call_id, shape=(3, 4), **fields):
    items = (
        {"name": "q", "dtype": "float32", "shape": [shape[1]], "offset": 0},
        {"name": "keys", "dtype": "float32", "shape": list(shape), "offset": 64},
    )
    request = wire.CallRequest(call_id, "float32", "cpu", ("q", "keys"), items, **fields)
    return request, wire.dumps(wire.encode_message(request))


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.integers(0, 10**15), min_size=1, max_size=12),
    shapes=st.lists(st.sampled_from([(3, 4), (2, 2), (1, 5)]), min_size=12, max_size=12),
    options=st.sampled_from([{}, {"options": (("scale", 0.5),)}, {"trailing_nones": 1}, {"function": "attention"}]),
)
def test_the_call_reader_gives_what_decode_call_gives_with_the_line_s_own_id(ids, shapes, options):
    """Lines that differ only in their id are read once: every line still gives its own id and
    the request decode_call makes of it (but for request.id, an earlier line's when remembered)."""
    read = wire.bound_call_reader()
    for call_id, shape in zip(ids, shapes, strict=False):
        request, line = _call_line(call_id, shape, **options)
        got_id, got = read(line)
        assert got_id == call_id
        assert {**vars(got), "id": call_id} == vars(wire.decode_call(wire.loads(line)))


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda line: line.replace(b'"id": 5,', b'"id": 05,'), id="a leading zero"),
        pytest.param(lambda line: line.replace(b'"id": 5,', b'"id": -5,'), id="a negative id"),
        pytest.param(lambda line: line.replace(b'"id": 5,', b'"id": 5.0,'), id="a float id"),
        pytest.param(lambda line: line.replace(b'"v": 1', b'"v": 2'), id="another version"),
    ],
)
def test_the_call_reader_never_takes_a_changed_line_for_a_remembered_one(edit):
    """A remembered line's twin with an id the parser would refuse, or any other byte changed,
    is parsed (and refused, or read, as decode_call does)."""
    read = wire.bound_call_reader()
    _, line = _call_line(4)
    read(line)
    _, line = _call_line(5)
    changed = edit(line)
    try:
        want = wire.decode_call(wire.bound_grader_lines()(changed))
    except (ValueError, KeyError, TypeError) as exc:
        with pytest.raises(type(exc)):
            read(changed)
    else:
        assert read(changed) == (want.id, want)


def test_the_call_reader_forgets_past_its_size():
    read = wire.bound_call_reader(size=2)
    lines = [_call_line(i, shape)[1] for i, shape in enumerate([(3, 4), (2, 2), (1, 5), (3, 4)])]
    for line in lines:
        read(line)
    assert read(_call_line(9, (3, 4))[1])[0] == 9
