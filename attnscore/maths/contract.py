"""What a function contract is: the parameters a graded function takes, what it returns, and how its
truth and its allowed error are computed (:class:`Contract`), and the keywords a spec may fix
(:class:`Keyword`, held in a family's :class:`~attnscore.maths.options.Options`). The contracts
themselves are in their families' modules (:mod:`attnscore.maths.families`), by name in
:mod:`attnscore.maths.contracts`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.calls import OMITTED
from attnscore.boundary.gradients import NOT_DIFFERENTIATED
from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths.bounds import Bound, check_symbols, legend_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import KeyView
from attnscore.maths.options import Keyword, Options
from attnscore.maths.tolerance import ErrorTerms

__all__ = ["Args", "Contract", "IntegerFn", "Keyword", "Options", "QKView"]

Args = Mapping[str, np.ndarray]
"""A call's arguments by parameter name, as numpy arrays."""

IntegerFn = Callable[[Callable[[int, int], int], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]
"""``(pick, legend sizes) -> (sizes, integer arrays)``: see :attr:`Contract.integer_fn`."""


@dataclass(frozen=True)
class QKView:
    """What a score function that is a view of ``Q Kᵀ`` carries (``score``, ``scores``, ``score_matrix``,
    ``scaled_score_matrix``): the score family's own geometry, which no other contract has.

    Attributes:
        operands: the positional arguments (numpy arrays or torch tensors, in parameter order) as
            ``(Q, K)`` views without a copy or a cast, e.g. ``q, k`` → ``(q[None, :], k[None, :])``:
            the one home of this geometry (``to_qk`` is built on it, and the mistake catalogue uses
            it on tensors).
        to_qk: ``args -> (Q, K)`` in float64, ``(..., n_q, d_k)`` and ``(..., n_k, d_k)``.
        from_scores: scores ``(..., n_q, n_k)`` back in the contract's output shape.
        pack: ``(Q, K) -> args``, the inverse of ``to_qk``.
        operand_sums: ``args -> Σ_i (|q_i| + |k_i|)`` per output entry: an input scaled into the
            subnormal range first is off by up to half a subnormal per coordinate, times the other
            factor (see :func:`attnscore.maths.tolerance.allowed_error`).
        scaled: whether the view is of ``Q Kᵀ / √d_k`` (else of the raw ``Q Kᵀ``).
        single_query, single_key: the view takes one query vector (``score``, ``scores``: no batch
            dims either), one key vector (``score``).
    """

    operands: Callable[..., tuple[Any, Any]]
    to_qk: Callable[[Args], tuple[np.ndarray, np.ndarray]]
    from_scores: Callable[[np.ndarray], np.ndarray]
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]
    operand_sums: Callable[[Args], np.ndarray]
    scaled: bool = False
    single_query: bool = False
    single_key: bool = False


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
        family: which kind of computation this is (:class:`attnscore.maths.family.ContractFamily`:
            the score functions, masking, weights, attention, causal attention, SDPA, the kernel
            variants, FlashAttention's layouts, packed batches, key padding); which closed forms,
            properties and mistakes apply.
        bool_parameters: parameters that are bool masks (True = keep), never cast to the tested dtype.
        additive_parameters: float masks added to the scaled scores (SDPA's float ``attn_mask``):
            cast to the tested dtype like every float input; ``-inf`` entries mask their key.
            Generated inputs hold finite biases, ``-inf`` entries and whole rows of ``-inf``
            (:func:`attnscore.maths.strategies.random_args`).
        qk: for the score functions that are views of ``Q Kᵀ`` (raw or scaled), their geometry
            (:class:`QKView`); None for every other contract.
        ties: ``(symbol, same_as)`` pairs a spec tied (see :meth:`tied`); their sizes are equal.
        bounds: shape bounds (``n_q <= n_k``, :mod:`attnscore.maths.bounds`): the kernel's domain;
            generated inputs are drawn inside it (see :meth:`bounded`).
        options: the options a spec fixes (:class:`attnscore.maths.options.Options`): the family's
            frozen value, one field per keyword (its :attr:`keywords`), the ones the spec fixed
            (:meth:`configured`) passed by name to the implementation on every call (iterating it
            gives them as ``(name, value)`` pairs); the family's reference, golden path, error bound
            and gradients read it whole. The base :class:`Options` (no keyword) for the positional
            contracts.
        keyword_parameters: tensor parameters passed by name (``attn_mask=``), not by position;
            they come after the positional ones.
        optional_parameters: parameters a spec may leave out (then never passed: the
            implementation's default applies, e.g. no ``attn_mask``).
        configure: ``(contract, options, kept parameters) -> contract``: this contract for a
            spec's options (of the type of :attr:`options`) and parameters (:meth:`configured`);
            None for positional contracts.
        samples: representative ``(options, kept parameters)`` configurations
            (:meth:`sample_configurations`).
        low_error_fn: ``(args, dtype, factor) -> ErrorTerms``, the budget in float16/bfloat16 of a kernel that rounds
            in the low precision and accumulates in float32, for contracts whose error is not one
            sum (softmax, attention); None means the ``n``-term sum of ``error_fn``
            (:meth:`attnscore.maths.tolerance.ErrorTerms.of_sum`).
        int_parameters: parameters that are int32 tensors (sequence offsets ``cu_seqlens``, valid
            key counts ``key_lengths``), never cast to the tested dtype (as bool masks are not);
            one of shape ``()`` (``max_seqlen_q``) reaches the implementation as a Python ``int``.
            Their values are drawn by ``integer_fn`` and checked by ``integer_check``.
        integer_fn: ``(pick, sizes) -> (sizes, integer arrays)``: given ``pick(lo, hi)`` (an int in
            ``[lo, hi]``, from hypothesis or a seeded generator) and drawn legend sizes, the sizes
            made consistent with the integers (``total_q`` the sum of the drawn sequence lengths)
            and an int32 array per integer parameter (:func:`attnscore.maths.strategies.random_args`).
        integer_check: ``args -> [(parameter, problem)]``: what is wrong with the integer
            parameters of ``args`` (a worked example's), each problem saying what was expected and
            what was found; empty when they are valid.
        leading: the names a spec gives the leading dims in place of ``"..."`` (``("batch",)`` for
            ``[batch, n_q, d_k]``, ``("batch", "heads")``): every parameter and the result whose legend
            starts with ``"..."`` then has exactly these dims first, each of one size throughout,
            and drawn inputs have exactly that rank; None: any number of leading dims (``...``).
            Set by :meth:`interfaced`.
        full_masks: mask parameters (bool or additive) that always come in the scores' full shape
            ``(..., n_q, n_k)``: drawn masks have no size-1 broadcast dims and are never one
            ``(n_q, n_k)`` mask shared by the batch (a course that passes them so).
        omittable: mask parameters a spec marks ``optional``: the implementation takes them with a
            default (``mask=None``), so calls sometimes leave them out and sometimes pass None;
            either means every key is kept (:meth:`absent_value`).
        unit_dims: ``(parameter, count)`` pairs a spec states (``token_positions: [1, seq]``): a
            parameter whose legend has no ``...`` passed with ``count`` leading dims of size 1, in
            every drawn input (:meth:`interfaced`); references and golden twins broadcast them.
        fixed_sizes: ``(symbol, size)`` pairs a spec fixes (``function.sizes``, an instructor's own
            reference: ``d_model`` 4 so that it divides by the heads): every drawn input has that
            size for that symbol (also a named leading dim's), whatever else is drawn.
        key_view_fn: ``args -> KeyView`` for contracts whose output is softmax weights over keys or
            made from them (weights, attention and its variants): which keys each output row keeps
            and which hold non-finite values (:mod:`attnscore.maths.key_view`), in the output's own
            row layout; None for the score functions. The convention corners are read off it.
    """

    name: str
    parameters: tuple[tuple[str, tuple[str, ...]], ...]
    returns: tuple[str, ...]
    reference: Callable[..., torch.Tensor]
    golden_fn: Callable[[Args], np.ndarray]
    error_fn: Callable[[Args], tuple[int, np.ndarray]]
    family: ContractFamily
    bool_parameters: frozenset[str] = field(default_factory=frozenset)
    qk: QKView | None = None
    bound_text: str = "d_k·u·Σ|q_i k_i|"
    ties: tuple[tuple[str, str], ...] = ()
    bounds: tuple[Bound, ...] = ()

    def bounded(self, bounds: tuple[Bound, ...]) -> Contract:
        """This contract with shape bounds added (``n_q <= n_k``): generated inputs lie inside them.

        Raises:
            ValueError: a bound names a symbol this contract's legend does not use.
        """
        check_symbols(bounds, self)
        added = tuple(b for b in bounds if b not in self.bounds)
        return dataclasses.replace(self, bounds=self.bounds + added) if added else self

    low_error_fn: Callable[[Args, str, float], ErrorTerms] | None = None
    options: Options = field(default_factory=Options)
    keyword_parameters: frozenset[str] = field(default_factory=frozenset)
    optional_parameters: frozenset[str] = field(default_factory=frozenset)
    configure: Callable[[Contract, Any, tuple[str, ...]], Contract] | None = None
    samples: tuple[tuple[tuple[tuple[str, Any], ...], tuple[str, ...]], ...] = ()
    additive_parameters: frozenset[str] = field(default_factory=frozenset)
    int_parameters: frozenset[str] = field(default_factory=frozenset)
    integer_fn: IntegerFn | None = None
    integer_check: Callable[[Args], list[tuple[str, str]]] | None = None
    leading: tuple[str, ...] | None = None
    full_masks: frozenset[str] = field(default_factory=frozenset)
    omittable: frozenset[str] = field(default_factory=frozenset)
    fixed_sizes: tuple[tuple[str, int], ...] = ()
    unit_dims: tuple[tuple[str, int], ...] = ()

    def interfaced(
        self,
        leading: tuple[str, ...] | None = None,
        full_masks: frozenset[str] = frozenset(),
        omittable: frozenset[str] = frozenset(),
        unit_dims: tuple[tuple[str, int], ...] = (),
    ) -> Contract:
        """This contract with the interface a spec states (see :attr:`leading`, :attr:`full_masks`,
        :attr:`omittable`, :attr:`unit_dims`): named leading dims, masks given in full shape,
        optional masks, leading dims of size 1 on a parameter without ``...``.

        Raises:
            ValueError: a full-shape or optional parameter that is not one of the contract's masks;
                unit dims on a parameter the contract lacks or whose legend has ``...``.

        Example:
            >>> from attnscore.maths.contracts import get_contract
            >>> c = get_contract("attention").interfaced(("batch",), omittable=frozenset({"mask"}))
            >>> c.declared_shape("Q"), c.declared_shape("mask")
            (('batch', 'n_q', 'd_k'), ('batch', 'n_q', 'n_k'))
        """
        masks = self.mask_parameters
        for name in sorted(full_masks | omittable):
            if name not in masks:
                raise ValueError(
                    f"expected a mask parameter of contract {self.name} ({', '.join(sorted(masks)) or 'none'}), "
                    f"found {name!r}"
                )
        legends = dict(self.parameters)
        for name, count in unit_dims:
            if name not in legends or legends[name][:1] == ("...",) or count < 1:
                raise ValueError(
                    f"expected leading dims of size 1 only on a parameter without '...', found {name!r} x {count}"
                )
        if leading is None and not full_masks and not omittable and not unit_dims:
            return self
        reference = self.reference
        if omittable:  # the truth of a call without its mask: the reference with every key kept
            reference = _WithAbsentMasks(self, reference, frozenset(omittable))
        return dataclasses.replace(
            self,
            leading=leading,
            full_masks=frozenset(full_masks),
            omittable=frozenset(omittable),
            unit_dims=tuple(unit_dims),
            reference=reference,
        )

    @property
    def mask_parameters(self) -> frozenset[str]:
        """The parameters that are masks (bool, True = keep; or float, added to the scores)."""
        return self.bool_parameters | self.additive_parameters

    def declared_shape(self, name: str) -> tuple[str, ...]:
        """Parameter ``name``'s legend as the spec states it: ``"..."`` replaced by the named leading
        dims (:attr:`leading`) when there are some; ``"returns"`` for the result's."""
        legend = self.returns if name == "returns" else dict(self.parameters)[name]
        unit = dict(self.unit_dims).get(name, 0)
        if unit:
            return ("1",) * unit + legend
        if self.leading is None or legend[:1] != ("...",):
            return legend
        return self.leading + legend[1:]

    def absent_value(self, name: str, args: Mapping[str, Any]) -> np.ndarray:
        """What an optional mask ``name`` (:attr:`omittable`) means when a call leaves it out or
        passes None: every key kept, a bool mask of True (or an additive mask of zeros), in the
        scores' full shape ``(..., n_q, n_k)`` read from the other arguments ``args``.

        Example:
            >>> from attnscore.maths.contracts import get_contract
            >>> c = get_contract("attention")
            >>> args = {"Q": np.zeros((2, 3, 4)), "K": np.zeros((2, 5, 4)), "V": np.zeros((2, 5, 1))}
            >>> keep = c.absent_value("mask", args)
            >>> keep.shape, keep.dtype.name, bool(keep.all())
            ((2, 3, 5), 'bool', True)
        """
        present = {n: a for n, a in args.items() if n != name and a is not None and a is not OMITTED}
        sizes = legend_of(self, present)
        legend = dict(self.parameters)[name]
        batches = [
            np.shape(present[n])[: np.ndim(present[n]) - (len(lg) - 1)]
            for n, lg in self.parameters
            if n in present and n not in self.mask_parameters and lg[:1] == ("...",)
        ]
        shape: tuple[int, ...] = ()
        for sym in legend:
            shape += tuple(np.broadcast_shapes(*batches)) if sym == "..." else (int(sizes[sym]),)
        if name in self.bool_parameters:
            return np.ones(shape, dtype=np.bool_)
        return np.zeros(shape, dtype=np.float64)

    key_view_fn: Callable[[Args], KeyView] | None = None

    def key_view(self, args: Args) -> KeyView | None:
        """Which keys each output row of a call with ``args`` keeps (:attr:`key_view_fn`), or None
        for a contract without softmax weights. An optional mask left out (:data:`OMITTED`) or
        passed as None keeps every key (:meth:`absent_value`)."""
        if self.key_view_fn is None:
            return None
        absent = [n for n in self.omittable if n not in args or args[n] is None or args[n] is OMITTED]
        if absent:
            args = {**args, **{n: self.absent_value(n, args) for n in absent}}
        return self.key_view_fn(args)

    def integers(self, pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], Args]:
        """``(sizes, integer arrays)`` for drawn legend ``sizes`` (:attr:`integer_fn`); ``(sizes, {})``
        for a contract without integer parameters."""
        if self.integer_fn is None:
            return sizes, {}
        sizes, ints = self.integer_fn(pick, dict(sizes))
        units = dict(self.unit_dims)
        return sizes, {
            name: np.array(a, dtype=np.int32, order="C").reshape((1,) * units.get(name, 0) + np.shape(a))
            for name, a in ints.items()
        }

    def integer_problems(self, args: Args) -> list[tuple[str, str]]:
        """What is wrong with the integer parameters of ``args`` (:attr:`integer_check`), as
        ``(parameter, "expected ..., found ...")`` pairs; empty when nothing is."""
        return [] if self.integer_check is None else list(self.integer_check(args))

    def sample_configurations(self) -> tuple[Contract, ...]:
        """This contract and representative configurations of its keywords (:attr:`samples`, as
        ``(options, kept parameters)``): what the catalogue tables list a keyword-dependent entry under."""
        return (self, *(self.configured(dict(options), kept) for options, kept in self.samples))

    @property
    def keywords(self) -> tuple[Keyword, ...]:
        """The keyword arguments a spec may fix (:class:`Keyword`): the fields of :attr:`options`;
        empty for the positional contracts."""
        return self.options.keywords()

    def keyword(self, name: str) -> Keyword:
        """The keyword called ``name``; KeyError naming the known ones otherwise."""
        for kw in self.keywords:
            if kw.name == name:
                return kw
        known = ", ".join(k.name for k in self.keywords) or "none"
        raise KeyError(f"contract {self.name} takes no keyword {name!r}; known: {known}")

    def option(self, name: str) -> Any:
        """The configured value of keyword ``name``, else its default (KeyError for an unknown one)."""
        return getattr(self.options, self.keyword(name).name)

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
        return self.configure(self, type(self.options).of(options), kept)

    def binding(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` as the runners call it, ``f(*arguments in parameter order)``, passing the
        keyword parameters (``attn_mask``) by name and the configured keywords (:attr:`options`)
        too, and leaving out an optional argument the runner marks
        :data:`attnscore.boundary.calls.OMITTED` (a trailing positional one, or one passed by name);
        ``function`` itself when the contract has none of these.

        Example:
            >>> from attnscore.maths.contracts import get_contract
            >>> c = get_contract("sdpa").configured({"scale": 0.5}, ("query", "key", "value", "attn_mask"))
            >>> c.binding(lambda q, k, v, **kw: sorted(kw))(1, 2, 3, 4)
            ['attn_mask', 'scale']
        """
        if not self.options and not self.keyword_parameters and not self.omittable:
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
    def differentiable_parameters(self) -> tuple[str, ...]:
        """The parameters a gradient is asked for, in parameter order: all but the bool masks, the
        integer parameters (lengths, offsets) and the float parameters the worker never differentiates
        (:data:`attnscore.boundary.gradients.NOT_DIFFERENTIATED`: a float ``attn_mask``, ``alibi_slopes``),
        so that the grader never asks for a gradient the worker does not compute.

        >>> from attnscore.maths.contracts import get_contract
        >>> get_contract("kernel_attention").differentiable_parameters
        ('query', 'key', 'value')
        """
        skipped = self.bool_parameters | self.int_parameters | NOT_DIFFERENTIATED
        return tuple(n for n in self.parameter_names if n not in skipped)

    @property
    def single_query(self) -> bool:
        """Whether the contract takes one query vector, not a matrix of queries (:attr:`QKView.single_query`)."""
        return self.qk is not None and self.qk.single_query

    @property
    def single_key(self) -> bool:
        """Whether the contract takes one key vector, not several keys (:attr:`QKView.single_key`)."""
        return self.qk is not None and self.qk.single_key

    @property
    def batched(self) -> bool:
        """Whether inputs can have leading batch dims: every contract but the one-query score views."""
        return not self.single_query

    @property
    def is_qk_view(self) -> bool:
        """Whether this contract is a view of ``Q Kᵀ`` (raw or scaled), reachable from ``(Q, K)``."""
        return self.qk is not None

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
        return None if self.qk is None else np.asarray(self.qk.operand_sums(args), dtype=np.float64)


class _WithAbsentMasks:
    """A contract's reference that takes its optional masks left out (or :data:`OMITTED`, or None)
    and computes as :meth:`Contract.absent_value` says (every key kept), whatever its own signature:
    ``masked_scores(S, mask)`` has no default for its mask."""

    def __init__(self, contract: Contract, reference: Callable[..., Any], omittable: frozenset[str]) -> None:
        self.names = contract.parameter_names
        self.contract = contract
        self.reference = reference
        self.omittable = omittable

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = dict(zip(self.names, args, strict=False))
        for name in self.names:
            if name in kwargs:
                values[name] = kwargs.pop(name)
        present = {n: v for n, v in values.items() if is_tensor(v)}
        like = next(iter(present.values()))
        for name in sorted(self.omittable):
            if not isinstance(values.get(name), torch.Tensor):
                shapes = {n: np.empty(tuple(t.shape), dtype=np.bool_) for n, t in present.items()}
                keep = self.contract.absent_value(name, shapes)
                kind = torch.bool if keep.dtype == np.bool_ else like.dtype
                values[name] = torch.as_tensor(keep, dtype=kind, device=like.device)
        return self.reference(*[values[n] for n in self.names if n in values], **kwargs)


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
        pairs = zip(self.names[self.positional :], args[self.positional :], strict=True)
        named = {name: value for name, value in pairs if value is not OMITTED}
        given = list(args[: self.positional])
        while given and given[-1] is OMITTED:  # an optional trailing argument left out: its default applies
            given.pop()
        return self.function(*given, **named, **self.fixed)

    def __repr__(self) -> str:
        by_name = [f"{n}=..." for n in self.names[self.positional :]]
        fixed = [f"{k}={v!r}" for k, v in self.fixed.items()]
        return f"{self.__qualname__}(*{list(self.names[: self.positional])}, {', '.join(by_name + fixed)})"
