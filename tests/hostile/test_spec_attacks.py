"""Attacks graded against their own specs: mutation in the backward pass, aliasing the grader judges
itself, null implementations, long worker descriptions, assignment rules; in every sandbox shape.

Each shape this machine can run grades every attack of :data:`tests.hostile.expectations.SPEC_ATTACKS`
once (two at a time): the worker template and a fresh interpreter per worker, without bubblewrap
and, where it works here, inside it. A shape that needs bubblewrap skips cleanly without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from attnscore.report import batch_to_json
from attnscore.sandbox.launch import bwrap_available
from tests.hostile.expectations import SPEC_ATTACK_FOLDERS, SPEC_ATTACKS
from tests.hostile.harness import HOSTILE, LIMITS, grade_spec_attacks

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

SHAPES = {
    "template": replace(LIMITS, bwrap=False, template=None),
    "fresh": replace(LIMITS, bwrap=False, template=False),
    "bwrap-template": replace(LIMITS, bwrap=True, template=None),
    "bwrap-fresh": replace(LIMITS, bwrap=True, template=False),
}
"""Every sandbox shape: the worker template or a fresh interpreter per worker, without and with bubblewrap."""


@pytest.fixture(scope="module", params=list(SHAPES))
def graded(request):
    """Every spec attack graded once in the shape; ``(results, shape name)``."""
    if request.param.startswith("bwrap") and not bwrap_available():
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")
    results, _ = grade_spec_attacks(limits=SHAPES[request.param])
    return results, request.param


def test_every_spec_attack_file_has_an_expectation():
    """The table and the attack folders name the same attacks, each with a spec that exists."""
    files = {f"{folder}/{p.stem}" for folder in SPEC_ATTACK_FOLDERS for p in (HOSTILE / folder).glob("*.py")}
    assert files == set(SPEC_ATTACKS)
    for attack in SPEC_ATTACKS.values():
        assert (HOSTILE.parents[1] / attack.spec).is_file(), attack.spec


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(SPEC_ATTACKS)])
def test_spec_attack_earns_only_what_its_values_earn(graded, name):
    """Each attack gets at most (with exact: exactly) what its right values earn, loses exactly the
    cases it must, and its failing cases say what was found (the input, the call, the count)."""
    results, shape = graded
    result = results[name]
    assert not isinstance(result, BaseException), f"the grader raised {result!r}"
    expected = SPEC_ATTACKS[name]
    failed = {c.id: c for c in result.cases if not c.passed}
    shown = {i: c.message[:400] for i, c in failed.items()}
    if expected.exact:
        assert result.score == expected.most, shown
    else:
        assert result.score <= expected.most, shown
    if expected.lost is not None:
        assert set(failed) == expected.lost, shown
    if expected.says:
        assert any(expected.says in c.message for c in failed.values()), shown
    if expected.verdicts:
        assert {c.verdict.value for c in failed.values()} <= expected.verdicts, shown
    assert all(c.verdict.value != "grader_error" for c in result.cases), shown
    json.loads(json.dumps(batch_to_json([result]), allow_nan=False))  # a complete, strict result


def test_no_point_is_wrongly_awarded(graded):
    """Over every spec attack: no point above what its values earn, no grader crash."""
    results, _ = graded
    crashes = [n for n, r in results.items() if isinstance(r, BaseException)]
    assert crashes == []
    wrongly = {n: r.score - SPEC_ATTACKS[n].most for n, r in results.items() if r.score > SPEC_ATTACKS[n].most}
    assert wrongly == {}


def test_a_backward_mutation_is_named_with_its_input_call_and_moment(graded):
    """The grader's own reading of the shared memory names the inputs, the call of the case and when:
    during the backward pass (saved Q and V scaled and zeroed, dO zeroed), or in the forward."""
    results, _ = graded
    saved = results["backward/backward_mutates_saved_inputs"]
    example = next(c for c in saved.cases if c.id == "example:one_key")
    assert "your function changed its input(s) Q, V in place (during its backward pass)" in example.message
    assert example.failure.diagnosis["id"] == "inputs_mutated"
    prop = next(c for c in saved.cases if c.id == "property:gradients_match_golden")
    assert re.search(r"in place \(call \d+ of 15, during its backward pass\)", prop.message), prop.message
    upstream = next(c for c in results["backward/backward_mutates_upstream"].cases if c.id == "example:one_key")
    assert "changed its input(s) dO in place (during its backward pass)" in upstream.message
    forward = next(c for c in results["backward/mutates_inputs_when_grad"].cases if c.id == "example:one_key")
    assert "changed its input(s) K, V in place; leave inputs as they are" in forward.message
    # the forward-only calls of the same submissions are untouched: their cases pass
    assert next(c for c in saved.cases if c.id == "property:inputs_not_mutated").passed


def test_aliasing_is_the_graders_finding_whatever_the_worker_is_told(graded):
    """A subclass whose storage lies and a TorchFunctionMode that answers storage questions both lose
    output_not_aliased: the grader's canaries show in the output read again."""
    results, _ = graded
    for name in ("aliasing/lying_storage_subclass", "aliasing/torch_function_mode_hides_storage"):
        case = next(c for c in results[name].cases if c.id == "property:output_not_aliased")
        assert not case.passed
        assert "your output shares memory with the input(s) S" in case.message, case.message
        assert "mask" not in case.failure.check  # only the input it shares memory with is named


def test_a_function_saving_many_tensors_loses_only_the_cases_that_read_l(graded):
    """300 extra tensors of L's shape: O, dQ, dK and dV right (gradients_match_golden passes), L
    ambiguous; the message names how many were saved and which have L's shape, and stays short."""
    results, _ = graded
    result = results["messages/saves_300_tensors"]
    assert next(c for c in result.cases if c.id == "property:gradients_match_golden").passed
    text = next(c for c in result.cases if c.id == "example:one_key").message
    assert "found 301 among the 305 saved tensors' shapes: (1, 1, 4) ×4, (1, 1) ×301" in text, text
    assert "(saved tensors 4, 5, 6, 7, 8, 9, 10, 11 and 293 more have that shape)" in text, text
    assert len(text) < 1500


def test_rules_cost_their_points_and_name_what_was_found(graded):
    """SDPA in the forward and autograd in the backward: right values, both rules broken, each naming
    the call, the file's lines and that the worker saw the call made (and in which phase)."""
    results, _ = graded
    cases = {c.id: c for c in results["rules/sdpa_forward_autograd_backward"].cases}
    sdpa, backward = cases["rule:no_sdpa"], cases["rule:hand_written_backward"]
    assert sdpa.verdict.value == backward.verdict.value == "rule_broken"
    assert "sdpa_forward_autograd_backward.py, lines 13 and 26; called while your function ran" in sdpa.message
    assert (
        "your code calls torch.autograd.grad inside your backward pass (sdpa_forward_autograd_backward.py, "
        "line 27; called inside your backward pass)" in backward.message
    )
    assert sdpa.message.startswith("Rule: The forward computes attention itself")


def test_a_null_implementation_keeps_the_rules_and_earns_nothing_for_them(graded):
    """A Function that computes nothing calls nothing forbidden, yet its rule cases earn no point."""
    results, _ = graded
    cases = {c.id: c for c in results["null/null_function"].cases}
    for rule in ("rule:no_sdpa", "rule:hand_written_backward"):
        assert cases[rule].points == 0 and cases[rule].verdict.value == "wrong_value"
        assert "the rule holds, but no case of yours" in cases[rule].message
