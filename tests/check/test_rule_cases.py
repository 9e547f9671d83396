"""Judging a spec's rules over a run (attnscore.check.rule_cases): broken by the code or by the calls
seen, required calls, and a kept rule's points only beside right values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from attnscore.check.cases import build_cases
from attnscore.check.rule_cases import judge_rules
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, Session
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.load import load_spec

SDPA = "torch.nn.functional.scaled_dot_product_attention"


@pytest.fixture(scope="module")
def spec():
    return load_spec("flash_attention_2")


_BUILT: dict[str, list] = {}


def _cases(spec) -> list:
    """The spec's cases, built once per spec file for this module."""
    if spec.path not in _BUILT:
        _BUILT[spec.path] = build_cases(spec)
    return _BUILT[spec.path]


def _others(spec, passed: set[str]) -> list:
    """Every non-rule case with a result: passed when its id is in ``passed``."""
    cases = [c for c in _cases(spec) if c.kind != "rule"]
    return [
        (c, CaseResult(c.id, c.kind, c.title, Verdict.PASSED if c.id in passed else Verdict.WRONG_VALUE,
                       c.points if c.id in passed else Fraction(0), c.points, c.visibility, c.location))
        for c in cases
    ]  # fmt: skip


def _judge(spec, passed, places, calls):
    rules = [c for c in _cases(spec) if c.kind == "rule"]
    return {r.id: r for r in judge_rules(spec, rules, _others(spec, passed), places, calls, "float32")}


EVERYTHING = {
    "example:two_equal_keys",
    "property:matches_reference",
    "property:gradients_match_golden",
}


def test_kept_rules_earn_their_points_beside_right_values(spec):
    """Nothing named in the code, nothing seen called, right values forward and backward: both rules pass."""
    results = _judge(spec, EVERYTHING, {"no_sdpa": (), "hand_written_backward": ()}, frozenset())
    assert all(r.passed and r.points == 1 for r in results.values())


def test_a_forbidden_call_in_the_code_or_seen_made_breaks_the_rule(spec):
    """The code naming SDPA breaks no_sdpa; autograd seen in the backward breaks hand_written_backward,
    but autograd seen in the forward does not (that rule looks inside the backward)."""
    calls = frozenset({"torch.autograd.grad@forward"})
    results = _judge(spec, EVERYTHING, {"no_sdpa": ("solution.py, line 4",), "hand_written_backward": ()}, calls)
    assert results["rule:no_sdpa"].verdict is Verdict.RULE_BROKEN and results["rule:no_sdpa"].points == 0
    assert "your code calls torch.nn.functional.scaled_dot_product_attention (solution.py, line 4)" in (
        results["rule:no_sdpa"].message
    )
    assert results["rule:hand_written_backward"].passed
    seen = frozenset({"torch.autograd.backward@backward"})
    broken = _judge(spec, EVERYTHING, None, seen)["rule:hand_written_backward"]
    assert broken.verdict is Verdict.RULE_BROKEN
    assert "your code calls torch.autograd.backward inside your backward pass (called inside your backward pass)" in (
        broken.message
    )


def test_a_rule_earns_nothing_without_right_values(spec):
    """A kept rule beside no passed case gets no point; a backward rule needs a passed case with a
    backward pass, a forward-only pass is not enough."""
    none = _judge(spec, set(), None, None)
    assert all(r.verdict is Verdict.WRONG_VALUE and r.points == 0 for r in none.values())
    assert "the rule holds, but no case of yours passed" in none["rule:no_sdpa"].message
    forward_only = _judge(spec, {"property:matches_reference"}, None, None)
    assert forward_only["rule:no_sdpa"].passed
    assert not forward_only["rule:hand_written_backward"].passed
    assert "no case of yours that ran a backward pass passed" in forward_only["rule:hand_written_backward"].message


def test_a_required_call_must_be_named_and_made(tmp_path):
    """require: broken when the code names none of the calls, or the worker never saw one made."""
    text = open("specs/dot_product_scores.yaml", encoding="utf-8").read()
    text += "rules:\n  - {id: uses_matmul, require: torch.matmul, points: 1, statement: 'Use torch.matmul.'}\n"
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    passed = {c.id for c in _cases(spec) if c.kind != "rule"}
    assert _judge(spec, passed, {"uses_matmul": ("solution.py, line 2",)}, frozenset({"torch.matmul@forward"}))[
        "rule:uses_matmul"
    ].passed
    unnamed = _judge(spec, passed, {"uses_matmul": ()}, frozenset())["rule:uses_matmul"]
    assert unnamed.verdict is Verdict.RULE_BROKEN
    assert "your code never names torch.matmul: this assignment asks you to use it" in unnamed.message
    uncalled = _judge(spec, passed, {"uses_matmul": ("solution.py, line 2",)}, frozenset())["rule:uses_matmul"]
    assert "your code never called torch.matmul" in uncalled.message


def test_a_session_judges_rules_last_in_process(spec):
    """In process nothing is read or trapped: the reference keeps both rules and gets full marks."""
    from attnscore.maths.flash_reference import FlashReference

    cases = build_cases(spec, "float32")
    session = Session(spec, tuple(cases), "float32", "cpu", "reference", spec.seed, budget=NO_SHRINK)
    result = session.run(InProcessRunner(FlashReference, logsumexp=spec.logsumexp))
    assert result.score == result.max_score == 28
    assert [c.id for c in result.cases][-2:] == ["rule:no_sdpa", "rule:hand_written_backward"]
