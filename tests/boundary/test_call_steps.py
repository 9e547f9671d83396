"""Tests for the worker's call inspector (attnscore.boundary.call_steps.bound_inspector): in process,
on tensors backed by a shared memory map as the worker builds them."""

from __future__ import annotations

import functools
import gc
import mmap
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.call_steps import bound_inspector
from attnscore.boundary.device_inputs import bound_inputs_on_device, input_span

ITEMS = [
    {"name": "Q", "dtype": "float64", "shape": [2, 3], "offset": 0},
    {"name": "K", "dtype": "float64", "shape": [3, 3], "offset": 64},
    {"name": "V", "dtype": "float32", "shape": [3], "offset": 192},
]


@pytest.fixture
def shared():
    fd = os.memfd_create("attnscore-test-inputs")
    try:
        os.ftruncate(fd, 4096)
        memory = mmap.mmap(fd, 4096)
    finally:
        os.close(fd)
    yield memory
    memory.close()


def _inputs(shared):
    args, _ = bound_inputs_on_device()(shared, ITEMS, "cpu")
    for i, arg in enumerate(args):
        arg.copy_(torch.arange(arg.numel(), dtype=arg.dtype).reshape(arg.shape) + i)
    return args, [input_span(item, arg) for item, arg in zip(ITEMS, args, strict=True)]


class _Marked(torch.Tensor):
    pass


# what one call may do to argument i, and whether the inspector must call it a change
CHANGES = {
    "nothing": (lambda t: None, False),
    "read": (lambda t: t.sum(), False),
    "add": (lambda t: t.add_(1), True),
    "same values written": (lambda t: t.copy_(t.clone()), False),
    "unsqueeze": (lambda t: t.unsqueeze_(0), True),
    "transpose twice": (lambda t: t.transpose_(0, -1).transpose_(0, -1), False),
    "strides only": (lambda t: t.as_strided_(t.shape, [0] * t.dim()), True),
    "class": (lambda t: setattr(t, "__class__", _Marked), True),
    "set_ to a copy": (lambda t: t.set_(t.clone()), True),
}


def test_a_call_that_changes_nothing_reports_nothing_and_returns_its_value(shared):
    args, spans = _inputs(shared)
    value, changed = bound_inspector(shared)(lambda Q, K, V: Q @ K, args, spans)
    assert changed == []
    assert torch.equal(value, args[0] @ args[1])


@pytest.mark.parametrize("name", sorted(CHANGES))
@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_change_of_one_argument_is_found_on_that_argument_only(shared, name, index):
    args, spans = _inputs(shared)
    change, counts = CHANGES[name]

    def function(*given):
        change(given[index])
        return given[0]

    _, changed = bound_inspector(shared)(function, args, spans)
    assert changed == ([index] if counts else [])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(sorted(set(CHANGES) - {"strides only"}))), max_size=4))
def test_the_changed_arguments_are_exactly_those_a_change_that_counts_touched(changes):
    """Several changes in one call (a zero-stride view refuses a later write: left out here)."""
    memory = mmap.mmap(-1, 4096)
    args, spans = _inputs(memory)

    def function(*given):
        for index, name in changes:
            CHANGES[name][0](given[index])

    _, changed = bound_inspector(memory)(function, args, spans)
    assert changed == sorted({i for i, name in changes if CHANGES[name][1]})


def test_a_value_written_outside_the_shared_memory_regions_is_not_a_change(shared):
    args, spans = _inputs(shared)

    def function(Q, K, V):
        shared[4000] = 7  # past every input's region

    assert bound_inspector(shared)(function, args, spans)[1] == []


def test_the_arguments_bound_by_name_are_inspected_too(shared):
    args, spans = _inputs(shared)

    def function(Q, K, *, V):
        V.mul_(2)

    inspected = bound_inspector(shared)
    _, changed = inspected(functools.partial(function, V=args[2]), args, spans, positional=2)
    assert changed == [2]


def test_without_shared_memory_only_metadata_and_class_count(shared):
    args, _ = _inputs(shared)

    def function(Q, K, V):
        Q.add_(1)  # a value: not seen without the memory
        K.unsqueeze_(0)

    assert bound_inspector(None)(function, args, [None, None, None])[1] == [1]


def test_the_function_s_own_exception_comes_through(shared):
    args, spans = _inputs(shared)

    def function(Q, K, V):
        raise ValueError("the submission's")

    with pytest.raises(ValueError, match="the submission's"):
        bound_inspector(shared)(function, args, spans)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_stays_as_the_call_left_it(shared, enabled):
    args, spans = _inputs(shared)
    was = gc.isenabled()

    def function(Q, K, V):
        (gc.enable if enabled else gc.disable)()

    try:
        bound_inspector(shared)(function, args, spans)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_metadata_of_tensors_is_their_class_shape_strides_pointer_dtype_and_bits(shared):
    args, _ = _inputs(shared)
    taken = bound_inspector(shared).metadata(args)
    assert taken == [(torch.Tensor, a.shape, a.stride(), a.data_ptr(), a.dtype, a.is_neg(), a.is_conj()) for a in args]
    args[1].t_()
    assert bound_inspector(shared).metadata(args)[1] != taken[1]


@pytest.mark.parametrize("name", ["nothing", "add", "unsqueeze", "class"])
def test_without_operator_call_as_on_python_3_10_it_finds_the_same(shared, monkeypatch, name):
    import operator

    args, spans = _inputs(shared)
    change, counts = CHANGES[name]
    monkeypatch.delattr(operator, "call", raising=False)
    inspected = bound_inspector(shared)

    def function(Q, K, V):
        change(K)
        return Q

    value, changed = inspected(function, args, spans)
    assert value is args[0]
    assert changed == ([1] if counts else [])
    assert inspected.metadata(args)[0] == (
        torch.Tensor,
        (2, 3),
        (3, 1),
        args[0].data_ptr(),
        torch.float64,
        False,
        False,
    )


def _settle_with(lines):
    """A settle over a request pipe holding ``lines``, its sender's lines kept in ``said``."""
    import io

    from attnscore.boundary.call_steps import bound_settle

    said = []

    def send(message):
        said.append(message)

    requests = io.BufferedReader(io.BytesIO(b"".join(lines)))
    return bound_settle(send, requests, lambda pairs: None, lambda pairs: None), said


@pytest.mark.parametrize("stage", ["forward", "call"])
@pytest.mark.parametrize(
    "line",
    [
        pytest.param(None, id="as the grader writes it"),
        pytest.param(b'{"v":1,"type":"proceed","id":7,"stage":"%s"}\n', id="written another way"),
        pytest.param(b'{"stage": "%s", "id": 7, "type": "proceed", "v": 1}', id="keys in another order, no newline"),
    ],
)
def test_settle_goes_on_at_the_grader_s_proceed_however_it_is_written(stage, line):
    from attnscore.boundary import wire

    written = wire.dumps(wire.encode_message(wire.Proceed(7, stage))) if line is None else line % stage.encode()
    settle, said = _settle_with([written])
    settle(7, stage, [])
    assert said == [wire.Returned(7, stage)]


@pytest.mark.parametrize(
    "proceed",
    [
        pytest.param((8, "call"), id="another call"),
        pytest.param((7, "forward"), id="another stage"),
        pytest.param(None, id="the pipe closed"),
    ],
)
def test_settle_refuses_anything_but_this_call_s_proceed(proceed):
    from attnscore.boundary import wire

    lines = [] if proceed is None else [wire.dumps(wire.encode_message(wire.Proceed(*proceed)))]
    settle, _ = _settle_with(lines)
    with pytest.raises(EOFError):
        settle(7, "call", [])


def test_settle_parses_a_call_id_that_is_no_int():
    """A bool id (``True == 1``) never takes the byte-for-byte shortcut: the line is parsed, as always."""
    from attnscore.boundary import wire

    settle, _ = _settle_with([wire.dumps(wire.encode_message(wire.Proceed(1, "call")))])
    settle(True, "call", [])
