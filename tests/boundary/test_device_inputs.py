"""Tests for the worker's inputs (attnscore.boundary.device_inputs.bound_inputs_on_device): tensors
backed by the grader's shared memory, as torch.frombuffer would make them."""

from __future__ import annotations

import mmap
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.calls import TORCH_DTYPES
from attnscore.boundary.device_inputs import bound_inputs_on_device, input_span

DTYPES = {**TORCH_DTYPES, "bool": torch.bool, "int32": torch.int32}
SIZE = 1 << 16


@pytest.fixture(scope="module")
def shared():
    fd = os.memfd_create("attnscore-test-inputs")
    try:
        os.ftruncate(fd, SIZE)
        memory = mmap.mmap(fd, SIZE)
    finally:
        os.close(fd)
    memory[:] = os.urandom(SIZE)
    yield memory
    memory.close()


def _as_frombuffer(shared, item):
    dtype = DTYPES[item["dtype"]]
    count = 1
    for n in item["shape"]:
        count *= n
    return torch.frombuffer(shared, dtype=dtype, count=count, offset=item["offset"]).view(item["shape"])


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(DTYPES)),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=4),
    slot=st.integers(0, 64),
)
def test_an_input_is_the_tensor_frombuffer_makes_over_the_same_bytes(shared, name, shape, slot):
    """Every dtype (numpy's view for those numpy has, torch's for bfloat16): the same memory,
    storage bytes, shape, strides and dtype as torch.frombuffer, a leaf that needs no gradient;
    a write through it lands in the shared memory, where the grader reads it."""
    item = {"name": "x", "dtype": name, "shape": shape, "offset": slot * 64}
    (got,), pairs = bound_inputs_on_device()(shared, [item], "cpu")
    want = _as_frombuffer(shared, item)
    assert pairs == [] and type(got) is torch.Tensor
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    assert got.data_ptr() == want.data_ptr()
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    assert got.untyped_storage().data_ptr() == want.untyped_storage().data_ptr()
    assert got.is_leaf and not got.requires_grad and got.is_contiguous()
    assert torch.equal(got, want) or got.dtype.is_floating_point  # NaN bit patterns differ from themselves
    assert input_span(item, got) == (item["offset"], item["offset"] + want.untyped_storage().nbytes())
    before = bytes(shared[item["offset"] : item["offset"] + 8])
    got.view(-1)[0] = 1
    assert bytes(shared[item["offset"] : item["offset"] + 8]) != before or want.view(-1)[0] == 1


def test_an_input_s_storage_cannot_grow_past_its_bytes(shared):
    """As with torch.frombuffer, the submission cannot resize an input's storage (over the shared memory)."""
    item = {"name": "x", "dtype": "float32", "shape": [2, 3], "offset": 0}
    (got,), _ = bound_inputs_on_device()(shared, [item], "cpu")
    with pytest.raises(RuntimeError):
        got.resize_(1000)


def test_a_patched_numpy_or_torch_does_not_change_how_inputs_are_built(shared, monkeypatch):
    """Bound before the submission is imported: patching torch.from_numpy or numpy.frombuffer
    afterwards changes nothing."""
    import numpy as np

    build = bound_inputs_on_device()
    monkeypatch.setattr(torch, "from_numpy", lambda a: torch.zeros(1))
    monkeypatch.setattr(np, "frombuffer", lambda *a, **k: np.zeros(1))
    item = {"name": "x", "dtype": "float64", "shape": [4], "offset": 128}
    (got,), _ = build(shared, [item], "cpu")
    assert got.shape == (4,) and got.data_ptr() == _as_frombuffer(shared, item).data_ptr()
