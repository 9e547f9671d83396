"""Tests for the worker's sender (attnscore.boundary.sender.bound_sender): the lines it writes."""

from __future__ import annotations

import os

import numpy as np
import pytest

from attnscore.boundary import wire
from attnscore.boundary.outputs import Received, ReturnKind
from attnscore.boundary.sender import bound_sender


def _written(say) -> bytes:
    read, write = os.pipe()
    try:
        say(bound_sender(write))
        os.close(write)
        write = -1
        with os.fdopen(read, "rb") as f:
            read = -1
            return f.read()
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


@pytest.mark.parametrize("stage", wire.CALL_STAGES)
@pytest.mark.parametrize("call_id", [1, 7, 123456789012])
def test_returned_is_said_in_the_very_line_the_message_encodes_to(call_id, stage):
    line = _written(lambda send: send.returned(call_id, stage))
    assert line == _written(lambda send: send(wire.Returned(call_id, stage)))
    assert line == wire.dumps(wire.encode_message(wire.Returned(call_id, stage))).replace(b": ", b":")
    assert wire.decode_reply(wire.loads(line)) == wire.Returned(call_id, stage)


@pytest.mark.parametrize("call_id, stage", [(True, "call"), (3, "backward"), (None, None), (2.0, "forward")])
def test_an_odd_returned_goes_through_the_message_encoder(call_id, stage):
    assert _written(lambda send: send.returned(call_id, stage)) == _written(
        lambda send: send(wire.Returned(call_id, stage))
    )


def test_a_result_is_one_line_of_json_the_grader_reads_back():
    value = Received(ReturnKind.TENSOR, "float64", "cpu", np.array([1.5, np.nan, -0.0]))
    line = _written(lambda send: send(wire.CallResult(4, value, {"mutated": [], "aliased": [], "calls": []})))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    reply = wire.decode_reply(wire.loads(line))
    assert isinstance(reply, wire.CallResult) and reply.id == 4
    assert reply.value.array.tobytes() == value.array.tobytes()


def test_a_line_longer_than_the_pipe_holds_is_written_whole():
    value = Received(ReturnKind.TENSOR, "float64", "cpu", np.arange(200_000, dtype=np.float64))
    read, write = os.pipe()
    send = bound_sender(write)
    pid = os.fork()
    if pid == 0:  # the writer: the pipe (64 KiB) fills long before the line ends
        try:
            os.close(read)
            send(wire.CallResult(1, value, None))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        line = f.read()
    os.waitpid(pid, 0)
    reply = wire.decode_reply(wire.loads(line))
    assert isinstance(reply, wire.CallResult) and reply.value.array.tobytes() == value.array.tobytes()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(Received("tensor", "float32", "cpu", np.arange(6, dtype=np.float32).reshape(2, 3)), id="float32"),
        pytest.param(Received("tensor", "bfloat16", "cpu", np.array([1.5, np.nan], dtype=np.float32)), id="bfloat16"),
        pytest.param(Received("ndarray", "float64", "cuda:0", np.array(2.5)), id="0-d on a GPU"),
        pytest.param(Received("list", "int32", "cpu", np.zeros((0, 3), dtype=np.int32)), id="empty int32"),
        pytest.param(Received("tensor", "float16", "cpu", np.array([np.inf, -0.0], dtype=np.float16)), id="float16"),
    ],
)
@pytest.mark.parametrize("probe", [None, np.array([7.0])], ids=["no probe", "a probe"])
def test_send_result_writes_the_line_send_writes(value, probe):
    """send.result(...) writes the very bytes of send(CallResult(...)), with or without a probe."""
    inspection = {"mutated": ["q"], "aliased": [], "calls": ["torch.matmul@forward"]}
    want = _written(lambda send: send(wire.CallResult(9, value, inspection, probe)))
    got = _written(lambda send: send.result(9, value, inspection, probe))
    assert got == want
    assert wire.decode_reply(wire.loads(got)).value.array.tobytes() == value.array.tobytes()
