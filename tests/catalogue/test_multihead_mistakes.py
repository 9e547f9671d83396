"""Multi-head attention's catalogue: its selectors, mistakes and properties, and the specs'
submissions graded in process (every dtype) and in the sandbox (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attnscore.catalogue import families
from attnscore.catalogue.mistakes import MISTAKES, get_mistake, mistakes_for
from attnscore.catalogue.properties import PROPERTIES
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec

SPEC = "specs/multihead_self_attention.yaml"
ROPE_SPEC = "specs/multihead_self_attention_rope.yaml"
SUBMISSIONS = Path("examples/submissions")
OURS = (
    "heads_reshaped_without_transpose",
    "projection_x_times_w",
    "output_projection_omitted",
    "causal_mask_missing",
    "causal_diagonal_masked",
    "causal_one_future_key_kept",
    "rope_on_values",
    "rope_before_head_split",
)
INSTRUCTOR_IDS = ("causal_mask_ignored", "heads_split_without_transpose", "scale_uses_d_model")


def _load(path: Path) -> Any:
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(
        module, "multihead_self_attention_rope" if "rope" in str(path.parent) else "multihead_self_attention"
    )


def _args(c: Any, a: dict) -> list:
    return [
        torch.tensor(np.asarray(a[n]), dtype=torch.int32) if n in c.int_parameters else torch.tensor(a[n])
        for n in c.parameter_names
    ]


def test_ids_are_new_and_not_the_instructor_examples():
    """Every multi-head mistake is registered once, and none reuses an id of the CS336 instructor file."""
    for mid in OURS:
        assert mid in MISTAKES
    assert not set(INSTRUCTOR_IDS) & set(MISTAKES)
    text = Path("examples/courses/cs336_assignment1/multihead_self_attention_reference.py").read_text()
    for mid in OURS:
        assert f'"{mid}"' not in text


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        pytest.param("multihead_self_attention", {}, {"heads_reshaped_without_transpose", "projection_x_times_w",
                     "output_projection_omitted", "scaled_by_sqrt_d_model"}, id="self, not causal"),
        pytest.param("multihead_self_attention_packed", {"causal": True}, {"heads_reshaped_without_transpose",
                     "output_projection_omitted", "scaled_by_sqrt_d_model", "causal_mask_missing",
                     "causal_diagonal_masked", "causal_one_future_key_kept"}, id="packed, causal: no x @ W"),
        pytest.param("multihead_self_attention_rope", {"causal": True}, set(OURS) | {"scaled_by_sqrt_d_model"},
                     id="rope, causal: every one"),
    ],
)  # fmt: skip
def test_mistakes_apply_by_feature(name: str, options: dict, expected: set) -> None:
    """A mistake applies where the contract has its feature: causal ones only when the spec fixes
    causal, x @ W only with separate weights, RoPE ones only with RoPE."""
    c = get_contract(name).configured(options)
    found = {m.id for m in mistakes_for(c)} & (set(OURS) | {"scaled_by_sqrt_d_model"})
    assert found == expected


def test_selectors() -> None:
    """The multihead selectors read the family, the causal convention and the parameters."""
    plain = get_contract("multihead_self_attention")
    causal = plain.configured({"causal": True})
    assert families.multihead(plain) and not families.multihead_causal(plain) and families.multihead_causal(causal)
    assert not families.multihead_separate_weights(get_contract("multihead_self_attention_packed"))
    assert families.multihead_rotary(get_contract("multihead_self_attention_rope"))
    assert families.per_head_scaled(plain) and not families.scaled(plain)
    assert not families.multihead(get_contract("attention"))


def _three_tokens() -> dict:
    zero, eye = np.zeros((4, 4)), np.eye(4)
    x = np.array([[1.0, 0, 0, 1], [2, 0, 0, 2], [4, 0, 0, 4]])
    return {"x": x, "W_q": zero, "W_k": zero, "W_v": eye, "W_o": eye, "num_heads": np.asarray(2)}


@pytest.mark.parametrize(
    ("mistake", "column0"),
    [
        pytest.param("causal_mask_missing", [7 / 3, 7 / 3, 7 / 3], id="missing"),
        pytest.param("causal_diagonal_masked", [0.0, 1.0, 1.5], id="diagonal"),
        pytest.param("causal_one_future_key_kept", [1.5, 7 / 3, 7 / 3], id="one future key"),
    ],
)
def test_causal_mistakes_by_averages(mistake: str, column0: list) -> None:
    """Zero scores: each token averages the values 1, 2, 4 it sees; the right answer is 1, 1.5, 7/3."""
    c = get_contract("multihead_self_attention").configured({"causal": True})
    a = _three_tokens()
    np.testing.assert_allclose(c.golden(a)[:, 0], [1.0, 1.5, 7 / 3])
    got = get_mistake(mistake).bind(c)(*_args(c, a)).numpy()
    np.testing.assert_allclose(got[:, 0], column0, rtol=1e-12)
    nan_form = get_mistake("causal_diagonal_masked").bind(c, form=1)(*_args(c, a)).numpy()
    assert np.isnan(nan_form[0]).all() and np.allclose(nan_form[1:, 0], [1.0, 1.5])


def test_projection_mistakes_on_permutations() -> None:
    """One token, W_v a cyclic shift and W_o a swap: x @ W.T gives [4, 3, 2, 1], x @ W [2, 1, 4, 3],
    no W_o [2, 3, 4, 1]."""
    c = get_contract("multihead_self_attention").configured({"causal": True})
    shift = np.roll(np.eye(4), 1, axis=1)
    swap = np.eye(4)[[2, 1, 0, 3]]
    a = {"x": np.array([[1.0, 2, 3, 4]]), "W_q": np.eye(4), "W_k": np.eye(4), "W_v": shift, "W_o": swap}
    a["num_heads"] = np.asarray(2)
    assert c.golden(a).tolist() == [[4.0, 3.0, 2.0, 1.0]]
    assert get_mistake("projection_x_times_w").bind(c)(*_args(c, a)).tolist() == [[2.0, 1.0, 4.0, 3.0]]
    assert get_mistake("output_projection_omitted").bind(c)(*_args(c, a)).tolist() == [[2.0, 3.0, 4.0, 1.0]]


def test_rope_mistakes_on_one_radian() -> None:
    """d_head 2, tokens [1, 0] and [2, 0] at positions 0 and 1: the values stay unrotated (1.8874);
    rotating them too turns the output; with two heads, rotating before the split changes head 1."""
    c = get_contract("multihead_self_attention_rope").configured({"causal": True})
    a = {"x": np.array([[1.0, 0], [2, 0]]), **{n: np.eye(2) for n in ("W_q", "W_k", "W_v", "W_o")}}
    a |= {"num_heads": np.asarray(1), "theta": np.asarray(10000), "token_positions": np.array([0, 1])}
    np.testing.assert_allclose(c.golden(a), [[1.0, 0.0], [1.887387024850779, 0.0]], rtol=1e-14)
    turned = get_mistake("rope_on_values").bind(c)(*_args(c, a)).numpy()
    assert abs(turned[1, 1]) > 1.0
    b = {"x": np.array([[1.0, 0, 1, 0], [2, 0, 2, 0]]), **{n: np.eye(4) for n in ("W_q", "W_k", "W_v", "W_o")}}
    b |= {"num_heads": np.asarray(2), "theta": np.asarray(100), "token_positions": np.array([0, 2])}
    whole = get_mistake("rope_before_head_split").bind(c)(*_args(c, b)).numpy()
    right = c.golden(b)
    np.testing.assert_allclose(whole[:, :2], right[:, :2], rtol=1e-12)  # head 0: frequency 1 either way
    assert abs(whole[1, 2] - right[1, 2]) > 0.1  # head 1: frequency 0.1 instead of 1


def test_heads_reshaped_mixes_tokens_not_with_one_head() -> None:
    """With one head a reshape without a transpose is right; with two it mixes tokens."""
    c = get_contract("multihead_self_attention")
    rng = np.random.default_rng(0)
    a = {"x": rng.normal(size=(3, 4)), **{n: rng.normal(size=(4, 4)) for n in ("W_q", "W_k", "W_v", "W_o")}}
    wrong = get_mistake("heads_reshaped_without_transpose").bind(c)
    np.testing.assert_allclose(
        wrong(*_args(c, a | {"num_heads": np.asarray(1)})), c.golden(a | {"num_heads": np.asarray(1)})
    )
    assert not np.allclose(
        wrong(*_args(c, a | {"num_heads": np.asarray(2)})), c.golden(a | {"num_heads": np.asarray(2)})
    )


@pytest.mark.parametrize("spec_path", [SPEC, ROPE_SPEC])
def test_every_mistake_caught_and_named_float32(spec_path: str) -> None:
    """verify's mutation test: every targeted mistake of the spec fails a case and is named as itself."""
    results = mutation_test(load_spec(spec_path), dtype="float32")
    assert results and all(r.ok for r in results), [r for r in results if not r.ok]
    targeted = {r.mistake_id for r in results}
    assert {"causal_mask_missing", "heads_reshaped_without_transpose", "scaled_by_sqrt_d_model"} <= targeted


@pytest.mark.parametrize(
    "dtype",
    [
        "float32",
        "float64",
        pytest.param("float16", marks=pytest.mark.slow),
        pytest.param("bfloat16", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize(
    "path",
    [
        SUBMISSIONS / "multihead_self_attention" / "correct.py",
        SUBMISSIONS / "multihead_self_attention" / "correct_sdpa.py",
        SUBMISSIONS / "multihead_self_attention_rope" / "correct.py",
    ],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_correct_submissions_get_full_marks(path: Path, dtype: str) -> None:
    """A correct plain-torch file (and one built on F.linear and SDPA) gets every point in every dtype."""
    spec = load_spec(ROPE_SPEC if "rope" in path.parent.name else SPEC)
    result = run_impl(spec, _load(path), dtype=dtype, shrink=False)
    assert result.score == result.max_score, [(c.id, c.message) for c in result.cases if not c.passed]


@pytest.mark.parametrize(
    ("folder", "mistake"),
    [
        ("multihead_self_attention", "heads_reshaped_without_transpose"),
        ("multihead_self_attention", "projection_x_times_w"),
        ("multihead_self_attention", "causal_diagonal_masked"),
        ("multihead_self_attention_rope", "rope_on_values"),
        ("multihead_self_attention_rope", "rope_before_head_split"),
    ],
)
def test_wrong_submissions_are_named(folder: str, mistake: str) -> None:
    """A realistic wrong file loses points and is diagnosed as its mistake, and as nothing else."""
    spec = load_spec(ROPE_SPEC if "rope" in folder else SPEC)
    result = run_impl(spec, _load(SUBMISSIONS / folder / f"{mistake}.py"), dtype="float32", shrink=False)
    assert result.score < result.max_score
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {mistake}


@pytest.mark.slow
def test_properties_catch_what_they_state() -> None:
    """heads_independent fails the reshape without a transpose, later_tokens_unseen a missing causal
    mask; both pass the correct file."""
    spec = load_spec(SPEC)
    assert {"heads_independent", "later_tokens_unseen"} <= set(PROPERTIES)
    folder = SUBMISSIONS / "multihead_self_attention"
    correct = run_impl(spec, _load(folder / "correct.py"), dtype="float64", shrink=False)
    passed = {c.id: c.passed for c in correct.cases}
    assert passed["property:heads_independent"] and passed["property:later_tokens_unseen"]
    reshaped = run_impl(spec, _load(folder / "heads_reshaped_without_transpose.py"), dtype="float64", shrink=False)
    assert not {c.id: c.passed for c in reshaped.cases}["property:heads_independent"]
    c = spec.contract
    missing = get_mistake("causal_mask_missing").bind(c)
    unmasked = run_impl(spec, missing, dtype="float64", shrink=False)
    assert not {r.id: r.passed for r in unmasked.cases}["property:later_tokens_unseen"]


@pytest.mark.slow
def test_submissions_in_the_sandbox() -> None:
    """attnscore grade: the correct files get full marks in float32 and float64, the wrong ones are named."""
    from attnscore.grade.grading import grade_many
    from attnscore.sandbox.launch import Limits

    folder = SUBMISSIONS / "multihead_self_attention"
    spec = load_spec(SPEC)
    for dtype in ("float32", "float64"):
        paths = [folder / "correct.py", folder / "correct_sdpa.py", folder / "projection_x_times_w.py"]
        right, sdpa, wrong = grade_many(paths, spec, dtype=dtype, limits=Limits(call_timeout_s=30.0), shrink_steps=0)
        assert right.score == right.max_score and sdpa.score == sdpa.max_score
        assert {c.diagnosis["id"] for c in wrong.cases if c.diagnosis} == {"projection_x_times_w"}
    rope = SUBMISSIONS / "multihead_self_attention_rope"
    right, wrong = grade_many([rope / "correct.py", rope / "rope_on_values.py"], load_spec(ROPE_SPEC),
                              limits=Limits(call_timeout_s=30.0), shrink_steps=0)  # fmt: skip
    assert right.score == right.max_score
    assert {c.diagnosis["id"] for c in wrong.cases if c.diagnosis} == {"rope_on_values"}
