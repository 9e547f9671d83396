"""Tests for reading a returned tensor as plain data (attnscore.boundary.outputs.to_received)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.boundary.outputs import MAX_ELEMENTS, BadReturn, Received, ReturnKind, bound_to_received, to_received


class _Logged(torch.Tensor):
    """A subclass whose __torch_function__ notes every call made on it."""

    seen: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def _values():
    return torch.arange(6, dtype=torch.float64).reshape(2, 3) - 2.5


@pytest.mark.parametrize(
    "make, dtype",
    [
        pytest.param(_values, "float64", id="plain"),
        pytest.param(lambda: _values().t(), "float64", id="transposed view"),
        pytest.param(lambda: _values().float(), "float32", id="float32"),
        pytest.param(lambda: _values().requires_grad_(), "float64", id="a leaf that needs a gradient"),
        pytest.param(lambda: _values().requires_grad_() * 1.0, "float64", id="a result that needs a gradient"),
        pytest.param(lambda: _values().bfloat16(), "bfloat16", id="bfloat16 (as float32 values)"),
        pytest.param(lambda: _values().as_subclass(_Logged), "float64", id="subclass"),
        pytest.param(lambda: _values()[:, 1], "float64", id="strided slice"),
    ],
)
def test_a_returned_tensor_is_one_fresh_c_ordered_copy_of_its_values(make, dtype):
    value = make()
    received = to_received(value)
    assert isinstance(received, Received)
    assert (received.kind, received.dtype, received.device) == (ReturnKind.TENSOR, dtype, "cpu")
    expected = torch.Tensor.float(value.detach()) if dtype == "bfloat16" else value.detach()
    assert received.array.tobytes() == np.ascontiguousarray(torch.Tensor.numpy(expected)).tobytes()
    assert received.array.flags.c_contiguous and received.array.flags.owndata
    assert type(received.array) is np.ndarray
    kept = received.array.tobytes()
    with torch.no_grad():
        torch.Tensor.add_(value, 1)
    assert received.array.tobytes() == kept  # a copy: it does not follow the tensor


def test_a_subclass_is_read_through_detach_as_before():
    _Logged.seen.clear()
    assert isinstance(to_received(_values().as_subclass(_Logged)), Received)
    assert "detach" in _Logged.seen


def test_a_tensor_with_its_negative_bit_set_cannot_be_read():
    with pytest.raises(RuntimeError, match="negative bit"):
        to_received(torch.ones(3)._neg_view())


@pytest.mark.parametrize(
    "value, text",
    [
        pytest.param(torch.ones(2, dtype=torch.complex64), "dtype complex64; expected real numbers", id="complex"),
        pytest.param(torch.zeros(1_000_001, dtype=torch.int8), "1000001 elements (limit 1000000)", id="too large"),
    ],
)
def test_a_tensor_that_cannot_be_graded_is_a_bad_return(value, text):
    got = to_received(value)
    assert isinstance(got, BadReturn) and text in got.message


_READ_BOTH_WAYS = [
    pytest.param(_values, id="plain float64"),
    pytest.param(lambda: _values().float(), id="float32"),
    pytest.param(lambda: _values().half(), id="float16"),
    pytest.param(lambda: _values().bfloat16(), id="bfloat16"),
    pytest.param(lambda: _values().int(), id="int32"),
    pytest.param(lambda: _values() > 0, id="bool"),
    pytest.param(lambda: _values().t(), id="transposed view"),
    pytest.param(lambda: _values()[:, 1], id="strided slice"),
    pytest.param(lambda: _values().requires_grad_(), id="needs a gradient"),
    pytest.param(lambda: _values().as_subclass(_Logged), id="subclass"),
    pytest.param(lambda: _values().to(torch.complex64), id="complex: a bad return"),
    pytest.param(lambda: torch.zeros(MAX_ELEMENTS + 1), id="too many elements: a bad return"),
    pytest.param(lambda: torch.tensor(3.5), id="0-d"),
    pytest.param(lambda: torch.zeros(0, 3), id="empty"),
    pytest.param(lambda: np.ones(3), id="ndarray"),
    pytest.param(lambda: [1.0, 2.0], id="list"),
    pytest.param(lambda: "text", id="text: a bad return"),
]


@pytest.mark.parametrize("make", _READ_BOTH_WAYS)
def test_the_worker_s_bound_reader_reads_what_to_received_reads(make):
    """bound_to_received's shortcut (a plain CPU tensor of an allowed dtype) gives the very Received
    to_received gives (kind, dtype, device, bytes, shape, a fresh C-ordered copy), and anything else
    goes through to_received itself."""
    value = make()
    got, want = bound_to_received()(value), to_received(value)
    assert type(got) is type(want)
    if isinstance(want, BadReturn):
        assert got == want
        return
    assert (got.kind, got.dtype, got.device, got.shape) == (want.kind, want.dtype, want.device, want.shape)
    assert got.array.dtype == want.array.dtype and got.array.tobytes() == want.array.tobytes()
    assert got.array.flags["C_CONTIGUOUS"] and got.array.flags["OWNDATA"]


def test_the_worker_s_bound_reader_ignores_a_patched_tensor_class():
    """Bound before the submission is imported: a later patch of torch.Tensor's dtype or numpy()
    does not change what it reads."""
    read = bound_to_received()
    value = _values()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.Tensor, "numpy", lambda self, *a, **k: np.zeros(6))
        patch.setattr(torch.Tensor, "dtype", property(lambda self: torch.float16), raising=False)
        got = read(value)
    assert got.dtype == "float64" and got.array.tolist() == _values().tolist()
