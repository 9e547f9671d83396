"""Tolerances: how far a computed value may be from the float64 golden value.

Modes (a spec chooses one, and a worked example may override it):

``exact``
    bit-for-bit equality with the golden value; for integer or dyadic examples only.
``close``
    ``|got - golden| <= atol + rtol·|golden|`` with per-dtype defaults from
    ``torch.testing.assert_close`` (float64 1e-7/1e-7, float32 1.3e-6/1e-5, float16 1e-3/1e-5,
    bfloat16 1.6e-2/1e-5); for half precision atol is raised to one ulp at 1.0 so that results
    near zero are not judged below rounding noise.
``dot_bound``
    ``|got - golden| <= factor · d_k · u · Σ_i |q_i k_i|``: the classical forward error bound of
    a dot product (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1),
    with ``u`` the unit roundoff of the tested dtype. It scales with the size of the computation
    and stays meaningful near zero (perpendicular keys). For float16 and bfloat16 the bound is
    that of float32 accumulation, ``factor · (u + d_k · u_fp32) · Σ_i |q_i k_i|``: each term
    rounded once in the low precision, summed in float32 (cuBLAS, SDPA). In general a contract
    states its low-precision budget as :class:`ErrorTerms`: what is rounded in the tested dtype
    (in its ``u``), what is accumulated in float32 (in float32's ``u``) and an absolute floor in
    subnormals, so that no sum over ``n_k`` keys or ``d_k`` coordinates is charged the low
    precision's ``u`` once per term: ``factor · (u·rounding + u_fp32·accumulation) + u·|golden| +
    floor·(smallest subnormal)``.
``ratio``
    the low-precision rule of FlashAttention and PyTorch's SDPA tests: the maximum error may be at
    most ``factor`` times the maximum error of the reference run *in the same dtype* against the
    float64 golden value, with the dtype's ``close`` atol and one ulp of each entry as floors.
    Meant for float16/bfloat16 (on GPU), where no a-priori bound is tight. A third floor is the
    ``dot_bound``: one rounding of each term in the low precision, summed in float32. Our reference
    accumulates in float32 and is often exact on small cases, so K× its error alone would reject
    correct code that rounds each product in the low precision (``torch.sum(q * keys, -1)``), as
    the naive low-precision baseline of those test suites does itself. The floor is ``factor``
    times that bound, as the rule allows ``factor`` times the baseline's error: code that rounds
    each operand once more (scaling ``Q`` and ``K`` by ``d**-0.25`` in the low precision) is correct
    too. Computing in a coarser dtype (bfloat16 inside a float16 run, 8 times float16's unit
    roundoff) still fails. Without the reference's own output (the spec loader, which runs no
    torch), the floor alone is the rule's a-priori bound.

Every rule lives here: :func:`allowed_error` for a call's output (the ratio rule's floor and
measured error combined) and :func:`gradient_allowed` for each gradient of a backward call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnscore.boundary.dtypes import DTYPES, LOW_PRECISION, SMALLEST_SUBNORMAL, UNIT_ROUNDOFF

__all__ = [
    "Tolerance",
    "ErrorTerms",
    "UNIT_ROUNDOFF",
    "CLOSE_DEFAULTS",
    "allowed_error",
    "gradient_allowed",
    "DTYPES",
    "entries_close",
    "close_enough",
    "all_finite_and_close",
]


def entries_close(got: np.ndarray, want: np.ndarray, allowed: np.ndarray | float) -> np.ndarray:
    """Entry by entry, whether ``got`` is close enough to ``want``: the one "close enough" rule.

    NaN matches only NaN (it is never a wildcard), an infinity only the same infinity, and a
    finite entry is close when ``|got - want| <= allowed`` there (absolute error; ``allowed``
    broadcasts). Shapes must already be equal.

    >>> entries_close(np.array([1.0, np.nan, np.inf]), np.array([1.1, np.nan, -np.inf]), 0.2).tolist()
    [True, True, False]
    """
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
        close = diff <= allowed
        if np.count_nonzero(close) == close.size and np.count_nonzero(np.isfinite(diff)) == diff.size:
            return close  # every entry finite and close (the usual case: no walk over the non-finite ones)
        both_nan = np.isnan(got) & np.isnan(want)
        same_inf = np.isinf(got) & (got == want)
        finite = np.isfinite(got) & np.isfinite(want)
        diff = np.abs(np.where(finite, got - want, 0.0))
        return both_nan | same_inf | (finite & (diff <= allowed))


_ENTRY_BY_ENTRY = 32
"""Arrays of at most this many entries are checked by :func:`all_finite_and_close` entry by entry, on
Python floats: for so few, numpy's per-call overhead (``errstate`` above all) costs more than the
loop, and Python's floats are the same IEEE doubles (a NaN or an infinity on either side gives a
difference that is not finite, a difference that overflows is infinite, and neither warns)."""
_INF = float("inf")


def all_finite_and_close(got: np.ndarray, want: np.ndarray, allowed: np.ndarray | float) -> bool:
    """Whether every entry of ``got`` and ``want`` is finite and ``|got - want| <= allowed`` there:
    the usual case, where :func:`entries_close` is all True without its walk over NaN and
    infinities (a NaN or an infinity on either side, or a difference that overflows, gives False;
    the rule may still hold, which only the walk says). ``got`` and ``want``: float64 arrays of one
    shape; ``allowed``: an array of that shape, or anything numpy broadcasts to it.

    >>> all_finite_and_close(np.array([1.0, 2.0]), np.array([1.1, 2.0]), np.array([0.2, 0.0]))
    True
    >>> all_finite_and_close(np.array([np.nan]), np.array([np.nan]), np.array([1.0]))
    False
    """
    if got.size <= _ENTRY_BY_ENTRY and getattr(allowed, "shape", None) == got.shape:
        bounds = allowed.ravel().tolist()  # type: ignore[union-attr]
        for x, y, most in zip(got.ravel().tolist(), want.ravel().tolist(), bounds, strict=True):
            d = abs(x - y)
            if not d <= most or d == _INF:  # a NaN difference (or allowed error) fails the first test
                return False
        return True
    with np.errstate(all="ignore"):
        diff = np.abs(got - want)
    close = diff <= allowed
    return bool(np.count_nonzero(close) == close.size and np.count_nonzero(np.isfinite(diff)) == diff.size)


def close_enough(got: np.ndarray, want: np.ndarray, allowed: np.ndarray | float) -> bool:
    """Same shape and every entry close (:func:`entries_close`; every entry finite and close needs
    no walk, :func:`all_finite_and_close`)."""
    if np.shape(got) != np.shape(want):
        return False
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return all_finite_and_close(got, want, allowed) or bool(entries_close(got, want, allowed).all())


# (rtol, atol) per dtype; half-precision atol floored at one ulp at 1.0 (2u).
CLOSE_DEFAULTS = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 2.0**-10),
    "bfloat16": (1.6e-2, 2.0**-7),
}

MODES = ("exact", "close", "dot_bound", "ratio")


@dataclass(frozen=True)
class ErrorTerms:
    """The error budget of one computation in float16/bfloat16 with float32 accumulation, per entry.

    What a kernel that rounds its inputs, intermediates and output in the low precision but
    accumulates every sum in float32 (cuBLAS, SDPA, torch's CPU matmul and reductions) can be off
    by, as three per-entry magnitudes (float64 arrays broadcastable to the result's shape):

    Attributes:
        rounding: in units of the tested dtype's ``u``: the magnitudes rounded once in it (a
            product, a scaled input, a softmax weight before ``P V``, ...).
        accumulation: in units of float32's ``u``: the sums accumulated in float32 (``d_k · Σ|q_i k_i|``
            for a dot product; it never grows with the low precision's ``u``).
        floor: in units of the tested dtype's smallest subnormal: the absolute floor for values
            that fall below the normal range.
    """

    rounding: np.ndarray
    accumulation: np.ndarray
    floor: np.ndarray | float

    @classmethod
    def of_sum(cls, n: int, scale: np.ndarray, operands: np.ndarray | None = None) -> ErrorTerms:
        """The terms of an ``n``-term sum with ``Σ|terms|`` = ``scale``: each term rounded once, summed in float32.

        >>> t = ErrorTerms.of_sum(4, np.array([2.0]))
        >>> t.rounding.tolist(), t.accumulation.tolist(), t.floor
        ([2.0], [8.0], 5.0)
        """
        scale = np.asarray(scale, dtype=np.float64)
        floor: np.ndarray | float = max(n, 1) + 1.0
        if operands is not None:
            floor = floor + np.nan_to_num(np.asarray(operands, dtype=np.float64), posinf=0.0)
        return cls(scale, max(n, 1) * scale, floor)


# Smallest positive subnormal per dtype: below the normal range rounding errors are absolute.
SUBNORMAL_MIN = SMALLEST_SUBNORMAL


@dataclass(frozen=True)
class Tolerance:
    """A comparison mode and its parameters.

    Attributes:
        mode: ``"exact"``, ``"close"``, ``"dot_bound"`` or ``"ratio"``.
        rtol, atol: for ``close``; None means the dtype's default.
        factor: for ``dot_bound``, the constant in front of ``d_k · u · Σ|q_i k_i|``; for
            ``ratio``, the allowed multiple of the reference's own error.
    """

    mode: str = "dot_bound"
    rtol: float | None = None
    atol: float | None = None
    factor: float = 2.0

    def describe(self, dtype: str, bound_text: str = "d_k·u·Σ|q_i k_i|") -> str:
        """One phrase naming the mode and its numbers, for feedback.

        Example:
            >>> Tolerance().describe("float32")
            'dot-product error bound 2·d_k·u·Σ|q_i k_i| (u=5.96e-08, float32)'
            >>> Tolerance("close").describe("float16")
            'close: rtol=0.001, atol=0.000976562 (float16)'
        """
        if self.mode == "exact":
            return "exact comparison"
        if self.mode == "close":
            rtol, atol = self._close(dtype)
            return f"close: rtol={rtol:g}, atol={atol:g} ({dtype})"
        if self.mode == "ratio":
            floor = self._close(dtype)[1]
            return (
                f"error ratio: at most {self.factor:g}× the reference's own {dtype} error (floor atol {floor:g}, "
                f"one ulp, {self.factor:g}× one rounding per term)"
            )
        kind = "dot-product error bound" if bound_text.startswith("d_k·") else "error bound"
        return f"{kind} {self.factor:g}·{bound_text} (u={UNIT_ROUNDOFF[dtype]:.3g}, {dtype})"

    def _close(self, dtype: str) -> tuple[float, float]:
        rtol, atol = CLOSE_DEFAULTS[dtype]
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)

    def ratio_allowed(self, golden: np.ndarray, reference_output: np.ndarray, dtype: str) -> np.ndarray:
        """``ratio`` mode: ``max(atol, factor · max|reference − golden|)`` for every entry."""
        golden = np.asarray(golden, dtype=np.float64)
        ref = np.asarray(reference_output, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(golden) & np.isfinite(ref)
            err = float(np.max(np.abs(np.where(finite, ref - golden, 0.0)), initial=0.0))
        _, atol = self._close(dtype)
        # The floor is magnitude-aware: one ulp of each entry in the tested dtype (an entry of 19
        # in float16 is 0.0156 apart from its neighbours, not 0.000977 as at 1.0).
        ulp = 2 * UNIT_ROUNDOFF[dtype] * np.abs(np.where(np.isfinite(golden), golden, 0.0))
        return np.maximum(max(atol, self.factor * err), ulp)


def allowed_error(
    tol: Tolerance,
    golden: np.ndarray,
    dtype: str,
    d_k: int,
    scale: np.ndarray,
    operands: np.ndarray | None = None,
    terms: ErrorTerms | None = None,
    reference: np.ndarray | None = None,
) -> np.ndarray:
    """Per-entry allowed absolute error, same shape as ``golden`` (float64).

    Args:
        tol: the tolerance to apply.
        golden: the float64 golden value.
        dtype: the tested dtype (``"float32"``, ...), which sets ``u`` and the close defaults.
        d_k: the dot products' length.
        scale: ``Σ_i |q_i k_i|`` per entry, same shape as ``golden``.
        operands: ``Σ_i (|q_i| + |k_i|)`` per entry, or None. Below the normal range rounding is
            absolute: a query scaled first (``(Q·d_k^-½) Kᵀ``) into the subnormal range is off by
            up to half a subnormal per coordinate, and that error is multiplied by ``|k_i|``. The
            absolute floor is ``(d_k + 1 + Σ_i (|q_i| + |k_i|))`` subnormals (tiny outside float16).
        terms: for float16/bfloat16, the contract's own low-precision budget (:class:`ErrorTerms`);
            None means the budget of a ``d_k``-term sum of ``scale``
            (:meth:`ErrorTerms.of_sum`). Ignored for float32 and float64.
        reference: for ``ratio``, the reference's own output computed in ``dtype`` (float64
            values, ``golden``'s shape): the allowed error is at least :meth:`Tolerance.ratio_allowed`
            of it. Without it (or in another mode) only the bound with ``tol.factor`` applies, which
            is the ratio rule's floor (see the module docstring).

    Example:
        The worked example in float32 (``d_k = 2``; golden ``[1, 0, 0.7]``; ``Σ|q_i k_i|`` is
        ``[1, 0, 0.7]`` too), in units of ``u = 2⁻²⁴``: ``2·d_k·u·Σ|q_i k_i| + u·|golden|``, and
        for the perpendicular key only the subnormal floor, far below ``u``:

        >>> golden = np.array([1.0, 0.0, 0.7])
        >>> allowed = allowed_error(Tolerance(), golden, "float32", d_k=2, scale=golden)
        >>> (allowed / 2**-24).round(6).tolist()
        [5.0, 0.0, 3.5]
        >>> allowed_error(Tolerance("close"), np.array([0.0, 100.0]), "float32", 2, np.zeros(2)).round(8).tolist()
        [1e-05, 0.00014]
        >>> allowed_error(Tolerance("exact"), golden, "float32", 2, golden).tolist()
        [0.0, 0.0, 0.0]
    """
    golden = np.asarray(golden, dtype=np.float64)
    if tol.mode == "exact":
        return np.zeros_like(golden)
    if tol.mode == "close":
        rtol, atol = tol._close(dtype)
        return atol + rtol * np.abs(golden)
    u = UNIT_ROUNDOFF[dtype]
    scale = np.asarray(scale, dtype=np.float64)
    if dtype in LOW_PRECISION:
        # What an implementation that accumulates in float32 (as cuBLAS and SDPA do) can be off by:
        # each term rounded once in the low precision (inputs scaled first, products), the float32
        # sum, and the result's own rounding below. A running sum in the low precision itself
        # (error growing as d_k·u) is not accepted.
        if terms is None:
            terms = ErrorTerms.of_sum(d_k, scale, operands)
        rounding = np.asarray(terms.rounding, dtype=np.float64)
        accumulation = np.asarray(terms.accumulation, dtype=np.float64)
        bound = tol.factor * (u * rounding + UNIT_ROUNDOFF["float32"] * accumulation)
        allowed = bound + u * np.abs(golden) + terms.floor * SUBNORMAL_MIN[dtype]
    else:
        bound = tol.factor * max(d_k, 1) * u * scale
        # The result itself is rounded to the output dtype: allow half an ulp of the golden value too,
        # and an absolute floor for products that fall into the subnormal range (or underflow to 0).
        floor_units: float | np.ndarray = max(d_k, 1) + 1.0
        if operands is not None:
            floor_units = floor_units + np.nan_to_num(np.asarray(operands, dtype=np.float64), posinf=0.0)
        allowed = bound + u * np.abs(golden) + floor_units * SUBNORMAL_MIN[dtype]
    if tol.mode == "ratio" and reference is not None:
        allowed = np.maximum(tol.ratio_allowed(golden, reference, dtype), allowed)
    return allowed


def gradient_allowed(
    tol: Tolerance,
    golden_grad: np.ndarray,
    scale: np.ndarray,
    n: int,
    dtype: str,
    reference_grad: np.ndarray | None = None,
) -> np.ndarray:
    """Per-entry allowed absolute error of one gradient, same shape as ``golden_grad`` (float64).

    Args:
        tol: the spec's tolerance.
        golden_grad: the float64 gradient
            (:func:`attnscore.maths.golden_gradients.contract_gradients`).
        scale, n: its error scale ``M`` and sum length
            (:func:`attnscore.maths.golden_gradients.contract_gradient_scales`).
        dtype: the tested dtype.
        reference_grad: for float16/bfloat16, the reference's own gradient computed in ``dtype``
            (torch autograd of the reference); required there.

    Rules: ``close`` is the dtype's ``close`` rule on the gradient; otherwise (``dot_bound``,
    ``exact``, ``ratio`` in float32/float64) ``factor · n · u · M + u·|g| + (n + 1)`` subnormals,
    with the spec's factor (2 for ``exact``: a gradient is rarely exact where the forward is). In
    float16/bfloat16 the ratio rule, as forward (FlashAttention's tests): at most ``factor`` (the
    spec's for ``ratio``, else 2) times the reference's own largest error in that dtype, with the
    dtype's ``close`` atol, one ulp of each entry and one low-precision rounding of each term summed in
    float32 (``u·M + n·u_fp32·M``) as floors.

    Raises:
        ValueError: a float16/bfloat16 dtype without ``reference_grad``.

    Example (float32, a gradient entry of 1 with magnitude 1 over 2 terms, factor 2):
        >>> allowed = gradient_allowed(Tolerance(), np.array([1.0]), np.array([1.0]), 2, "float32")
        >>> float(allowed[0] / 2**-24).__round__(6)
        5.0
    """
    g = np.nan_to_num(np.asarray(golden_grad, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    M = np.nan_to_num(np.asarray(scale, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    u = UNIT_ROUNDOFF[dtype]
    if tol.mode == "close":
        return allowed_error(tol, g, dtype, n, M)
    if dtype in LOW_PRECISION:
        if reference_grad is None:
            raise ValueError(f"gradient_allowed: {dtype} needs the reference's own {dtype} gradient (ratio rule)")
        factor = tol.factor if tol.mode == "ratio" else 2.0
        ratio = Tolerance("ratio", factor=factor).ratio_allowed(g, reference_grad, dtype)
        floor = u * M + max(n, 1) * UNIT_ROUNDOFF["float32"] * M + u * np.abs(g)
        return np.maximum(ratio, floor + (n + 1) * SUBNORMAL_MIN[dtype])
    factor = 2.0 if tol.mode == "exact" else tol.factor
    return factor * max(n, 1) * u * M + u * np.abs(g) + (n + 1) * SUBNORMAL_MIN[dtype]
