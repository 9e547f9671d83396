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
    assert "expected a parameter of function.parameters with shape [] (a whole number; here: none), found 'W' " \
        "with shape [d_q, d_k]" in problems[0]
    assert "function.module.init.n.value" in problems[1] and "found 'heads'" in problems[1]
