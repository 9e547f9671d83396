"""RoPE's catalogued mistakes (attnscore/catalogue/mistakes/rotary.py): each wrong rotation on a
hand-checkable input, the stale theta's fit, each caught and named by specs/rope.yaml, and student
files graded in process and in the sandbox (a class-level cache across thetas included)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.catalogue.mistakes.rotary import (
    WRONG_ROTATIONS,
    other_pairing,
    rotate_frequencies_per_coordinate,
    rotate_other_pairing,
    rotate_positions_from_one,
    rotate_positions_ignored,
    rotate_stale_theta,
)
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test
from attnscore.grade.grading import grade_many
from attnscore.maths.contracts import get_contract
from attnscore.maths.rotary import rotate
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

SPEC = "specs/rope.yaml"
SUBMISSIONS = Path("examples/submissions/rope")
ROPE_IDS = [
    "rope_pairing_swapped",
    "rope_frequencies_per_coordinate",
    "rope_positions_from_one",
    "rope_positions_ignored",
    "rope_stale_theta",
]
X = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
POSITIONS = torch.tensor([0, 10], dtype=torch.int32)


def test_rope_mistakes_apply_to_rope_only_and_are_in_the_table() -> None:
    """The five RoPE mistakes apply to the rope contract (by its feature), to no attention contract,
    and each has its wrong rotation in WRONG_ROTATIONS."""
    ids = [m.id for m in mistakes_for("rope")]
    assert ids[:5] == ROPE_IDS
    assert not {m.id for m in mistakes_for("attention")} & set(ROPE_IDS)
    assert list(WRONG_ROTATIONS) == ROPE_IDS


def test_other_pairing_both_ways_and_refuses_an_unknown_one() -> None:
    """interleaved <-> rotate_half; anything else is a ValueError naming the pairings."""
    assert (other_pairing("interleaved"), other_pairing("rotate_half")) == ("rotate_half", "interleaved")
    with pytest.raises(ValueError, match="expected a RoPE pairing among .*, found 'neox'"):
        other_pairing("neox")


def test_each_wrong_rotation_on_a_hand_checkable_input() -> None:
    """x = [1, 0, 1, 0] at positions 0 and 10, theta 10000 (frequencies 1 and 0.01)."""
    right = rotate(X, POSITIONS, 10000, "interleaved")
    np.testing.assert_allclose(right[1], [math.cos(10), math.sin(10), math.cos(0.1), math.sin(0.1)])
    # the halves paired: (x0, x2) = (1, 1) turns at 1, (x1, x3) = (0, 0) at 0.01
    half = rotate_other_pairing(X, POSITIONS, 10000, "interleaved")
    np.testing.assert_allclose(
        half[1], [math.cos(10) - math.sin(10), 0.0, math.sin(10) + math.cos(10), 0.0], atol=1e-15
    )
    # theta^(-i/d): pair 1 at 10000^(-1/4) = 0.1, angle 1
    fast = rotate_frequencies_per_coordinate(X, POSITIONS, 10000, "interleaved")
    np.testing.assert_allclose(fast[1], [math.cos(10), math.sin(10), math.cos(1), math.sin(1)])
    # m + 1: position 0 turns too, by 1 radian in pair 0
    shifted = rotate_positions_from_one(X, POSITIONS, 10000, "interleaved")
    np.testing.assert_allclose(shifted[0], [math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)])
    # arange(seq): the second token at 1, not 10
    indexed = rotate_positions_ignored(X, POSITIONS, 10000, "interleaved")
    np.testing.assert_allclose(indexed[1], [math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)])
    # theta 100 passed, 10000 used: pair 1 at 0.01 instead of 0.1
    stale = rotate_stale_theta(X, POSITIONS, torch.tensor(100, dtype=torch.int32), "interleaved")
    torch.testing.assert_close(stale, right)


@pytest.mark.parametrize("stale", [10000, 500, 12769])
def test_stale_theta_fit_finds_the_theta_the_output_was_computed_with(stale: int) -> None:
    """The fit reads the base of a rotation made with another theta (one of THETAS, or a whole
    number off the list found on the grid) as its first candidate."""
    mistake = get_mistake("rope_stale_theta")
    contract = get_contract("rope")
    x = torch.tensor(np.random.default_rng(0).uniform(-2, 2, size=(3, 8)))
    positions = torch.tensor([2, 9, 31], dtype=torch.int32)
    got = rotate(x, positions, stale, "interleaved").numpy()
    fit = mistake.fit(contract, (x, positions, torch.tensor(100, dtype=torch.int32)), got)
    assert fit is not None and fit[0] == {"stale": float(stale)}
    assert "theta = 12769, not the theta of this call" in mistake.describe({"stale": 12769.0})
    assert mistake.fit(contract, (x, positions, torch.tensor(100)), np.full((3, 8), np.nan)) is None


def test_every_mistake_the_spec_lists_is_caught_and_named_in_float32() -> None:
    """mutation_test on specs/rope.yaml: each listed mistake fails a case and is diagnosed as itself."""
    results = mutation_test(load_spec(SPEC), dtype="float32")
    assert {r.mistake_id for r in results} >= set(ROPE_IDS)
    assert [(r.mistake_id, r.cell) for r in results if not r.ok] == []


def _load(name: str):
    path = SUBMISSIONS / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"rope_submission_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.rope


NAMED = {
    "rotate_half": "rope_pairing_swapped",
    "frequencies_per_coordinate": "rope_frequencies_per_coordinate",
    "positions_from_one": "rope_positions_from_one",
    "positions_ignored": "rope_positions_ignored",
    "theta_ignored": "rope_stale_theta",
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_student_file_is_caught_and_named_in_process(name: str) -> None:
    """Each wrong student RoPE loses points and is diagnosed as its mistake only."""
    result = run_impl(load_spec(SPEC), _load(name), dtype="float32", shrink=False)
    assert result.score < result.max_score
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {NAMED[name]}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["correct_interleaved", "correct_keyed_cache"])
def test_correct_student_files_get_full_marks_in_process(name: str, dtype: str) -> None:
    """The correct files score full marks in float32 and float64."""
    result = run_impl(load_spec(SPEC), _load(name), dtype=dtype, shrink=False)
    assert result.score == result.max_score, [c.message for c in result.cases if not c.passed]


@pytest.mark.slow
def test_students_in_the_sandbox_a_class_cache_across_thetas_fails() -> None:
    """attnscore grade in one worker per file: the correct files get full marks; the file whose table
    lives on the class (keyed by d_k, not theta) reuses an earlier call's theta and fails worked
    examples and properties; the rotate-half file is named."""
    names = ["correct_interleaved", "correct_keyed_cache", "stale_class_cache", "rotate_half"]
    correct, keyed, stale, half = grade_many(
        [SUBMISSIONS / f"{n}.py" for n in names], load_spec(SPEC), limits=Limits(call_timeout_s=30.0), shrink_steps=0
    )
    assert correct.score == correct.max_score and keyed.score == keyed.max_score
    failed = {c.id for c in stale.cases if not c.passed}
    assert {"example:quarter_turn", "example:frequency_of_pair_one", "property:matches_reference"} <= failed
    assert stale.score < stale.max_score / 2
    # the same file alone on each case (a fresh import per call) is right: only the shared table is wrong
    fresh = _load("stale_class_cache")
    x = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    assert torch.allclose(
        fresh(x, torch.tensor([10], dtype=torch.int32), 10000), torch.tensor([[0, 0, 0.9950, 0.0998]]), atol=1e-4
    )
    assert {c.diagnosis["id"] for c in half.cases if c.diagnosis} == {"rope_pairing_swapped"}


def _rotate_half_spec(tmp_path: Path):
    """specs/rope.yaml with pairing rotate_half and its one worked example turned to rotate-half pairs."""
    text = Path(SPEC).read_text(encoding="utf-8")
    head = text[: text.index("worked_examples:")].replace("{pairing: interleaved}", "{pairing: rotate_half}")
    properties = text[text.index("properties:") : text.index("mistakes:")]
    example = (
        "worked_examples:\n"
        "  - id: halves_pair_up\n"
        "    inputs: {x: [[1, 0, 0, 0]], token_positions: [1], theta: 100}\n"
        "    expected: [[0.5403023058681398, 0, 0.8414709848078965, 0]]\n"
        "    explanation: pair 0 is (x[0], x[2]), turning 1 radian at position 1.\n"
        "    points: 2\n"
    )
    path = tmp_path / "rope_half.yaml"
    path.write_text(head + example + properties, encoding="utf-8")
    return load_spec(path)


def test_a_rotate_half_spec_verifies_and_names_the_interleaved_pairing(tmp_path: Path) -> None:
    """pairing: rotate_half: the reference passes in float32, every RoPE mistake is caught and named
    (the swapped pairing is now the interleaved one)."""
    from attnscore.check.verify import verify_spec

    spec = _rotate_half_spec(tmp_path)
    assert spec.contract.option("pairing") == "rotate_half"
    (reference,) = verify_spec(spec, ["float32"])
    assert reference.score == reference.max_score
    results = {r.mistake_id: r for r in mutation_test(spec, dtype="float32")}
    assert [i for i in ROPE_IDS if not results[i].ok] == []
    interleaved = run_impl(spec, _load("correct_interleaved"), dtype="float32", shrink=False)
    assert {c.diagnosis["id"] for c in interleaved.cases if c.diagnosis} == {"rope_pairing_swapped"}
