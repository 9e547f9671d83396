"""A parameter declared with leading dims of size 1 (``token_positions: [1, seq]``, as CS336 passes RoPE's
positions to multi-head attention): the contract keeps them, drawn inputs have them, worked examples must."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from attnscore.maths.strategies import draw_examples, random_args
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

BUNDLED = Path(__file__).resolve().parents[2] / "specs" / "multihead_self_attention_rope.yaml"


def _cs336_text() -> str:
    """The bundled MHA-with-RoPE spec with CS336's interface: one batch dim, positions (1, seq)."""
    text = BUNDLED.read_text(encoding="utf-8").replace("id: multihead_self_attention_rope", "id: mha_rope_1_seq")
    text = text.replace('- {name: x, shape: ["...", seq, d_model]}', "- {name: x, shape: [batch, seq, d_model]}")
    text = text.replace("- {name: token_positions, shape: [seq]}", "- {name: token_positions, shape: [1, seq]}")
    text = text.replace('shape: ["...", seq, d_model]', "shape: [batch, seq, d_model]")
    text = re.sub(r"token_positions: (\[[0-9, ]+\])", r"token_positions: [\1]", text)
    text = re.sub(r"(\n      x: )(\[.*\])\n", r"\1[\2]\n", text)
    return re.sub(r"(\n    expected: )(\[.*\])\n", r"\1[\2]\n", text)


def test_the_spec_states_positions_as_one_by_seq(tmp_path: Path) -> None:
    path = tmp_path / "mha.yaml"
    path.write_text(_cs336_text(), encoding="utf-8")
    spec = load_spec(path)
    contract = spec.contract
    assert contract.unit_dims == (("token_positions", 1),)
    assert contract.declared_shape("token_positions") == ("1", "seq")
    assert contract.leading == ("batch",)
    for args in draw_examples(random_args(contract), 10, 5):
        positions, x = args["token_positions"], args["x"]
        assert positions.shape == (1, x.shape[-2]) and positions.dtype == np.int32
        assert x.ndim == 3
    example = spec.worked_examples[0]
    assert np.shape(example.inputs["token_positions"]) == (1, 2)


def test_a_worked_example_without_the_unit_dim_is_a_located_problem(tmp_path: Path) -> None:
    text = _cs336_text().replace("token_positions: [[0, 0]]", "token_positions: [0, 0]", 1)
    path = tmp_path / "mha.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    (problem,) = raised.value.problems
    assert "worked_examples[0].inputs.token_positions" in str(problem)
    assert "expected shape (1, seq) (2-D, as function.parameters states), found shape (2,)" in str(problem)


def test_a_literal_other_than_one_is_still_a_shape_problem(tmp_path: Path) -> None:
    one, two = "- {name: token_positions, shape: [1, seq]}", "- {name: token_positions, shape: [2, seq]}"
    text = _cs336_text().replace(one, two)
    path = tmp_path / "mha.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert any("function.parameters" in str(p) and "token_positions" in str(p) for p in raised.value.problems)
