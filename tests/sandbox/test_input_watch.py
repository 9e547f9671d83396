"""The grader's own reading of the inputs in shared memory: what changed, when, and the canaries."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary import wire
from attnscore.sandbox.folders import shared_memory
from attnscore.sandbox.input_watch import CANARY_FLOATS, InputWatch, canary_bytes, canary_value, input_bytes


@pytest.fixture
def shared():
    fd = shared_memory()
    yield fd
    os.close(fd)


def _lay_out(shared: int, items: list[tuple[str, str, bytes]]) -> InputWatch:
    """Write ``(name, dtype, bytes)`` items at 64-byte boundaries, as the runner does; their watch."""
    layout, raws, offset = [], [], 0
    for name, kind, raw in items:
        offset = -(-offset // 64) * 64
        os.pwrite(shared, raw, offset)
        layout.append({"name": name, "dtype": kind, "shape": [len(raw)], "offset": offset})
        raws.append(raw)
        offset += len(raw)
    return InputWatch(layout, raws)


@pytest.mark.parametrize("kind", CANARY_FLOATS)
@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, 40), count=st.integers(0, 300))
def test_canary_bytes_are_what_input_bytes_makes_of_the_canary(kind, index, count):
    value = canary_value(index)
    assert canary_bytes(value, kind, count) == input_bytes(np.full(count, value, dtype=np.float32), kind)


def test_an_untouched_call_reads_as_unchanged_and_gets_its_canaries(shared):
    q, k = np.arange(4.0), np.arange(12.0)
    watch = _lay_out(shared, [("q", "float64", q.tobytes()), ("keys", "float64", k.tobytes())])
    assert watch.settle(shared, wire.Returned(1, "call"))
    watch.finish(shared, None)
    assert watch.stages == {} and watch.canaried
    for index, item in enumerate(watch.layout):
        held = os.pread(shared, 8 * (4 if index == 0 else 12), item["offset"])
        assert held == canary_bytes(canary_value(index), "float64", 4 if index == 0 else 12)


def test_a_write_into_the_gap_between_items_changes_no_input(shared):
    watch = _lay_out(shared, [("q", "float64", np.ones(3).tobytes()), ("keys", "float64", np.ones(5).tobytes())])
    os.pwrite(shared, b"\x01", 30)  # between q (24 bytes) and keys (at 64)
    assert watch.settle(shared, wire.Returned(1, "call"))
    assert watch.stages == {}


def test_each_change_is_seen_when_it_was_made(shared):
    """A change during the forward, then one after the call returned (into a canaried input), then
    one into a mask (kept, not canaried) after the call: each input named once, with its stage."""
    mask = np.array([True, False, True]).tobytes()
    watch = _lay_out(
        shared,
        [
            ("q", "float32", np.ones(2, np.float32).tobytes()),
            ("keys", "float32", np.ones(4, np.float32).tobytes()),
            ("mask", "bool", mask),
        ],
    )
    os.pwrite(shared, np.float32(2).tobytes(), 0)  # q, during the call
    assert watch.settle(shared, wire.Returned(1, "call"))
    assert watch.stages == {"q": "forward"}
    assert set(watch.canaries) == {"q", "keys"}
    os.pwrite(shared, b"\x07", 64)  # keys, after its canaries
    os.pwrite(shared, b"\x07", 128)  # the mask, after the call
    watch.finish(shared, np.array([canary_value(1), 0.0]))
    assert watch.stages == {"q": "forward", "keys": "after", "mask": "after"}
    assert watch.aliased == {"keys"}


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 100), min_size=0, max_size=4))
def test_a_watch_given_the_span_written_expects_what_one_built_from_the_items_expects(sizes):
    """The runner hands over the span it wrote (items at 64-byte boundaries, zero gaps): the watch
    takes it as it is, and expects what a watch built from the items alone expects."""
    layout, raws, offset, written = [], [], 0, bytearray()
    for index, size in enumerate(sizes):
        offset = -(-offset // 64) * 64
        raw = bytes([index + 1]) * size
        written += bytes(offset - len(written)) + raw
        layout.append({"name": f"x{index}", "dtype": "float64", "shape": [size // 8], "offset": offset})
        raws.append(raw)
        offset += size
    given_span, built = InputWatch(layout, raws, bytearray(written)), InputWatch(layout, raws)
    assert (given_span.start, given_span.end, bytes(given_span.span)) == (0, built.end, bytes(built.span))
