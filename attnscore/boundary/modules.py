"""An ``nn.Module`` handed in: built per call, its weights drawn by the grader, called through
``torch.func.functional_call``.

A spec's ``function.module`` (read by :mod:`attnscore.spec.module`) grades a ``torch.nn.Module``
subclass instead of a function. The contract still takes every tensor as an input (bilinear
scores ``Q, K, W``); the spec says which of them are the module's weights and under which
parameter names (``W: weight``, ``W_q: q_proj.weight``), the constructor's keyword arguments
(plain values, the size of a legend symbol in the call's inputs, or the value of a scalar integer
input such as ``num_heads``), and in which order the other inputs go to ``forward``.
:class:`ModuleConfig` is that, as the grader sends it with every call (``CallRequest.module``);
:func:`module_call` turns the class into a function of the contract's inputs, so the worker and
the in-process runner call it, inspect it and run its backward pass as they do any function:
gradients reach the weights as they reach any input.

Each call builds the module anew with the call's constructor arguments, moves it to the inputs'
device and dtype (``module.to``: floating buffers too), lets a lazy module (``nn.LazyLinear``)
create its parameters with one forward call on copies of the inputs, compares its parameters
with the stated names and shapes (all missing, extra and mis-shaped ones together are one
:attr:`Verdict.WRONG_PARAMETERS`, never a traceback), then calls
``functional_call(module, {name: weight}, forward_inputs, options)``. Buffers stay the module's own.
The parameter check says whether the module has the interface the spec states; it is no security
boundary (the values are judged by the grader, against its own golden values).

Every failure of the module's own making is a :class:`ModuleFailure`: the runner's verdict, a
bounded message and the name of the exception the submission raised, if any (what a hidden case may
show). This module is part of the worker's world: it imports nothing of attnscore outside
``attnscore.boundary``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# the worker's torch, bound before any submission runs (a replaced sys.modules["torch"] is not it)
from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.verdict import Verdict

__all__ = [
    "InitValue",
    "ModuleConfig",
    "ModuleFailure",
    "SizeOf",
    "ValueOf",
    "class_problem",
    "module_call",
    "parameter_problem",
]

InitValue = bool | int | float | str | None | tuple[bool | int | float | str | None, ...]
"""A constructor argument written in the spec: a scalar, a string, None, or a tuple of those."""

_MOST_INIT = 32
"""Most constructor arguments a config may carry (the wire refuses more)."""
_MOST_SHOWN = 12
"""Most parameters a message names one by one."""


@dataclass(frozen=True)
class SizeOf:
    """A constructor argument that is the size of a legend symbol in the call's inputs
    (``{size: d_q}`` in the spec): axis ``axis`` (negative, counted from the last) of input
    ``parameter``; ``symbol`` is the legend's name, for messages."""

    parameter: str
    axis: int
    symbol: str = ""


@dataclass(frozen=True)
class ValueOf:
    """A constructor argument that is the value of a scalar integer input of the call
    (``{value: num_heads}`` in the spec): that input then goes to the constructor, not to ``forward``."""

    parameter: str


@dataclass(frozen=True)
class ModuleConfig:
    """How a module handed in is built and called (a spec's ``function.module``).

    Attributes:
        init: the constructor's keyword arguments, in the spec's order: name -> an
            :data:`InitValue`, or a :class:`SizeOf` or :class:`ValueOf` resolved per call.
        weights: contract parameter -> the module's parameter name (its ``state_dict`` key,
            ``q_proj.weight``), in the spec's order.
        forward: the order in which the other parameters go to ``forward``; empty: the call's own
            order (the contract's).

    Example:
        >>> config = ModuleConfig((("d_q", SizeOf("W", -2, "d_q")), ("bias", False)), (("W", "weight"),))
        >>> config.init_kwargs({"W": (3, 2)})
        {'d_q': 3, 'bias': False}
        >>> ModuleConfig.from_json(config.to_json()) == ModuleConfig(
        ...     (("d_q", SizeOf("W", -2)), ("bias", False)), (("W", "weight"),))
        True
    """

    init: tuple[tuple[str, InitValue | SizeOf | ValueOf], ...] = ()
    weights: tuple[tuple[str, str], ...] = ()
    forward: tuple[str, ...] = ()

    @property
    def weight_names(self) -> dict[str, str]:
        """Contract parameter -> the module's parameter name."""
        return dict(self.weights)

    @property
    def init_inputs(self) -> frozenset[str]:
        """The inputs the constructor takes by value (:class:`ValueOf`): not passed to ``forward``."""
        return frozenset(v.parameter for _, v in self.init if isinstance(v, ValueOf))

    def init_kwargs(
        self, shapes: Mapping[str, tuple[int, ...]], values: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The constructor's keyword arguments for a call whose inputs have ``shapes`` (name -> shape)
        and ``values`` (name -> the input: a :class:`ValueOf` takes it as a Python int).

        Raises:
            ValueError: a size is asked of an input the call lacks, or of an axis it does not have; a
                value of an input the call lacks or that is no whole number.
        """
        kwargs: dict[str, Any] = {}
        for name, value in self.init:
            if isinstance(value, ValueOf):
                kwargs[name] = _whole(name, value.parameter, (values or {}).get(value.parameter))
            elif isinstance(value, SizeOf):
                shape = shapes.get(value.parameter)
                if shape is None or not -len(shape) <= value.axis < 0:
                    raise ValueError(
                        f"expected input {value.parameter} with an axis {value.axis} for {name}, found "
                        f"{'no such input' if shape is None else f'shape {tuple(shape)}'}"
                    )
                kwargs[name] = int(shape[value.axis])
            else:
                kwargs[name] = list(value) if isinstance(value, tuple) else value
        return kwargs

    def to_json(self) -> dict[str, Any]:
        """The config as JSON data (the wire's ``module`` field of a call)."""
        init: dict[str, Any] = {}
        for name, value in self.init:
            if isinstance(value, SizeOf):
                init[name] = {"size": [value.parameter, value.axis]}
            elif isinstance(value, ValueOf):
                init[name] = {"value": value.parameter}
            else:
                init[name] = list(value) if isinstance(value, tuple) else value
        return {"init": init, "weights": dict(self.weights), "forward": list(self.forward)}

    @classmethod
    def from_json(cls, raw: object) -> ModuleConfig:
        """A config read back from :meth:`to_json`'s form.

        Raises:
            ValueError: ``raw`` is not of that form (what was expected, what was found).
        """
        if not isinstance(raw, dict) or set(raw) - {"init", "weights", "forward"}:
            raise ValueError(f"expected a module config of init, weights and forward, found {str(raw)[:80]}")
        init_raw, weights_raw, forward_raw = raw.get("init", {}), raw.get("weights", {}), raw.get("forward", [])
        if not isinstance(init_raw, dict) or len(init_raw) > _MOST_INIT:
            raise ValueError(f"expected init as at most {_MOST_INIT} keyword arguments, found {str(init_raw)[:80]}")
        init = tuple((_identifier(k, "an init keyword"), _init_value(k, v)) for k, v in init_raw.items())
        if not isinstance(weights_raw, dict) or not all(isinstance(v, str) for v in weights_raw.values()):
            raise ValueError(f"expected weights as parameter -> module name, found {str(weights_raw)[:80]}")
        weights = tuple((_identifier(k, "a weight's parameter"), _dotted(v)) for k, v in weights_raw.items())
        if not isinstance(forward_raw, list):
            raise ValueError(f"expected forward as a list of parameter names, found {str(forward_raw)[:80]}")
        forward = tuple(_identifier(n, "a forward parameter") for n in forward_raw)
        return cls(init, weights, forward)


def _identifier(name: object, what: str) -> str:
    if isinstance(name, str) and name.isidentifier() and len(name) <= 100:
        return name
    raise ValueError(f"expected {what} as an identifier, found {str(name)[:80]!r}")


def _dotted(name: str) -> str:
    parts = name.split(".")
    if parts and len(name) <= 300 and parts[0].isidentifier() and all(p.isidentifier() or p.isdigit() for p in parts):
        return name
    raise ValueError(f"expected a module parameter name such as q_proj.weight, found {name[:80]!r}")


def _whole(name: str, parameter: str, value: object) -> int:
    """``value`` (a Python int, or a 0-d integer tensor) as an int, for constructor argument ``name``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and not value.dtype.is_floating_point and value.dtype != torch.bool:
            return int(value.item())
    elif getattr(value, "shape", None) == () and getattr(getattr(value, "dtype", None), "kind", "") in ("i", "u"):
        return int(value.item())  # type: ignore[attr-defined]  # a numpy integer (a reproduction's argument)
    found = "no such input" if value is None else type(value).__name__
    raise ValueError(f"expected input {parameter} as a whole number for {name}, found {found}")


def _init_value(name: str, value: object) -> InitValue | SizeOf | ValueOf:
    scalar = (bool, int, float, str)
    if value is None or isinstance(value, scalar):
        return value
    if isinstance(value, list) and len(value) <= 64 and all(v is None or isinstance(v, scalar) for v in value):
        return tuple(value)
    if isinstance(value, dict) and set(value) == {"size"}:
        size = value["size"]
        if (
            isinstance(size, list)
            and len(size) == 2
            and isinstance(size[0], str)
            and size[0].isidentifier()
            and isinstance(size[1], int)
            and not isinstance(size[1], bool)
            and -64 <= size[1] < 0
        ):
            return SizeOf(size[0], size[1])
    if isinstance(value, dict) and set(value) == {"value"} and isinstance(value["value"], str):
        return ValueOf(_identifier(value["value"], "an init input"))
    raise ValueError(
        f"expected init {name} as a value, {{size: [input, axis]}} or {{value: input}}, found {str(value)[:80]}"
    )


class ModuleFailure(Exception):
    """A call of a module handed in that failed before or outside its ``forward``: the class is no
    module, its constructor raised, its parameters are not the spec's. ``verdict`` is the case's
    (for an exception the submission raised, ``cause``, the verdict of that exception:
    :func:`attnscore.boundary.failure_texts.failure_verdict`), ``message`` the feedback (bounded, no
    traceback), ``exception`` the type name of what the submission raised, or ``""``."""

    def __init__(self, verdict: Verdict, message: str, exception: str = "", cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.verdict, self.message, self.exception, self.cause = verdict, message, exception, cause


def class_problem(obj: object, name: str) -> str | None:
    """Why ``obj`` (what the submission binds to ``name``) is not an ``nn.Module`` subclass, or None.

    >>> print(class_problem(len, "BilinearScore"))  # doctest: +NORMALIZE_WHITESPACE
    the spec grades a torch.nn.Module subclass named 'BilinearScore', found a builtin_function_or_method;
    define class BilinearScore(nn.Module) with __init__ and forward
    """
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        return None
    if isinstance(obj, torch.nn.Module):
        found = f"an instance of {type(obj).__name__[:100]} (the spec builds the module itself: bind the class)"
    elif isinstance(obj, type):
        found = f"a class that is not a torch.nn.Module subclass (its bases: {_bases(obj)})"
    elif callable(obj) and type(obj).__name__ == "function":
        found = "a function"
    else:
        found = f"a {type(obj).__name__[:100]}"
    return (
        f"the spec grades a torch.nn.Module subclass named {name!r}, found {found}; "
        f"define class {name}(nn.Module) with __init__ and forward"
    )


def _bases(cls: type) -> str:
    try:
        return ", ".join(str(b.__name__)[:60] for b in cls.__bases__[:6]) or "none"
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        return "unknown"


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _named(items: Sequence[tuple[str, Sequence[int]]]) -> str:
    from attnscore.boundary.untrusted import shown_list

    return shown_list([f"{n[:120]} {_shape_text(s)}" for n, s in items], most=_MOST_SHOWN) or "none"


def parameter_problem(
    expected: Mapping[str, tuple[int, ...]],
    found: Mapping[str, tuple[int, ...]],
    buffers: Sequence[str] = (),
    stated: Mapping[str, str] | None = None,
) -> str | None:
    """Whether a module's parameters (``found``: name -> shape) are exactly the ``expected`` ones;
    else the one message that lists expected and found names and shapes and says what differs.
    ``buffers``: the module's buffer names (a weight registered as a buffer is said to be one);
    ``stated``: module name -> the contract parameter it holds (``weight`` -> ``W``), for the text.

    >>> parameter_problem({"weight": (3, 2)}, {"weight": (3, 2)}) is None
    True
    >>> found = {"weight": (2, 3), "bias": (2,)}
    >>> print(parameter_problem({"weight": (3, 2)}, found, stated={"weight": "W"}))  # doctest: +NORMALIZE_WHITESPACE
    expected the parameters weight (3, 2) (the spec's W), found weight (2, 3), bias (2,): weight has shape (2, 3),
    not (3, 2); bias is not one of the spec's (remove it, or make it a buffer)
    >>> print(parameter_problem({"out.weight": (2, 2)}, {"o.weight": (2, 2)}))  # doctest: +NORMALIZE_WHITESPACE
    expected the parameters out.weight (2, 2), found o.weight (2, 2): out.weight is missing; o.weight is not
    one of the spec's: name it out.weight (the name the spec states)
    """
    stated = stated or {}
    wrong: list[str] = []
    missing = [n for n in expected if n not in found]
    extra = [n for n in found if n not in expected]
    for name in expected:
        if name in found and tuple(found[name]) != tuple(expected[name]):
            wrong.append(f"{name} has shape {_shape_text(found[name])}, not {_shape_text(expected[name])}")
    # one missing and one extra of the same shape: most likely a weight named differently
    renamed = (
        (missing[0], extra[0])
        if len(missing) == 1 and len(extra) == 1 and tuple(found[extra[0]]) == tuple(expected[missing[0]])
        else None
    )
    for name in missing:
        why = " (it is a buffer: register it as an nn.Parameter)" if name in buffers else ""
        wrong.append(f"{name} is missing{why}")
    if renamed is not None:
        wrong.append(f"{renamed[1][:120]} is not one of the spec's: name it {renamed[0]} (the name the spec states)")
    elif extra:
        from attnscore.boundary.untrusted import shown_list

        names = shown_list([n[:120] for n in extra], most=_MOST_SHOWN)
        verb = "is" if len(extra) == 1 else "are"
        pronoun = "it" if len(extra) == 1 else "them"
        wrong.append(f"{names} {verb} not one of the spec's (remove {pronoun}, or make {pronoun} a buffer)")
    if not wrong:
        return None
    spec_names = ", ".join(
        f"{n} {_shape_text(s)}" + (f" (the spec's {stated[n]})" if n in stated else "")
        for n, s in list(expected.items())[:_MOST_SHOWN]
    )
    return f"expected the parameters {spec_names or 'none'}, found {_named(list(found.items()))}: " + "; ".join(
        wrong[: _MOST_SHOWN + 1]
    )


def module_call(cls: object, config: ModuleConfig, names: Sequence[str], name: str = "") -> Callable[..., object]:
    """The contract's function made of the module class ``cls`` for one call whose inputs are
    ``names`` (in the order they are passed; any passed by name come by name).

    The function returned takes the call's arguments as the contract's binding passes them
    (``f(*positional, **by_name, **options)``): it builds ``cls(**init)`` with the call's sizes,
    moves it to the weights' device and dtype, creates a lazy module's parameters with one forward
    call (on copies of the inputs, without gradients), compares its parameters with the weights'
    names and shapes, and returns ``functional_call(module, weights, forward_inputs, options)``:
    the inputs named as weights are the module's parameters for this call (their gradients flow as
    any input's), the others go to ``forward`` in ``config.forward``'s order (else the call's),
    then any extra positional argument, and ``options`` by name.

    Raises (from the function returned):
        ModuleFailure: ``cls`` is not an ``nn.Module`` subclass (:attr:`Verdict.FUNCTION_MISSING`),
            its constructor, ``.to`` or lazy forward raised (the exception's verdict, its name kept),
            the constructor returned no module (:attr:`Verdict.BAD_RETURN_TYPE`), its parameters are
            not the spec's (:attr:`Verdict.WRONG_PARAMETERS`).
        Exception: whatever ``forward`` itself raises, unchanged.

    Example:
        >>> import torch
        >>> class Scale(torch.nn.Module):
        ...     def __init__(self, n):
        ...         super().__init__()
        ...         self.w = torch.nn.Parameter(torch.zeros(n))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> f = module_call(Scale, ModuleConfig((("n", SizeOf("w", -1)),), (("w", "w"),)), ["x", "w"])
        >>> f(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])).tolist()
        [3.0, 8.0]
    """
    label = name or str(getattr(cls, "__name__", "module"))[:100]
    weights_of, order, inputs = config.weight_names, tuple(config.forward), tuple(names)
    to_init = config.init_inputs

    def call(*positional: object, **named: object) -> object:
        functional_call = torch.func.functional_call
        problem = class_problem(cls, label)
        if problem is not None:
            raise ModuleFailure(Verdict.FUNCTION_MISSING, problem)
        values = dict(zip(inputs, positional, strict=False))
        rest = list(positional[len(inputs) :])
        options = {k: v for k, v in named.items() if k not in inputs}
        values.update({k: v for k, v in named.items() if k in inputs})
        shapes = {k: tuple(v.shape) for k, v in values.items() if isinstance(v, torch.Tensor)}
        try:
            kwargs = config.init_kwargs(shapes, values)
        except ValueError as exc:
            raise ModuleFailure(Verdict.GRADER_ERROR, f"the spec's module could not be built: {exc}") from None
        weights: dict[str, torch.Tensor] = {}
        for p, m in weights_of.items():
            if isinstance(values.get(p), torch.Tensor):
                weights[m] = values[p]  # type: ignore[assignment]
        forward = [values[p] for p in (order or inputs) if p in values and p not in weights_of and p not in to_init]
        forward += rest
        built = f"{label}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        module = _built(cls, kwargs, built)
        first = next(iter(weights.values()), None)
        _guarded(lambda: _to(module, first), f"{built}.to(...) (moving it to the inputs' device and dtype)")
        if _guarded(lambda: _lazy(module), f"{built}.parameters()"):
            copies = [torch.Tensor.clone(torch.Tensor.detach(a)) if isinstance(a, torch.Tensor) else a for a in forward]
            with torch.no_grad():
                _guarded(
                    lambda: module(*copies, **options), f"{built}'s first forward call, creating its lazy parameters"
                )
        found, still_lazy = _parameters(module, built)
        if still_lazy:
            raise ModuleFailure(
                Verdict.WRONG_PARAMETERS,
                f"{built} still has uninitialized lazy parameters after a forward call: {', '.join(still_lazy[:12])}",
            )
        buffers = _guarded(lambda: [str(n) for n, _ in module.named_buffers()], f"{built}.named_buffers()")
        expected = {m: tuple(int(n) for n in w.shape) for m, w in weights.items()}
        mismatch = parameter_problem(expected, found, buffers, {m: p for p, m in weights_of.items()})
        if mismatch is not None:
            raise ModuleFailure(Verdict.WRONG_PARAMETERS, f"{built}: {mismatch}")
        return functional_call(module, weights, tuple(forward), options or None)

    return call


def _built(cls: Any, kwargs: dict[str, Any], built: str) -> Any:
    """``cls(**kwargs)``; a :class:`ModuleFailure` when it raises or gives no ``nn.Module``."""
    module = _guarded(lambda: cls(**kwargs), f"the constructor {built}")
    if not isinstance(module, torch.nn.Module):
        raise ModuleFailure(
            Verdict.BAD_RETURN_TYPE, f"the constructor {built} gave a {type(module).__name__[:100]}, not a module"
        )
    return module


def _to(module: Any, like: Any) -> None:
    """``module`` moved to ``like``'s device and, for a floating ``like``, its dtype (its floating
    parameters and buffers)."""
    if like is None:
        return
    if like.dtype.is_floating_point:
        module.to(device=like.device, dtype=like.dtype)
    else:
        module.to(device=like.device)


def _lazy(module: Any) -> bool:
    return any(torch.nn.parameter.is_lazy(p) for p in module.parameters())


def _parameters(module: Any, built: str) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """The module's parameters, name -> shape (``named_parameters``), and those still lazy (no
    shape yet); a :class:`ModuleFailure` when the module cannot say."""

    def read() -> tuple[dict[str, tuple[int, ...]], list[str]]:
        shapes, lazy = {}, []
        for n, p in module.named_parameters():
            if torch.nn.parameter.is_lazy(p):
                lazy.append(str(n)[:120])
            else:
                shapes[str(n)] = tuple(int(s) for s in p.shape)
        return shapes, lazy

    return _guarded(read, f"{built}.named_parameters()")


def _guarded(step: Callable[[], Any], what: str) -> Any:
    """``step()``; what it raises (anything: SystemExit too) becomes a :class:`ModuleFailure` naming ``what``."""
    try:
        return step()
    except ModuleFailure:
        raise
    except BaseException as exc:  # noqa: BLE001 - the submission's own failure is its verdict
        raise _failure(exc, what) from None


def _failure(exc: BaseException, what: str) -> ModuleFailure:
    from attnscore.boundary.calls import describe_exception, type_name

    return ModuleFailure(Verdict.EXCEPTION, f"{what} {describe_exception(exc)}", type_name(exc), exc)
