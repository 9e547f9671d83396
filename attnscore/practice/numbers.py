"""Exact numbers for practice problems: fractions in, well-formed decimal strings out.

Every answer is a :class:`fractions.Fraction` computed from the values shown to the student.
Display rules:

- integers print as integers (``-1``), terminating fractions as plain decimals (``0.7``), never
  ``-0``, never exponent notation (``1e-05``) and never binary float artefacts;
- an answer that does not terminate within ``places`` decimals is rounded **half away from zero**
  in exact arithmetic (the one rounding rule of the toolkit) and keeps its trailing zeros
  (``0.300``);
- a value exactly on a halfway point is reported by :func:`is_halfway` so that generators can
  reject it instead of depending on a rounding convention.

Example:
    >>> answer_text(Fraction(2, 3), 3), answer_text(Fraction(-1), 3), format_exact(Fraction(7, 10))
    ('0.667', '-1', '0.7')
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "WELL_FORMED_NUMBER",
    "as_fraction",
    "is_terminating",
    "format_exact",
    "round_half_away",
    "is_halfway",
    "answer_text",
    "is_rounded",
    "tolerance_for",
    "format_decimal",
    "is_well_formed",
]

#: A number as the toolkit prints it: optional minus, no leading zeros, optional decimals.
WELL_FORMED_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


def as_fraction(x: int | str | Decimal | Fraction) -> Fraction:
    """Return ``x`` as an exact Fraction; strings and Decimals are read in decimal, exactly.

    Raises:
        TypeError: ``x`` is a float (binary floats are not exact decimal values) or a bool.
        ValueError: a string is not a decimal number.
    """
    if isinstance(x, bool) or isinstance(x, float):
        raise TypeError(f"expected an int, decimal string, Decimal or Fraction, found {type(x).__name__} {x!r}")
    if isinstance(x, str):
        try:
            return Fraction(Decimal(x))
        except ArithmeticError:
            raise ValueError(f"expected a decimal number, found {x!r}") from None
    return Fraction(x)


def is_terminating(x: Fraction) -> bool:
    """Whether ``x`` has a finite decimal expansion (its denominator is ``2^a 5^b``)."""
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal_digits(x: Fraction) -> int:
    """Number of decimals of a terminating fraction (0 for integers)."""
    places = 0
    while (x * 10**places).denominator != 1:
        places += 1
    return places


def format_decimal(value: Decimal) -> str:
    """Print a Decimal in fixed notation, keeping its trailing zeros and never as ``-0``."""
    text = format(value, "f")
    if value == 0:
        text = text.lstrip("-")
    return text


def _fixed(units: int, places: int) -> str:
    """``units · 10^-places`` printed in fixed notation with exactly ``places`` decimals (never ``-0``)."""
    digits = str(abs(units)).rjust(places + 1, "0")
    body = digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}"
    return f"-{body}" if units < 0 else body


def format_exact(x: Fraction) -> str:
    """Print ``x`` exactly: ``-1``, ``0.7``, ``0.00625``; non-terminating values as ``2/3``."""
    if x.denominator == 1:
        return str(x.numerator)
    if is_terminating(x):
        places = _decimal_digits(x)
        return _fixed(x.numerator * 10**places // x.denominator, places)
    sign = "-" if x < 0 else ""
    return f"{sign}{abs(x.numerator)}/{x.denominator}"


def round_half_away(x: Fraction, places: int) -> Decimal:
    """Round ``x`` to ``places`` decimals, half away from zero, in exact arithmetic.

    Unlike ``round(0.125, 2)`` (``0.12``: binary float, half to even), this gives ``0.13``.

    Raises:
        ValueError: ``places`` is negative.
    """
    if places < 0:
        raise ValueError(f"places must be >= 0, found {places}")
    scaled = abs(x) * 10**places
    units = int(scaled + Fraction(1, 2))  # floor(|x| 10^p + 1/2): halves go up, i.e. away from 0
    result = Decimal(units).scaleb(-places)
    return -result if x < 0 and units != 0 else result


def is_halfway(x: Fraction, places: int) -> bool:
    """Whether ``x`` lies exactly halfway between two ``places``-decimal numbers."""
    return (x * 10**places * 2).denominator == 1 and (x * 10**places).denominator == 2


def is_rounded(x: Fraction, places: int) -> bool:
    """Whether the key for ``x`` is a rounded value (``x`` needs more than ``places`` decimals)."""
    return (x * 10**places).denominator != 1


def answer_text(x: Fraction, places: int) -> str:
    """The answer key's text for ``x``: exact when it fits in ``places`` decimals, else rounded.

    Example:
        >>> answer_text(Fraction(3, 10), 3), answer_text(Fraction(2999, 10000), 3)
        ('0.3', '0.300')
    """
    if not is_rounded(x, places):
        return format_exact(x)
    units = int(abs(x) * 10**places + Fraction(1, 2))  # half away from zero, exactly
    return _fixed(-units if x < 0 else units, places)


def tolerance_for(places: int) -> Fraction:
    """The absolute tolerance of an answer given to ``places`` decimals: half a unit in the last place."""
    return Fraction(1, 2 * 10**places)


def is_well_formed(text: str) -> bool:
    """Whether ``text`` is a number as the toolkit prints it (no ``-0``, no exponent, no artefacts).

    Artefacts are caught by length: more than 8 decimals is never produced by the generators.
    """
    if not WELL_FORMED_NUMBER.fullmatch(text):
        return False
    if text.startswith("-") and Fraction(Decimal(text)) == 0:
        return False
    decimals = text.partition(".")[2]
    return len(decimals) <= 8
