"""Memory layouts: the same input values handed over as a non-contiguous view.

Real callers pass views, not fresh contiguous tensors: ``K.transpose(-2, -1)`` of a stored
``Kᵀ``, every other column of an interleaved buffer (``x[..., 1::2]``), a key shared by a batch
through ``expand`` (stride 0). Code that reads a tensor's storage as if it were contiguous, or
calls ``.view`` on an input, is wrong for those callers. The ``non_contiguous_inputs`` property
makes each call with every tensor argument in one of these layouts:

``transposed``
    the storage holds the array with its last two axes swapped; the view swaps them back
    (strides ``(..., 1, n)``). Needs two axes of size > 1, else ``sliced`` is used.
``sliced``
    the storage holds twice as many columns, the array's values at the odd positions and a
    poison value (NaN; for a bool mask, the negated entry) at the even ones; the view is
    ``storage[..., 1::2]`` (last stride 2, storage offset 1).
``expanded``
    the array's values are the same along its first axis of size > 1 (:func:`expand_values`
    makes them so before the golden value is computed), and the storage holds one slice; that
    axis has stride 0. With no axis of size > 1, ``sliced`` is used.

A layout is only a way of handing over values: the golden value and the allowed error come
from the values, which are the same in every layout.

An optional argument (a mask a spec marks ``optional``) may also be handed over as no value at all
(:data:`HANDOVERS`): ``omitted``, left out of the call so that the implementation's default
applies, or ``none``, passed as None. Its values in the call are then what either means (every
key kept), and no tensor is made of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LAYOUTS",
    "HANDOVERS",
    "OMIT",
    "PASS_NONE",
    "Strided",
    "effective_layout",
    "expand_axis",
    "expand_values",
    "strided_form",
    "describe_layout",
]

LAYOUTS = ("transposed", "sliced", "expanded")
OMIT = "omitted"
PASS_NONE = "none"
HANDOVERS = (OMIT, PASS_NONE)
"""How an optional argument may be handed over without a value: left out, or passed as None."""


@dataclass(frozen=True)
class Strided:
    """How to build a view: ``storage.as_strided(shape, strides, offset)`` (in elements)."""

    storage: np.ndarray  # 1-D, contiguous, the array's dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


def expand_axis(shape: tuple[int, ...]) -> int | None:
    """The axis an ``expanded`` view repeats (stride 0): the first of size > 1, or None."""
    return next((axis for axis, n in enumerate(shape) if n > 1), None)


def effective_layout(layout: str, shape: tuple[int, ...]) -> str:
    """The layout actually used for an array of ``shape`` (``transposed`` and ``expanded`` need
    axes of size > 1; ``sliced`` always applies)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if layout == "transposed" and (len(shape) < 2 or shape[-1] < 2 or shape[-2] < 2):
        return "sliced"
    if layout == "expanded" and expand_axis(shape) is None:
        return "sliced"
    return layout


def expand_values(array: np.ndarray, layout: str) -> np.ndarray:
    """``array`` with the values an ``expanded`` view can hold (first slice repeated along the
    first axis of size > 1); other layouts return it unchanged."""
    array = np.asarray(array)
    if effective_layout(layout, array.shape) != "expanded":
        return array
    axis = expand_axis(array.shape)
    first = np.take(array, [0], axis=axis)
    return np.ascontiguousarray(np.broadcast_to(first, array.shape))


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def strided_form(array: np.ndarray, layout: str) -> Strided:
    """The storage and strides of ``array`` handed over in ``layout``.

    Raises:
        ValueError: ``expanded`` for an array whose values differ along the expanded axis
            (call :func:`expand_values` first), or an unknown layout.
    """
    array = np.asarray(array)
    shape = tuple(int(n) for n in array.shape)
    kind = effective_layout(layout, shape)
    if kind == "transposed":
        stored = np.ascontiguousarray(np.swapaxes(array, -1, -2))
        strides = list(_contiguous_strides(stored.shape))
        strides[-1], strides[-2] = strides[-2], strides[-1]
        return Strided(stored.reshape(-1), shape, tuple(strides), 0)
    if kind == "expanded":
        axis = expand_axis(shape)
        assert axis is not None
        first = np.take(array, [0], axis=axis)
        if not np.array_equal(np.broadcast_to(first, shape), array, equal_nan=array.dtype.kind == "f"):
            raise ValueError("an expanded layout needs equal values along the expanded axis (see expand_values)")
        strides = list(_contiguous_strides(first.shape))
        strides[axis] = 0
        return Strided(np.ascontiguousarray(first).reshape(-1), shape, tuple(strides), 0)
    # sliced: values at the odd positions of twice as many columns, poison at the even ones
    width = shape[-1] if shape else 1
    base = array.reshape(shape[:-1] + (width,)) if shape else array.reshape(1)
    poison = ~base if base.dtype == np.bool_ else np.full_like(base, np.nan)
    stored = np.stack([poison, base], axis=-1).reshape(base.shape[:-1] + (2 * width,))
    strides = list(_contiguous_strides(stored.shape))
    strides[-1] = 2
    return Strided(np.ascontiguousarray(stored).reshape(-1), shape, tuple(strides) if shape else (), 1)


def describe_layout(name: str, layout: str, shape: tuple[int, ...]) -> str:
    """How ``name`` was handed over, as the code that builds such a view (for feedback)."""
    if layout == OMIT:
        return f"{name} was left out of the call (your default for it applies)"
    if layout == PASS_NONE:
        return f"{name} was passed as None"
    kind = effective_layout(layout, tuple(shape))
    if kind == "transposed":
        return f"{name} was a transposed view ({name}.mT.contiguous().mT: strides not row-major)"
    if kind == "expanded":
        axis = expand_axis(tuple(shape))
        return f"{name} was an expanded view (axis {axis} has stride 0, as after .expand())"
    return f"{name} was a sliced view (every other column of a wider tensor, as x[..., 1::2])"
