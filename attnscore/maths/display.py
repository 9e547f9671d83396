"""How numbers, indices and shapes are written in every text attnscore shows.

Each number is printed as the shortest text that reads back as the same value in the dtype it
lives in (a float32 0.7 prints ``0.7``, not its float64 expansion); ``-0`` prints ``0`` and whole
numbers drop ``.0`` (the display rules in the field notes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["format_number", "format_index", "format_array", "shape_text", "counted"]


def format_number(x: float, dtype: str = "float64") -> str:
    """The shortest text that reads back as ``x`` in ``dtype`` (``0.7``, ``-1``, ``nan``, ``1.5e+10``).

    ``dtype`` is the precision the value lives in: a float32 0.7 prints as ``0.7``, not as its
    float64 expansion 0.699999988079071. Whole numbers drop the ``.0``; ``-0`` prints as ``0``.

    >>> format_number(0.699999988079071, "float32"), format_number(-0.0), format_number(3.0)
    ('0.7', '0', '3')
    """
    x = float(x)
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    scalar = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32}.get(dtype, np.float64)(x)
    text = str(scalar) if np.isfinite(scalar) else repr(x)
    return text[:-2] if text.endswith(".0") else text


def format_index(name: str, index: tuple[int, ...]) -> str:
    """``out[1, 2]`` style index text; ``out`` for a scalar."""
    return f"{name}[{', '.join(str(i) for i in index)}]" if index else name


def format_array(array: Any, dtype: str | None = None) -> str:
    """Nested-list text of an array with the shortest numbers of its dtype: ``[[1, 0], [0.7, 0.7]]``."""
    arr = np.asarray(array)
    dtype = dtype or arr.dtype.name
    if arr.ndim == 0:
        return format_number(float(arr), dtype)
    return "[" + ", ".join(format_array(a, dtype) for a in arr) + "]"


def shape_text(shape: tuple[int, ...]) -> str:
    """``(2, 3)``, ``(4,)`` or ``()``."""
    return "()" if not shape else "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def counted(n: int | float | object, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: ``1 point``, ``2 points``, ``0 points``,
    ``1 entry`` / ``3 entries`` (``plural`` when the plural is not ``singular + "s"``). ``n`` is
    written as given (an int, a Fraction's text); only exactly one takes the singular.

    >>> counted(1, "point"), counted(2, "point"), counted(0, "case"), counted(1, "entry", "entries")
    ('1 point', '2 points', '0 cases', '1 entry')
    >>> from fractions import Fraction
    >>> counted(Fraction(1), "point"), counted(Fraction(3, 2), "point")
    ('1 point', '3/2 points')
    """
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
