"""What a contract family provides: the :class:`Family` protocol, which each module of
:mod:`attnscore.maths.families` satisfies (the module itself is the family object).

A family module carries everything about one :class:`~attnscore.maths.family.ContractFamily`: its
contracts (parameters, keywords as a frozen :class:`~attnscore.maths.options.Options` subclass, the
torch reference and the float64 twin bound to those options, error bounds, the key view), and the
closed-form gradients and their error scales. Generic code asks
:func:`attnscore.maths.families.registry.family_of` for the family and calls it; it never branches
on a family's member (``tests/maths/test_family_modules.py`` fails on one named outside its module).

A family module has no ``__all__``: its public names are those without a leading underscore, the
protocol's and its own. (mypy checks each module against :class:`Family` in
:mod:`~attnscore.maths.families.registry` by its public names, and reads an ``__all__`` only as a
list of literal strings, so one would have to repeat the protocol's eight names in every module.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Contract
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import cleaned
from attnscore.maths.keyword_gradients import keyword_gradient_scales, keyword_gradients, keyword_unused_keys
from attnscore.maths.options import Options

__all__ = [
    "MASK",
    "Family",
    "Gradients",
    "GeneralGradients",
    "Scales",
    "absolute_args",
    "no_unused_keys",
    "not_general_attention",
    "options_of",
    "UnusedKeys",
]

MASK = ("...", "n_q", "n_k")
"""The shape legend of a mask over the scores."""

Gradients = dict[str, np.ndarray]
"""``{parameter: float64 gradient}``, each of its argument's shape."""

Scales = tuple[int, dict[str, np.ndarray]]
"""``(n, {parameter: M})``: each gradient entry's error scale and the longest sum's length."""


UnusedKeys = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]
"""A call's arguments -> ``{key or value parameter: bool, the keys no query keeps}``
(:meth:`Family.unused_keys`)."""


_O = TypeVar("_O", bound=Options)


def options_of(contract: Contract, kind: type[_O]) -> _O:
    """``contract``'s options as its family's :class:`~attnscore.maths.options.Options` subclass ``kind``.

    Raises:
        TypeError: the contract's options are of another family (a contract built by hand with
            another family's options).
    """
    options = contract.options
    if not isinstance(options, kind):
        raise TypeError(f"contract {contract.name!r}: expected {kind.__name__}, found {type(options).__name__}")
    return options


class Family(Protocol):
    """One contract family, as its module provides it."""

    @property
    def MEMBER(self) -> ContractFamily:
        """The family this module is the home of."""
        ...

    @property
    def CONTRACTS(self) -> tuple[Contract, ...]:
        """The family's contracts (unconfigured), in the order the catalogue tables list them."""
        ...

    @property
    def SHARED_MASKS(self) -> bool:
        """Whether a mask argument may come shared by the batch ``(n_q, n_k)`` or with size-1 batch
        dims that broadcast (drawn so by :func:`attnscore.maths.strategies.random_args`)."""
        ...

    def gradients(self, contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
        """The float64 gradients of ``contract``'s output with respect to each differentiable
        parameter (:func:`attnscore.maths.golden_gradients.contract_gradients`)."""
        ...

    def gradient_scales(self, contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
        """The error scale of each gradient entry
        (:func:`attnscore.maths.golden_gradients.contract_gradient_scales`)."""
        ...

    def attention_options(self, contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions | None:
        """The :func:`attnscore.maths.golden_variants.general_attention_parts` options of a call
        (its keywords and option arguments), one value, in the heads-first layout; None for a family
        that is not a variant of that general attention."""
        ...

    def attention_changed(self, contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> Any:
        """``contract``'s call on ``args`` (torch tensors in its parameter order, its own layout)
        computed by general attention with one step done another way (``change``, a known mistake:
        :func:`attnscore.maths.variants.general_attention` with ``change=``), the result in the
        contract's layout; None for a family that is not a variant of general attention
        (:func:`not_general_attention`)."""
        ...

    def unused_keys(self, contract: Contract) -> UnusedKeys | None:
        """How ``contract``'s keywords (and a keyword mask such as SDPA's bool ``attn_mask``) leave a
        key out of every query, so that its key and value get no gradient: a function of a call's
        arguments (by the contract's parameter names) giving, for its key and value parameter, the
        keys no query keeps, in the family's own layout without the last dim
        (:func:`attnscore.maths.keyword_gradients.keyword_unused_keys`); what the property
        ``masked_entries_get_no_gradient`` checks for a variant of general attention. None when its
        keywords cannot leave a key out, for a family without such keywords (a mask *argument* is
        the catalogue's own selector, ``masked``) and for one the check does not cover (packed
        batches, the FlashAttention-2 Function): :func:`no_unused_keys`."""
        ...


def absolute_args(
    contract: Contract, args: Mapping[str, np.ndarray], d_out: Any
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The arguments with non-finite entries zeroed (bool masks as they are), and ``|d_out|``: what
    a family's :meth:`Family.gradient_scales` computes on."""
    a = {
        n: cleaned(args[n]) if n not in contract.bool_parameters else np.asarray(args[n])
        for n in contract.parameter_names
    }
    return a, np.abs(cleaned(d_out))


def not_general_attention(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> None:
    """:meth:`Family.attention_changed` of a family that is not a variant of general attention: None."""
    return None


def no_unused_keys(contract: Contract) -> None:
    """:meth:`Family.unused_keys` of a family whose keywords leave no key out (or that the check does
    not cover): None."""
    return None


@dataclass(frozen=True)
class GeneralGradients:
    """A keyword family's gradients, their error scales and the keys no query keeps, all general
    attention's (:func:`~attnscore.maths.keyword_gradients.keyword_gradients`,
    :func:`~attnscore.maths.keyword_gradients.keyword_gradient_scales`,
    :func:`~attnscore.maths.keyword_gradients.keyword_unused_keys`) under the family's
    ``attention_options`` of a call, in its own layout (``heads_last``: FlashAttention's
    ``(b, n, h, d)``); ``attn_mask``, ``alibi_slopes`` and ``key_lengths`` get no gradient. A family
    module binds its :meth:`Family.gradients` and :meth:`Family.gradient_scales` to one."""

    attention_options: Callable[[Contract, Mapping[str, np.ndarray]], AttentionOptions]
    heads_last: bool = False

    def gradients(self, contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
        options = self.attention_options(contract, args)
        return keyword_gradients(contract.parameter_names, args, d_out, options, heads_last=self.heads_last)

    def gradient_scales(self, contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
        options = self.attention_options(contract, args)
        return keyword_gradient_scales(contract.parameter_names, args, d_out, options, heads_last=self.heads_last)

    def unused_keys(self, contract: Contract) -> UnusedKeys:
        """:meth:`Family.unused_keys` of a contract whose keywords can leave a key out."""
        names = contract.parameter_names
        return lambda args: keyword_unused_keys(
            names, args, self.attention_options(contract, args), heads_last=self.heads_last
        )
