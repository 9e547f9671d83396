"""An instructor's own properties and known mistakes, registered from their reference file.

The reference file of a spec with ``function.reference`` (:mod:`attnscore.spec.reference`) may
register, with the decorators of the public module :mod:`attnscore.instructor`:

- **properties**: ``@property("rows_sum_to_one", statement="Each row sums to 1.")`` on a check
  ``check(inputs, call) -> str | None``: ``inputs`` are the drawn arguments (float64 CPU tensors
  by parameter name), ``call(*args, **kwargs)`` calls the graded function (positionally in the
  spec's parameter order or by name; the spec's keywords are added) and returns its output as a
  float64 CPU tensor; the check returns a failure message for the student, or None when the
  property holds. A spec lists it by name under ``properties`` as any registered property.
- **known mistakes**: ``@mistake("no_max_subtraction", feedback="...")`` on a function with the
  reference's signature (keywords included) computing the wrong answer. Diagnosis names it when a
  failing output matches it (:mod:`attnscore.check.diagnosis`), and ``attnscore verify`` requires
  each to be caught and named.

Outside a spec load the decorators register nothing and return the function unchanged, so the file
stays importable by the instructor's own tests.

How a check "calls" the graded function: the calls a case makes are known before anything runs
(they are built with the case and run in the sandboxed worker), so the check runs twice. When the
cases are built it runs with ``call`` answering the reference's own output, and the calls it makes
become the case's calls; when the case is judged it runs again on the same inputs with ``call``
answering the graded function's outputs, in the same order. The calls a check makes must therefore
depend on its inputs only (not on what ``call`` returned); a check that asks for more calls when
judged than when built fails with a message saying so.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.catalogue.families import own_reference
from attnscore.catalogue.mistakes.registry import Mistake
from attnscore.catalogue.properties.registry import CheckContext, Property
from attnscore.maths.contract import Contract
from attnscore.maths.families.instructor import float64_output
from attnscore.maths.strategies import random_args

__all__ = [
    "OwnMistake",
    "OwnProperty",
    "Registered",
    "as_mistake",
    "as_property",
    "collecting",
    "mistake",
    "property",
]

Check = Callable[[dict[str, Any], Callable[..., Any]], "str | None"]
"""``check(inputs, call) -> message | None`` (see the module docstring)."""

_ID = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class OwnProperty:
    """A property the instructor's file registered.

    Attributes:
        name: snake_case; what a spec's ``properties`` lists.
        statement: what it says, in a student's words (the default summary).
        check: ``check(inputs, call) -> message | None``.
        max_value: the bound on drawn input magnitudes unless the spec says otherwise.
    """

    name: str
    statement: str
    check: Check
    max_value: float = 10.0


@dataclass(frozen=True)
class OwnMistake:
    """A known mistake the instructor's file registered.

    Attributes:
        id: snake_case; the diagnosis's name for it.
        feedback: what a student whose output matches it reads (what is wrong and how to fix it).
        function: the wrong implementation, with the reference's signature (keywords included).
        title: a few words (default: the id in words).
    """

    id: str
    feedback: str
    function: Callable[..., Any]
    title: str = ""


@dataclass
class Registered:
    """What one reference file registered while it was imported, in registration order."""

    properties: list[OwnProperty] = field(default_factory=list)
    mistakes: list[OwnMistake] = field(default_factory=list)


_COLLECTING: contextvars.ContextVar[Registered | None] = contextvars.ContextVar("attnscore_instructor", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[Registered]:
    """Within it, the decorators record what they decorate into the :class:`Registered` it yields
    (the spec loader imports a reference file inside one)."""
    found = Registered()
    token = _COLLECTING.set(found)
    try:
        yield found
    finally:
        _COLLECTING.reset(token)


def _checked_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError(f"{what}: expected a snake_case name (e.g. rows_sum_to_one), found {value!r}")
    return value


def property(name: str | None = None, *, statement: str, max_value: float = 10.0) -> Callable[[Check], Check]:  # noqa: A001 - the public API's word
    """Register the decorated ``check(inputs, call) -> str | None`` as a property of the spec whose
    reference file this is (see the module docstring); ``name`` defaults to the function's name.

    Raises:
        ValueError: a name that is not snake_case, an empty statement, or a max_value <= 0.
    """
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError(f"property statement: expected a sentence for students, found {statement!r}")
    if not isinstance(max_value, int | float) or isinstance(max_value, bool) or not max_value > 0:
        raise ValueError(f"property max_value: expected a number > 0, found {max_value!r}")

    def register(check: Check) -> Check:
        own = OwnProperty(
            _checked_id(name or getattr(check, "__name__", ""), "property name"),
            statement.strip(),
            check,
            float(max_value),
        )
        found = _COLLECTING.get()
        if found is not None:
            found.properties.append(own)
        return check

    return register


def mistake(id: str, *, feedback: str, title: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002 - the public API's word
    """Register the decorated function (the reference's signature, a wrong answer) as a known
    mistake with ``id`` and the ``feedback`` a student whose output matches it reads.

    Raises:
        ValueError: an id that is not snake_case, or empty feedback.
    """
    _checked_id(id, "mistake id")
    if not isinstance(feedback, str) or not feedback.strip():
        raise ValueError(f"mistake {id} feedback: expected a sentence for students, found {feedback!r}")

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        found = _COLLECTING.get()
        if found is not None:
            found.mistakes.append(OwnMistake(id, feedback.strip(), function, title or id.replace("_", " ")))
        return function

    return register


# ---------------------------------------------------------------------------------------------
# as the catalogue's own records


def _bound(contract: Contract, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A check's ``call(*args, **kwargs)`` as arguments by parameter name (float64, bool kept)."""
    names = contract.parameter_names
    if len(args) > len(names):
        raise TypeError(f"call() takes {len(names)} arguments ({', '.join(names)}), {len(args)} were given")
    values = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"call() got an unexpected argument {key!r}; the parameters are {', '.join(names)}")
        if key in values:
            raise TypeError(f"call() got argument {key!r} twice")
        values[key] = value
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"call() is missing the argument {missing[0]!r}")
    out = {}
    for n in names:
        v = values[n]
        array = v.detach().cpu().numpy() if is_tensor(v) else np.asarray(v)
        out[n] = array if n in contract.bool_parameters else np.asarray(array, dtype=np.float64)
    return out


def _inputs(contract: Contract, example: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The drawn example as a check sees it: float64 CPU tensors (bool ones bool), by parameter name."""
    out = {}
    for n in contract.parameter_names:
        a = np.asarray(example[n])
        out[n] = torch.as_tensor(np.array(a, dtype=bool if a.dtype == np.bool_ else np.float64))
    return out


class _RecordedCalls:
    """A property's ``calls``: the check run with ``call`` answering the reference's own output;
    the calls it made (at least the drawn example itself)."""

    def __init__(self, own: OwnProperty) -> None:
        self.own = own

    def __call__(self, contract: Contract, example: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
        made: list[dict[str, np.ndarray]] = []

        def call(*args: Any, **kwargs: Any) -> Any:
            values = _bound(contract, args, kwargs)
            made.append(values)
            return torch.as_tensor(float64_output(contract, values))

        try:
            message = self.own.check(_inputs(contract, example), call)
        except Exception as exc:  # noqa: BLE001 - the instructor's code: one clear message
            raise ValueError(
                f"property {self.own.name}: the check raised {type(exc).__name__} on the reference's own outputs: {exc}"
            ) from None
        if not _is_message(message):
            returned = _not_a_message(message, " on the reference's own outputs")
            raise ValueError(f"property {self.own.name}: {returned}")
        return made or [dict(example)]


def _is_message(message: object) -> bool:
    return message is None or isinstance(message, str)


def _not_a_message(message: object, where: str = "") -> str:
    shown = repr(message)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return (
        f"the check returned {shown} ({type(message).__name__}){where}; a check returns a failure message (str), "
        "or None when the output passes"
    )


class _ReplayedCheck:
    """A property's ``check``: the instructor's check run again with ``call`` answering the graded
    function's outputs, in the order the calls were recorded."""

    def __init__(self, own: OwnProperty) -> None:
        self.own = own

    def __call__(self, ctx: CheckContext) -> str | None:
        outputs = list(ctx.outputs)
        given = {"count": 0}

        def call(*args: Any, **kwargs: Any) -> Any:
            number = given["count"]
            if number >= len(outputs):
                raise LookupError(
                    f"the check asked for call {number + 1} but made only {len(outputs)} when the cases were built "
                    "(a check's calls must depend on its inputs only)"
                )
            given["count"] = number + 1
            return torch.as_tensor(outputs[number].array.astype(np.float64))

        try:
            message = self.own.check(_inputs(ctx.contract, ctx.example), call)
        except LookupError as exc:
            return f"property {self.own.name} could not be judged: {exc}"
        except Exception as exc:  # noqa: BLE001 - a check that cannot read this output: the property fails
            return f"your output could not be checked ({type(exc).__name__}: {exc})"
        if not _is_message(message):
            return f"property {self.own.name} could not be judged: {_not_a_message(message)}"
        return message or None


def as_property(own: OwnProperty) -> Property:
    """``own`` as a catalogue :class:`~attnscore.catalogue.properties.Property` of the spec: drawn
    inputs of its contract, the calls its check makes, judged by the check alone (a wrong value is
    the other cases' concern)."""
    return Property(
        name=own.name,
        summary=own.statement,
        strategy=random_args,
        applies=own_reference,
        calls=_RecordedCalls(own),
        check=_ReplayedCheck(own),
        golden=False,
        default_max_value=own.max_value,
        tags=("instructor",),
    )


class _WrongAnswer:
    """A mistake's ``fn``: the instructor's wrong function with the spec's keywords by name."""

    def __init__(self, own: OwnMistake) -> None:
        self.own = own

    def __call__(self, contract: Contract, spec: Any, *args: Any) -> Any:
        return self.own.function(*args, **dict(contract.options))


def as_mistake(own: OwnMistake) -> Mistake:
    """``own`` as a catalogue :class:`~attnscore.catalogue.mistakes.Mistake` of the spec."""
    return Mistake(own.id, own.title, own_reference, _WrongAnswer(own), own.feedback)
