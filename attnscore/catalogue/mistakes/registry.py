"""The catalogue's registry: the :class:`Mistake` record, the contract groups and lookup."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.catalogue.families import own_reference
from attnscore.catalogue.tables import add_new, named
from attnscore.maths.contract import Contract
from attnscore.maths.contracts import CONTRACTS

__all__ = ["Mistake", "MISTAKES", "get_mistake", "mistakes_for", "add"]


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation.

    Attributes:
        id: stable snake_case id.
        title: a few words.
        applies: ``contract -> bool``, the contracts it applies to, by their features
            (:mod:`attnscore.catalogue.families`), as properties select theirs.
        fn: ``(contract, spec, *args, **params) -> result``, the wrong implementation.
        message: feedback for a student whose output matches it (what and how to fix); it may hold
            ``{name}`` fields filled from the mistake's parameters (:meth:`describe`).
        forms: other ways real code makes the same mistake, each like ``fn``; they differ only
            where conventions differ (a query with no kept key: zeros, NaN or the mean of the
            values). The diagnosis accepts any form that holds on every input it sees.
        fit: ``(contract, args, got) -> params | None``: the mistake's parameters read from a
            failing output (a constant scale ratio, a fill value), or None when no parameter
            explains it; the diagnosis then confirms the fitted mistake on further inputs.
        defaults: the parameters ``bind`` uses when none are given (as ``(name, value)`` pairs).
        computes_in: the precision the mistake computes in: its output is matched within that
            precision's rounding error, not the tested dtype's (``"float32"`` for float64 work done
            in float32).
        dtypes: the tested dtypes in which the mistake can happen (empty: every dtype).
        not_dtypes: the tested dtypes in which it cannot (its message would be false there).
        backward: whether the mistake shows in the backward pass or the saved logsumexp (its ``fn``
            returns the output of a ``torch.autograd.Function``): a backward call's failure is also
            matched on its gradients and ``L`` (:mod:`attnscore.check.diagnosis`).

            ``fit`` may also return a list of parameter sets, every one that explains the output
            (a tile size the failing call cannot pin down); each is a candidate, and the diagnosis
            keeps the one the further inputs bear out best.
        unwritten: ``(contract, args, params) -> mask | None``: the output entries that ``fn``'s
            code never writes (True), such as rows past a kernel's last full tile: real code leaves
            there whatever its ``torch.empty`` held, so any value there agrees with the mistake, and
            only the other entries count as evidence. None: every entry is written.
        raises: ``(contract, args) -> [params, ...]``: for a call the implementation raised on, the
            parameter sets under which ``fn`` raises there too, most likely first (a kernel that
            needs n to be a multiple of its tile: each tile that n is not a multiple of); None for a
            mistake that never raises. The diagnosis confirms one on :attr:`witnesses`.
        witnesses: ``params -> [legend sizes, ...]``: inputs (by their sizes, e.g. ``{"n_q": 16,
            "n_k": 16}``) on which ``fn`` with ``params`` raises or runs, so that an implementation
            that raises or runs on each exactly as ``fn`` does (and gives ``fn``'s value where it
            runs) is this mistake.
        confirm_sizes: legend sizes of further confirmation inputs, made for every spec the mistake
            applies to: the smallest inputs on which it shows (n just past a tile of 16).
        probe_sizes: legend sizes of further probe inputs, tried only where candidates disagree
            (inputs that tell its tile sizes apart).
        scores_zero: a null implementation (it computes nothing): ``attnscore verify`` requires every
            one of its forms to score 0 on every spec, in every dtype (:func:`attnscore.check.verify.mutation_test`),
            rather than to fail a case and be diagnosed; every spec is verified against it, whatever
            its ``mistakes`` list says.
    """

    id: str
    title: str
    applies: Callable[[Contract], bool]
    fn: Callable[..., Any]
    message: str
    forms: tuple[Callable[..., Any], ...] = ()
    fit: (
        Callable[[Contract, tuple[torch.Tensor, ...], np.ndarray], dict[str, float] | list[dict[str, float]] | None]
        | None
    ) = None
    defaults: tuple[tuple[str, float], ...] = ()
    computes_in: str | None = None
    dtypes: tuple[str, ...] = ()
    not_dtypes: tuple[str, ...] = ()
    backward: bool = False
    unwritten: Callable[[Contract, tuple[torch.Tensor, ...], dict[str, float]], np.ndarray | None] | None = None
    raises: Callable[[Contract, tuple[torch.Tensor, ...]], list[dict[str, float]]] | None = None
    witnesses: Callable[[dict[str, float]], list[dict[str, int]]] | None = None
    confirm_sizes: tuple[dict[str, int], ...] = ()
    probe_sizes: tuple[dict[str, int], ...] = ()
    scores_zero: bool = False

    def bind(self, contract: Contract, spec: Any = None, form: int = 0, **params: float) -> Callable[..., Any]:
        """The wrong implementation (``form`` 0 is ``fn``, 1.. are ``forms``) as a plain function of
        the contract's arguments, with ``params`` over :attr:`defaults` (a Python int argument, an
        integer parameter of shape ``()``, reaches ``fn`` as a 0-d int32 tensor)."""
        fn = (self.fn, *self.forms)[form]
        values = {**dict(self.defaults), **params}

        def wrong(*args: Any) -> Any:
            # an integer parameter of shape () comes in as a Python int (max_seqlen_q): every form sees tensors
            given = [torch.tensor(a, dtype=torch.int32) if type(a) is int else a for a in args]
            return fn(contract, spec, *_with_absent(contract, given), **values)

        wrong.__name__ = f"mistake_{self.id}"
        return wrong

    @property
    def contracts(self) -> tuple[str, ...]:
        """The names of the bundled contracts it applies to, in the contract table's order."""
        return tuple(name for name in CONTRACTS if any(self.applies(c) for c in _sample_configurations(name)))

    @property
    def form_count(self) -> int:
        """How many forms the mistake has (``fn`` and :attr:`forms`)."""
        return 1 + len(self.forms)

    def applies_in(self, dtype: str) -> bool:
        """Whether the mistake can happen when the inputs have ``dtype``."""
        return (not self.dtypes or dtype in self.dtypes) and dtype not in self.not_dtypes

    def describe(self, params: dict[str, float] | None = None) -> str:
        """The message with its ``{name}`` fields filled (numbers to 3 significant digits, whole numbers
        below 10^9 in full: a fitted theta of 10000, not 1e+04)."""
        values = {**dict(self.defaults), **(params or {})}
        if not values:
            return self.message
        return self.message.format(**{k: _shown(float(v)) for k, v in values.items()})


def _shown(v: float) -> str:
    """A fitted parameter as a message shows it: ``10000``, ``16``, ``0.5``, ``0.333``."""
    return str(int(v)) if v.is_integer() and abs(v) < 1e9 else f"{v:.3g}"


def _with_absent(contract: Contract, args: list[Any]) -> list[Any]:
    """``args`` with an optional mask that a call left out or passed as None replaced by what that
    means (every key kept, :meth:`Contract.absent_value`), so that every form sees tensors."""
    if not contract.omittable:
        return args
    names = list(contract.parameter_names)
    present = {n: a for n, a in zip(names, args, strict=False) if is_tensor(a)}
    shapes = {n: np.empty(tuple(t.shape), dtype=np.bool_) for n, t in present.items()}
    out = []
    for name, value in zip(names, args, strict=False):
        if name in contract.omittable and not is_tensor(value):
            like = next(iter(present.values()))
            keep = contract.absent_value(name, shapes)
            value = torch.tensor(keep, device=like.device, dtype=torch.bool if keep.dtype == np.bool_ else like.dtype)
        out.append(value)
    return out


MISTAKES: dict[str, Mistake] = {}


def add(
    id: str, title: str, applies: Callable[[Contract], bool], message: str, **extra: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        add_new(MISTAKES, id, Mistake(id, title, applies, fn, message, **extra), "mistake")
        return fn

    return deco


def get_mistake(id: str) -> Mistake:
    """The mistake called ``id``; KeyError naming the known ones otherwise."""
    return named(MISTAKES, id, "mistake")


def mistakes_for(contract: str | Contract) -> list[Mistake]:
    """The catalogue's mistakes that apply to ``contract`` (a bundled contract's name, or a contract),
    in catalogue order. A contract that takes keywords (``sdpa`` with ``scale: 0.5``,
    :meth:`attnscore.maths.contract.Contract.configured`) is judged by its own features, since which
    mistakes can happen depends on its keywords; a name stands for every sample configuration. An
    instructor's own reference (``function.reference``) gets none: its contract takes the spec's
    function name, which may be a bundled contract's (``multihead_self_attention``) although its
    parameters, their order and its conventions are the instructor's; its own mistakes are its
    reference file's."""
    if isinstance(contract, Contract) and own_reference(contract):
        return []
    if isinstance(contract, Contract) and contract.keywords:
        return [m for m in MISTAKES.values() if m.applies(contract)]
    name = contract if isinstance(contract, str) else contract.name
    if name not in CONTRACTS:
        return []
    samples = _sample_configurations(name)
    return [m for m in MISTAKES.values() if any(m.applies(c) for c in samples)]


@functools.cache
def _sample_configurations(name: str) -> tuple[Contract, ...]:
    """A bundled contract's sample configurations, made once per process (loading a spec asks for
    them per listed mistake, and making them builds every configured contract again)."""
    return CONTRACTS[name].sample_configurations()
