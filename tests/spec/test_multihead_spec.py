"""The multi-head specs as the loader reads them: conventions stated, integers checked where written."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]


def test_conventions_are_stated_never_passed() -> None:
    """causal (and RoPE's pairing) are the spec's conventions: stated, and no keyword reaches the function."""
    spec = load_spec(ROOT / "specs" / "multihead_self_attention_rope.yaml")
    assert spec.contract.options.stated() == {"causal": True, "pairing": "interleaved"}
    assert dict(spec.contract.options) == {}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        pytest.param(
            "      num_heads: 2\n      theta: 10000\n      token_positions: [0, 0]\n",
            "      num_heads: 3\n      theta: 10000\n      token_positions: [0, 0]\n",
            "worked_examples[0].inputs.num_heads: expected a divisor of d_model = 4, found 3",
            id="heads do not divide d_model",
        ),
        pytest.param(
            "      num_heads: 2\n      theta: 10000\n      token_positions: [0, 0]\n",
            "      num_heads: 4\n      theta: 10000\n      token_positions: [0, 0]\n",
            "worked_examples[0].inputs.num_heads: expected an even d_head for RoPE, found d_model / num_heads = 1",
            id="odd d_head",
        ),
        pytest.param(
            "      token_positions: [0, 0]\n",
            "      token_positions: [0, 0, 1]\n",
            "worked_examples[0].inputs.token_positions: expected seq=2 as in x, found seq=3",
            id="positions of another length",
        ),
    ],
)
def test_bad_integers_in_a_worked_example_are_located(tmp_path: Path, old: str, new: str, message: str) -> None:
    """A worked example's head count, RoPE width or positions that do not fit is one located problem."""
    text = (ROOT / "specs" / "multihead_self_attention_rope.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert any(message in str(p) for p in info.value.problems), [str(p) for p in info.value.problems]
