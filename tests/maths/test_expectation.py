"""maths/expectation.py: the one question a call asks of maths, and the tolerance rules it applies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnscore.check.cases import cast
from attnscore.maths.contracts import get_contract
from attnscore.maths.expectation import expect
from attnscore.maths.golden_gradients import contract_gradient_scales, contract_gradients, golden_backward
from attnscore.maths.tolerance import Tolerance, allowed_error, gradient_allowed


def _attention_call(dtype: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Arguments of one ``attention`` call (one masked key) cast to ``dtype``, and an upstream gradient."""
    rng = np.random.default_rng(7)
    args = {
        "Q": cast(rng.uniform(-2, 2, (2, 3)), dtype),
        "K": cast(rng.uniform(-2, 2, (4, 3)), dtype),
        "V": cast(rng.uniform(-2, 2, (4, 2)), dtype),
        "mask": np.array([[True, True, False, True], [True, True, True, True]]),
    }
    return args, cast(rng.uniform(-1, 1, (2, 2)), dtype)


def _counted(contract):
    """``contract`` whose reference counts its runs (``runs[0]``)."""
    runs = [0]

    def reference(*tensors):
        runs[0] += 1
        return contract.reference(*tensors)

    return dataclasses.replace(contract, reference=reference), runs


def test_ratio_rule_is_the_floor_or_the_measured_error_whichever_is_larger():
    """allowed_error under ``ratio`` is the factor-roundings floor alone without the reference's output,
    and the larger of that floor and ``factor`` times the reference's own error with it."""
    golden = np.array([1.0, 0.0, 0.7, 19.0])
    scale = np.abs(golden)
    ratio = Tolerance("ratio", factor=3.0)
    floor = allowed_error(ratio, golden, "float16", 2, scale)
    assert np.array_equal(floor, allowed_error(Tolerance("dot_bound", factor=3.0), golden, "float16", 2, scale))
    own = golden + np.array([0.0, 0.0, 0.05, 0.0])  # the reference itself off by 0.05 in one entry
    measured = allowed_error(ratio, golden, "float16", 2, scale, reference=own)
    assert np.array_equal(measured, np.maximum(ratio.ratio_allowed(golden, own, "float16"), floor))
    assert measured.min() == pytest.approx(3.0 * 0.05)  # every entry: 3x the largest own error
    # another mode ignores the reference's output
    bound = Tolerance("dot_bound", factor=3.0)
    assert np.array_equal(allowed_error(bound, golden, "float16", 2, scale, reference=own), floor)


def test_golden_backward_is_the_gradients_and_their_scales():
    """golden_backward answers what contract_gradients and contract_gradient_scales answer, together."""
    contract = get_contract("attention")
    args, d_out = _attention_call("float64")
    gradients, n, scales = golden_backward(contract, args, d_out)
    want = contract_gradients(contract, args, d_out)
    want_n, want_scales = contract_gradient_scales(contract, args, d_out)
    assert list(gradients) == list(want) == ["Q", "K", "V"]
    assert n == want_n
    for name in want:
        assert np.array_equal(gradients[name], want[name])
        assert np.array_equal(scales[name], want_scales[name])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_one_reference_run_answers_the_ratio_output_and_the_gradients(dtype):
    """A backward call under ``ratio`` in a low precision runs the reference once, and its output and
    gradients give the allowed errors that a forward-only run and a backward run give apart."""
    contract, runs = _counted(get_contract("attention"))
    args, d_out = _attention_call(dtype)
    tol = Tolerance("ratio", factor=2.0)
    got = expect(contract, args, dtype, tol, upstream=d_out)
    assert runs[0] == 1

    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]

    def tensor(a: np.ndarray, grad: bool = False) -> torch.Tensor:
        kind = torch.bool if a.dtype == np.bool_ else torch_dtype
        return torch.tensor(a, dtype=kind).requires_grad_(grad)

    own_output = contract.reference(*[tensor(a) for a in args.values()]).detach().double().numpy()
    tensors = {n: tensor(a, grad=n != "mask") for n, a in args.items()}
    contract.reference(*tensors.values()).backward(tensor(d_out))
    golden = contract.golden(args)
    d_k, scale = contract.error_scale(args)
    terms = contract.low_precision_terms(args, dtype, tol.factor)
    floor = allowed_error(tol, golden, dtype, d_k, scale, contract.operand_sums(args), terms)
    assert np.array_equal(got.allowed, np.maximum(tol.ratio_allowed(golden, own_output, dtype), floor))
    _, n, scales = golden_backward(contract, args, d_out)
    for name in ("Q", "K", "V"):
        own = tensors[name].grad.double().numpy()
        want = gradient_allowed(tol, got.gradients[name], scales[name], n, dtype, own)
        assert np.array_equal(got.gradients_allowed[name], want)


def test_the_loader_never_runs_the_reference():
    """``reference="a_priori"`` (the spec loader, which imports no torch for this) runs no reference:
    a forward call under ``ratio`` gets the floor alone; float32 and float64 never run it either."""
    contract, runs = _counted(get_contract("attention"))
    args, _ = _attention_call("float16")
    got = expect(contract, args, "float16", Tolerance("ratio"), reference="a_priori")
    assert runs[0] == 0
    d_k, scale = contract.error_scale(args)
    terms = contract.low_precision_terms(args, "float16", 2.0)
    floor = allowed_error(Tolerance("ratio"), contract.golden(args), "float16", d_k, scale, None, terms)
    assert np.array_equal(got.allowed, floor)
    args32, d_out = _attention_call("float32")
    expect(contract, args32, "float32", Tolerance(), upstream=d_out)
    assert runs[0] == 0


def test_low_precision_gradients_need_the_references_own():
    """gradient_allowed in float16 without the reference's own gradient is refused, naming the rule."""
    g = np.array([1.0, -2.0])
    with pytest.raises(ValueError, match="needs the reference's own float16 gradient"):
        gradient_allowed(Tolerance(), g, np.abs(g), 2, "float16")
