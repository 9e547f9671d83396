"""The mistake catalogue: named wrong implementations that students and engineers really write.

Each :class:`Mistake` has an id, the contracts it applies to, a wrong implementation (a torch
function with the contract's parameters) and a student-facing message. The catalogue serves two
jobs:

- **diagnosis** (:mod:`attnscore.check.diagnosis`): a failing output is compared with each applicable
  mistake recomputed on the same inputs; a match names the mistake in the feedback;
- **spec quality** (``attnscore verify``): every applicable mistake must fail at least one case of
  a spec and be diagnosed as itself, else the spec has a blind spot.

Mistakes are plain functions ``fn(contract, spec, *args)``; ``spec`` is only used by the
"hard-coded worked examples" mistake.
"""

from attnscore.catalogue.mistakes import (
    causal,
    flash_attention,
    heads,
    masks,
    packed,
    rotary,
    scaling,
    score_functions,
    sequences,
    shapes,
    shortcuts,
    variants,
)
from attnscore.catalogue.mistakes.registry import MISTAKES, Mistake, get_mistake, mistakes_for

SECTIONS = (
    scaling,
    shapes,
    score_functions,
    masks,
    causal,
    heads,
    variants,
    sequences,
    packed,
    rotary,
    flash_attention,
    shortcuts,
)
"""The catalogue's sections, in the catalogue's order (each registers its mistakes when imported)."""

_ORDER = {section.__name__: number for number, section in enumerate(SECTIONS)}
for _mistake in sorted(MISTAKES.values(), key=lambda m: _ORDER[m.fn.__module__]):  # stable: keeps each section's order
    MISTAKES[_mistake.id] = MISTAKES.pop(_mistake.id)

__all__ = ["Mistake", "MISTAKES", "get_mistake", "mistakes_for"]
