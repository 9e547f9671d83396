"""The property registry: every property passes on the reference and catches what it names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.catalogue.properties import PROPERTIES, applicable_properties, get_property
from attnscore.check.cases import Case, property_calls
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.maths.contracts import CONTRACTS
from attnscore.maths.strategies import draw_examples
from attnscore.maths.tolerance import Tolerance
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec

SPEC_FOR = {
    "score_matrix": "specs/score_matrix.yaml",
    "scores": "specs/dot_product_scores.yaml",
    "scaled_score_matrix": "specs/scaled_score_matrix.yaml",
    "attention_weights": "specs/attention_weights.yaml",
    "masked_scores": "specs/masked_scores.yaml",
    "attention": "specs/attention.yaml",
    "bilinear_scores": "specs/bilinear_scores.yaml",
    "additive_scores": "specs/additive_scores.yaml",
}

REQUIRED = {
    "matches_reference",
    "equals_qk_entries",
    "perpendicular_keys_score_zero",
    "parallel_keys_score_norm_product",
    "anti_aligned_keys_score_negative",
    "cauchy_schwarz_bound",
    "linear_in_query",
    "linear_in_key",
    "permuting_keys_permutes_scores",
    "permuting_queries_permutes_rows",
    "batch_items_independent",
    "self_scores_symmetric",
    "scaled_is_raw_over_sqrt_dk",
    "scale_independent_of_heads",
    "scores_not_normalised",
    "weights_sum_to_one",
    "weights_non_negative",
    "softmax_shift_invariant",
    "masked_positions_zero_weight",
    "nan_in_kept_position_propagates",
    "inputs_not_mutated",
    "output_not_aliased",
    "dtype_device_follow_inputs",
    "deterministic",
}


def _case(spec_path: str, name: str, dtype: str = "float32", count: int = 8) -> tuple[object, Case]:
    spec = load_spec(spec_path)
    prop = get_property(name)
    examples = draw_examples(prop.strategy(spec.contract, prop.default_max_value), count, seed=11)
    calls = property_calls(spec, name, examples, dtype, spec.tolerance)
    case = Case(
        id=f"property:{name}",
        kind="property",
        title=name,
        statement=prop.summary,
        calls=calls,
        points=1,
        visibility="visible",
        location=f"{spec_path}:1",
        tolerance=spec.tolerance,
        property_name=name,
        corner=prop.corner,  # as build_cases makes it: a property dedicated to a corner judges it
    )
    return spec, case


def test_registry_has_the_required_properties():
    """Every property the issue asks for is registered, with a summary."""
    assert REQUIRED <= set(PROPERTIES)
    assert all(p.summary.endswith(".") for p in PROPERTIES.values())


PAIRS = [pytest.param(c, p, id=f"{c}-{p}") for c in SPEC_FOR for p in applicable_properties(CONTRACTS[c])]


@pytest.mark.parametrize("contract, name", PAIRS)
def test_reference_passes_every_applicable_property(contract, name):
    """The reference passes each applicable property on its generated inputs (float32)."""
    spec, case = _case(SPEC_FOR[contract], name, count=5)
    result = judge_case(spec, case, InProcessRunner(CONTRACTS[contract].reference), "float32")
    assert result.verdict is Verdict.PASSED, result.message


def _permuting_bug(Q, K):
    """Correct only when the keys are in their original order (sorts keys by first coordinate)."""
    order = torch.argsort(K[..., 0], dim=-1, stable=True)
    return torch.take_along_dim(Q @ K.transpose(-2, -1), order[..., None, :].expand(*Q.shape[:-1], -1), dim=-1)


def _mutating(Q, K):
    out = Q @ K.transpose(-2, -1)
    K.mul_(2)
    return out


WRONG = [
    pytest.param("score_matrix", "permuting_keys_permutes_scores", _permuting_bug, id="key order matters"),
    pytest.param("score_matrix", "inputs_not_mutated", _mutating, id="keys mutated in place"),
    pytest.param(
        "masked_scores",
        "output_not_aliased",
        lambda S, m: S.masked_fill_(~m, float("-inf")),
        id="masked in place and returned",
    ),
    pytest.param(
        "score_matrix",
        "dtype_device_follow_inputs",
        lambda Q, K: (Q @ K.transpose(-2, -1)).double(),
        id="float64 output for float32 inputs",
    ),
    pytest.param(
        "score_matrix", "deterministic", lambda Q, K: Q @ K.transpose(-2, -1) + torch.rand(()) * 1e-3, id="random noise"
    ),
    pytest.param(
        "scaled_score_matrix",
        "scale_independent_of_heads",
        lambda Q, K: (Q @ K.transpose(-2, -1)) / (Q.shape[-1] * (Q.shape[0] if Q.ndim > 2 else 1)) ** 0.5,
        id="scaled by √d_model",
    ),
    pytest.param(
        "attention_weights", "masked_positions_zero_weight", lambda S, m: torch.softmax(S, -1), id="mask ignored"
    ),
    pytest.param(
        "attention_weights",
        "fully_masked_row_zero",
        lambda S, m: torch.softmax(S.masked_fill(~m, float("-inf")), -1),
        id="NaN rows",
    ),
    pytest.param(
        "attention_weights",
        "stable_for_large_logits",
        lambda S, m: torch.where(m, S.exp(), 0) / torch.where(m, S.exp(), 0).sum(-1, keepdim=True),
        id="no max subtraction",
    ),
    pytest.param(
        "masked_scores",
        "masked_positions_neg_inf",
        lambda S, m: S + (1 - m.float()) * -1e9,
        id="large negative instead of -inf",
    ),
]


@pytest.mark.parametrize("contract, name, wrong", WRONG)
def test_property_catches_the_bug_it_names(contract, name, wrong):
    """Each property fails an implementation with exactly the bug it is about."""
    spec, case = _case(SPEC_FOR[contract], name, count=10)
    result = judge_case(spec, case, InProcessRunner(wrong), "float32")
    assert result.verdict is not Verdict.PASSED
    assert result.message.startswith("Property: ")


def test_mutation_check_names_the_input_and_diagnoses():
    """inputs_not_mutated names the mutated argument and diagnoses inputs_mutated."""
    spec, case = _case(SPEC_FOR["score_matrix"], "inputs_not_mutated")
    result = judge_case(spec, case, InProcessRunner(_mutating), "float32")
    assert "changed its input(s) K in place" in result.message
    assert result.diagnosis == {"id": "inputs_mutated", "message": result.diagnosis["message"]}


def test_generation_is_derandomised():
    """The same property, contract and seed give the same inputs."""
    prop = get_property("linear_in_query")
    a = draw_examples(prop.strategy(CONTRACTS["score_matrix"], 3.0), 5, seed=3)
    b = draw_examples(prop.strategy(CONTRACTS["score_matrix"], 3.0), 5, seed=3)
    assert all(np.array_equal(x[0], y[0]) and x[4:] == y[4:] for x, y in zip(a, b, strict=True))


@pytest.mark.slow
def test_generation_ignores_imported_modules():
    """Importing more local modules does not change generated cases (hypothesis local constants are off)."""
    import subprocess
    import sys

    code = (
        "{imp}from attnscore.spec.load import load_spec; from attnscore.check.cases import build_cases; "
        "import hashlib; c = build_cases(load_spec('specs/scaled_score_matrix.yaml'), 'float32'); "
        "print(hashlib.md5(b''.join(a.tobytes() for k in c for x in k.calls for a in x.args.values())).hexdigest())"
    )
    plain = subprocess.run([sys.executable, "-c", code.format(imp="")], capture_output=True, text=True, check=True)
    more = subprocess.run(
        [sys.executable, "-c", code.format(imp="import attnscore.cli, attnscore.catalogue.mistakes; ")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert plain.stdout == more.stdout and len(plain.stdout.strip()) == 32


def test_relational_calls_carry_one_check_per_example():
    """A relational property makes several calls per example; only the last carries the check."""
    spec = load_spec(SPEC_FOR["score_matrix"])
    ex = draw_examples(get_property("linear_in_key").strategy(spec.contract, 3.0), 2, seed=1)
    calls = property_calls(spec, "linear_in_key", ex, "float32", Tolerance())
    assert len(calls) == 6
    assert [c.check is not None for c in calls] == [False, False, True, False, False, True]
    assert calls[5].group == (3, 4, 5)


def test_loader_rejects_a_property_that_does_not_apply(tmp_path):
    """A weights property on a score contract is a located spec error."""
    from attnscore.spec.located import SpecError

    text = (
        open(SPEC_FOR["scores"], encoding="utf-8")
        .read()
        .replace("  - name: equals_qk_entries", "  - name: weights_sum_to_one")
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        SpecError, match="expected a property that applies to contract scores, found 'weights_sum_to_one'"
    ):
        load_spec(path)
