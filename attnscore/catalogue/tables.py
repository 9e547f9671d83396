"""The catalogue's tables keyed by name (its mistakes, its properties): adding an entry under a new
name, and looking one up with an error that names the known ones."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TypeVar

__all__ = ["add_new", "named"]

_V = TypeVar("_V")


def add_new(table: MutableMapping[str, _V], name: str, entry: _V, kind: str) -> None:
    """Put ``entry`` in ``table`` under ``name``.

    Raises:
        ValueError: ``name`` is taken (``kind``, e.g. ``"mistake"``, names the table's entries).

    Example:
        >>> table = {}
        >>> add_new(table, "a", 1, "mistake")
        >>> add_new(table, "a", 2, "mistake")
        Traceback (most recent call last):
        ...
        ValueError: mistake 'a' is already registered
    """
    if name in table:
        raise ValueError(f"{kind} {name!r} is already registered")
    table[name] = entry


def named(table: Mapping[str, _V], name: str, kind: str) -> _V:
    """``table``'s entry called ``name``.

    Raises:
        KeyError: none is (the message names the known ones).

    Example:
        >>> named({"b": 1, "a": 2}, "c", "property")
        Traceback (most recent call last):
        ...
        KeyError: "unknown property 'c'; known: a, b"
    """
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}") from None
