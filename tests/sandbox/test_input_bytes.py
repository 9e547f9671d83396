"""The bytes the grader sends the worker for each input are torch's own, made without torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnscore.boundary.calls import to_torch
from attnscore.check.cases import cast
from attnscore.sandbox.input_watch import input_bytes


def _torch_bytes(array: np.ndarray, kind: str) -> bytes:
    tensor = to_torch(array, kind).contiguous().reshape(-1)
    return tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b""


_FLOATS = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    elements=st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
)


@pytest.mark.parametrize("kind", ["float64", "float32", "float16", "bfloat16"])
@settings(max_examples=150, deadline=None)
@given(values=_FLOATS, cast_first=st.booleans())
def test_float_inputs_are_torchs_bytes(kind, values, cast_first):
    """As built cases hand them over (already rounded to the dtype) or raw float64 (rounded here),
    with infinities, NaN, subnormals and values out of float16's range."""
    array = cast(values, kind) if cast_first else values
    assert input_bytes(array, kind) == _torch_bytes(array, kind)


@pytest.mark.parametrize(("kind", "dtype"), [("bool", np.bool_), ("int32", np.int32)])
def test_masks_and_integer_parameters_are_torchs_bytes(kind, dtype):
    for array in (np.array([[True, False], [False, True]]), np.array([0, 2, 5]), np.array(7), np.zeros((0, 3))):
        typed = np.asarray(array).astype(dtype)
        assert input_bytes(typed, kind) == _torch_bytes(typed, kind)


def test_a_strided_storage_is_sent_as_is():
    """A layout's storage (transposed, padded) goes over as its own contiguous bytes."""
    storage = cast(np.arange(12, dtype=np.float64).reshape(3, 4).T, "bfloat16")
    assert input_bytes(storage, "bfloat16") == _torch_bytes(np.ascontiguousarray(storage), "bfloat16")
