"""``function.module.init`` with ``{value: PARAMETER}``: only a whole-number parameter of shape []."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from tests.spec.test_module_spec import BILINEAR


def test_a_value_of_a_parameter_with_axes_is_a_located_problem(tmp_path: Path) -> None:
    module = """\
  module:
    init: {d_q: {value: W}, n: {value: heads}}
    weights: {W: weight}"""
    path = tmp_path / "tiny.yaml"
    path.write_text(BILINEAR.replace("MODULE", module), encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    problems = [str(p).removeprefix(f"{tmp_path}/") for p in raised.value.problems]
    assert len(problems) == 2, problems
    assert "function.module.init.d_q.value" in problems[0]
    assert (
        "expected a parameter of function.parameters with shape [] (a whole number; here: none), found 'W' "
        "with shape [d_q, d_k]" in problems[0]
    )
    assert "function.module.init.n.value" in problems[1] and "found 'heads'" in problems[1]


def test_the_bundled_module_spec_takes_num_heads_by_value() -> None:
    from attnscore.boundary.modules import SizeOf, ValueOf

    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / "multihead_self_attention_module.yaml")
    assert spec.module is not None
    assert dict(spec.module.init) == {"d_model": SizeOf("x", -1, "d_model"), "num_heads": ValueOf("num_heads")}
    assert spec.module.forward == ("x",) and spec.module.init_inputs == frozenset({"num_heads"})


def test_forward_listing_a_value_parameter_is_a_located_problem(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "specs" / "multihead_self_attention_module.yaml").read_text()
    path = tmp_path / "m.yaml"
    path.write_text(text.replace("forward: [x]", "forward: [x, num_heads]"), encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    (problem,) = raised.value.problems
    assert "function.module.forward" in str(problem)
    assert (
        "expected every parameter that is not a weight or a constructor value once, in forward's order "
        "(x in some order)"
    ) in str(problem)
