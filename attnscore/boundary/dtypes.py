"""The floating dtypes attnscore tests, and their numbers, in one table.

Names are the strings used everywhere (specs, ``--dtype``, reports): ``float64``, ``float32``,
``float16``, ``bfloat16``. Figures from IEEE 754-2008 (binary64, binary32, binary16) and the
bfloat16 format (8 exponent bits like binary32, 8 significand bits).

Example:
    >>> UNIT_ROUNDOFF["float32"] == 2.0**-24, UNIT_ROUNDOFF["bfloat16"]
    (True, 0.00390625)
    >>> [name for name in DTYPES if name not in LOW_PRECISION]
    ['float64', 'float32']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    TORCH_DTYPES: dict[str, torch.dtype]
    """dtype name -> ``torch.dtype`` (made on first use, see :func:`__getattr__`)."""

__all__ = [
    "DTYPES",
    "LOW_PRECISION",
    "TORCH_DTYPES",
    "PRECISION_BITS",
    "UNIT_ROUNDOFF",
    "SMALLEST_NORMAL",
    "SMALLEST_SUBNORMAL",
]

DTYPES = ("float64", "float32", "float16", "bfloat16")
"""Every dtype a spec or ``--dtype`` may name, most precise first."""

LOW_PRECISION = ("float16", "bfloat16")


def __getattr__(name: str) -> Any:
    """``TORCH_DTYPES`` (dtype name -> ``torch.dtype``), made on first use: the names and numbers
    of this table need no torch, so the command line reads them before torch is imported."""
    if name != "TORCH_DTYPES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import torch

    table = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    globals()["TORCH_DTYPES"] = table
    return table


PRECISION_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
"""Significand bits, the implicit one included."""

UNIT_ROUNDOFF = {name: 2.0**-bits for name, bits in PRECISION_BITS.items()}
"""``u``: half the distance from 1 to the next number (round to nearest)."""

SMALLEST_NORMAL = {"float64": 2.0**-1022, "float32": 2.0**-126, "float16": 2.0**-14, "bfloat16": 2.0**-126}

SMALLEST_SUBNORMAL = {"float64": 2.0**-1074, "float32": 2.0**-149, "float16": 2.0**-24, "bfloat16": 2.0**-133}
"""Below the normal range rounding errors are absolute, in steps of this size."""
