"""The contract families by member: :data:`FAMILIES` maps each
:class:`~attnscore.maths.family.ContractFamily` to its module (a
:class:`~attnscore.maths.families.base.Family`), and :func:`family_of` answers for a contract.
Generic code (the contracts by name, the gradients, the input strategies) asks a family here, never
``if contract.family is ContractFamily.X``.
"""

from __future__ import annotations

from attnscore.maths.contract import Contract
from attnscore.maths.families import (
    attention,
    causal,
    flash,
    flash_attention_2,
    flash_varlen,
    instructor,
    kernel_attention,
    key_padding,
    mask,
    multihead,
    rope,
    scores,
    sdpa,
    weights,
)
from attnscore.maths.families.base import Family
from attnscore.maths.family import ContractFamily

__all__ = ["FAMILIES", "family_of"]

_MODULES: tuple[Family, ...] = (
    scores,
    mask,
    weights,
    attention,
    causal,
    sdpa,
    kernel_attention,
    flash,
    flash_attention_2,
    flash_varlen,
    key_padding,
    rope,
    multihead,
    instructor,
)

FAMILIES: dict[ContractFamily, Family] = {family.MEMBER: family for family in _MODULES}
"""Each family's module, in :class:`ContractFamily`'s order (the catalogue tables' order)."""


def family_of(contract: Contract) -> Family:
    """The module of ``contract``'s family.

    Raises:
        ValueError: a family without a module (a contract built by hand with another family).

    >>> from attnscore.maths.contracts import get_contract
    >>> family_of(get_contract("sdpa")).MEMBER.value
    'sdpa'
    """
    family = FAMILIES.get(contract.family)
    if family is None:
        known = ", ".join(str(member) for member in FAMILIES)
        raise ValueError(f"contract {contract.name!r}: expected a family of {known}, found {str(contract.family)!r}")
    return family
