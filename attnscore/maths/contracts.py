"""Function contracts: what a graded function takes and returns, and how its truth is computed.

A contract ties a spec's ``function.contract`` name to the reference implementation
(:mod:`attnscore.maths.reference`), the independent float64 golden path (:mod:`attnscore.maths.golden`),
the parameters' shapes in the shape legend, the per-entry error scale used by the tolerance, and
a hypothesis strategy for its arguments.

The first three contracts (``score``, ``scores``, ``score_matrix``) are views of one
computation, ``S = Q Kᵀ``; ``scaled_score_matrix`` is ``S/√d_k``. They also say how their
arguments become ``(Q, K)`` (``to_qk``) and back (``pack``), so the Q Kᵀ properties reach them
all. The others (bilinear, additive, masking, weights, attention) only have their own golden
function, error scale and argument strategy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnscore.boundary.dtypes import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.maths import golden, golden_variants, reference, variants
from attnscore.maths.bounds import Bound
from attnscore.maths.tolerance import ErrorTerms

__all__ = ["Contract", "CONTRACTS", "Keyword", "get_contract", "QK_CONTRACTS"]

Args = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Keyword:
    """A keyword argument a spec may fix for every call (``function.keywords``), passed by name.

    Attributes:
        name: the keyword's name, as the implementation takes it (``is_causal``, ``scale``).
        kind: ``"bool"``, ``"number"`` (an int or float), ``"positive_or_null"`` (a number > 0 or
            null for the default) or ``"zero"`` (the number 0, e.g. ``dropout_p``).
        default: the value the implementation's default means (what the reference uses unset).
        description: one line for the docs and error messages.
    """

    name: str
    kind: str
    default: Any
    description: str

    def expected(self) -> str:
        """What a value must be, in words (for located errors)."""
        return {
            "bool": "true or false",
            "number": "a number",
            "positive_or_null": "a number > 0, or null for the default",
            "zero": "0 (the reference is deterministic)",
        }[self.kind]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (as YAML loads it) is a value of this keyword."""
        is_number = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "number":
            return bool(is_number)
        if self.kind == "positive_or_null":
            return value is None or (bool(is_number) and value > 0)
        return bool(is_number) and value == 0


@dataclass(frozen=True)
class Contract:
    """One function contract.

    Attributes:
        name: the contract's name, as written in a spec's ``function.contract``.
        parameters: ``(name, shape)`` pairs; a shape is a tuple of legend symbols
            (``"..."``, ``"n_q"``, ``"n_k"``, ``"d_k"``, ``"d_v"``, ``"d_q"``, ``"d_a"``).
        returns: the return shape in the same legend.
        reference: the torch reference implementation.
        golden_fn: ``args -> float64 array``, the independent numpy path.
        error_fn: ``args -> (n, scale)``: the allowed error per entry is about
            ``factor · n · u · scale`` (see :func:`attnscore.maths.tolerance.allowed_error`).
        kind: ``"scores"``, ``"mask"``, ``"weights"``, ``"attention"`` or ``"causal"`` (attention
            with a causal flag instead of a mask argument; which properties and mistakes apply).
        bool_parameters: parameters that are bool masks (True = keep), never cast to the tested dtype.
        to_qk, from_scores, pack: for Q Kᵀ views only (else None); see the module docstring.
        qk_operands: for Q Kᵀ views, the positional arguments (numpy arrays or torch tensors, in
            parameter order) as ``(Q, K)`` views without a copy or a cast, e.g. ``q, k`` →
            ``(q[None, :], k[None, :])``: the one home of this geometry (``to_qk`` is built on it,
            and the mistake catalogue uses it on tensors); None otherwise.
        batched, single_query, single_key: what shapes the Q Kᵀ views can express.
        scale: for Q Kᵀ views, how ``d_k`` scales ``Q Kᵀ`` (``1`` raw, ``"sqrt"`` for ``/√d_k``).
        ties: ``(symbol, same_as)`` pairs a spec tied (see :meth:`tied`); their sizes are equal.
        bounds: shape bounds (``n_q <= n_k``, :mod:`attnscore.maths.bounds`): the kernel's domain;
            generated inputs are drawn inside it (see :meth:`bounded`).
        operand_fn: for Q Kᵀ views, ``args -> Σ_i (|q_i| + |k_i|)`` per output entry: an input
            scaled into the subnormal range first is off by up to half a subnormal per
            coordinate, times the other factor (see :func:`attnscore.maths.tolerance.allowed_error`).
        keywords: the keyword arguments a spec may fix (:class:`Keyword`); empty for the
            positional contracts.
        options: the keyword values this contract was configured with (:meth:`configured`), as
            ``(name, value)`` pairs: passed by name to the implementation on every call, and used
            by the reference, the golden path and the error bound.
        keyword_parameters: tensor parameters passed by name (``attn_mask=``), not by position;
            they come after the positional ones.
        optional_parameters: parameters a spec may leave out (then never passed: the
            implementation's default applies, e.g. no ``attn_mask``).
        configure: ``(contract, options, kept parameters) -> contract``: this contract for a
            spec's keywords and parameters (:meth:`configured`); None for positional contracts.
        samples: representative ``(options, kept parameters)`` configurations
            (:meth:`sample_configurations`).
        low_error_fn: ``(args, dtype, factor) -> ErrorTerms``, the budget in float16/bfloat16 of a kernel that rounds
            in the low precision and accumulates in float32, for contracts whose error is not one
            sum (softmax, attention); None means the ``n``-term sum of ``error_fn``
            (:meth:`attnscore.maths.tolerance.ErrorTerms.of_sum`).
    """

    name: str
    parameters: tuple[tuple[str, tuple[str, ...]], ...]
    returns: tuple[str, ...]
    reference: Callable[..., torch.Tensor]
    golden_fn: Callable[[Args], np.ndarray]
    error_fn: Callable[[Args], tuple[int, np.ndarray]]
    kind: str = "scores"
    bool_parameters: frozenset[str] = field(default_factory=frozenset)
    to_qk: Callable[[Args], tuple[np.ndarray, np.ndarray]] | None = None
    qk_operands: Callable[..., tuple[Any, Any]] | None = None
    from_scores: Callable[[np.ndarray], np.ndarray] | None = None
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]] | None = None
    batched: bool = True
    single_query: bool = False
    single_key: bool = False
    scale: str = "none"
    bound_text: str = "d_k·u·Σ|q_i k_i|"
    operand_fn: Callable[[Args], np.ndarray] | None = None
    ties: tuple[tuple[str, str], ...] = ()
    bounds: tuple[Bound, ...] = ()

    def bounded(self, bounds: tuple[Bound, ...]) -> Contract:
        """This contract with shape bounds added (``n_q <= n_k``): generated inputs lie inside them.

        Raises:
            ValueError: a bound names a symbol this contract's legend does not use.
        """
        from attnscore.maths.bounds import check_symbols

        check_symbols(bounds, self)
        added = tuple(b for b in bounds if b not in self.bounds)
        return dataclasses.replace(self, bounds=self.bounds + added) if added else self

    low_error_fn: Callable[[Args, str, float], ErrorTerms] | None = None
    keywords: tuple[Keyword, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    keyword_parameters: frozenset[str] = field(default_factory=frozenset)
    optional_parameters: frozenset[str] = field(default_factory=frozenset)
    configure: Callable[[Contract, Mapping[str, Any], tuple[str, ...]], Contract] | None = None
    samples: tuple[tuple[tuple[tuple[str, Any], ...], tuple[str, ...]], ...] = ()

    def sample_configurations(self) -> tuple[Contract, ...]:
        """This contract and representative configurations of its keywords (:attr:`samples`, as
        ``(options, kept parameters)``): what the catalogue tables list a keyword-dependent entry under."""
        return (self, *(self.configured(dict(options), kept) for options, kept in self.samples))

    def keyword(self, name: str) -> Keyword:
        """The keyword called ``name``; KeyError naming the known ones otherwise."""
        for kw in self.keywords:
            if kw.name == name:
                return kw
        known = ", ".join(k.name for k in self.keywords) or "none"
        raise KeyError(f"contract {self.name} takes no keyword {name!r}; known: {known}")

    def option(self, name: str) -> Any:
        """The configured value of keyword ``name``, else its default."""
        options = dict(self.options)
        return options[name] if name in options else self.keyword(name).default

    def configured(self, options: Mapping[str, Any], kept: tuple[str, ...] | None = None) -> Contract:
        """This contract with keyword values fixed and optional parameters left out.

        Args:
            options: keyword name -> value (each checked by :meth:`Keyword.accepts`).
            kept: the parameter names a spec declares (None: all); every left-out one must be
                optional.

        Raises:
            ValueError: an unknown keyword, a value of the wrong kind, or a required parameter
                left out (the message says what was expected and what was found).
        """
        kept = self.parameter_names if kept is None else tuple(kept)
        for name, value in options.items():
            try:
                kw = self.keyword(name)
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            if not kw.accepts(value):
                raise ValueError(f"keyword {name}: expected {kw.expected()}, found {value!r}")
        missing = [n for n in self.parameter_names if n not in kept and n not in self.optional_parameters]
        if missing:
            optional = ", ".join(sorted(self.optional_parameters)) or "none"
            raise ValueError(f"contract {self.name} needs parameter {missing[0]}; only {optional} may be left out")
        if not options and kept == self.parameter_names:
            return self
        if self.configure is None:
            raise ValueError(f"contract {self.name} takes no keywords")
        return self.configure(self, dict(options), kept)

    def binding(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` as the runners call it, ``f(*arguments in parameter order)``, passing the
        keyword parameters (``attn_mask``) by name and the configured keywords (:attr:`options`)
        too; ``function`` itself when the contract has neither.

        Example:
            >>> c = get_contract("sdpa").configured({"scale": 0.5}, ("query", "key", "value", "attn_mask"))
            >>> c.binding(lambda q, k, v, **kw: sorted(kw))(1, 2, 3, 4)
            ['attn_mask', 'scale']
        """
        if not self.options and not self.keyword_parameters:
            return function
        return _KeywordCall(function, self.parameter_names, self.keyword_parameters, dict(self.options))

    def tied(self, ties: Mapping[str, str]) -> Contract:
        """This contract with legend symbols tied (``{"d_v": "d_k"}``: d_v is always d_k's size).

        Kernels often require it (FlashAttention-style kernels need ``d_v = d_k``): generated
        inputs, worked-example checks and shapes in feedback then use one size for both.
        """
        if not ties:
            return self

        def sub(legend: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(ties.get(sym, sym) for sym in legend)

        return dataclasses.replace(
            self,
            parameters=tuple((name, sub(legend)) for name, legend in self.parameters),
            returns=sub(self.returns),
            ties=tuple(sorted({**dict(self.ties), **ties}.items())),
        )

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parameters)

    @property
    def is_qk_view(self) -> bool:
        """Whether this contract is a view of ``Q Kᵀ`` (raw or scaled), reachable from ``(Q, K)``."""
        return self.to_qk is not None

    def golden(self, args: Args) -> np.ndarray:
        """The float64 golden value for ``args`` (numpy path, independent of the reference)."""
        return np.asarray(self.golden_fn(args), dtype=np.float64)

    def error_scale(self, args: Args) -> tuple[int, np.ndarray]:
        """``(n, scale)`` per output entry for the error bound (``n`` = ``d_k`` for dot products)."""
        return self.error_fn(args)

    def low_precision_terms(self, args: Args, dtype: str = "bfloat16", factor: float = 1.0) -> ErrorTerms:
        """The ``dtype`` (float16/bfloat16) error budget per output entry, for a bound with ``factor``
        (:class:`attnscore.maths.tolerance.ErrorTerms`; the factor only sets how far a
        non-linear step such as softmax may amplify the errors before it)."""
        if self.low_error_fn is not None:
            return self.low_error_fn(args, dtype, factor)
        n, scale = self.error_fn(args)
        return ErrorTerms.of_sum(n, scale, self.operand_sums(args))

    def operand_sums(self, args: Args) -> np.ndarray | None:
        """``Σ_i (|q_i| + |k_i|)`` per output entry for Q Kᵀ views, else None (no operand floor)."""
        return None if self.operand_fn is None else np.asarray(self.operand_fn(args), dtype=np.float64)


class _KeywordCall:
    """A function called with some arguments by name and fixed keywords (:meth:`Contract.binding`)."""

    def __init__(
        self, function: Callable[..., Any], names: tuple[str, ...], by_name: frozenset[str], fixed: dict[str, Any]
    ) -> None:
        self.function = function
        self.names = names
        self.positional = sum(1 for n in names if n not in by_name)
        self.fixed = fixed
        self.__name__ = getattr(function, "__name__", "function")
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)

    def __call__(self, *args: Any) -> Any:
        named = dict(zip(self.names[self.positional :], args[self.positional :], strict=True))
        return self.function(*args[: self.positional], **named, **self.fixed)

    def __repr__(self) -> str:
        by_name = [f"{n}=..." for n in self.names[self.positional :]]
        fixed = [f"{k}={v!r}" for k, v in self.fixed.items()]
        return f"{self.__qualname__}(*{list(self.names[: self.positional])}, {', '.join(by_name + fixed)})"


def _qk_view(
    name: str,
    parameters: tuple[tuple[str, tuple[str, ...]], ...],
    returns: tuple[str, ...],
    ref: Callable[..., torch.Tensor],
    qk_operands: Callable[..., tuple[Any, Any]],
    from_scores: Callable[[np.ndarray], np.ndarray],
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]],
    *,
    batched: bool,
    single_query: bool,
    single_key: bool,
    scaled: bool = False,
) -> Contract:
    def to_qk(a: Args) -> tuple[np.ndarray, np.ndarray]:
        Q, K = qk_operands(*(_f(a, n) for n, _ in parameters))
        return np.asarray(Q), np.asarray(K)

    def gold(a: Args) -> np.ndarray:
        Q, K = to_qk(a)
        S = golden.scaled_dot_products(Q, K) if scaled else golden.dot_products(Q, K)
        return from_scores(S)

    def error(a: Args) -> tuple[int, np.ndarray]:
        Q, K = to_qk(a)
        mags = golden.dot_magnitudes(Q, K)
        if scaled:
            mags = mags / np.sqrt(Q.shape[-1]) + np.abs(golden.scaled_dot_products(Q, K))
        return int(Q.shape[-1]), from_scores(mags)

    def operands(a: Args) -> np.ndarray:
        Q, K = to_qk(a)
        return from_scores(golden.operand_sums(Q, K))

    return Contract(
        name=name,
        parameters=parameters,
        returns=returns,
        reference=ref,
        golden_fn=gold,
        error_fn=error,
        to_qk=to_qk,
        qk_operands=qk_operands,
        from_scores=from_scores,
        pack=pack,
        batched=batched,
        single_query=single_query,
        single_key=single_key,
        scale="sqrt" if scaled else "none",
        operand_fn=operands,
    )


def _f(a: Args, name: str) -> np.ndarray:
    return np.asarray(a[name], dtype=np.float64)


def _weights_error(S: np.ndarray, mask: np.ndarray | None) -> tuple[int, np.ndarray]:
    """Softmax error scale: ``w·(1 + |s| + |max s|)`` plus a floor of one unit per row (``1/n_k``).

    Rounding each score by a relative ``u`` moves ``s_i - logsumexp(s)`` by up to ``u·(|s_i| + |max s|)``,
    so any backward-stable softmax (max subtraction, or ``exp(s - logsumexp(s))``) stays inside.
    """
    S = np.asarray(S, dtype=np.float64)
    w = golden.softmax_weights(S, mask)
    keep = np.ones(S.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), S.shape)
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True)
        spread = np.where(keep & np.isfinite(z - m), np.abs(z) + np.abs(m), 0.0)
    n_k = S.shape[-1]
    return n_k, np.nan_to_num(w) * (1.0 + spread) + 1.0 / n_k


def _softmax_parts(S: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(W, gap, spread)`` of a masked softmax: weights (NaN as 0), ``|s - max s|`` and ``|s| + |max s|``
    at kept finite entries (0 elsewhere)."""
    w = golden.softmax_weights(S, keep)
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True)
        ok = keep & np.isfinite(z - m)
        gap = np.where(ok, np.abs(z - m), 0.0)
        spread = np.where(ok, np.abs(z) + np.abs(m), 0.0)
    return np.nan_to_num(w), gap, spread


def _neg_log(W: np.ndarray) -> np.ndarray:
    """``|log w|`` where ``w > 0``, else 0."""
    with np.errstate(divide="ignore"):
        return np.where(W > 0, -np.log(np.where(W > 0, W, 1.0)), 0.0)


def _weights_low_terms(S: np.ndarray, mask: np.ndarray | None) -> ErrorTerms:
    """Softmax in float16/bfloat16, accumulated in float32 (:class:`ErrorTerms`).

    Rounded in the low precision, relative to ``w_i``: ``s_i - max s`` (the inputs are exact, so
    the subtraction is rounded once: ``|s_i - max s|``, at most ``|log w_i|``), or ``log w_i``
    itself for ``exp(log_softmax(s))`` (``|log w_i|``), then ``exp``, the row sum and the division;
    the row sum's rounding moves every weight by the weighted mean of the exponents' errors.
    Accumulated in float32: the float32 budget of a softmax computed in float32
    (``n_k·(w·(1 + |s| + |max s|) + 1/n_k)``). Floor: ``2 + n_k·w`` subnormals (each
    ``exp`` that underflows, over the row sum). A row sum accumulated in the low precision (every
    weight doubled for 4,096 equal float16 scores) does not fit.
    """
    S = np.asarray(S, dtype=np.float64)
    keep = np.ones(S.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), S.shape)
    W, gap, spread = _softmax_parts(S, keep)
    n_k = S.shape[-1]
    mean_gap = np.sum(W * gap, axis=-1, keepdims=True)
    rounding = W * (3.0 + _neg_log(W) + mean_gap)
    accumulation = n_k * (W * (1.0 + spread) + 1.0 / max(n_k, 1))
    return ErrorTerms(rounding, accumulation, 2.0 + n_k * W)


def _attention_low_terms(a: Args, dtype: str, factor: float) -> ErrorTerms:
    """Attention in float16/bfloat16 with float32 accumulation (:class:`ErrorTerms`).

    Scores ``s = Q Kᵀ/√d_k``: rounded in the low precision up to ``2|s| + Σ|q_i k_i|/√d_k`` (a
    query scaled first and the product's result, or the product and the division, or ``√d_k``
    rounded too), accumulated in float32 ``d_k·Σ|q_i k_i|/√d_k``, floor ``d_k + 1 + Σ(|q_i| + |k_i|)``
    subnormals. Softmax renormalises, so a score error ``δs_j`` (or a rounded exponent
    ``s_j - max s``) moves the output by ``Σ_j w_j δs_j (v_j - o)``: it is carried by ``|v_j - o|``,
    not ``|v_j|``, and amplified by ``exp(2·max_j δs_j)`` when it is not small (huge scores in
    bfloat16). Each weight's own roundings (``exp``, the division, the cast before ``P V``, and
    ``log w_j`` for ``exp(log_softmax)``) are carried by ``|v_j|``; the row sum's rounding scales
    the whole output (``2|o|``); ``P V`` and the softmax's sums are accumulated in float32
    (``(2 n_k + 2)·Σ_j w_j |v_j|``).
    """
    Q, K, V = _f(a, "Q"), _f(a, "K"), _f(a, "V")
    d_k, n_k = Q.shape[-1], K.shape[-2]
    u, u32, sub = UNIT_ROUNDOFF[dtype], UNIT_ROUNDOFF["float32"], SMALLEST_SUBNORMAL[dtype]
    S = golden.scaled_dot_products(Q, K)
    kept = np.broadcast_to(np.asarray(a["mask"], dtype=bool), S.shape)
    W, gap, spread = _softmax_parts(S, kept)
    with np.errstate(invalid="ignore", over="ignore"):
        mags = golden.dot_magnitudes(Q, K) / np.sqrt(d_k)
        fin = kept & np.isfinite(S) & np.isfinite(mags)

        def clean(x: np.ndarray) -> np.ndarray:
            return np.where(fin, np.nan_to_num(x, nan=0.0, posinf=0.0), 0.0)

        r_s = clean(2.0 * np.abs(S) + mags)
        a_s = clean(d_k * mags)
        f_s = clean(d_k + 1.0 + golden.operand_sums(Q, K))
        delta = factor * (u * r_s + u32 * a_s) + sub * f_s  # the scores' own allowed error
        amp = np.exp(np.minimum(2.0 * np.max(delta, axis=-1, keepdims=True), 50.0))[..., None]  # (..., n_q, 1, 1)
        Vk = np.where(kept[..., None], np.nan_to_num(V[..., None, :, :], nan=0.0, posinf=0.0, neginf=0.0), 0.0)
        Wk = W[..., None]  # (..., n_q, n_k, 1)
        out = np.sum(Wk * Vk, axis=-2, keepdims=True)  # (..., n_q, 1, d_v)
        dev, size = np.abs(Vk - out), np.abs(Vk)  # (..., n_q, n_k, d_v)

        def keys(x: np.ndarray, carried: np.ndarray) -> np.ndarray:
            return np.sum(x[..., None] * carried, axis=-2)  # (..., n_q, n_k, d_v) -> (..., n_q, d_v)

        o = np.abs(out[..., 0, :])
        amp = amp[..., 0, :]
        rounding = amp * keys(W * (r_s + gap), dev) + keys(W * (3.0 + _neg_log(W)), size) + 2.0 * o
        accumulation = amp * keys(W * (a_s + spread), dev) + (2.0 * n_k + 2.0) * keys(W, size)
        floor = amp * keys(W * f_s, dev) + keys(np.where(kept, 2.0 + n_k * W, 0.0), size) + 2.0
    return ErrorTerms(rounding, accumulation, floor)


def _attention_error(a: Args) -> tuple[int, np.ndarray]:
    Q, K, V = _f(a, "Q"), _f(a, "K"), _f(a, "V")
    d_k, n_k = Q.shape[-1], K.shape[-2]
    S = golden.scaled_dot_products(Q, K)
    w = golden.softmax_weights(S, a["mask"])
    kept = np.broadcast_to(np.asarray(a["mask"], dtype=bool), S.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        # Masked keys contribute nothing, whatever they hold (NaN, inf); a non-finite kept key makes
        # its row's golden value non-finite, which is compared by placement, not by this bound.
        err_S = np.where(kept, d_k * golden.dot_magnitudes(Q, K) / np.sqrt(d_k) + np.abs(S), 0.0)  # units of u
        row = np.max(np.nan_to_num(err_S, nan=0.0, posinf=0.0), axis=-1, keepdims=True)
        W = np.nan_to_num(w)
        per_key = (W * (2.0 * row + n_k + 2.0) + n_k * W)[..., None] * np.abs(V)[..., None, :, :]
        per_key = np.where(kept[..., None], np.nan_to_num(per_key, nan=0.0, posinf=0.0), 0.0)
    return 1, per_key.sum(axis=-2)  # (..., n_q, n_k, d_v) summed over keys -> (..., n_q, d_v)


_MASK = ("...", "n_q", "n_k")


def _causal(alignment: str) -> Contract:
    def with_mask(a: Args) -> dict[str, np.ndarray]:
        keep = golden.causal_keep(np.shape(a["Q"])[-2], np.shape(a["K"])[-2], alignment)
        return {"Q": a["Q"], "K": a["K"], "V": a["V"], "mask": keep}

    def ref(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return reference.causal_attention(Q, K, V, alignment)

    return Contract(
        name=f"causal_attention_{alignment}",
        kind="causal",
        parameters=(("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k")), ("V", ("...", "n_k", "d_v"))),
        returns=("...", "n_q", "d_v"),
        reference=ref,
        golden_fn=lambda a: golden.causal_attention(a["Q"], a["K"], a["V"], alignment),
        error_fn=lambda a: _attention_error(with_mask(a)),
        low_error_fn=lambda a, dtype, factor: _attention_low_terms(with_mask(a), dtype, factor),
        bound_text="u·(error of scores and weights propagated through V)",
    )


_SDPA_KEYWORDS = (
    Keyword("dropout_p", "zero", 0.0, "dropout probability; 0 (a deterministic reference)"),
    Keyword(
        "is_causal", "bool", False, "keep key j for query i only when j <= i (top-left, torch.ones(n_q, n_k).tril())"
    ),
    Keyword("scale", "positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"),
    Keyword(
        "enable_gqa",
        "bool",
        False,
        "K and V may have fewer heads (axis -3) than Q: head h uses KV head h // (H_q / H_kv)",
    ),
)


def _kv_grouped(Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``X`` (K or V) with each KV head repeated for its group of query heads (``repeat_interleave``
    on axis -3: ``h0 h0 h1 h1``), when ``X`` has fewer heads than ``Q``."""
    if Q.ndim >= 3 and X.ndim >= 3 and X.shape[-3] not in (Q.shape[-3], 1):
        return np.repeat(X, Q.shape[-3] // X.shape[-3], axis=-3)
    return X


def _sdpa_configure(base: Contract, options: Mapping[str, Any], kept: tuple[str, ...]) -> Contract:
    """The SDPA contract for fixed keywords (``is_causal``, ``scale``, ``enable_gqa``, ``dropout_p``)
    and its kept parameters (``attn_mask`` optional)."""
    is_causal = bool(options.get("is_causal", False))
    scale = options.get("scale")
    enable_gqa = bool(options.get("enable_gqa", False))
    if is_causal and "attn_mask" in kept:
        raise ValueError(
            "keyword is_causal: expected false when attn_mask is a parameter (SDPA refuses both), found true; "
            "leave attn_mask out of function.parameters for a causal spec"
        )
    has_mask = "attn_mask" in kept

    def ref(
        query: Any,
        key: Any,
        value: Any,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = is_causal,
        scale: float | None = scale,
        enable_gqa: bool = enable_gqa,
    ) -> torch.Tensor:
        # SDPA's signature; dropout_p is 0 and GQA heads are grouped whenever K has fewer heads.
        return variants.general_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)

    def gold(a: Args) -> np.ndarray:
        mask = a["attn_mask"] if has_mask else None
        return golden_variants.general_attention(
            a["query"], a["key"], a["value"], attn_mask=mask, is_causal=is_causal, scale=scale
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        """The plain ``attention`` contract's arguments with the same scores, weights and output:
        Q rescaled so that ``Q' Kᵀ/√d_k = scale·Q Kᵀ``, K and V grouped, the causal mask folded in."""
        Q, K, V = _f(a, "query"), _f(a, "key"), _f(a, "value")
        d_k, n_q, n_k = Q.shape[-1], Q.shape[-2], K.shape[-2]
        if scale is not None:
            Q = Q * (float(scale) * np.sqrt(d_k))
        K, V = _kv_grouped(Q, K), _kv_grouped(Q, V)
        keep = np.ones((n_q, n_k), dtype=bool)
        if is_causal:
            keep = golden.causal_keep(n_q, n_k, "top_left")
        if has_mask:
            keep = np.asarray(a["attn_mask"], dtype=bool) & keep
        S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}

    parameters = base.parameters
    returns = base.returns
    if enable_gqa:  # the heads axis is explicit: H_q query heads over H_kv key/value heads
        heads = {"query": "h_q", "key": "h_kv", "value": "h_kv", "attn_mask": "h_q"}
        parameters = tuple((n, ("...", heads[n], *legend[1:])) for n, legend in base.parameters)
        returns = ("...", "h_q", *base.returns[1:])
    return dataclasses.replace(
        base,
        parameters=tuple(p for p in parameters if p[0] in kept),
        returns=returns,
        bool_parameters=base.bool_parameters & frozenset(kept),
        keyword_parameters=base.keyword_parameters & frozenset(kept),
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: _attention_error(as_attention(a)),
        low_error_fn=lambda a, dtype, factor: _attention_low_terms(as_attention(a), dtype, factor),
        options=tuple(sorted(options.items())),
    )


def _sdpa() -> Contract:
    """``torch.nn.functional.scaled_dot_product_attention`` with ``dropout_p = 0``, its keywords fixed
    by the spec (:meth:`Contract.configured`); reference :func:`attnscore.maths.variants.general_attention`,
    golden :func:`attnscore.maths.golden_variants.general_attention`, the error bound of ``attention``."""
    parameters = (
        ("query", ("...", "n_q", "d_k")),
        ("key", ("...", "n_k", "d_k")),
        ("value", ("...", "n_k", "d_v")),
        ("attn_mask", _MASK),
    )
    unconfigured = Contract(
        name="sdpa",
        kind="sdpa",
        parameters=parameters,
        returns=("...", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        bool_parameters=frozenset({"attn_mask"}),
        keyword_parameters=frozenset({"attn_mask"}),
        optional_parameters=frozenset({"attn_mask"}),
        keywords=_SDPA_KEYWORDS,
        configure=_sdpa_configure,
        samples=(
            ((("scale", 0.5), ("enable_gqa", True)), tuple(n for n, _ in parameters)),
            ((("is_causal", True),), ("query", "key", "value")),
        ),
        bound_text="u·(error of scores and weights propagated through V)",
    )
    return _sdpa_configure(unconfigured, {}, unconfigured.parameter_names)


CONTRACTS: dict[str, Contract] = {
    c.name: c
    for c in (
        _qk_view(
            "score",
            (("q", ("d_k",)), ("k", ("d_k",))),
            (),
            reference.score,
            lambda q, k: (q[None, :], k[None, :]),
            lambda S: S[0, 0],
            lambda Q, K: {"q": Q[0], "k": K[0]},
            batched=False,
            single_query=True,
            single_key=True,
        ),
        _qk_view(
            "scores",
            (("q", ("d_k",)), ("keys", ("n_k", "d_k"))),
            ("n_k",),
            reference.scores,
            lambda q, keys: (q[None, :], keys),
            lambda S: S[0],
            lambda Q, K: {"q": Q[0], "keys": K},
            batched=False,
            single_query=True,
            single_key=False,
        ),
        _qk_view(
            "score_matrix",
            (("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k"))),
            ("...", "n_q", "n_k"),
            reference.score_matrix,
            lambda Q, K: (Q, K),
            lambda S: S,
            lambda Q, K: {"Q": Q, "K": K},
            batched=True,
            single_query=False,
            single_key=False,
        ),
        _qk_view(
            "scaled_score_matrix",
            (("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k"))),
            ("...", "n_q", "n_k"),
            reference.scaled_score_matrix,
            lambda Q, K: (Q, K),
            lambda S: S,
            lambda Q, K: {"Q": Q, "K": K},
            batched=True,
            single_query=False,
            single_key=False,
            scaled=True,
        ),
        Contract(
            name="bilinear_scores",
            parameters=(("Q", ("...", "n_q", "d_q")), ("K", ("...", "n_k", "d_k")), ("W", ("d_q", "d_k"))),
            returns=("...", "n_q", "n_k"),
            reference=reference.bilinear_scores,
            golden_fn=lambda a: golden.bilinear(a["Q"], a["K"], a["W"]),
            error_fn=lambda a: (
                int(np.shape(a["Q"])[-1] + np.shape(a["K"])[-1]),
                golden.bilinear_magnitudes(a["Q"], a["K"], a["W"]),
            ),
            bound_text="(d_q + d_k)·u·Σ|q_a W_ab k_b|",
        ),
        Contract(
            name="additive_scores",
            parameters=(
                ("Q", ("...", "n_q", "d_k")),
                ("K", ("...", "n_k", "d_k")),
                ("W_q", ("d_a", "d_k")),
                ("W_k", ("d_a", "d_k")),
                ("v", ("d_a",)),
            ),
            returns=("...", "n_q", "n_k"),
            reference=reference.additive_scores,
            golden_fn=lambda a: golden.additive(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"]),
            error_fn=lambda a: (
                int(np.shape(a["Q"])[-1] + np.shape(a["v"])[-1] + 4),
                golden.additive_magnitudes(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"]),
            ),
            bound_text="(d_k + d_a + 4)·u·Σ_a |v_a|(|W_q q|_a + |W_k k|_a + 1)",
        ),
        Contract(
            name="masked_scores",
            kind="mask",
            parameters=(("S", ("...", "n_q", "n_k")), ("mask", _MASK)),
            returns=("...", "n_q", "n_k"),
            reference=reference.masked_scores,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.masked(a["S"], a["mask"]),
            error_fn=lambda a: (1, np.zeros(np.shape(a["S"]))),
            bound_text="u·|S| (masking is exact)",
        ),
        Contract(
            name="attention_weights",
            kind="weights",
            parameters=(("S", ("...", "n_q", "n_k")), ("mask", _MASK)),
            returns=("...", "n_q", "n_k"),
            reference=reference.attention_weights,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.softmax_weights(a["S"], a["mask"]),
            error_fn=lambda a: _weights_error(a["S"], a["mask"]),
            low_error_fn=lambda a, dtype, factor: _weights_low_terms(a["S"], a["mask"]),
            bound_text="n_k·u·(w·(1 + |s| + |max s|) + 1/n_k)",
        ),
        Contract(
            name="attention",
            kind="attention",
            parameters=(
                ("Q", ("...", "n_q", "d_k")),
                ("K", ("...", "n_k", "d_k")),
                ("V", ("...", "n_k", "d_v")),
                ("mask", _MASK),
            ),
            returns=("...", "n_q", "d_v"),
            reference=reference.attention,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.attention(a["Q"], a["K"], a["V"], a["mask"]),
            error_fn=_attention_error,
            low_error_fn=_attention_low_terms,
            bound_text="u·(error of scores and weights propagated through V)",
        ),
        _causal("top_left"),
        _causal("bottom_right"),
        _sdpa(),
    )
}

QK_CONTRACTS = tuple(name for name, c in CONTRACTS.items() if c.is_qk_view)


def get_contract(name: str) -> Contract:
    """Return the contract called ``name``; raise KeyError naming the known ones."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}") from None
