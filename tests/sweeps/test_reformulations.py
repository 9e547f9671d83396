"""Every bundled spec accepts equivalent reformulations of its reference, in every dtype.

Each function below is a correct implementation written another way (scaling before or after the
product, on both sides, einsum, a broadcast product summed, float64 then cast back, numpy, PyTorch's
own kernels, float32 then cast back, a softmax written out in the tested dtype, ``exp(log_softmax)``).
Each must get full marks in float32, float64, float16 and bfloat16 under the spec's default
tolerance (whose float16/bfloat16 bound is that of float32 accumulation, so it is tight), and with
the low-precision ``--ratio 2`` rule in the half dtypes.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.load import load_spec

pytestmark = pytest.mark.slow

DTYPES = ("float32", "float64", "float16", "bfloat16")


def _in_float64(fn):
    """Compute in float64, return in the inputs' dtype (a correctly rounded result)."""

    def wrapped(*args):
        dtype = next(a.dtype for a in args if a.dtype.is_floating_point)
        out = fn(*[a.double() if a.dtype.is_floating_point else a for a in args])
        return out.to(dtype)

    wrapped.__name__ = f"{fn.__name__}_in_float64"
    return wrapped


_HALF = (torch.float16, torch.bfloat16)


def _up(x):
    """float16/bfloat16 upcast to float32; float32 and float64 as they are (float32 for float64 is a mistake)."""
    return x.float() if x.dtype in _HALF else x


def _in_float32(fn):
    """Half-precision inputs upcast to float32, computed, cast back (the usual way to run them)."""

    def wrapped(*args):
        dtype = next(a.dtype for a in args if a.dtype.is_floating_point)
        out = fn(*[_up(a) if a.dtype.is_floating_point else a for a in args])
        return out.to(dtype)

    wrapped.__name__ = f"{fn.__name__}_in_float32"
    return wrapped


def _numpy(fn):
    def wrapped(*args):
        dtype = next(a.dtype for a in args if a.dtype.is_floating_point)
        arrays = [a.double().numpy() if a.dtype.is_floating_point else a.numpy() for a in args]
        return torch.from_numpy(fn(*arrays)).to(dtype)

    wrapped.__name__ = f"{fn.__name__}_numpy"
    return wrapped


def _qkt(Q, K):
    return Q @ K.transpose(-2, -1)


def _masked_softmax(S, mask):
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros((), dtype=S.dtype))


def _log_softmax_exp(S, mask):
    """exp(log_softmax): log w rounded in the tested dtype, then exp."""
    weights = torch.exp(torch.log_softmax(S.masked_fill(~mask, float("-inf")), dim=-1))
    return torch.where(mask, weights, torch.zeros((), dtype=S.dtype))


def _manual_softmax(S, mask):
    logits = S.masked_fill(~mask, float("-inf"))
    top = logits.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(logits - top)
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(mask, e / total.masked_fill(total == 0, 1.0), torch.zeros((), dtype=S.dtype))


REFORMULATIONS = {
    "dot_product_scores": [
        lambda q, keys: keys @ q,
        lambda q, keys: torch.einsum("d,nd->n", q, keys),
        lambda q, keys: (q * keys).sum(-1),
        lambda q, keys: torch.stack([torch.dot(k, q) for k in keys]),
        _in_float64(
            lambda q, keys: torch.tensor(
                [sum(float(a) * float(b) for a, b in zip(q, k, strict=True)) for k in keys], dtype=torch.float64
            )
        ),
        _numpy(lambda q, keys: keys @ q),
        _in_float32(lambda q, keys: keys @ q),
    ],
    "score_matrix": [
        _qkt,
        lambda Q, K: torch.matmul(Q, K.mT),
        lambda Q, K: torch.einsum("...id,...jd->...ij", Q, K),
        lambda Q, K: (Q.unsqueeze(-2) * K.unsqueeze(-3)).sum(-1),
        _in_float64(_qkt),
        _numpy(lambda Q, K: Q @ K.swapaxes(-1, -2)),
        _in_float32(_qkt),
    ],
    "scaled_score_matrix": [
        lambda Q, K: _qkt(Q, K) / math.sqrt(Q.shape[-1]),
        lambda Q, K: (Q / math.sqrt(Q.shape[-1])) @ K.transpose(-2, -1),
        lambda Q, K: (Q * Q.shape[-1] ** -0.5) @ K.transpose(-2, -1),
        lambda Q, K: (Q * Q.shape[-1] ** -0.25) @ (K * K.shape[-1] ** -0.25).transpose(-2, -1),
        lambda Q, K: torch.einsum("...id,...jd->...ij", Q, K) * Q.shape[-1] ** -0.5,
        _in_float64(lambda Q, K: _qkt(Q, K) / math.sqrt(Q.shape[-1])),
        _in_float32(lambda Q, K: _qkt(Q, K) / math.sqrt(Q.shape[-1])),
    ],
    "bilinear_scores": [
        lambda Q, K, W: (Q @ W) @ K.transpose(-2, -1),
        lambda Q, K, W: Q @ (W @ K.transpose(-2, -1)),
        lambda Q, K, W: torch.einsum("...ia,ab,...jb->...ij", Q, W, K),
        _in_float64(lambda Q, K, W: (Q @ W) @ K.transpose(-2, -1)),
        _in_float32(lambda Q, K, W: (Q @ W) @ K.transpose(-2, -1)),
    ],
    "additive_scores": [
        lambda Q, K, W_q, W_k, v: torch.tanh((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v,
        lambda Q, K, W_q, W_k, v: torch.einsum(
            "...ija,a->...ij", torch.tanh((Q @ W_q.T)[..., :, None, :] + (K @ W_k.T)[..., None, :, :]), v
        ),
        _in_float64(lambda Q, K, W_q, W_k, v: torch.tanh((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v),
        _in_float32(lambda Q, K, W_q, W_k, v: torch.tanh((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v),
    ],
    "masked_scores": [
        lambda S, mask: S.masked_fill(~mask, float("-inf")),
        lambda S, mask: torch.where(mask, S, torch.full_like(S, float("-inf"))),
        lambda S, mask: S.clone().index_put_((~mask,), torch.tensor(float("-inf"), dtype=S.dtype)),
    ],
    "attention_weights": [
        _masked_softmax,
        _manual_softmax,
        lambda S, mask: (
            torch.where(mask.any(-1, keepdim=True), torch.softmax(S.masked_fill(~mask, -math.inf), -1), 0.0)
            .masked_fill(~mask, 0.0)
            .to(S.dtype)
        ),
        _in_float64(_masked_softmax),
        _in_float32(_masked_softmax),
        _in_float32(_manual_softmax),
        _log_softmax_exp,
    ],
    "attention": [
        lambda Q, K, V, mask: _masked_softmax(_qkt(Q, K) / math.sqrt(Q.shape[-1]), mask) @ V,
        lambda Q, K, V, mask: _manual_softmax((Q * Q.shape[-1] ** -0.5) @ K.mT, mask) @ V,
        lambda Q, K, V, mask: torch.einsum(
            "...ij,...jd->...id",
            _masked_softmax(torch.einsum("...id,...jd->...ij", Q, K) / Q.shape[-1] ** 0.5, mask),
            V,
        ),
        _in_float64(lambda Q, K, V, mask: _masked_softmax(_qkt(Q, K) / math.sqrt(Q.shape[-1]), mask) @ V),
        _in_float32(lambda Q, K, V, mask: _masked_softmax(_qkt(Q, K) / math.sqrt(Q.shape[-1]), mask) @ V),
        lambda Q, K, V, mask: _manual_softmax(_qkt(Q, K) / math.sqrt(Q.shape[-1]), mask) @ V,
        lambda Q, K, V, mask: _masked_softmax(_up(_qkt(Q, K)) / math.sqrt(Q.shape[-1]), mask).to(Q.dtype) @ V,
    ],
    "causal_attention": [
        lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True),
        lambda Q, K, V: (
            _masked_softmax(
                _qkt(Q, K) / math.sqrt(Q.shape[-1]), torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
            )
            @ V
        ),
        _in_float64(lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)),
        _in_float32(lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)),
        lambda Q, K, V: (
            _manual_softmax(
                (Q * Q.shape[-1] ** -0.5) @ K.mT, torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
            )
            @ V
        ),
        lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(
            Q, K, V, is_causal=True, scale=1 / math.sqrt(Q.shape[-1])
        ),
    ],
}

CASES = [
    pytest.param(spec_id, i, dtype, id=f"{spec_id}-{i}-{dtype}")
    for spec_id, fns in REFORMULATIONS.items()
    for i in range(len(fns))
    for dtype in DTYPES
]


@pytest.fixture(scope="module")
def specs():
    return {spec_id: load_spec(f"specs/{spec_id}.yaml") for spec_id in REFORMULATIONS}


@pytest.fixture(scope="module")
def built():
    """Each (spec, dtype)'s cases, built once for every reformulation (cases are plain data)."""
    made: dict[tuple[str, str], list] = {}

    def cases(spec, dtype: str) -> list:
        key = (spec.id, repr(spec.tolerance), dtype)
        if key not in made:
            made[key] = build_cases(spec, dtype)
        return made[key]

    return cases


@pytest.mark.parametrize("spec_id, index, dtype", CASES)
def test_equivalent_reformulation_gets_full_marks(specs, built, spec_id, index, dtype):
    spec = specs[spec_id]
    result = run_impl(spec, REFORMULATIONS[spec_id][index], dtype=dtype, shrink=False, cases=built(spec, dtype))
    failed = [f"{c.id}: {c.message}" for c in result.cases if not c.passed]
    assert result.score == result.max_score, "\n\n".join(failed)


@pytest.mark.parametrize("spec_id", sorted(REFORMULATIONS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reformulations_pass_the_ratio_rule(specs, built, spec_id, dtype):
    spec = dataclasses.replace(specs[spec_id], tolerance=Tolerance(mode="ratio", factor=2.0))  # --ratio 2
    for fn in REFORMULATIONS[spec_id]:
        result = run_impl(spec, fn, dtype=dtype, shrink=False, cases=built(spec, dtype))
        failed = [f"{c.id}: {c.message}" for c in result.cases if not c.passed]
        assert result.score == result.max_score, "\n\n".join(failed)
