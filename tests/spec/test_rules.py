"""A spec's assignment rules (attnscore.spec.rules): read, validated with located problems, and
turned into rule cases worth their points."""

from __future__ import annotations

from fractions import Fraction

import pytest

from attnscore.check.cases import build_cases
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

SPEC = """\
format: attnscore-spec/1
id: tiny
version: 1
title: tiny spec
function:
  name: scores
  contract: scores
  parameters:
    - {name: q, shape: [d_k]}
    - {name: keys, shape: [n_k, d_k]}
  returns: {shape: [n_k]}
worked_examples:
  - id: first
    inputs:
      q: [1, 0]
      keys: [[1, 0], [0, 1]]
    expected: [1, 0]
    explanation: aligned then perpendicular
    points: 1
RULES
"""


def _load(tmp_path, rules: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC.replace("RULES", rules), encoding="utf-8")
    return load_spec(path)


def test_rules_are_read_and_become_cases_worth_their_points(tmp_path):
    """Each rule is a Rule (names as a list, during defaulting to any) and a case rule:<id> after the others."""
    spec = _load(
        tmp_path,
        "rules:\n"
        "  - {id: no_einsum, forbid: torch.einsum, points: 0.5, statement: 'Use matmul.'}\n"
        "  - {id: uses_matmul, require: [torch.matmul, torch.Tensor.matmul], during: forward, points: 1,\n"
        "     statement: 'Use matmul.'}\n",
    )
    first, second = spec.rules
    assert (first.id, first.kind, first.names, first.during, first.points) == (
        "no_einsum", "forbid", ("torch.einsum",), "any", Fraction(1, 2),
    )  # fmt: skip
    assert (second.kind, second.names, second.during) == ("require", ("torch.matmul", "torch.Tensor.matmul"), "forward")
    assert spec.ruled_calls == ("torch.einsum", "torch.matmul", "torch.Tensor.matmul")
    assert spec.max_points == Fraction(5, 2)
    cases = build_cases(spec)
    assert [c.id for c in cases] == ["example:first", "rule:no_einsum", "rule:uses_matmul"]
    rule = cases[1]
    assert (rule.kind, rule.calls, rule.points, rule.title) == ("rule", (), Fraction(1, 2), "Use matmul.")
    assert rule.location == "tiny.yaml:21"


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        pytest.param(
            "  - {id: both, forbid: torch.einsum, require: torch.matmul, points: 1, statement: s}\n",
            "tiny.yaml:21:5: rules[0]: expected one of forbid or require (a dotted name or a list), found both",
            id="forbid and require",
        ),
        pytest.param(
            "  - {id: neither, points: 1, statement: s}\n",
            "tiny.yaml:21:5: rules[0]: expected one of forbid or require (a dotted name or a list), found neither",
            id="neither",
        ),
        pytest.param(
            "  - {id: a, forbid: torch.einsum, points: 1, statement: s}\n"
            "  - {id: a, forbid: torch.bmm, points: 1, statement: s}\n",
            "tiny.yaml:22:10: rules[1].id: expected a unique id, found 'a' again (first at rules[0])",
            id="a repeated id",
        ),
    ],
)
def test_a_rule_that_cannot_be_judged_is_a_located_problem(tmp_path, rules, problem):
    """Forbid and require at once, neither, or an id given twice: one located line each."""
    with pytest.raises(SpecError) as raised:
        _load(tmp_path, "rules:\n" + rules)
    found = [str(p).rsplit("/", 1)[-1] for p in raised.value.problems]
    assert problem in found, found


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        pytest.param(
            "  - {id: a, forbid: einsum, points: 1, statement: s}\n",
            "tiny.yaml:21:21: rules[0].forbid: expected dotted names of functions "
            "(torch.nn.functional.scaled_dot_product_attention), found 'einsum'",
            id="not dotted",
        ),
        pytest.param(
            "  - {id: a, forbid: 'torch.einsum()', points: 1, statement: s}\n",
            "tiny.yaml:21:21: rules[0].forbid: expected dotted names of functions "
            "(torch.nn.functional.scaled_dot_product_attention), found 'torch.einsum()'",
            id="a call, not a name",
        ),
        pytest.param(
            "  - {id: a, forbid: [], points: 1, statement: s}\n",
            "tiny.yaml:21:21: rules[0].forbid: expected dotted names of functions "
            "(torch.nn.functional.scaled_dot_product_attention), found an empty list",
            id="an empty list",
        ),
        pytest.param(
            "  - {id: a, forbid: torch.einsum, during: later, points: 1, statement: s}\n",
            "tiny.yaml:21:43: rules[0].during: expected one of any, forward, backward, found string 'later'",
            id="unknown phase",
        ),
    ],
)
def test_what_is_not_a_rule_is_a_located_problem(tmp_path, rules, problem):
    """A name that is not a function's dotted name, an empty list, an unknown phase: the spec does not load."""
    with pytest.raises(SpecError) as raised:
        _load(tmp_path, "rules:\n" + rules)
    assert [str(p).rsplit("/", 1)[-1] for p in raised.value.problems] == [problem]


def test_bundled_flash_attention_specs_forbid_sdpa_and_autograd_in_the_backward():
    """Both FlashAttention-2 specs carry the two rules, 1 point each."""
    for name in ("flash_attention_2", "flash_attention_2_causal"):
        spec = load_spec(name)
        rules = {r.id: r for r in spec.rules}
        assert rules["no_sdpa"].names == ("torch.nn.functional.scaled_dot_product_attention",)
        assert rules["no_sdpa"].during == "any"
        assert rules["hand_written_backward"].names == ("torch.autograd.grad", "torch.autograd.backward")
        assert rules["hand_written_backward"].during == "backward"
        assert all(r.points == 1 for r in spec.rules)
