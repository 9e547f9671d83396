"""Comparison of a received result against the golden value.

Order of checks (the first failure decides the verdict): return kind → shape (exact: no
broadcasting, an empty array never matches) → dtype → non-finite placement (NaN is never a
wildcard; an infinite golden entry needs the same infinity) → values within the allowed error
(see :mod:`attnscore.maths.tolerance`). The fast vectorised check runs first; the walk to the worst
entries happens only on failure.
"""

from __future__ import annotations

import numpy as np

from attnscore.boundary.dtypes import DTYPES, PRECISION_BITS, SMALLEST_NORMAL
from attnscore.boundary.outputs import RETURN_KINDS, Received, ReturnKind
from attnscore.boundary.verdict import Verdict
from attnscore.maths.display import format_index, format_number, shape_text
from attnscore.maths.tolerance import all_finite_and_close, entries_close
from attnscore.report.failure import EntryMismatch, Mismatch

__all__ = ["Mismatch", "compare", "format_index", "format_number"]

NUMERIC_DTYPES = (*DTYPES, "int64", "int32", "int16", "int8", "uint8")
SHOW_WORST = 3
_FLOATS = DTYPES
_PRECISION = PRECISION_BITS
# Smallest normal number per dtype: an allowed error below it is the subnormal floor, i.e. exact.
_TINY = SMALLEST_NORMAL


def compare(
    received: Received,
    golden: np.ndarray,
    allowed: np.ndarray,
    *,
    name: str = "out",
    accept: tuple[str, ...] = RETURN_KINDS,
    tolerance_text: str = "",
    dtype: str | None = None,
) -> Mismatch | None:
    """Compare ``received`` with ``golden``; return None when it matches, else a :class:`Mismatch`.

    Args:
        received: the plain returned value.
        golden: float64 golden value; its shape is the expected shape.
        allowed: per-entry allowed absolute error, same shape as ``golden``.
        name: what to call the output in feedback (``"scores"``).
        accept: the return kinds the spec accepts.
        tolerance_text: the tolerance mode in words, kept with value mismatches.
        dtype: the dtype the inputs were cast to; expected values are shown in it, and a result
            of lower precision is pointed out.

    The mismatch is data (counts and the worst entries, worst first by the size of the error);
    :func:`attnscore.report.feedback.mismatch_text` puts it in words.
    """
    golden = np.asarray(golden, dtype=np.float64)
    dtype = dtype or received.dtype
    if received.kind not in accept:
        wanted = " or ".join(accept)
        return Mismatch(
            Verdict.BAD_RETURN_TYPE,
            name=name,
            detail=f"returned a {received.kind}; this function must return a {wanted}",
        )
    if received.shape != golden.shape:
        return Mismatch(
            Verdict.WRONG_SHAPE,
            name=name,
            detail=f"{name} has shape {shape_text(received.shape)}, expected shape {shape_text(golden.shape)}",
        )
    if received.dtype not in NUMERIC_DTYPES or (
        received.kind in (ReturnKind.TENSOR, ReturnKind.NDARRAY) and received.dtype not in _FLOATS
    ):
        return Mismatch(
            Verdict.WRONG_DTYPE,
            name=name,
            detail=f"{name} has dtype {received.dtype}; scores are real numbers, so return "
            f"a floating {received.kind} (the inputs were {dtype})",
        )
    got = np.asarray(received.array, dtype=np.float64)
    # the usual case, every entry finite and close: nothing below can fail (a NaN or an infinity on
    # either side, or a difference that overflows, is judged below)
    if all_finite_and_close(got, golden, allowed):
        return None
    total = int(golden.size)

    # Non-finite placement: NaN must match NaN, ±inf the same infinity.
    got_nan, gold_nan = np.isnan(got), np.isnan(golden)
    got_inf, gold_inf = np.isinf(got), np.isinf(golden)
    bad_nonfinite = (
        (got_nan != gold_nan) | (got_inf != gold_inf) | (got_inf & gold_inf & (np.sign(got) != np.sign(golden)))
    )
    if bad_nonfinite.any():
        first = tuple(int(i) for i in np.argwhere(bad_nonfinite)[0])
        count = int(bad_nonfinite.sum())
        if not (got_nan | got_inf)[first]:  # finite where the golden value is not
            order = [tuple(int(i) for i in ix) for ix in np.argwhere(bad_nonfinite)[:SHOW_WORST]]
            entries = tuple(EntryMismatch(ix, float(got[ix]), float(golden[ix])) for ix in order)
            return Mismatch(
                Verdict.WRONG_VALUE,
                name=name,
                wrong=count,
                total=total,
                entries=entries,
                tolerance=tolerance_text,
                got_dtype=received.dtype,
                dtype=dtype,
            )
        entry = EntryMismatch(first, float(got[first]), float(golden[first]))
        return Mismatch(
            Verdict.NON_FINITE,
            name=name,
            wrong=count,
            total=total,
            entries=(entry,),
            got_dtype=received.dtype,
            dtype=dtype,
        )

    finite = np.isfinite(golden)
    with np.errstate(over="ignore"):  # finite entries far apart: an infinite error, judged wrong below
        err = np.abs(np.where(finite, got, 0.0) - np.where(finite, golden, 0.0))
    wrong = ~entries_close(got, golden, allowed)  # the one "close enough" rule
    if not wrong.any():
        return None
    count = int(wrong.sum())
    # Worst first by the size of the error: an entry whose allowed error is a subnormal floor
    # (an exact 0 expected) would lead a list ordered by error/allowed with a tiny mistake.
    size = np.where(wrong, np.nan_to_num(err, nan=np.inf), -1.0)
    flat = np.argsort(-size, axis=None, kind="stable")[: min(SHOW_WORST, count)]
    order = [tuple(int(i) for i in np.unravel_index(f, golden.shape)) for f in flat]
    tiny = _TINY.get(dtype, 0.0)
    entries = tuple(
        EntryMismatch(
            ix, float(got[ix]), float(golden[ix]), float(err[ix]), float(allowed[ix]), bool(allowed[ix] < tiny)
        )
        for ix in order
    )
    return Mismatch(
        Verdict.WRONG_VALUE,
        wrong=count,
        entries=entries,
        tolerance=tolerance_text,
        lower_precision=_PRECISION.get(received.dtype, 0) < _PRECISION.get(dtype, 0),
        name=name,
        total=total,
        got_dtype=received.dtype,
        dtype=dtype,
    )
