"""Shape bounds: the domain of a kernel, in the shape legend (``n_q <= n_k``, ``d_k <= 128``).

Kernels legitimately refuse some shapes: GPT-2's causal slice, the Triton tutorial's kernel and
KV-cache decode code need ``n_q <= n_k``; a fused kernel may need ``d_k <= 128``. A bound says
so, from ``attnscore test --where``, the pytest plugin's ``--attnscore-where`` or a spec's
``function.where``; generated inputs are then drawn inside the domain
(:func:`admits`, used by :meth:`attnscore.catalogue.properties.Property.examples`), and worked
examples outside it are skipped by constraint (:meth:`attnscore.spec.model.Spec.bounded`).

A bound is ``SYMBOL OP SYMBOL`` or ``SYMBOL OP INTEGER`` with ``OP`` one of ``<=``, ``<``,
``>=``, ``>``, ``==``, ``!=`` and the symbols of the contract's legend (``n_q``, ``n_k``, ``d_k``,
``d_v``, ...; not ``...``).

>>> b = parse_bound("n_q<=n_k")
>>> str(b), b.holds({"n_q": 2, "n_k": 3}), b.holds({"n_q": 4, "n_k": 3})
('n_q <= n_k', True, False)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["Bound", "Legend", "parse_bound", "legend_of", "admits", "broken_bounds", "check_symbols"]


class Legend(Protocol):
    """What a bound reads of a contract (:class:`attnscore.maths.contract.Contract` is one): its
    parameters' legends, which of them are bool masks, and its own bounds."""

    @property
    def name(self) -> str: ...

    @property
    def parameters(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...

    @property
    def bool_parameters(self) -> frozenset[str]: ...

    @property
    def bounds(self) -> tuple[Bound, ...]: ...


_OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*([A-Za-z_][A-Za-z0-9_]*|\d+)\s*$")


@dataclass(frozen=True)
class Bound:
    """One shape bound: ``left op right``; ``right`` is a legend symbol or a whole number."""

    left: str
    op: str
    right: str | int

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"

    def holds(self, sizes: Mapping[str, int]) -> bool:
        """Whether the bound holds for ``sizes`` (symbol -> size); a symbol missing from ``sizes``
        (a shape the example does not have) leaves the bound satisfied."""
        if self.left not in sizes or (isinstance(self.right, str) and self.right not in sizes):
            return True
        right = sizes[self.right] if isinstance(self.right, str) else self.right
        return _OPS[self.op](int(sizes[self.left]), int(right))

    def broken_text(self, sizes: Mapping[str, int]) -> str:
        """``"n_q = 3, n_k = 2 break n_q <= n_k"``: the sizes that break the bound, in words."""
        shown = [f"{self.left} = {sizes[self.left]}"]
        if isinstance(self.right, str):
            shown.append(f"{self.right} = {sizes[self.right]}")
        return f"{', '.join(shown)} break {self}"

    def symbols(self) -> tuple[str, ...]:
        return (self.left, self.right) if isinstance(self.right, str) else (self.left,)


def parse_bound(text: str) -> Bound:
    """A bound from its text, ``"n_q<=n_k"`` or ``"d_k <= 128"``.

    Raises:
        ValueError: the text is not ``SYMBOL OP SYMBOL`` or ``SYMBOL OP INTEGER`` (the message
            quotes it and gives the form).
    """
    match = _PATTERN.match(str(text))
    if match is None:
        raise ValueError(
            f"expected SYMBOL OP SYMBOL or SYMBOL OP INTEGER with OP one of <=, <, >=, >, ==, != "
            f"(e.g. n_q<=n_k), found {text!r}"
        )
    left, op, right = match.groups()
    return Bound(left, op, int(right) if right.isdigit() else right)


def check_symbols(bounds: Iterable[Bound], contract: Legend) -> None:
    """Raise ValueError when a bound names a symbol that ``contract``'s legend does not use."""
    symbols = {sym for _, legend in contract.parameters for sym in legend} - {"..."}
    for bound in bounds:
        for name in bound.symbols():
            if name not in symbols:
                known = ", ".join(sorted(symbols))
                raise ValueError(
                    f"{bound}: expected a shape symbol of contract {contract.name} ({known}), found {name!r}"
                )


def legend_of(contract: Legend, args: Mapping[str, Any]) -> dict[str, int]:
    """The size of each legend symbol in ``args`` (contract parameter names -> arrays).

    The first parameter that holds a symbol gives its size (a broadcast size-1 axis of a mask
    does not count: its legend symbol is read from the other parameters first).
    """
    sizes: dict[str, int] = {}
    ordered = sorted(contract.parameters, key=lambda p: p[0] in contract.bool_parameters)
    for name, legend in ordered:
        if name not in args:
            continue
        shape = np.shape(args[name])
        fixed = [sym for sym in legend if sym != "..."]
        if len(shape) < len(fixed):
            continue
        for sym, size in zip(fixed, shape[len(shape) - len(fixed) :], strict=True):
            sizes.setdefault(sym, int(size))
    return sizes


def broken_bounds(contract: Legend, args: Mapping[str, Any], bounds: Iterable[Bound] | None = None) -> list[str]:
    """Each bound of ``contract`` (or ``bounds``) that ``args`` break, in words; [] inside the domain."""
    sizes = legend_of(contract, args)
    return [b.broken_text(sizes) for b in (contract.bounds if bounds is None else bounds) if not b.holds(sizes)]


def admits(contract: Legend, args: Mapping[str, Any]) -> bool:
    """Whether ``args`` lie inside every bound of ``contract`` (True without bounds)."""
    if not contract.bounds:
        return True
    sizes = legend_of(contract, args)
    return all(b.holds(sizes) for b in contract.bounds)
