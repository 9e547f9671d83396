"""Function contracts by name: what a spec's ``function.contract`` names.

Each contract lives in its family's module (:mod:`attnscore.maths.families`: the score functions,
masking, weights, attention, causal attention, SDPA, the kernel variants, FlashAttention's layout,
the FlashAttention-2 Function, packed batches, key padding); :data:`CONTRACTS` gathers them, in
the families' order, by name.
"""

from __future__ import annotations

from attnscore.maths.contract import Contract
from attnscore.maths.families.registry import FAMILIES

__all__ = ["CONTRACTS", "QK_CONTRACTS", "get_contract"]

CONTRACTS: dict[str, Contract] = {c.name: c for family in FAMILIES.values() for c in family.CONTRACTS}
"""Every bundled contract by name (unconfigured: each spec configures its own)."""

QK_CONTRACTS = tuple(name for name, c in CONTRACTS.items() if c.is_qk_view)


def get_contract(name: str) -> Contract:
    """Return the contract called ``name``; raise KeyError naming the known ones."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}") from None
