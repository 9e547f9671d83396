"""Comparison of a received result against the golden value.

Order of checks (the first failure decides the verdict): return kind → shape (exact: no
broadcasting, an empty array never matches) → dtype → non-finite placement (NaN is never a
wildcard; an infinite golden entry needs the same infinity) → values within the allowed error
(see :mod:`attnscore.maths.tolerance`). The fast vectorised check runs first; the walk to the worst
entries happens only on failure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnscore.check.outputs import Received
from attnscore.maths.dtypes import PRECISION_BITS, SMALLEST_NORMAL
from attnscore.report.results import Verdict

__all__ = ["Mismatch", "compare", "format_index", "format_number"]

NUMERIC_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8")
SHOW_WORST = 3
_FLOATS = ("float64", "float32", "float16", "bfloat16")
_PRECISION = PRECISION_BITS


@dataclass(frozen=True)
class Mismatch:
    """Why a received result does not match: a verdict and a student-facing message."""

    verdict: Verdict
    message: str


def format_index(name: str, index: tuple[int, ...]) -> str:
    """``out[1, 2]`` style index text; ``out`` for a scalar."""
    return f"{name}[{', '.join(str(i) for i in index)}]" if index else name


def format_number(x: float, dtype: str = "float64") -> str:
    """The shortest text that reads back as ``x`` in ``dtype`` (``0.7``, ``-1``, ``nan``, ``1.5e+10``).

    ``dtype`` is the precision the value lives in: a float32 0.7 prints as ``0.7``, not as its
    float64 expansion 0.699999988079071. Whole numbers drop the ``.0``; ``-0`` prints as ``0``.
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


def _shape_text(shape: tuple[int, ...]) -> str:
    return "()" if not shape else "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def compare(
    received: Received,
    golden: np.ndarray,
    allowed: np.ndarray,
    *,
    name: str = "out",
    accept: tuple[str, ...] = ("tensor", "ndarray", "list", "number"),
    hidden: bool = False,
    tolerance_text: str = "",
    dtype: str | None = None,
) -> Mismatch | None:
    """Compare ``received`` with ``golden``; return None when it matches, else a :class:`Mismatch`.

    Args:
        received: the plain returned value.
        golden: float64 golden value; its shape is the expected shape.
        allowed: per-entry allowed absolute error, same shape as ``golden``.
        name: what to call the output in messages (``"scores"``).
        accept: the return kinds the spec accepts.
        hidden: a hidden case: messages never show expected values.
        tolerance_text: the tolerance mode in words, quoted in value messages.
        dtype: the dtype the inputs were cast to; expected values are shown in it, and a result
            of lower precision or an integer tensor is pointed out.
    """
    golden = np.asarray(golden, dtype=np.float64)
    dtype = dtype or received.dtype
    if received.kind not in accept:
        wanted = " or ".join(accept)
        return Mismatch(Verdict.BAD_RETURN_TYPE, f"returned a {received.kind}; this function must return a {wanted}")
    if received.shape != golden.shape:
        return Mismatch(
            Verdict.WRONG_SHAPE,
            f"{name} has shape {_shape_text(received.shape)}, expected shape {_shape_text(golden.shape)}",
        )
    if received.dtype not in NUMERIC_DTYPES or (
        received.kind in ("tensor", "ndarray") and received.dtype not in _FLOATS
    ):
        return Mismatch(
            Verdict.WRONG_DTYPE,
            f"{name} has dtype {received.dtype}; scores are real numbers, so return "
            f"a floating {received.kind} (the inputs were {dtype})",
        )
    got = received.array.astype(np.float64)

    # Non-finite placement: NaN must match NaN, ±inf the same infinity.
    got_nan, gold_nan = np.isnan(got), np.isnan(golden)
    got_inf, gold_inf = np.isinf(got), np.isinf(golden)
    bad_nonfinite = (
        (got_nan != gold_nan) | (got_inf != gold_inf) | (got_inf & gold_inf & (np.sign(got) != np.sign(golden)))
    )
    if bad_nonfinite.any():
        idx = tuple(int(i) for i in np.argwhere(bad_nonfinite)[0])
        where = format_index(name, idx)
        count = int(bad_nonfinite.sum())
        if not (got_nan | got_inf)[idx]:  # finite where the golden value is not
            return Mismatch(
                Verdict.WRONG_VALUE,
                _value_message(received.dtype, dtype, name, got, golden, bad_nonfinite, hidden, tolerance_text),
            )
        return Mismatch(
            Verdict.NON_FINITE,
            f"{where} is {format_number(got[idx])}"
            + ("" if hidden else f", expected {format_number(golden[idx], dtype)}")
            + (f" ({count} non-finite entries in all)" if count > 1 else "")
            + "; look for a division by zero, an overflow or a log/sqrt of a bad value",
        )

    finite = np.isfinite(golden)
    err = np.abs(np.where(finite, got, 0.0) - np.where(finite, golden, 0.0))
    wrong = err > allowed
    if not wrong.any():
        return None
    message = _value_message(received.dtype, dtype, name, got, golden, wrong, hidden, tolerance_text, err, allowed)
    if _PRECISION.get(received.dtype, 0) < _PRECISION.get(dtype, 0):
        message += (
            f"\nNote: {name} has dtype {received.dtype}, less precise than the inputs' {dtype}; "
            f"compute and return in {dtype}"
        )
    return Mismatch(Verdict.WRONG_VALUE, message)


# Smallest normal number per dtype: an allowed error below it is the subnormal floor, i.e. exact.
_TINY = SMALLEST_NORMAL


def _value_message(
    got_dtype: str,
    dtype: str,
    name: str,
    got: np.ndarray,
    golden: np.ndarray,
    wrong: np.ndarray,
    hidden: bool,
    tolerance_text: str,
    err: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
) -> str:
    count, total = int(wrong.sum()), int(wrong.size)
    head = f"{count} of {total} entries of {name} are wrong" if total > 1 else f"{name} is wrong"
    if hidden:
        return head + " (hidden case: expected values are not shown)"
    if err is None or allowed is None:
        order = [tuple(int(i) for i in ix) for ix in np.argwhere(wrong)[:SHOW_WORST]]
    else:
        # Worst first by the size of the error: an entry whose allowed error is a subnormal floor
        # (an exact 0 expected) would lead a list ordered by error/allowed with a tiny mistake.
        size = np.where(wrong, np.nan_to_num(err, nan=np.inf), -1.0)
        flat = np.argsort(-size, axis=None, kind="stable")[: min(SHOW_WORST, count)]
        order = [tuple(int(i) for i in np.unravel_index(f, golden.shape)) for f in flat]
    lines = [head + (f" ({tolerance_text})" if tolerance_text else "") + ":"]
    for idx in order:
        line = (
            f"  {format_index(name, idx)} = {format_number(got[idx], got_dtype)}, "
            f"expected {format_number(golden[idx], dtype)}"
        )
        if err is not None and allowed is not None:
            limit = f"{allowed[idx]:.3g}" if allowed[idx] >= _TINY.get(dtype, 0.0) else "0 (exact here)"
            line += f" (|error| {err[idx]:.3g} > allowed {limit})"
        lines.append(line)
    if count > len(order):
        lines.append(f"  ... and {count - len(order)} more")
    return "\n".join(lines)
