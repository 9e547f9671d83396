"""An instructor's own reference function (:attr:`ContractFamily.INSTRUCTOR`): a spec that gives
``function.reference: FILE.py`` instead of a bundled ``function.contract``.

Its contract is built from the spec (:func:`instructor_contract`), never bundled, so this family
lists no contracts of its own. What the contract knows comes from the spec and the instructor's
function alone:

- parameters and result in any snake_case size symbols (``d_model``, ``seq``, ``n_heads``), the
  legend's ``...`` first for any number of leading dims, sizes a spec fixes (``function.sizes``:
  :attr:`Contract.fixed_sizes`), bool parameters (``dtype: bool``, never cast);
- keywords (``function.keywords``: plain ints, floats, bools, strings) passed by name on every
  call, to the instructor's function and to the graded one (:class:`InstructorOptions`);
- the golden value: the instructor's function run on float64 CPU tensors of the call's arguments
  (as the graded function received them, after the cast to the tested dtype), as a float64 array;
- no contract-specific error term: the ``close`` mode needs none, and ``ratio`` measures the
  instructor's function in the tested dtype (its floors, the dtype's ``close`` atol and one ulp
  of each entry, need none either); ``dot_bound`` has no meaning here and the spec loader refuses it;
- gradients (a worked example's upstream ``dO``): torch autograd of the float64 run.

The instructor's function is trusted code run in the grading process only (see
:mod:`attnscore.spec.reference`); nothing of it reaches a sandboxed worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths.contract import Args, Contract
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.options import Options

MEMBER = ContractFamily.INSTRUCTOR
SHARED_MASKS = False
CONTRACTS: tuple[Contract, ...] = ()
"""None bundled: each instructor contract is built from its spec (:func:`instructor_contract`)."""


class ReferenceFailed(ValueError):
    """The instructor's function raised, or returned no array of numbers, on some arguments (the
    message names the function, its file and what it raised)."""


@dataclass(frozen=True)
class InstructorOptions(Options):
    """The keywords a spec fixes for an instructor's function (``function.keywords``), by name:
    any names, each a plain value (int, float, bool, str), passed by name on every call.

    >>> options = InstructorOptions.fixed({"dim": -1})
    >>> dict(options), bool(options)
    ({'dim': -1}, True)
    """

    values: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def fixed(cls, values: Mapping[str, Any]) -> InstructorOptions:
        """The options holding ``values`` (keyword name -> plain value), sorted by name."""
        pairs = tuple(sorted(values.items()))
        return cls(given=tuple(name for name, _ in pairs), values=pairs)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.values)


class OwnReference:
    """The instructor's function as a contract's reference: called with the arguments in parameter
    order (tensors), the spec's keywords added by name (a keyword given again by the caller wins).

    Attributes:
        function: the instructor's function.
        keywords: the spec's fixed keywords.
        label: ``name (file)``, for messages.
    """

    def __init__(self, function: Callable[..., Any], keywords: Mapping[str, Any], label: str) -> None:
        self.function = function
        self.keywords = dict(keywords)
        self.label = label
        self.__name__ = getattr(function, "__name__", "reference")
        self.__qualname__ = self.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **{**self.keywords, **kwargs})

    def __repr__(self) -> str:
        return f"OwnReference({self.label})"


def _tensor(value: Any, grad: bool = False) -> torch.Tensor:
    """A float64 CPU tensor of ``value`` (a bool array stays bool)."""
    array = np.asarray(value)
    if array.dtype == np.bool_:
        return torch.as_tensor(np.array(array, order="C"))
    t = torch.tensor(np.asarray(array, dtype=np.float64))
    return t.requires_grad_(True) if grad else t


def _as_array(out: Any, label: str) -> np.ndarray:
    """``out`` (a tensor, an array, a number or a list of numbers) as a float64 array."""
    if is_tensor(out):
        return out.detach().to(device="cpu", dtype=torch.float64).numpy()
    try:
        array = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        raise ReferenceFailed(
            f"the reference {label} returned {type(out).__name__}; expected a tensor or an array of numbers"
        ) from None
    return array


def float64_output(contract: Contract, args: Args) -> np.ndarray:
    """The instructor's function run on float64 CPU tensors of ``args`` (by parameter name, bool
    masks bool), its result as a float64 array: the golden value.

    Raises:
        ReferenceFailed: the function raised (its exception type and text are in the message) or
            returned something that is not an array of numbers.
    """
    reference = contract.reference
    label = getattr(reference, "label", contract.name)
    tensors = [_tensor(args[name]) for name in contract.parameter_names]
    try:
        with torch.no_grad():
            out = reference(*tensors)
    except Exception as exc:  # noqa: BLE001 - the instructor's code: any exception is one clear message
        raise ReferenceFailed(
            f"the reference {label} raised {type(exc).__name__}: {exc} (on inputs {_shapes_text(contract, args)})"
        ) from None
    array = _as_array(out, label)
    wanted = returns_shape(contract, args)
    if wanted is not None and array.shape != wanted:
        raise ReferenceFailed(
            f"the reference {label} returned shape {_shape_text(array.shape)}, where the spec's returns "
            f"[{', '.join(contract.returns)}] gives {_shape_text(wanted)} (on inputs {_shapes_text(contract, args)})"
        )
    return array


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _shapes_text(contract: Contract, args: Args) -> str:
    """``scores (2, 4), keep (2, 4)``: the shapes of a call's arguments, for a message."""
    return ", ".join(f"{name} {_shape_text(np.shape(args[name]))}" for name in contract.parameter_names)


def returns_shape(contract: Contract, args: Args) -> tuple[int, ...] | None:
    """The result's shape the spec's ``returns`` gives for ``args``: its size symbols read off the
    parameters' shapes, ``...`` the parameters' leading dims broadcast together; None when the
    arguments do not say (a rank below the legend's, leading dims that do not broadcast).

    Example:
        >>> c = instructor_contract("f", lambda x, y: x, (("x", ("...", "n")), ("y", ("...", "m", "n"))),
        ...                         ("...", "m", "n"))
        >>> returns_shape(c, {"x": np.zeros((2, 3)), "y": np.zeros((1, 4, 3))})
        (2, 4, 3)
    """
    sizes: dict[str, int] = {}
    leads: list[tuple[int, ...]] = []
    for name, legend in contract.parameters:
        shape = tuple(np.shape(args[name]))
        named = [symbol for symbol in legend if symbol != "..."]
        if legend[:1] == ("...",):
            if len(shape) < len(named):
                return None
            leads.append(shape[: len(shape) - len(named)])
            shape = shape[len(shape) - len(named) :]
        elif len(shape) != len(named):
            return None
        for symbol, size in zip(named, shape, strict=True):
            sizes.setdefault(symbol, size)
    try:
        lead = tuple(np.broadcast_shapes(*leads)) if leads else ()
    except ValueError:
        return None
    wanted: list[int] = []
    for symbol in contract.returns:
        if symbol == "...":
            wanted.extend(lead)
        elif symbol in sizes:
            wanted.append(sizes[symbol])
        else:
            return None
    return tuple(wanted)


def instructor_contract(
    name: str,
    function: Callable[..., Any],
    parameters: tuple[tuple[str, tuple[str, ...]], ...],
    returns: tuple[str, ...],
    *,
    keywords: Mapping[str, Any] | None = None,
    sizes: Mapping[str, int] | None = None,
    bool_parameters: frozenset[str] = frozenset(),
    label: str = "",
) -> Contract:
    """The contract of an instructor's function.

    Args:
        name: the contract's name (the spec's function name).
        function: the instructor's function, called with the parameters in order and ``keywords``
            by name.
        parameters: ``(name, shape)`` pairs; a shape is a tuple of size symbols, ``"..."`` first
            for any number of leading dims.
        returns: the result's shape in the same symbols.
        keywords: fixed keywords passed by name on every call (also to the graded function).
        sizes: symbols whose size every drawn input has (:attr:`Contract.fixed_sizes`).
        bool_parameters: the parameters that are bool arrays (never cast to the tested dtype).
        label: how messages name the function (``softmax (softmax_reference.py)``).

    Example:
        >>> c = instructor_contract("double", lambda x, k: k * x, (("x", ("...", "n")),), ("...", "n"),
        ...                         keywords={"k": 2.0})
        >>> c.golden({"x": np.array([1.0, -3.0])}).tolist(), dict(c.options)
        ([2.0, -6.0], {'k': 2.0})
    """
    keywords = dict(keywords or {})
    reference = OwnReference(function, keywords, label or name)
    contract = Contract(
        name=name,
        family=MEMBER,
        parameters=tuple((n, tuple(shape)) for n, shape in parameters),
        returns=tuple(returns),
        reference=reference,
        golden_fn=lambda a: float64_output(contract, a),
        # no error term of its own: close needs none, ratio measures the reference in the tested dtype
        error_fn=lambda a: (1, np.zeros(())),
        bool_parameters=frozenset(bool_parameters),
        bound_text="u·|golden|",
        options=InstructorOptions.fixed(keywords),
        fixed_sizes=tuple(sorted((dict(sizes or {})).items())),
    )
    return contract


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """torch autograd of the instructor's function run in float64 on ``args``, with upstream
    ``d_out``: one float64 gradient per float parameter (zeros where the output does not depend on it).

    Raises:
        ReferenceFailed: the function raised, or its output is not differentiable.
    """
    reference = contract.reference
    label = getattr(reference, "label", contract.name)
    names = [n for n in contract.parameter_names if n not in contract.bool_parameters]
    tensors = {n: _tensor(args[n], grad=n in names) for n in contract.parameter_names}
    try:
        with torch.enable_grad():
            out = reference(*tensors.values())
            if not is_tensor(out) or not out.requires_grad:
                raise ReferenceFailed(f"the reference {label} returned no differentiable tensor for a backward call")
            out.backward(torch.as_tensor(np.asarray(d_out, dtype=np.float64)).reshape(out.shape))
    except ReferenceFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - the instructor's code: any exception is one clear message
        raise ReferenceFailed(f"the reference {label} raised {type(exc).__name__} in its backward: {exc}") from None
    return {
        n: (t.grad if t.grad is not None else torch.zeros_like(t)).detach().numpy()
        for n, t in tensors.items()
        if n in names
    }


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """No closed form to bound: each gradient entry's scale is its own magnitude plus the largest
    magnitude of that gradient, over sums as long as the longest last axis of the inputs (what the
    rules other than ``close`` multiply by ``u``; ``close`` reads none of it)."""
    grads = gradients(contract, args, d_out)
    n = max((int(np.shape(args[p])[-1]) for p in contract.parameter_names if np.ndim(args[p]) >= 1), default=1)
    scales = {}
    for name, g in grads.items():
        magnitude = np.abs(np.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0))
        scales[name] = magnitude + np.max(magnitude, initial=0.0)
    return n, scales


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: an instructor's function is not a variant of general attention (as far as we know)."""
    return None


unused_keys = no_unused_keys
attention_changed = not_general_attention
