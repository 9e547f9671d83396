"""One codec: frozen dataclasses as strict-JSON plain data, and back, derived from their fields.

Every record of results (:mod:`attnscore.report.record`: the gradebook's rows, a cluster
worker's answer) and the JSON report's failure object (:func:`attnscore.report.feedback.failure_data`)
are written by :func:`encode` and read by :func:`decode`; neither lists a field by hand, so a
field added to :class:`~attnscore.report.failure.Failure` travels everywhere at once.

The rules, by the field's type:

- ``bool``, ``int``, ``str``: as they are (an ``int`` field refuses a bool);
- ``float``: a number, or :func:`finite_or_word` for NaN and ±inf (``"nan"``, ``"inf"``, ``"-inf"``:
  strict JSON has no such tokens);
- ``Fraction``: exact text (``"7/3"``); an enum: its value (``"wrong_value"``);
- ``tuple[T, ...]``: a list; ``dict[str, ...]``: an object (copied; its values are already plain data);
- a dataclass: an object with one key per field, in field order; ``X | None``: ``null`` or ``X``;
  a union of dataclasses: the first member whose fields are exactly the object's keys (those
  added later aside), else the first whose fields hold every key.

Reading checks every value and names the first wrong one by its path
(``record.cases[2].failure.hidden: expected bool, found str``). A field whose metadata holds
``ADDED`` was added after records were first written: an absent key reads as its default.
Records hold only ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``:
reading one never runs code.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from fractions import Fraction
from functools import cache
from typing import Any, TypeVar

__all__ = ["CodecError", "ADDED", "encode", "decode", "finite_or_word", "number_from_word"]

T = TypeVar("T")

ADDED: dict[str, bool] = {"added": True}
"""Field metadata: the key may be absent from data written before the field existed."""

_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class CodecError(ValueError):
    """Data that does not read as the expected type: the message names the path, what was
    expected and what was found."""


def finite_or_word(x: float) -> float | str:
    """A float as strict-JSON data: finite numbers as they are, NaN and ±inf as words.

    The one non-finite encoder (records, JSON reports, arguments of a counterexample).

    >>> finite_or_word(0.5), finite_or_word(float("nan")), finite_or_word(-float("inf"))
    (0.5, 'nan', '-inf')
    """
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def number_from_word(value: object) -> float:
    """The inverse of :func:`finite_or_word`: a number, or ``"nan"``, ``"inf"``, ``"-inf"``.

    Raises:
        CodecError: ``value`` is neither a number nor one of the three words.
    """
    if isinstance(value, str):
        if value not in _WORDS:
            raise CodecError(f"expected a number, 'nan', 'inf' or '-inf', found {value!r}")
        return _WORDS[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"expected a number, found {type(value).__name__}")
    return float(value)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _members(kind: Any) -> tuple[Any, ...]:
    """The members of a union type (``X | None``, ``A | B``), or ``()`` when ``kind`` is no union;
    worked out once per type (a class rerun decodes every stored result, field by field)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return typing.get_args(kind)
    return ()


def encode(value: Any) -> Any:
    """``value`` (a dataclass, enum, Fraction, tuple, dict or plain value) as strict-JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return finite_or_word(value)
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    raise CodecError(f"cannot encode a {type(value).__name__}")


def _name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind)


def _found(value: object) -> str:
    return "none" if value is None else type(value).__name__


def decode(kind: type[T], data: Any, where: str) -> T:
    """``data`` read as ``kind`` (the inverse of :func:`encode`); ``where`` names ``data`` in errors.

    Raises:
        CodecError: the first value that does not read as its field's type, by path.
    """
    return typing.cast(T, _decode(kind, data, where))


def _decode(kind: Any, data: Any, where: str) -> Any:
    members = _members(kind)
    if members:
        if data is None and type(None) in members:
            return None
        options = [m for m in members if m is not type(None)]
        if data is None:
            raise CodecError(f"{where}: expected {' or '.join(_name(m) for m in options)}, found none")
        if len(options) == 1:
            return _decode(options[0], data, where)
        # a union of dataclasses: the first member the object's keys make whole, else the first
        # whose fields hold every key (its error names what is missing)
        keys = set(data) if isinstance(data, dict) else set()
        fitting = [
            m for m in options if dataclasses.is_dataclass(m) and keys <= {f.name for f in dataclasses.fields(m)}
        ]
        whole = [m for m in fitting if {f.name for f in dataclasses.fields(m) if not f.metadata.get("added")} <= keys]
        return _decode((whole or fitting or options)[0], data, where)
    if kind is Any:
        return data
    origin = typing.get_origin(kind) or kind
    if dataclasses.is_dataclass(origin):
        return _decode_dataclass(typing.cast(type, origin), data, where)
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        if not isinstance(data, str):
            raise CodecError(f"{where}: expected {_name(origin)}, found {_found(data)}")
        try:
            return origin(data)
        except ValueError:
            words = ", ".join(repr(m.value) for m in origin)
            raise CodecError(f"{where}: expected one of {words}, found {data!r}") from None
    if origin is float:
        try:
            return number_from_word(data)
        except CodecError as exc:
            raise CodecError(f"{where}: {exc}") from None
    if origin is Fraction:
        if not isinstance(data, str):
            raise CodecError(f"{where}: expected exact points such as '7/3', found {_found(data)}")
        try:
            return Fraction(data)
        except (ValueError, ZeroDivisionError):
            raise CodecError(f"{where}: expected exact points such as '7/3', found {data!r}") from None
    if origin is tuple:
        if not isinstance(data, list):
            raise CodecError(f"{where}: expected list, found {_found(data)}")
        (item, *_) = typing.get_args(kind) or (Any,)
        return tuple(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(data))
    if origin is dict:
        if not isinstance(data, dict):
            raise CodecError(f"{where}: expected dict, found {_found(data)}")
        return dict(data)
    if origin in (bool, int, str):
        if not isinstance(data, origin) or (origin is int and isinstance(data, bool)):
            raise CodecError(f"{where}: expected {origin.__name__}, found {_found(data)}")
        return data
    raise CodecError(f"{where}: cannot decode a {_name(kind)}")  # pragma: no cover - a type the records never hold


def _decode_dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object, found {_found(data)}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.metadata.get("added"):
                continue  # written before the field existed: its default
            raise CodecError(f"{where}.{f.name}: expected a value, found none")
        values[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**values)
