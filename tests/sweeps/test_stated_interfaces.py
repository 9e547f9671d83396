"""Every bundled spec with open leading dims, graded as a course that states its interface would
state it: no leading dims, [batch], or [batch, heads]; every mask full-shape and optional. The
reference passes every property that applies, and every drawn input has exactly the stated rank."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attnscore.catalogue.properties import get_property
from attnscore.check.cases import build_cases
from attnscore.check.verify import verify_spec
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
OPEN = sorted(
    p.name
    for p in (ROOT / "specs").glob("*.yaml")
    if any(legend[:1] == ("...",) for _, legend in load_spec(p).contract.parameters)
)
LEADING = {"none": (), "batch": ("batch",), "batch_heads": ("batch", "heads")}


def stated(name: str, leading: tuple[str, ...]):
    """The bundled spec with the interface stated, its worked examples left out (they are written at
    other ranks), each applicable property on at most 5 examples."""
    spec = load_spec(ROOT / "specs" / name)
    c = spec.contract
    masks = frozenset(n for n, legend in c.parameters if n in c.mask_parameters and legend[:1] == ("...",))
    contract = c.interfaced(leading, masks, masks)
    uses = tuple(
        dataclasses.replace(u, examples=min(u.examples, 5))
        for u in spec.properties
        if get_property(u.name).applies(contract)
    )
    return dataclasses.replace(spec, contract=contract, worked_examples=(), properties=uses)


def test_the_sweep_covers_the_open_specs():
    """The specs whose legend has "..." (the others state every dim already)."""
    assert "attention.yaml" in OPEN and "flash_attention_2.yaml" in OPEN and "score_matrix.yaml" in OPEN
    assert "varlen.yaml" not in OPEN and "dot_product_scores.yaml" not in OPEN


@pytest.mark.slow
@pytest.mark.parametrize("leading", sorted(LEADING))
@pytest.mark.parametrize("name", OPEN)
def test_reference_passes_at_the_stated_rank(name, leading):
    """The reference gets full marks, and every drawn input has the stated leading dims."""
    spec = stated(name, LEADING[leading])
    assert spec.properties, "no property applies"
    built = build_cases(spec, "float64")  # built once: verified, then read for the inputs' ranks
    (result,) = verify_spec(spec, ("float64",), cases={"float64": built})
    assert result.all_passed, [c.message for c in result.cases if not c.passed]
    c = spec.contract
    for case in built:
        for call in case.calls:
            for n, a in call.args.items():
                legend = dict(c.parameters)[n]
                if legend[:1] == ("...",):
                    assert np.ndim(a) - (len(legend) - 1) == len(LEADING[leading]), (case.id, n, np.shape(a))
