"""Calls: how arguments reach an implementation, and how a raised exception is described.

Shared by the in-process runner (:mod:`attnscore.check.runner`) and the sandboxed worker
(:mod:`attnscore.boundary.worker`), which imports only this module, :mod:`attnscore.boundary.outputs`,
:mod:`attnscore.boundary.dtypes` and :mod:`attnscore.boundary.wire` from the project: nothing here knows specs,
references or golden values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.boundary import dtypes
from attnscore.boundary.lazy_torch import torch


def __getattr__(name: str) -> Any:
    """``TORCH_DTYPES`` (re-exported from :mod:`attnscore.boundary.dtypes`: the worker imports it
    from here), made on first use so that importing this module does not import torch."""
    if name == "TORCH_DTYPES":
        return dtypes.TORCH_DTYPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "OMITTED",
    "to_torch",
    "describe_exception",
    "exception_text",
    "type_name",
    "inspect_call",
    "aliased_inputs",
    "tensor_layout",
    "argument_value",
    "bound_python_ints",
    "bound_trailing_nones",
]


class _Omitted:
    """The marker of an argument left out of a call (:data:`OMITTED`)."""

    _made = False

    def __new__(cls) -> _Omitted:
        if cls._made:
            raise TypeError("OMITTED is the only _Omitted")
        cls._made = True
        return super().__new__(cls)

    def __repr__(self) -> str:
        return "OMITTED"

    def __reduce__(self) -> str:
        return "OMITTED"  # pickled by name: still the one marker after a round trip


OMITTED = _Omitted()
"""In the positional arguments a runner hands a bound function
(:meth:`attnscore.maths.contract.Contract.binding`), the place of an optional argument the call
leaves out, so that the implementation's default applies (``attention(Q, K, V)`` for a spec whose
``mask`` is optional); the binding drops it before calling the implementation."""


def to_torch(array: np.ndarray, dtype: str, device: str = "cpu", layout: str | None = None) -> torch.Tensor:
    """A fresh tensor of ``dtype`` on ``device`` holding ``array``'s values (bool arrays stay bool masks,
    int32 arrays stay int32: integer parameters such as ``cu_seqlens``).

    With ``layout`` (see :mod:`attnscore.boundary.layouts`) the tensor is a non-contiguous view with the
    same values: transposed, sliced or expanded.
    """
    arr = np.asarray(array)
    if arr.dtype == np.bool_ or arr.dtype == np.int32:
        torch_dtype = torch.bool if arr.dtype == np.bool_ else torch.int32
    else:
        torch_dtype = dtypes.TORCH_DTYPES[dtype]
    if layout is None:
        return torch.tensor(arr, dtype=torch_dtype, device=device)
    from attnscore.boundary.layouts import strided_form

    form = strided_form(arr, layout)
    storage = torch.tensor(form.storage, dtype=torch_dtype, device=device)
    return storage.as_strided(form.shape, form.strides, form.offset)


def argument_value(t: torch.Tensor) -> object:
    """What the implementation receives for the input tensor ``t``: a 0-d int32 tensor (an integer
    parameter of shape ``()``, such as ``max_seqlen_q``) as the Python ``int`` it holds, as
    ``flash_attn_varlen_func`` takes it; any other tensor as it is."""
    if t.dtype == torch.int32 and t.ndim == 0:
        return int(t.item())
    return t


def bound_python_ints() -> Any:
    """``wrap(function, positions, names)``: ``function`` called with its positional arguments at
    ``positions`` and its keyword arguments ``names`` (0-d int32 tensors) turned into Python ints,
    as :func:`argument_value` does. Every name it uses is held in its closure when this is called
    (the worker calls it before the submission is imported, so patching ``int``, ``torch`` or this
    module afterwards cannot change what the function receives)."""
    item, as_int, listed, enumerated, mapping = torch._C.TensorBase.item, int, list, enumerate, dict

    def wrap(function: Any, positions: frozenset[int], names: frozenset[str]) -> Any:
        if not positions and not names:
            return function

        def call(*args: Any, **kwargs: Any) -> Any:
            given = listed(args)
            for i, a in enumerated(given):
                if i in positions:
                    given[i] = as_int(item(a))
            named = mapping(kwargs)
            for n in names:
                if n in named:
                    named[n] = as_int(item(named[n]))
            return function(*given, **named)

        return call

    return wrap


def bound_trailing_nones() -> Any:
    """``wrap(function, count)``: ``function`` called with ``count`` None arguments after the
    positional ones it is given (optional masks a call passes as None, ``f(Q, K, V, None)``), its
    keyword arguments as given; ``function`` itself for ``count`` 0. Built before the submission is
    imported (the worker's rule for everything it uses afterwards)."""
    repeated = tuple

    def wrap(function: Any, count: int) -> Any:
        if not count:
            return function
        nones = repeated(None for _ in range(count))

        def call(*args: Any, **kwargs: Any) -> Any:
            return function(*args, *nones, **kwargs)

        return call

    return wrap


def type_name(exc: BaseException) -> str:
    """The exception's class name as the interpreter knows it (a metaclass cannot disguise it)."""
    try:
        name = type.__dict__["__name__"].__get__(type(exc), type)
    except BaseException:  # noqa: BLE001 - cannot happen for real classes; never let it escape
        return "Exception"
    return name if isinstance(name, str) else "Exception"


def exception_text(exc: BaseException) -> str | None:
    """First line of ``str(exc)`` (at most 300 characters); ``""`` when empty; ``None`` when the
    exception's ``__str__`` raises or returns something that is not text."""
    try:
        raw = exc.__str__()
        if not isinstance(raw, str):
            return None
        text = str.strip(raw)
        text = text.splitlines()[0] if text else ""
    except BaseException:  # noqa: BLE001 - a hostile __str__ is the submission's, not ours
        return None
    return text[:297] + "..." if len(text) > 300 else text


def describe_exception(exc: BaseException) -> str:
    """``"raised ValueError: message"`` (first line of the message, at most 300 characters).

    An exception whose ``__str__`` raises or returns a non-string is still described, by its type:
    ``"raised BadError (its message could not be shown: __str__ failed)"``.
    """
    text = exception_text(exc)
    if text is None:
        return f"raised {type_name(exc)} (its message could not be shown: __str__ failed)"
    return f"raised {type_name(exc)}" + (f": {text}" if text else "")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _span(value: object) -> tuple[int, int] | None:
    """``(start, end)`` addresses of the memory behind a tensor's storage or an ndarray's data."""
    if isinstance(value, torch.Tensor) and value.numel():
        storage = value.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    if isinstance(value, np.ndarray) and value.size:
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        start = base.__array_interface__["data"][0]
        return start, start + base.nbytes
    return None


def _shares_memory(out: object, t: torch.Tensor) -> bool:
    """Whether ``out`` (a tensor, or an ndarray such as ``S.numpy()``) overlaps ``t``'s memory."""
    try:
        a, b = _span(out), _span(t)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - storages that cannot be inspected
        return False
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


def tensor_layout(t: torch.Tensor) -> tuple[object, ...]:
    """What an in-place metadata change alters: ``(shape, strides, storage offset, dtype, data
    pointer)`` (``K.transpose_()``, ``v.unsqueeze_()``, ``x.set_(...)`` change it, values or not)."""
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.data_ptr())


def inspect_call(
    names: list[str],
    tensors: list[torch.Tensor],
    copies: list[torch.Tensor],
    value: object,
    layouts: list[tuple[object, ...]] | None = None,
) -> dict[str, list[str]]:
    """Which inputs a call changed in place (``"mutated"``: values, or with ``layouts`` taken by
    :func:`tensor_layout` before the call also shape and strides) and which the output shares
    memory with (``"aliased"``), given the input tensors and copies made before the call."""
    before = layouts if layouts is not None else [None] * len(tensors)
    return {
        "mutated": [
            n
            for n, t, c, lay in zip(names, tensors, copies, before, strict=False)
            if not _same_bits(t, c) or (lay is not None and tensor_layout(t) != lay)
        ],
        "aliased": aliased_inputs(names, tensors, value),
    }


def aliased_inputs(names: list[str], tensors: list[torch.Tensor], value: object) -> list[str]:
    """The names of the inputs whose memory the output ``value`` shares (``return K`` or a view of it)."""
    return [n for n, t in zip(names, tensors, strict=False) if _shares_memory(value, t)]
