"""The FlashAttention-2 assignment: its specs, where L is read, factories, styles and mistakes."""

from __future__ import annotations

# ruff: noqa: E741  (O and L: the paper's names)
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.boundary import wire
from attnscore.boundary.gradients import WithGradients, backward_call, find_logsumexp, resolve_factory
from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.grade.grading import grade_many
from attnscore.maths.families.flash_attention_2 import logsumexp_golden
from attnscore.maths.flash_reference import FlashReference
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from examples.impl.flash_attention_2 import STYLES

SPECS = ("specs/flash_attention_2.yaml", "specs/flash_attention_2_causal.yaml")
SUBMISSIONS = Path("examples/submissions/flash_attention_2")
IMPL = Path("examples/impl/flash_attention_2.py")
LN2 = math.log(2.0)


def spec_with(path: str, tmp_path: Path, logsumexp: dict | None = None, factory: bool = False, name: str = ""):
    """The bundled spec with its ``function.logsumexp`` replaced and ``factory`` set, written to tmp_path."""
    text = Path(path).read_text()
    if logsumexp is not None:
        inner = ", ".join(f"{k}: {v}" for k, v in logsumexp.items())
        text = text.replace("logsumexp: {in: saved_tensors}", "logsumexp: {" + inner + "}")
    if factory:
        text = text.replace("  contract: flash_attention_2\n", "  contract: flash_attention_2\n  factory: true\n")
    if name:
        text = text.replace("  name: FlashAttention2\n", f"  name: {name}\n")
    out = tmp_path / Path(path).name
    out.write_text(text)
    return load_spec(out)


def _case(spec, case_id: str, dtype: str = "float32"):
    return next(c for c in build_cases(spec, dtype) if c.id == case_id)


class _SavesNoL(torch.autograd.Function):
    """Right O and gradients, but saves only (Q, K, V, O): no L."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        S = _scores(Q, K, is_causal)
        O = torch.softmax(S, dim=-1) @ V
        ctx.save_for_backward(Q, K, V, O)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O = ctx.saved_tensors
        S = _scores(Q, K, ctx.is_causal)
        P = torch.softmax(S, dim=-1)
        dS = P * (dO @ V.transpose(-2, -1) - (dO * O).sum(-1, keepdim=True))
        scale = Q.shape[-1] ** -0.5
        return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, P.transpose(-2, -1) @ dO, None


def _scores(Q, K, is_causal):
    S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
    if is_causal:
        S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return S


# ---------------------------------------------------------------------------------------------
# the specs


@pytest.mark.parametrize("path", SPECS)
def test_spec_loads_with_the_logsumexp_source(path):
    """Both specs read L from the saved tensors and pass is_causal only in the causal one."""
    spec = load_spec(path)
    assert spec.logsumexp == ("saved_tensors", None)
    assert spec.factory is False
    assert dict(spec.contract.options) == ({"is_causal": True} if "causal" in path else {})


def test_worked_examples_state_l_and_gradients_by_hand():
    """The hand-checkable numbers: L = log 2 for two equal scores, dK = [-1/2, 1/2], L = 1 for one key."""
    spec = load_spec(SPECS[0])
    ex = {e.id: e for e in spec.worked_examples}
    assert ex["two_equal_keys"].expected_logsumexp.tolist() == [[LN2]]
    assert ex["two_equal_keys"].expected_gradients["K"].tolist() == [[[-0.5], [0.5]]]
    assert ex["one_key"].expected_logsumexp.tolist() == [[1.0]]
    assert ex["scale_in_every_gradient"].expected_gradients["Q"].tolist() == [[[0, 0, 0, 0], [0.5, -0.5, 0, 0]]]
    causal = {e.id: e for e in load_spec(SPECS[1]).worked_examples}
    assert causal["square_lower_triangle"].expected_logsumexp.tolist() == [[0.0, LN2]]


@pytest.mark.parametrize(
    "old, new, text",
    [
        pytest.param("expected_logsumexp: [[1]]", "expected_logsumexp: [[2]]",
                     "expected the logsumexp L the inputs give", id="wrong L in a worked example"),
        pytest.param("      K: [[[-0.5], [0.5]]]", "      K: [[[0.5], [1.5]]]",
                     "expected the gradient dK the inputs give", id="wrong dK in a worked example"),
        pytest.param("  logsumexp: {in: saved_tensors}\n", "", "expected function.logsumexp to say where L is read",
                     id="no logsumexp field"),
        pytest.param("logsumexp: {in: saved_tensors}", "logsumexp: {in: returned, index: 2}",
                     "expected no index with in: returned", id="index with returned"),
        pytest.param("    upstream: [[[1]]]\n", "", "expected upstream (dO) beside expected_gradients",
                     id="expected L without upstream"),
        pytest.param("    upstream: [[[1, 1, 1, 1]]]\n", "    upstream: [[[1, 1]]]\n",
                     "expected dO of the output's shape", id="upstream of the wrong shape"),
    ],
)  # fmt: skip
def test_spec_mistakes_are_located(tmp_path, old, new, text):
    """Each wrong FlashAttention field is one located problem saying what was expected and found."""
    source = Path(SPECS[0]).read_text()
    assert old in source
    bad = tmp_path / "bad.yaml"
    bad.write_text(source.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    assert text in str(info.value), str(info.value)


def test_logsumexp_field_refused_on_another_contract(tmp_path):
    """function.logsumexp on a contract without a logsumexp is a located problem."""
    source = (
        Path("specs/causal_attention.yaml")
        .read_text()
        .replace(
            "  contract: causal_attention_top_left\n",
            "  contract: causal_attention_top_left\n  logsumexp: {in: returned}\n",
        )
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(source)
    with pytest.raises(SpecError, match="expected a contract with a logsumexp"):
        load_spec(bad)


def test_logsumexp_golden_is_natural_log_over_kept_keys():
    """L = m + log Σ exp(s − m), the causal form over keys j <= i only."""
    Q = np.array([[1.0, 0.0], [0.0, 2.0]])
    K = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    S = Q @ K.T / math.sqrt(2)
    assert np.allclose(logsumexp_golden(Q, K, False), np.log(np.exp(S).sum(-1)))
    assert np.allclose(logsumexp_golden(Q, K, True), [S[0, 0], np.log(np.exp(S[1, :2]).sum())])


# ---------------------------------------------------------------------------------------------
# where L is read


def _inputs(n_q=3, n_k=5, d=4):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, n, d, generator=g, dtype=torch.float64) for n in (n_q, n_k, n_k)]


def test_find_logsumexp_in_saved_tensors():
    """The one saved tensor of shape (..., n_q) is L, and it equals the golden logsumexp."""
    Q, K, V = _inputs()
    _, got = backward_call(FlashReference.apply, ["Q", "K", "V"], [Q, K, V], torch.ones(2, 3, 4),
                           logsumexp=("saved_tensors", None))  # fmt: skip
    assert isinstance(got, WithGradients) and got.logsumexp_problem == ""
    assert np.allclose(got.logsumexp, logsumexp_golden(Q.detach().numpy(), K.detach().numpy(), False))


@pytest.mark.parametrize(
    "index, make, text",
    [
        pytest.param(None, lambda Q, K, V: FlashReference.apply(Q, K, V) * 1.0,
                     "found an output computed by MulBackward0", id="not a Function's output"),
        pytest.param(2, FlashReference.apply, "expected the logsumexp L of shape (2, 3) as saved tensor 2",
                     id="index names a tensor of another shape"),
        pytest.param(9, FlashReference.apply, "found the saved tensors' shapes: (2, 3, 4), (2, 5, 4)",
                     id="index past the saved tensors"),
        pytest.param(None, STYLES["saves_max_too"][0].apply, "expected exactly one saved tensor of shape (2, 3)",
                     id="two tensors of shape (..., n_q) and no index"),
        pytest.param(None, _SavesNoL.apply, "found 0 among the saved tensors' shapes", id="no L saved"),
    ],
)  # fmt: skip
def test_find_logsumexp_says_what_was_expected_and_found(index, make, text):
    """A submission whose L cannot be read gets a sentence with the expected shape and what it saved."""
    Q, K, V = (t.clone().requires_grad_(True) for t in _inputs())
    O = make(Q, K, V)
    lse, problem = find_logsumexp(O, None, "saved_tensors", index, (2, 3))
    assert lse is None and text in problem, problem


def test_find_logsumexp_returned_needs_a_tuple():
    """With in: returned, a single tensor is not (O, L)."""
    lse, problem = find_logsumexp(torch.zeros(2, 3, 4), None, "returned", None, (2, 3))
    assert lse is None and problem.startswith("expected the forward to return a tuple (O, L)"), problem


def test_saves_no_l_loses_only_the_logsumexp_points(tmp_path):
    """A Function with right O and gradients that saves no L fails the L cases only, saying why."""
    result = run_impl(load_spec(SPECS[0]), _SavesNoL, dtype="float32", shrink=False)
    failed = {c.id: c for c in result.cases if c.verdict is not Verdict.PASSED}
    assert set(failed) == {"example:two_equal_keys", "example:one_key", "example:huge_scores",
                           "example:scale_in_every_gradient", "property:logsumexp_matches_golden"}  # fmt: skip
    assert (
        "the logsumexp L could not be read: expected exactly one saved tensor of shape ("
        in failed["property:logsumexp_matches_golden"].message
    )
    assert "found 0 among the saved tensors' shapes" in failed["example:one_key"].message


def test_wire_carries_logsumexp_and_factory():
    """L and its problem travel with the gradients; a call request says where L is and whether to call a factory."""
    value = WithGradients("tensor", "float32", "cpu", np.zeros((1, 2), np.float32), {"Q": np.ones((1, 2))}, {}, (),
                          np.array([0.5]), "")  # fmt: skip
    back = wire.decode_received(wire.encode_received(value))
    assert isinstance(back, WithGradients) and back.logsumexp.tolist() == [0.5] and back.logsumexp_problem == ""
    request = wire.CallRequest(1, "float32", "cpu", ("Q",), (), logsumexp=("saved_tensors", 4), factory=True)
    decoded = wire.decode_call(wire.loads(wire.dumps(wire.encode_message(request))))
    assert decoded.logsumexp == ("saved_tensors", 4) and decoded.factory is True
    with pytest.raises(ValueError, match="expected logsumexp as"):
        wire.decode_call({**wire.encode_message(request), "logsumexp": ["elsewhere", None]})


# ---------------------------------------------------------------------------------------------
# factories


def test_resolve_factory_refuses_what_is_not_a_function_class():
    """A factory returning an instance, .apply or a plain function is refused with what it returned."""
    for made, found in ((lambda: FlashReference.apply, "found a method"), (lambda: 3, "found a int")):
        with pytest.raises(TypeError, match=found):
            resolve_factory(made)
    assert resolve_factory(lambda: FlashReference) is FlashReference


def test_factory_returning_a_function_is_a_clear_verdict(tmp_path):
    """In process, a factory that does not return a Function class fails every case with that reason."""
    spec = spec_with(SPECS[0], tmp_path, factory=True)
    result = run_impl(spec, lambda: FlashReference.apply, dtype="float32", shrink=False)
    assert result.score == 0
    assert "expected the function to return a torch.autograd.Function subclass" in result.error


# ---------------------------------------------------------------------------------------------
# correct styles: full marks in process and in the sandbox


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_gets_full_marks_in_process(style, tmp_path):
    """Each correct FlashAttention-2 style gets full marks with attnscore test (the non-causal or causal spec)."""
    obj, extra = STYLES[style]
    path = SPECS[sorted(STYLES).index(style) % 2]
    spec = spec_with(path, tmp_path, extra.get("logsumexp"), extra.get("factory", False))
    result = run_impl(spec, obj, dtype="float32", shrink=False)
    assert result.score == result.max_score, [c.message for c in result.cases if c.verdict is not Verdict.PASSED]


@pytest.mark.slow
def test_float32_accumulation_passes_in_float16(tmp_path):
    """Float16 inputs accumulated in float32 pass the causal spec, gradients by the ratio rule."""
    result = run_impl(load_spec(SPECS[1]), STYLES["float32_accumulation"][0], dtype="float16", shrink=False)
    assert result.score == result.max_score, [c.message for c in result.cases if c.verdict is not Verdict.PASSED]


@pytest.mark.slow
@pytest.mark.parametrize(
    "style, path",
    [
        ("tiled_two_loops", SPECS[0]),
        ("factory_base2", SPECS[1]),
        ("recompute_backward", SPECS[1]),
        ("returns_logsumexp", SPECS[0]),
        ("float32_accumulation", SPECS[0]),
        ("saves_max_too", SPECS[1]),
    ],
)
def test_styles_get_full_marks_in_the_sandbox(style, path, tmp_path):
    """attnscore grade's path: the styles' file graded in the sandboxed worker, L read there. Every
    value case passes; the file also holds RecomputeBackward, whose backward runs torch.autograd, so
    the specs' hand_written_backward rule (which reads the whole file) is the only case lost, and
    only that style is also seen making the call."""
    obj, extra = STYLES[style]
    spec = spec_with(path, tmp_path, extra.get("logsumexp"), extra.get("factory", False), name=obj.__name__)
    (result,) = grade_many([IMPL], spec, limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    failed = {c.id: c for c in result.cases if c.verdict is not Verdict.PASSED}
    assert set(failed) == {"rule:hand_written_backward"}, [c.message for c in failed.values()]
    rule = failed["rule:hand_written_backward"]
    assert rule.verdict is Verdict.RULE_BROKEN and rule.points == 0
    assert "your code calls torch.autograd.grad inside your backward pass (flash_attention_2.py, line" in rule.message
    assert ("called inside your backward pass" in rule.message) == (style == "recompute_backward"), rule.message
    assert result.score == result.max_score - 1


def test_factory_refused_in_the_sandbox(tmp_path):
    """In the sandbox, a factory that returns no Function class gets the same clear verdict on every case."""
    sub = tmp_path / "factory.py"
    sub.write_text("def FlashAttention2():\n    return 42\n")
    spec = spec_with(SPECS[0], tmp_path, factory=True)
    (result,) = grade_many([sub], spec, limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    assert result.score == 0
    case = result.cases[0]
    assert case.verdict is Verdict.BAD_RETURN_TYPE
    assert "expected the function to return a torch.autograd.Function subclass" in case.message, case.message


# ---------------------------------------------------------------------------------------------
# the mistakes as students write them


def _load(path: Path):
    module_spec = importlib.util.spec_from_file_location(f"fa2_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.FlashAttention2


MISTAKE_FILES = sorted(p.stem for p in SUBMISSIONS.glob("*.py") if not p.stem.startswith("correct"))


def test_every_catalogued_flash_mistake_has_a_student_file():
    """Each FlashAttention catalogue entry is written as a student file, and nothing else is."""
    from attnscore.catalogue.mistakes import flash_attention
    from attnscore.catalogue.mistakes.registry import MISTAKES

    ids = {m.id for m in MISTAKES.values() if m.fn.__module__ == flash_attention.__name__}
    assert set(MISTAKE_FILES) == ids


@pytest.mark.slow
@pytest.mark.parametrize("name", MISTAKE_FILES)
def test_student_mistake_is_caught_and_named(name):
    """Each mistake written as a realistic tiled Function is caught and diagnosed as itself."""
    path = SPECS[1] if name == "causal_tiles_off_by_one" else SPECS[0]
    result = run_impl(load_spec(path), _load(SUBMISSIONS / f"{name}.py"), dtype="float32", shrink=False)
    assert result.score < result.max_score
    named = {c.diagnosis["id"] for c in result.cases if c.diagnosis}
    assert named == {name}, [(c.id, c.diagnosis) for c in result.cases if not c.passed]


@pytest.mark.slow
def test_correct_student_file_and_a_mistake_in_the_sandbox():
    """attnscore grade: the correct file gets full marks, the unscaled dQ is named, L read in the worker."""
    spec = load_spec(SPECS[0])
    paths = [SUBMISSIONS / "correct_tiled.py", SUBMISSIONS / "logsumexp_base_2.py"]
    correct, wrong = grade_many(paths, spec, limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    assert correct.score == correct.max_score
    assert {c.diagnosis["id"] for c in wrong.cases if c.diagnosis} == {"logsumexp_base_2"}
    failed = {c.id for c in wrong.cases if not c.passed}
    assert "property:gradients_match_golden" not in failed  # a consistent base-2 L leaves the gradients right
    assert "property:logsumexp_matches_golden" in failed


def test_judging_a_worked_example_with_upstream_names_the_gradient():
    """A worked example with upstream judges the gradients: the missing D shows in dK."""
    spec = load_spec(SPECS[0])
    case = _case(spec, "example:two_equal_keys")
    result = judge_case(spec, case, InProcessRunner(_load(SUBMISSIONS / "backward_d_term_omitted.py"),
                                                   logsumexp=spec.logsumexp), "float32")  # fmt: skip
    assert result.verdict is Verdict.WRONG_VALUE
    assert "the gradient with respect to K is wrong: dK[0, 0, 0] = 0.5, but should be -0.5" in result.failure.check


@pytest.mark.slow
def test_self_check_calls_as_the_grader():
    """attnscore check passes the causal spec's is_causal by name and reads L, as grading does."""
    from attnscore.selfcheck import check_function

    checked = check_function(STYLES["tiled_two_loops"][0], SPECS[1])
    assert checked.passed, checked.text()
    wrong = check_function(_load(SUBMISSIONS / "logsumexp_is_running_max.py"), SPECS[1])
    assert not wrong.passed and "logsumexp_is_running_max" in wrong.text()


@pytest.mark.slow
@pytest.mark.parametrize("factory, call", [(False, "FlashAttention2.apply("), (True, "FlashAttention2().apply(")])
def test_reproduction_calls_the_function_through_apply(factory, call, tmp_path):
    """The line a student pastes calls the Function as the grader did: ``.apply``, after the factory's call."""
    from attnscore.report.feedback import reproduction

    spec = spec_with(SPECS[0], tmp_path, factory=True) if factory else load_spec(SPECS[0])
    mistake = _load(SUBMISSIONS / "logsumexp_base_2.py")  # the class the file defines
    function = (lambda: mistake) if factory else mistake
    result = run_impl(spec, function, dtype="float32", shrink=False)
    failed = next(c for c in result.cases if c.id == "example:two_equal_keys")
    assert reproduction(failed.failure) == (
        f"{call}torch.tensor([[[1]]], dtype=torch.float32), torch.tensor([[[0], [0]]], dtype=torch.float32), "
        "torch.tensor([[[1], [3]]], dtype=torch.float32))"
    )
