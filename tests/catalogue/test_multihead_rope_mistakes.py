"""RoPE's catalogued mistakes inside multi-head attention with RoPE (attnscore/catalogue/mistakes/rotary.py
applied per head through heads.attend_with_hooks): which apply, each on a hand-checkable input, the
stale theta's fit through attention, each caught and named by specs/multihead_self_attention_rope.yaml,
and student files (rotate-half pairs, arange positions) named in process and in the sandbox."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.catalogue.families import multihead_rotary
from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.catalogue.mistakes.rotary import WRONG_ROTATIONS, rotary_anywhere, rotated
from attnscore.check.implementation import run_impl
from attnscore.check.verify import targeted_mistakes
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec

SPEC = "specs/multihead_self_attention_rope.yaml"
APPLIED = ["rope_pairing_swapped", "rope_frequencies_per_coordinate", "rope_positions_ignored", "rope_stale_theta"]


def _contract(pairing: str = "interleaved"):
    return get_contract("multihead_self_attention_rope").configured({"causal": True, "pairing": pairing})


def _two_tokens(m: int = 10, theta: int = 100) -> dict:
    """One head of width 4, identity weights, x1 = 2·x0 = [2, 0, 2, 0] at positions 0 and ``m``."""
    eye = np.eye(4)
    x = np.array([[1.0, 0, 1, 0], [2, 0, 2, 0]])
    return {"x": x, "W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye, "num_heads": np.asarray(1),
            "theta": np.asarray(theta), "token_positions": np.array([0, m])}  # fmt: skip


def _args(c, a: dict) -> list[torch.Tensor]:
    return [
        torch.tensor(np.asarray(a[n]), dtype=torch.int32) if n in c.int_parameters else torch.tensor(a[n])
        for n in c.parameter_names
    ]


def _token1(score_10: float) -> float:
    """Token 1's output in coordinate 0 when its query scores ``score_10`` against key 0 and
    |x1|² = 8 against itself (d_head = 4, so both divided by 2): 1·w0 + 2·(1 − w0)."""
    w0 = 1.0 / (1.0 + math.exp((8.0 - score_10) / 2.0))
    return 2.0 - w0


def test_the_rope_mistakes_apply_to_multihead_rope_by_feature() -> None:
    """The four apply to multi-head attention with RoPE in both pairings (multihead_rotary), none to
    multi-head attention without RoPE; positions counted from 1 stays RoPE's alone."""
    for pairing in ("interleaved", "rotate_half"):
        c = _contract(pairing)
        assert multihead_rotary(c) and rotary_anywhere(c)
        ids = [m.id for m in mistakes_for(c)]
        assert [i for i in ids if i in WRONG_ROTATIONS] == APPLIED
    plain = get_contract("multihead_self_attention").configured({"causal": True})
    assert not rotary_anywhere(plain)
    assert not {m.id for m in mistakes_for(plain)} & set(WRONG_ROTATIONS)
    assert "rope_positions_from_one" in {m.id for m in mistakes_for("rope")}
    assert get_mistake("rope_stale_theta").contracts == ("rope", "multihead_self_attention_rope")
    assert set(APPLIED) <= {m.id for m in targeted_mistakes(load_spec(SPEC))}  # verify's targets, by feature


@pytest.mark.parametrize(
    ("mistake", "score_10"),
    [
        # interleaved pairs (0, 1), (2, 3) turn by 10 and 10·100^(-1/2) = 1: 2·(cos 10 + cos 1) is right;
        # the halves paired: (x0, x2) = (2, 2) turns by 10 against (1, 1): 4·cos 10
        pytest.param("rope_pairing_swapped", 4 * math.cos(10), id="pairing swapped"),
        # pair 1 at 100^(-1/4): an angle of 10^(1/2)
        pytest.param("rope_frequencies_per_coordinate", 2 * (math.cos(10) + math.cos(10**0.5)), id="theta^(-i/d)"),
        # arange(seq): token 1 at position 1, angles 1 and 0.1
        pytest.param("rope_positions_ignored", 2 * (math.cos(1) + math.cos(0.1)), id="positions ignored"),
        # theta 10000 instead of 100: pair 1 at 0.01, an angle of 0.1
        pytest.param("rope_stale_theta", 2 * (math.cos(10) + math.cos(0.1)), id="stale theta 10000"),
    ],
)
def test_each_wrong_rotation_inside_attention_by_hand(mistake: str, score_10: float) -> None:
    """Token 1 weighs the values 1 and 2 by its scores against key 0 (rotated as the mistake
    rotates) and itself (8, whatever the rotation): the reference and the mistake differ there."""
    c = _contract()
    a = _two_tokens()
    right = c.golden(a)
    assert right[1, 0] == pytest.approx(_token1(2 * (math.cos(10) + math.cos(1))), rel=1e-12)
    np.testing.assert_allclose(right[0], [1.0, 0, 1, 0], rtol=1e-15)  # token 0 sees only itself
    wrong = get_mistake(mistake).bind(c)(*_args(c, a)).numpy()
    assert wrong[1, 0] == pytest.approx(_token1(score_10), rel=1e-12)
    assert abs(wrong[1, 0] - right[1, 0]) > 1e-3


def test_positions_from_one_changes_nothing_inside_attention() -> None:
    """Every query and key one step further keeps every offset, so every score and the output: the
    mistake cannot show in multi-head attention, which is why it does not apply there."""
    c = _contract()
    rng = np.random.default_rng(3)
    a = {"x": rng.normal(size=(2, 5, 8)), **{n: rng.normal(size=(8, 8)) / 3 for n in ("W_q", "W_k", "W_v", "W_o")}}
    a |= {"num_heads": np.asarray(2), "theta": np.asarray(100), "token_positions": np.array([3, 4, 9, 10, 17])}
    args = tuple(_args(c, a))
    shifted = rotated(c, args, WRONG_ROTATIONS["rope_positions_from_one"]).numpy()
    np.testing.assert_allclose(shifted, c.golden(a), rtol=1e-12, atol=1e-12)
    assert not np.allclose(rotated(c, args, WRONG_ROTATIONS["rope_positions_ignored"]).numpy(), c.golden(a))


@pytest.mark.parametrize("stale", [10000, 500, 12769])
def test_stale_theta_fit_reads_the_base_through_attention(stale: int) -> None:
    """The fit finds the base a multi-head output was rotated with (one of THETAS, or a whole number off
    the list) as its first candidate, and refuses a non-finite or misshapen output."""
    c = _contract()
    rng = np.random.default_rng(0)
    a = {"x": rng.normal(size=(2, 5, 8)), **{n: rng.normal(size=(8, 8)) / 3 for n in ("W_q", "W_k", "W_v", "W_o")}}
    a |= {"num_heads": np.asarray(2), "theta": np.asarray(100), "token_positions": np.array([3, 4, 9, 10, 17])}
    mistake = get_mistake("rope_stale_theta")
    args = _args(c, a)
    got = mistake.bind(c, stale=float(stale))(*args).numpy()
    fit = mistake.fit(c, tuple(args), got)
    assert fit is not None and fit[0] == {"stale": float(stale)}
    assert all(p["stale"] != 100.0 for p in fit)  # the call's own theta is never a stale one
    assert mistake.fit(c, tuple(args), np.full_like(got, np.nan)) is None
    assert mistake.fit(c, tuple(args), got[..., :4]) is None


@pytest.mark.slow
@pytest.mark.parametrize("mistake", APPLIED)
def test_each_is_caught_and_named_by_the_spec(mistake: str) -> None:
    """The wrong implementation graded in process in float32 loses points and every diagnosed case
    names it (the diagnosis confirms on its own inputs, so a name is never a guess)."""
    spec = load_spec(SPEC)
    result = run_impl(spec, get_mistake(mistake).bind(spec.contract), dtype="float32", shrink=False)
    assert result.score < result.max_score
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {mistake}


STUDENTS = Path("examples/submissions/multihead_self_attention_rope")
NAMED = {"rope_rotate_half": "rope_pairing_swapped", "rope_positions_ignored": "rope_positions_ignored"}


def _student(name: str):
    module_spec = importlib.util.spec_from_file_location(f"mha_rope_{name}", STUDENTS / f"{name}.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.multihead_self_attention_rope


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(NAMED))
def test_student_files_are_named_in_process(name: str, dtype: str) -> None:
    """A Hugging Face style rotate-half file and one that rotates at arange(seq) lose points and are
    diagnosed as their mistake only."""
    result = run_impl(load_spec(SPEC), _student(name), dtype=dtype, shrink=False)
    assert result.score < result.max_score
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {NAMED[name]}


@pytest.mark.slow
def test_student_files_in_the_sandbox() -> None:
    """attnscore grade, one worker per file: the correct file gets full marks, each wrong one its name."""
    from attnscore.grade.grading import grade_many
    from attnscore.sandbox.launch import Limits

    names = ["correct", *sorted(NAMED)]
    right, *wrong = grade_many(
        [STUDENTS / f"{n}.py" for n in names], load_spec(SPEC), limits=Limits(call_timeout_s=30.0), shrink_steps=0
    )
    assert right.score == right.max_score
    for name, result in zip(sorted(NAMED), wrong, strict=True):
        assert result.score < result.max_score
        assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {NAMED[name]}
