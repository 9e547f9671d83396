"""Tests for reading a returned tensor as plain data (attnscore.boundary.outputs.to_received)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.boundary.outputs import BadReturn, Received, ReturnKind, to_received


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
