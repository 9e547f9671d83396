"""The RoPE family (attnscore/maths/families/rope.py): the contract and its pairing convention,
drawn integers, the error bound (a correct float32 RoPE inside it, a float16 detour outside), the
closed-form gradient, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.maths.contracts import get_contract
from attnscore.maths.expectation import expect
from attnscore.maths.families import rope
from attnscore.maths.families.registry import family_of
from attnscore.maths.golden_gradients import contract_gradient_scales, contract_gradients
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.rotary import rotate_golden
from attnscore.maths.tolerance import Tolerance, gradient_allowed

CONTRACT = get_contract("rope")


def _args(seq: int = 3, d: int = 6, theta: int = 10000, batch: tuple[int, ...] = (2,), seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(-5, 5, size=(*batch, seq, d)).astype(np.float32).astype(np.float64),
        "token_positions": np.array([3, 11, 40, 7, 90][:seq], dtype=np.int32),
        "theta": np.asarray(theta, dtype=np.int32),
    }


def test_contract_shape_options_and_family() -> None:
    """rope(x, token_positions, theta): two integer parameters, pairing a convention never passed."""
    assert CONTRACT.parameter_names == ("x", "token_positions", "theta")
    assert CONTRACT.int_parameters == {"token_positions", "theta"}
    assert family_of(CONTRACT) is rope
    (pairing,) = CONTRACT.keywords
    assert (pairing.name, pairing.default, pairing.passed) == ("pairing", "interleaved", False)
    half = CONTRACT.configured({"pairing": "rotate_half"})
    assert half.option("pairing") == "rotate_half" and dict(half.options) == {}
    with pytest.raises(ValueError, match="keyword pairing: expected one of 'interleaved', 'rotate_half', found 'neox'"):
        CONTRACT.configured({"pairing": "neox"})


@pytest.mark.parametrize("pairing", ["interleaved", "rotate_half"])
def test_reference_and_golden_agree_and_follow_the_pairing(pairing: str) -> None:
    """The configured reference (float64) equals its golden twin, and the two pairings differ."""
    c = CONTRACT.configured({"pairing": pairing})
    a = _args()
    got = c.reference(torch.tensor(a["x"]), torch.tensor(a["token_positions"]), 10000).numpy()
    np.testing.assert_allclose(got, c.golden(a), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(c.golden(a), rotate_golden(a["x"], a["token_positions"], 10000.0, pairing))
    other = "rotate_half" if pairing == "interleaved" else "interleaved"
    assert not np.allclose(c.golden(a), rotate_golden(a["x"], a["token_positions"], 10000.0, other))


def test_drawn_integers_make_d_k_even_and_positions_uneven() -> None:
    """integer_fn: an odd d_k becomes even, positions are distinct, increasing and not evenly spaced,
    theta is one of THETAS; many draws see several thetas."""
    rng = np.random.default_rng(1)
    thetas = set()
    for _ in range(200):
        seq = int(rng.integers(1, 7))
        sizes, ints = CONTRACT.integers(lambda lo, hi: int(rng.integers(lo, hi + 1)), {"d_k": 5, "seq": seq})
        assert sizes["d_k"] == 6
        p = ints["token_positions"]
        assert p.dtype == np.int32 and p.shape == (seq,)
        gaps = np.diff(p)
        assert (gaps > 0).all()
        if seq == 2:
            assert gaps[0] >= 2  # two tokens are never adjacent: arange(2) + c cannot stand in
        if seq >= 3:
            assert len(set(gaps.tolist())) > 1
        assert ints["theta"].shape == () and int(ints["theta"]) in rope.THETAS
        thetas.add(int(ints["theta"]))
    assert thetas == set(rope.THETAS)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        pytest.param(
            {"x": np.zeros((3, 3))},
            ("x", "expected x of shape (..., seq, d_k) with d_k even, found shape (3, 3)"),
            id="odd d_k",
        ),
        pytest.param(
            {"token_positions": np.array([0, 1], dtype=np.int32)},
            (
                "token_positions",
                "expected token positions of shape (seq,) = (3,) as x (..., seq, d_k) has, found shape (2,)",
            ),
            id="positions of another length",
        ),
        pytest.param(
            {"theta": np.asarray(0)}, ("theta", "expected one frequency base > 0 (shape ()), found 0"), id="theta 0"
        ),
        pytest.param(
            {"theta": np.asarray([100, 10])},
            ("theta", "expected one frequency base > 0 (shape ()), found [100, 10]"),
            id="theta of shape (2,)",
        ),
    ],
)
def test_integer_check_names_each_bad_worked_example_input(changes: dict, problem: tuple[str, str]) -> None:
    """A worked example's x, token_positions and theta are checked against each other."""
    a = {**_args(seq=3, d=4, batch=()), **changes}
    assert CONTRACT.integer_problems(a) == [problem]
    assert CONTRACT.integer_problems(_args(seq=3, d=4, batch=())) == []


@pytest.mark.parametrize(
    ("x", "positions", "theta", "message"),
    [
        pytest.param(
            torch.zeros(2, 3),
            torch.tensor([0, 1]),
            100,
            "x: expected shape (..., seq, d_k) with d_k even, found (2, 3)",
            id="odd d_k",
        ),
        pytest.param(
            torch.zeros(2, 4),
            torch.tensor([[0, 1], [2, 3]]),
            100,
            "token_positions: expected token positions of shape (seq,) = (2,) as x (..., seq, d_k) has, "
            "found shape (2, 2)",
            id="positions (batch, seq)",
        ),
        pytest.param(
            torch.zeros(2, 4), torch.tensor([0, 1]), 0, "theta: expected a frequency base > 0, found 0", id="theta 0"
        ),
        pytest.param(
            torch.zeros(2, 4), torch.tensor([0, 1]), True, "theta: expected an int, found bool", id="theta bool"
        ),
        pytest.param(
            torch.zeros(2, 4),
            torch.tensor([0, 1]),
            torch.tensor([1, 2]),
            "theta: expected an int, found a tensor of shape (2,)",
            id="theta tensor (2,)",
        ),
    ],
)
def test_reference_refuses_bad_input(x, positions, theta, message: str) -> None:
    """The reference raises a ScoreInputError naming the argument, what it expected and what it found."""
    with pytest.raises(ScoreInputError) as error:
        CONTRACT.reference(x, positions, theta)
    assert str(error.value) == message


def test_theta_may_come_as_a_0d_tensor() -> None:
    """A mistake receives theta as a 0-d int32 tensor: the same rotation as the Python int."""
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    pos = torch.tensor([2], dtype=torch.int32)
    assert torch.equal(
        CONTRACT.reference(x, pos, torch.tensor(500, dtype=torch.int32)), CONTRACT.reference(x, pos, 500)
    )


def _float32_student(x: torch.Tensor, positions: torch.Tensor, theta: int) -> torch.Tensor:
    """A correct float32 RoPE computing its frequencies as students do: theta ** (arange(0, d, 2) / d) in float32."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angle = positions.to(torch.float32)[:, None] * inv_freq
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()), -1).flatten(-2)


@pytest.mark.parametrize("theta", [10000, 500, 10])
def test_error_bound_admits_correct_float32_code_and_refuses_a_float16_detour(theta: int) -> None:
    """In float32, a student's float32 frequencies and angles stay inside the bound at positions up to
    400; the same code run in float16 and cast back does not."""
    rng = np.random.default_rng(theta)
    x = rng.uniform(-10, 10, size=(3, 5, 8)).astype(np.float32)
    positions = np.array([0, 37, 120, 251, 400], dtype=np.int32)
    a = {"x": x.astype(np.float64), "token_positions": positions, "theta": np.asarray(theta, dtype=np.int32)}
    e = expect(CONTRACT, a, "float32", Tolerance())
    good = _float32_student(torch.tensor(x), torch.tensor(positions), theta).double().numpy()
    assert (np.abs(good - e.golden) <= e.allowed).all()
    half = _float32_student(torch.tensor(x).half(), torch.tensor(positions), theta).double().numpy()
    assert not (np.abs(half - e.golden) <= e.allowed).all()


def test_error_scale_is_the_pair_magnitude_times_the_angle_term() -> None:
    """rope_error: (|x_a| + |x_b|)·(3 + (3 + ln theta)·|m θ_i|) at both coordinates of each pair."""
    a = {"x": np.array([[1.0, -2.0, 0.5, 0.0]]), "token_positions": np.array([10]), "theta": np.asarray(100)}
    n, scale = rope.rope_error(a, "interleaved")
    pair0 = 3.0 * (3 + (3 + np.log(100)) * 10)
    pair1 = 0.5 * (3 + (3 + np.log(100)) * 1.0)
    assert n == 1
    np.testing.assert_allclose(scale, [[pair0, pair0, pair1, pair1]])
    terms = rope.low_terms(a, "interleaved")
    np.testing.assert_allclose(terms.rounding, [[6.0, 6.0, 1.0, 1.0]])
    np.testing.assert_allclose(terms.accumulation, scale)


@pytest.mark.parametrize("pairing", ["interleaved", "rotate_half"])
def test_gradient_is_the_inverse_rotation_and_matches_autograd(pairing: str) -> None:
    """dx = R(−m) dO equals torch autograd of the reference; the allowed error admits it in float32."""
    c = CONTRACT.configured({"pairing": pairing})
    a = _args(batch=(2, 2))
    d_out = np.random.default_rng(5).uniform(-1, 1, size=a["x"].shape)
    x = torch.tensor(a["x"], requires_grad=True)
    c.reference(x, torch.tensor(a["token_positions"]), 10000).backward(torch.tensor(d_out))
    grads = contract_gradients(c, a, d_out)
    assert set(grads) == {"x"}
    np.testing.assert_allclose(grads["x"], x.grad.numpy(), rtol=1e-12, atol=1e-12)
    n, scales = contract_gradient_scales(c, a, d_out)
    x32 = torch.tensor(a["x"], dtype=torch.float32, requires_grad=True)
    c.reference(x32, torch.tensor(a["token_positions"]), 10000).backward(torch.tensor(d_out, dtype=torch.float32))
    allowed = gradient_allowed(Tolerance(), grads["x"], scales["x"], n, "float32")
    assert (np.abs(x32.grad.double().numpy() - grads["x"]) <= allowed).all()
