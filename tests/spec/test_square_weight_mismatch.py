"""A square weight of the wrong size in a worked example is one located problem, not one per axis."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

BUNDLED = Path(__file__).resolve().parents[2] / "specs" / "multihead_self_attention.yaml"


def test_a_three_by_three_weight_beside_width_four_is_said_once(tmp_path: Path) -> None:
    text = BUNDLED.read_text(encoding="utf-8").replace(
        "      W_q: &identity [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n      W_k: *identity",
        "      W_q: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]\n"
        "      W_k: &identity [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]",
        1,
    )
    path = tmp_path / "mha.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    texts = [str(p).removeprefix(f"{path}:") for p in raised.value.problems]
    assert texts == ["38:12: worked_examples[0].inputs.W_q: expected d_model=4 as in x, found d_model=3"], texts
