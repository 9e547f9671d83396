"""mistakes_for: an instructor's own reference gets none of the catalogue's mistakes, even when the
spec's function name is a bundled contract's (its contract takes that name, not its layout)."""

from __future__ import annotations

from pathlib import Path

from attnscore.catalogue.mistakes import mistakes_for
from attnscore.maths.family import ContractFamily
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "examples" / "courses" / "cs336_assignment1"


def test_own_reference_named_like_a_bundled_contract_gets_no_catalogue_mistake():
    """The course's multihead_self_attention (weights first, in_features fifth) is graded against the
    instructor's file: the bundled contract's mistakes, written for (x, W_q, W_k, W_v, W_o, num_heads),
    do not apply, and the mistakes a failing output is diagnosed against are exactly its reference file's."""
    spec = load_spec(COURSE / "multihead_self_attention.yaml")
    assert spec.contract.family is ContractFamily.INSTRUCTOR
    assert spec.contract.name == "multihead_self_attention"
    assert mistakes_for(spec.contract) == []
    assert {m.id for m in mistakes_for("multihead_self_attention")} >= {"heads_reshaped_without_transpose"}
    assert {m.id for m in spec.known_mistakes()} == {
        "causal_mask_ignored",
        "heads_split_without_transpose",
        "scale_uses_d_model",
    }
