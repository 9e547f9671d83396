"""Catalogue entries select contracts by their features (attnscore.catalogue.families)."""

from __future__ import annotations

import pytest

from attnscore.catalogue import families
from attnscore.catalogue.mistakes import MISTAKES, mistakes_for
from attnscore.catalogue.properties import PROPERTIES
from attnscore.maths.contracts import CONTRACTS

_CAUSAL = {"causal_attention_top_left", "causal_attention_bottom_right"}


def _names(predicate: families.Applies) -> set[str]:
    return {name for name, c in CONTRACTS.items() if predicate(c)}


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        (families.dot_product, {"score", "scores", "score_matrix", "scaled_score_matrix"}),
        (families.raw_dot_product, {"score", "scores", "score_matrix"}),
        (families.scaled_dot_product, {"scaled_score_matrix"}),
        (families.bilinear, {"bilinear_scores"}),
        (families.additive, {"additive_scores"}),
        (families.masked, {"masked_scores", "attention_weights", "attention"}),
        (families.weights, {"attention_weights"}),
        (families.attention, {"attention"} | _CAUSAL),
        (families.causal, _CAUSAL),
        (
            families.rows_can_be_fully_masked,
            {
                "masked_scores",
                "attention_weights",
                "attention",
                "causal_attention_bottom_right",
                "sdpa",
                "sdpa_float_mask",
                "key_padding_attention",
            },
        ),
        (
            families.scaled,
            {"scaled_score_matrix", "attention", "causal_attention_top_left", "causal_attention_bottom_right"},
        ),
        (families.many_queries, set(CONTRACTS) - {"score", "scores"}),
        (families.many_keys, set(CONTRACTS) - {"score"}),
        (families.every, set(CONTRACTS)),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_each_family_names_the_contracts_with_its_features(family: families.Applies, expected: set[str]) -> None:
    assert _names(family) == expected


def test_mistakes_and_properties_select_the_same_way() -> None:
    """Both carry an ``applies(contract) -> bool``; a mistake's contract names derive from it (over
    each contract's sample keyword configurations, for contracts that take keywords)."""
    for m in MISTAKES.values():
        expected = tuple(n for n, c in CONTRACTS.items() if any(m.applies(x) for x in c.sample_configurations()))
        assert m.contracts == expected, m.id
    for p in PROPERTIES.values():
        assert all(isinstance(p.applies(c), bool) for c in CONTRACTS.values()), p.name
    assert [m.id for m in mistakes_for("scaled_score_matrix")][:3] == [
        "not_scaled",
        "scaled_by_dk",
        "scaled_by_half_dk",
    ]
    assert "causal_wrong_alignment" not in {m.id for m in mistakes_for("attention")}
    assert {m.id for m in mistakes_for("masked_scores")} >= {"mask_ignored", "mask_inverted"}
    assert "computed_in_float32" not in {m.id for m in mistakes_for("masked_scores")}


def test_a_new_contract_with_known_features_is_covered_without_naming_it() -> None:
    """A bounded or tied copy of a contract (a new Contract object) is selected like the original."""
    from dataclasses import replace

    copy = replace(CONTRACTS["attention"], name="my_attention")
    chosen = {m.id for m in MISTAKES.values() if m.applies(copy)}
    assert chosen == {m.id for m in mistakes_for("attention")}
