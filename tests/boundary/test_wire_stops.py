"""The wire's stops within a call (returned / proceed), the output read again after the grader's
canaries, and texts cut where they are made instead of refusing a reply."""

from __future__ import annotations

import numpy as np
import pytest

from attnscore.boundary import wire
from attnscore.boundary.gradients import WithGradients, saved_tensors_shapes
from attnscore.boundary.outputs import Received
from attnscore.boundary.verdict import Verdict
from attnscore.boundary.worker import missing_entry_text, missing_function_text

VALUE = Received("tensor", "float32", "cpu", np.array([1.0, 2.0], dtype=np.float32))


def _round_trip(message: wire.Message) -> wire.Reply:
    return wire.decode_reply(wire.loads(wire.dumps(wire.encode_message(message))))


@pytest.mark.parametrize("stage", wire.CALL_STAGES)
def test_returned_and_proceed_travel_as_words(stage):
    """The worker's stop and the grader's answer carry the call and the stage; an unknown stage is None."""
    assert _round_trip(wire.Returned(3, stage)) == wire.Returned(3, stage)
    assert wire.encode_message(wire.Proceed(3, stage)) == {"type": "proceed", "id": 3, "stage": stage}
    assert wire.decode_reply({"type": "returned", "id": 3, "stage": "later"}) == wire.Returned(3, None)


def test_a_result_carries_the_output_read_again_only_when_given():
    """The probe (the output read after the canaries) travels as an array; absent, it decodes as None."""
    probe = np.array([-16512.0, 2.0], dtype=np.float32)
    got = _round_trip(wire.CallResult(1, VALUE, {"mutated": [], "aliased": []}, probe))
    assert isinstance(got, wire.CallResult) and got.probe is not None
    assert got.probe.tolist() == [-16512.0, 2.0]
    plain = _round_trip(wire.CallResult(1, VALUE, {"mutated": [], "aliased": []}))
    assert isinstance(plain, wire.CallResult) and plain.probe is None
    broken = wire.decode_reply({"type": "result", "id": 1, "value": wire.encode_received(VALUE), "probe": "x"})
    assert isinstance(broken, wire.UnreadableResult)


def test_long_texts_are_cut_where_they_are_made_and_where_they_are_read():
    """A failure's message and a logsumexp problem longer than MAX_TEXT are cut with a note, both when
    the worker encodes them and when the grader reads a hand-written reply: the reply is never refused."""
    long = "x" * (wire.MAX_TEXT + 500)
    sent = wire.encode_message(wire.CallFailed(1, Verdict.EXCEPTION, long))
    assert len(sent["message"]) < wire.MAX_TEXT + 40 and sent["message"].endswith("[... 500 more characters]")
    read = wire.decode_reply({"type": "failure", "id": 1, "verdict": "exception", "message": long})
    assert isinstance(read, wire.CallFailed) and read.message.endswith("[... 436 more characters]")
    grads = WithGradients("tensor", "float32", "cpu", VALUE.array, {}, {}, (), None, long)
    decoded = _round_trip(wire.CallResult(1, grads, {"mutated": [], "aliased": []}))
    assert isinstance(decoded, wire.CallResult) and isinstance(decoded.value, WithGradients)
    assert decoded.value.logsumexp_problem.endswith("[... 500 more characters]")
    hand_written = {"type": "result", "id": 1, "value": {**wire.encode_received(grads), "logsumexp_problem": long}}
    assert isinstance(wire.decode_reply(hand_written), wire.CallResult)


def test_the_worker_lists_are_bounded():
    """A file with 110,000 functions, a folder of 5,000 files, 305 saved tensors: each sentence stays short."""
    namespace = {f"helper_{i}": len for i in range(110_000)}
    for f in namespace.values():
        assert callable(f)
    text = missing_function_text("scores", None, {n: _defined(n) for n in list(namespace)[:30_000]}, "submission")
    assert text.startswith("your file has no function named 'scores'; it defines: helper_0, helper_1")
    assert text.endswith("and 29980 more") and len(text) < 600
    files = [f"file_{i}.py" for i in range(5000)]
    listed = missing_entry_text("solution.py", files)
    assert listed.endswith("and 4988 more)") and len(listed) < 400
    shapes = saved_tensors_shapes([(1, 4)] * 4 + [(1,)] * 301)
    assert shapes == "the 305 saved tensors' shapes: (1, 4) ×4, (1,) ×301"


def _defined(name: str):
    def f() -> None:
        return None

    f.__module__ = "submission"
    return f
