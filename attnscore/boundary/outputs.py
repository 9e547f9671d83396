"""Turning whatever an implementation returned into plain, trustworthy data.

The implementation under test may return a tensor, a numpy array, a nested list or a number.
:func:`to_received` copies it into a fresh, plain ``numpy.ndarray`` of a known dtype (the base
classes' methods are used, so a subclass's overrides are not consulted), and records what kind of
object it was. Everything after this point (comparison, diagnosis, reports) only sees
:class:`Received`, never the original object.

In a sandboxed grading run this runs inside the worker process; the grader then re-validates the
plain data it receives (see :mod:`attnscore.boundary.wire`), so a lying object can at most choose the
numbers it sends.
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.verdict import Verdict

__all__ = [
    "Received",
    "BadReturn",
    "CallFailure",
    "Outcome",
    "ReturnKind",
    "RETURN_KINDS",
    "to_received",
    "bound_to_received",
    "ALLOWED_DTYPES",
    "MAX_ELEMENTS",
]

# dtypes that may cross the boundary; bfloat16 travels as float32 with dtype "bfloat16".
ALLOWED_DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)
MAX_ELEMENTS = 1_000_000


class ReturnKind(str, enum.Enum):
    """The closed set of kinds of returned object that can be graded (:attr:`Received.kind`).

    A spec's ``returns.accept`` lists some of them (all of them by default); the value is the
    word used in specs, records and feedback (``str(ReturnKind.TENSOR)`` is ``"tensor"``).
    """

    TENSOR = "tensor"
    NDARRAY = "ndarray"
    LIST = "list"
    NUMBER = "number"

    def __str__(self) -> str:
        return self.value


RETURN_KINDS: tuple[str, ...] = tuple(kind.value for kind in ReturnKind)
"""Every return kind's word, in order: ``("tensor", "ndarray", "list", "number")``."""


@dataclass(frozen=True)
class Received:
    """A returned value as plain data.

    Attributes:
        kind: a :class:`ReturnKind` (``"tensor"``, ``"ndarray"``, ``"list"`` or ``"number"``; the
            word is accepted and turned into the member, and a word outside the set raises
            ValueError).
        dtype: the returned dtype's name (``"bfloat16"`` is kept as a name; the array is float32).
        device: ``"cpu"``, ``"cuda:0"``, ... (``"cpu"`` for non-tensors).
        array: a plain C-contiguous numpy array holding the values.
    """

    kind: ReturnKind
    dtype: str
    device: str
    array: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ReturnKind):
            object.__setattr__(self, "kind", ReturnKind(self.kind))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)


@dataclass(frozen=True)
class BadReturn:
    """The returned object could not be turned into numbers; ``message`` says why."""

    message: str


def _from_tensor(value: Any) -> Received | BadReturn:
    tensor: Any = torch.Tensor  # its descriptors and methods, called on the value (a subclass's are not consulted)
    # a plain tensor that needs no gradient is read as it is: detach() would give the same values
    # (a subclass, or a tensor that needs a gradient, goes through it as always)
    plain = type(value) is tensor and not tensor.requires_grad.__get__(value)
    t = value if plain else tensor.detach(value)
    on_cpu = tensor.is_cpu.__get__(t)
    device = "cpu" if on_cpu else str(tensor.device.__get__(t))
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in ALLOWED_DTYPES:
        return BadReturn(f"returned a tensor of dtype {dtype}; expected real numbers (a float tensor)")
    if tensor.numel(t) > MAX_ELEMENTS:
        return BadReturn(f"returned a tensor with {tensor.numel(t)} elements (limit {MAX_ELEMENTS})")
    if not on_cpu:
        t = tensor.cpu(t)
    if dtype == "bfloat16":
        t = tensor.float(t)
    # one copy, in C order, of the contiguous tensor's values
    return Received(ReturnKind.TENSOR, dtype, device, np.array(tensor.numpy(tensor.contiguous(t)), order="C"))


def _item_shape(item: object) -> tuple[int, ...] | None:
    """The shape of a tensor or ndarray item; None for anything else (numbers, nested lists)."""
    try:
        if isinstance(item, torch.Tensor):
            return tuple(torch.Tensor.size(item))
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if isinstance(item, np.ndarray):
        return tuple(np.ndarray.view(item, np.ndarray).shape)
    return None


def _shown(item: object, shape: tuple[int, ...] | None) -> str:
    """One item of a returned tuple or list, in a few words: its shape, ``None``, or its type."""
    if shape is not None:
        return str(shape)
    if item is None:
        return "None"
    return "a number" if isinstance(item, int | float | complex) and not isinstance(item, bool) else type(item).__name__


def _several_results(value: list | tuple) -> BadReturn | None:
    """Explain a tuple of arrays (``return out, weights``) or a list of arrays of different shapes.

    A list of equal-shape rows (``[Q[i] @ K.T for i ...]``) and a sequence of numbers or 0-d
    tensors are one result, and pass through.
    """
    shapes = [_item_shape(item) for item in value[:50]]
    arrays = [s for s in shapes if s]
    if not arrays:
        return None
    kind = type(value).__name__
    listed = " and ".join(_shown(item, s) for item, s in zip(value[:3], shapes[:3], strict=False))
    listed += " ..." if len(value) > 3 else ""
    if kind == "tuple":
        return BadReturn(
            f"returned a tuple of {len(value)} values (shapes {listed}); return only the output, "
            "one tensor (e.g. `return out`, not `return out, weights`)"
        )
    if len(set(shapes)) > 1:
        return BadReturn(
            f"returned a list of {len(value)} values with different shapes ({listed}); return only the output, "
            "one tensor"
        )
    return None


def to_received(value: object) -> Received | BadReturn:
    """Copy ``value`` into a :class:`Received`, or explain why it is not a numeric result."""
    try:
        if isinstance(value, torch.Tensor):
            return _from_tensor(value)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if isinstance(value, np.ndarray):
        arr = np.array(np.ndarray.view(value, np.ndarray), copy=True)
        kind = ReturnKind.NDARRAY
    elif isinstance(value, (bool, np.bool_)):
        return BadReturn(f"returned a boolean ({bool(value)}); expected numbers")
    elif isinstance(value, numbers.Real) and not isinstance(value, np.generic):
        try:
            f = float(value)  # Python int/float and numbers.Real implementers
        except OverflowError:
            return BadReturn("returned an integer too large for a float")
        arr, kind = np.array(f, dtype=np.float64), ReturnKind.NUMBER
    elif isinstance(value, np.generic):
        arr, kind = np.array(value, copy=True), ReturnKind.NUMBER
    elif isinstance(value, (list, tuple)):
        several = _several_results(value)
        if several is not None:
            return several
        try:
            arr = np.array(value, dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - ragged lists, tensors needing grad, exotic dtypes...
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            return BadReturn(f"returned a {type(value).__name__} that is not a rectangular array of numbers ({reason})")
        kind = ReturnKind.LIST
    else:
        return BadReturn(f"returned {type(value).__name__}; expected a tensor, array, list or number")
    name = arr.dtype.name
    if name not in ALLOWED_DTYPES:
        if arr.dtype.kind == "f":
            return BadReturn(
                f"returned values of dtype {name}, which cannot be graded; return float32 or float64 values"
            )
        return BadReturn(f"returned values of dtype {name}; expected real numbers")
    if arr.size > MAX_ELEMENTS:
        return BadReturn(f"returned {arr.size} elements (limit {MAX_ELEMENTS})")
    return Received(kind, name, "cpu", np.array(arr, order="C"))


def bound_to_received() -> Any:
    """:func:`to_received`, with a shortcut for what most calls return (a plain CPU tensor of an
    allowed dtype that needs no gradient, within :data:`MAX_ELEMENTS`): the same
    :class:`Received`, read with torch's own methods and numpy's copy held in its closure. Built
    before the submission is imported (the worker's rule for everything it uses afterwards);
    anything else goes through :func:`to_received` as always."""
    import torch as real_torch

    base = real_torch._C.TensorBase
    plain, tensor_kind, made = real_torch.Tensor, ReturnKind.TENSOR, Received
    names = {getattr(real_torch, name): name for name in ALLOWED_DTYPES if name != "bfloat16"}
    slots = base.__dict__  # the descriptors themselves (a subclass's properties are not consulted)
    dtype_of, needs_grad, on_cpu = slots["dtype"].__get__, slots["requires_grad"].__get__, slots["is_cpu"].__get__
    count, contiguous, as_numpy = base.numel, base.contiguous, base.numpy
    copied, kind, most = np.array, type, MAX_ELEMENTS
    slow = to_received

    def read(value: Any) -> Received | BadReturn:
        if kind(value) is plain and not needs_grad(value) and on_cpu(value):
            name = names.get(dtype_of(value))
            if name is not None and count(value) <= most:
                return made(tensor_kind, name, "cpu", copied(as_numpy(contiguous(value)), order="C"))
        return slow(value)

    return read


@dataclass(frozen=True, init=False)
class CallFailure:
    """A call that produced no comparable value: the verdict it earns and a message.

    Attributes:
        verdict: a :class:`~attnscore.boundary.verdict.Verdict` (exception, timeout, crashed, ...);
            its word (``"timeout"``) is accepted too and turned into the member.
        message: what happened, in words (already cleaned when it came from the worker).
        scope: ``"call"`` for this call only; ``"submission"`` when the whole submission failed
            (import error, missing function), so every call fails the same way.
        exception: for an exception verdict, the exception's type name (``"ValueError"``), else "".

    Raises:
        ValueError: ``verdict`` is not one of the verdicts (``'slow' is not a valid Verdict``).
    """

    verdict: Verdict
    message: str
    scope: str
    exception: str

    def __init__(self, verdict: Verdict | str, message: str, scope: str = "call", exception: str = "") -> None:
        object.__setattr__(self, "verdict", Verdict(verdict))
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "exception", exception)


Outcome = Received | CallFailure
