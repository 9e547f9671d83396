"""Multi-head attention with its four projections (:attr:`ContractFamily.MULTIHEAD`), its options in
:class:`MultiheadOptions` and :class:`RotaryMultiheadOptions`.

The contracts (our own parameter order; every weight ``(d_model, d_model)`` stored as ``nn.Linear``
stores it, ``(d_out, d_in)``, so a projection is ``x @ W.T``):

- ``multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads)``: ``x (..., seq, d_model)``;
- ``multihead_cross_attention(x, context, W_q, W_k, W_v, W_o, num_heads)``: queries from
  ``x (..., n_q, d_model)``, keys and values from ``context (..., n_k, d_model)``;
- ``multihead_self_attention_packed(x, c_attn, W_o, num_heads)``: ``c_attn (3·d_model, d_model)`` is
  ``[W_q; W_k; W_v]`` stacked along the output dim (nanoGPT's ``c_attn`` without its bias:
  ``q, k, v = (x @ c_attn.T).split(d_model, dim=-1)``);
- ``multihead_self_attention_rope(x, W_q, W_k, W_v, W_o, num_heads, theta, token_positions)``: RoPE
  (:func:`attnscore.maths.rotary.rotate`) on each head's queries and keys, ``d_head`` even,
  ``token_positions (seq,)`` int32 shared by the batch, ``theta`` a Python int.

``num_heads`` is an int parameter of shape ``()`` (a Python ``int`` for the implementation);
``d_head = d_model / num_heads``. Head ``h`` is columns ``h·d_head .. (h+1)·d_head − 1`` of a
projection's output; each head computes ``softmax(q_h k_hᵀ / √d_head) v_h``; the heads are
concatenated in order and projected by ``W_o``: ``out = concat(heads) @ W_o.T``. The spec fixes
``causal`` (a convention, never passed: query ``i`` keeps keys ``j <= i``, top-left) and, for the RoPE
form, ``pairing`` (:data:`attnscore.maths.rotary.PAIRINGS`).

Reference :func:`attend` (torch: the projections, :func:`attnscore.maths.reference.attention` per
head, the output projection), golden :func:`attend_golden` (float64 numpy, its own softmax),
error bound :func:`error_budget` (both in :mod:`attnscore.maths.multihead_golden`: each
projection's dot-product error carried through the rotation, attention
(:mod:`attnscore.maths.error_scales`) and the output projection), gradients by the float64 chain
rule through the parts (:func:`gradient_parts`).

Sources: Vaswani et al. (2017), section 3.2.2; Stanford CS336 assignment 1 (causal multi-head
self-attention given its projection weights, with and without RoPE); nanoGPT's
``CausalSelfAttention`` (the packed ``c_attn``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths import reference
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Args, Contract
from attnscore.maths.families.attention import attention_scales
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import attention as attention_gradients
from attnscore.maths.gradient_formulas import cleaned, f64
from attnscore.maths.multihead_golden import (
    Parts,
    attend_golden,
    causal_keep,
    error_budget,
    heads_of,
    keep_of,
    merged,
    pair_sum,
    signed_heads,
    sum_to,
    weight_grad,
)
from attnscore.maths.options import Options, convention
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.rotary import PAIRINGS, rotate, rotate_golden
from attnscore.maths.tolerance import ErrorTerms

MEMBER = ContractFamily.MULTIHEAD
SHARED_MASKS = False

THETAS = (10000, 500, 100, 10, 3)
"""The RoPE bases drawn for ``theta`` (one per call, so a table cached across calls shows)."""

_CAUSAL = "keep key j for query i only when j <= i (top-left; CS336, nanoGPT's CausalSelfAttention)"


@dataclass(frozen=True)
class MultiheadOptions(Options):
    """What a multi-head attention spec fixes: ``causal``, a convention (never passed)."""

    causal: bool = convention(False, _CAUSAL, kind="bool")


@dataclass(frozen=True)
class RotaryMultiheadOptions(Options):
    """What a multi-head attention with RoPE spec fixes: ``causal`` and RoPE's ``pairing``, both
    conventions (never passed)."""

    causal: bool = convention(False, _CAUSAL, kind="bool")
    pairing: str = convention(
        "interleaved", "RoPE's pairs: interleaved (x[2i], x[2i+1]) or rotate_half (x[i], x[i + d/2])", PAIRINGS
    )


# ---------------------------------------------------------------------------------------------
# the parts of a call, whatever the contract's form


def _as_int(value: Any, name: str) -> int:
    """An int parameter of shape ``()`` (a Python int, a 0-d tensor or array) as a Python int."""
    if isinstance(value, bool):
        raise ScoreInputError(name, f"expected an int, found {value!r}")
    if isinstance(value, int):
        return value
    array = np.asarray(value.detach().cpu() if is_tensor(value) else value)
    if array.ndim != 0 or array.dtype.kind not in "iu":
        raise ScoreInputError(
            name, f"expected an int (or a 0-d integer tensor), found {array.dtype} of shape {array.shape}"
        )
    return int(array)


def parts_of(contract: Contract, *args: Any) -> Parts:
    """``args`` (in ``contract``'s parameter order, torch tensors or numpy arrays) as :class:`Parts`:
    the packed ``c_attn`` split into ``W_q, W_k, W_v`` (rows ``0..d−1``, ``d..2d−1``, ``2d..3d−1``),
    ``context`` set to ``x`` for self-attention, ``num_heads`` and ``theta`` Python ints."""
    a = dict(zip(contract.parameter_names, args, strict=True))
    if "c_attn" in a:
        d = a["c_attn"].shape[-1]
        if a["c_attn"].shape[-2] != 3 * d:
            raise ScoreInputError(
                "c_attn", f"expected shape (3·d_model, d_model) = ({3 * d}, {d}), found {tuple(a['c_attn'].shape)}"
            )
        W_q, W_k, W_v = a["c_attn"][:d], a["c_attn"][d : 2 * d], a["c_attn"][2 * d :]
    else:
        W_q, W_k, W_v = a["W_q"], a["W_k"], a["W_v"]
    theta = _as_int(a["theta"], "theta") if "theta" in a else None
    return Parts(
        a["x"], a.get("context", a["x"]), W_q, W_k, W_v, a["W_o"], _as_int(a["num_heads"], "num_heads"),
        a.get("token_positions"), theta,
    )  # fmt: skip


def _check(p: Parts, even: bool) -> None:
    d = p.x.shape[-1]
    if p.num_heads < 1 or d % p.num_heads:
        raise ScoreInputError("num_heads", f"expected a divisor of d_model = {d}, found {p.num_heads}")
    for name, W in (("W_q", p.W_q), ("W_k", p.W_k), ("W_v", p.W_v), ("W_o", p.W_o)):
        if tuple(W.shape) != (d, d):
            raise ScoreInputError(name, f"expected shape (d_model, d_model) = ({d}, {d}), found {tuple(W.shape)}")
    if p.context.shape[-1] != d:
        raise ScoreInputError("context", f"expected width d_model = {d}, found {p.context.shape[-1]}")
    if even and (d // p.num_heads) % 2:
        raise ScoreInputError("num_heads", f"expected an even d_head for RoPE, found d_head = {d // p.num_heads}")


def split_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(..., n, d_model) -> (..., heads, n, d_head)``: head ``h`` is columns ``h·d_head .. (h+1)·d_head − 1``."""
    *batch, n, d = t.shape
    return t.reshape(*batch, n, num_heads, d // num_heads).transpose(-3, -2)  # (..., heads, n, d_head)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    """``(..., heads, n, d_head) -> (..., n, d_model)``, the heads concatenated in order."""
    *batch, h, n, d_head = t.shape
    return t.transpose(-3, -2).reshape(*batch, n, h * d_head)  # (..., n, heads·d_head)


def _linear(t: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    return t @ W.T  # (..., n, d_in) @ (d_in, d_out) -> (..., n, d_out)


Rotation = Callable[["torch.Tensor"], "torch.Tensor"]


def attend(
    x: torch.Tensor,
    context: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor | None,
    num_heads: int,
    *,
    causal: bool,
    rotation: Rotation | None = None,
    model_rotation: Rotation | None = None,
    rotate_values: bool = False,
    keep: torch.Tensor | None = None,
    scale: float | None = None,
    project: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _linear,
    split: Callable[[torch.Tensor, int], torch.Tensor] = split_heads,
    merge: Callable[[torch.Tensor], torch.Tensor] = merge_heads,
) -> torch.Tensor:
    """Multi-head attention in torch, the reference, with the hooks the catalogue's mistakes turn.

    Args:
        x: queries' input ``(..., n_q, d_model)``; context: keys' and values' input ``(..., n_k,
            d_model)`` (``x`` for self-attention).
        W_q, W_k, W_v, W_o: ``(d_model, d_model)``, ``nn.Linear``'s layout (a projection is
            ``t @ W.T``); ``W_o`` None leaves the output projection out (a mistake).
        num_heads: the head count; ``d_head = d_model / num_heads``.
        causal: query ``i`` keeps keys ``j <= i`` (top-left) unless ``keep`` is given.
        rotation: applied to each head's queries and keys, ``(..., heads, n, d_head)`` (RoPE), or None;
            ``rotate_values`` applies it to the values too (a mistake).
        model_rotation: applied to the projected queries and keys ``(..., n, d_model)`` before the
            head split (a mistake), or None.
        keep: ``(n_q, n_k)`` bool, True = keep, instead of the causal rule (a shifted mask).
        scale: the scores' factor; None is ``1/√d_head``.
        project, split, merge: the projection ``(t, W) -> t @ W.T``, the head split
            (:func:`split_heads`) and merge (:func:`merge_heads`).

    Returns:
        ``(..., n_q, d_model)`` in ``x``'s dtype and on its device. The arguments are not checked
        here; the contracts' references raise :class:`~attnscore.maths.reference.ScoreInputError`
        for a head count that does not divide ``d_model``, a weight of another shape or an odd RoPE
        width.

    Example (one token sees only itself: the output is its value, ``x @ W_v.T``, through ``W_o``):
        >>> x, eye = torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.eye(4)
        >>> attend(x, x, eye, eye, eye.roll(1, dims=1), eye, 2, causal=True).tolist()
        [[2.0, 3.0, 4.0, 1.0]]
    """
    q, k, v = project(x, W_q), project(context, W_k), project(context, W_v)  # (..., n, d_model) each
    if model_rotation is not None:
        q, k = model_rotation(q), model_rotation(k)
    q, k, v = split(q, num_heads), split(k, num_heads), split(v, num_heads)  # (..., heads, n, d_head)
    if rotation is not None:
        q, k = rotation(q), rotation(k)
        if rotate_values:
            v = rotation(v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if keep is None and causal:
        keep = torch.as_tensor(causal_keep(n_q, n_k), device=x.device)
    heads = reference.attention(q, k, v, keep, scale=scale)  # (..., heads, n_q, d_head)
    out = merge(heads)  # (..., n_q, d_model)
    return out if W_o is None else project(out, W_o)  # (..., n_q, d_model)


def rotation_of(parts: Parts, pairing: str, device: Any = None) -> Rotation | None:
    """RoPE at ``parts``' token positions and ``theta`` in ``pairing`` as a function of
    ``(..., n, d)`` tensors (None for a form without RoPE)."""
    if parts.theta is None:
        return None
    positions = torch.as_tensor(parts.token_positions, device=device)
    theta = parts.theta
    return lambda t: rotate(t, positions, theta, pairing)


def conventions(contract: Contract) -> tuple[bool, str]:
    """``(causal, pairing)`` a (configured) multi-head contract's spec fixed (``"interleaved"`` for a
    form without RoPE)."""
    options = contract.options
    return bool(getattr(options, "causal", False)), str(getattr(options, "pairing", "interleaved"))


def _reference_of(contract: Contract) -> Callable[..., torch.Tensor]:
    causal, pairing = conventions(contract)
    rotary = "theta" in contract.parameter_names

    def ref(*args: Any) -> torch.Tensor:
        p = parts_of(contract, *args)
        _check(p, rotary)
        return attend(
            p.x, p.context, p.W_q, p.W_k, p.W_v, p.W_o, p.num_heads, causal=causal,
            rotation=rotation_of(p, pairing, p.x.device),
        )  # fmt: skip

    ref.__name__ = contract.name
    return ref


# ---------------------------------------------------------------------------------------------
# the float64 twin, bound to a contract's conventions (the twin itself: attnscore.maths.multihead_golden)


def _golden_parts(contract: Contract, a: Args) -> Parts:
    p = parts_of(contract, *[a[n] for n in contract.parameter_names])
    return p._replace(
        x=f64(p.x), context=f64(p.context), W_q=f64(p.W_q), W_k=f64(p.W_k), W_v=f64(p.W_v), W_o=f64(p.W_o)
    )


def _golden_of(contract: Contract) -> Callable[[Args], np.ndarray]:
    causal, pairing = conventions(contract)
    return lambda a: attend_golden(_golden_parts(contract, a), causal, pairing)


# ---------------------------------------------------------------------------------------------
# the error bound, bound to a contract's conventions (error_budget: attnscore.maths.multihead_golden)


def _error_of(contract: Contract) -> Callable[[Args], tuple[int, np.ndarray]]:
    causal, pairing = conventions(contract)

    def error(a: Args) -> tuple[int, np.ndarray]:
        with np.errstate(all="ignore"):
            terms = error_budget(_golden_parts(contract, a), causal, pairing, None)
        return 1, cleaned(np.asarray(terms.rounding) + np.asarray(terms.accumulation))

    return error


def _low_error_of(contract: Contract) -> Callable[[Args, str, float], ErrorTerms]:
    causal, pairing = conventions(contract)

    def low(a: Args, dtype: str, factor: float) -> ErrorTerms:
        with np.errstate(all="ignore"):
            t = error_budget(_golden_parts(contract, a), causal, pairing, dtype, factor)
        return ErrorTerms(cleaned(np.asarray(t.rounding)), cleaned(np.asarray(t.accumulation)), t.floor)

    return low


# ---------------------------------------------------------------------------------------------
# integers: the head count (and RoPE's theta and positions), drawn with the sizes they fix


def _heads_integers(
    pick: Callable[[int, int], int], sizes: dict[str, Any], even: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """1..3 heads of 1..3 coordinates (2 or 4 for RoPE); ``d_model`` (and ``d_qkv = 3·d_model``) follow."""
    h = pick(1, 3)
    d_head = 2 * pick(1, 2) if even else pick(1, 3)
    sizes = {**sizes, "d_model": h * d_head}
    if "d_qkv" in sizes:
        sizes["d_qkv"] = 3 * h * d_head
    return sizes, {"num_heads": np.asarray(h)}


def uneven_positions(pick: Callable[[int, int], int], seq: int) -> np.ndarray:
    """``seq`` distinct increasing positions from a random start with random gaps of 1..5, never all
    gaps 1 (``arange(seq) + c`` cannot tell a forward that ignores the positions: RoPE's scores
    depend only on offsets)."""
    start = pick(0, 20)
    gaps = [pick(1, 5) for _ in range(seq - 1)]
    if gaps and all(g == 1 for g in gaps):
        gaps[-1] = 2 + pick(0, 3)
    return np.cumsum([start, *gaps])


def _rope_integers(pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Heads as :func:`_heads_integers` with an even ``d_head``; ``theta`` one of :data:`THETAS`;
    uneven token positions (:func:`uneven_positions`)."""
    sizes, ints = _heads_integers(pick, sizes, even=True)
    ints["theta"] = np.asarray(THETAS[pick(0, len(THETAS) - 1)])
    ints["token_positions"] = uneven_positions(pick, int(sizes["seq"]))
    return sizes, ints


def _integer_check(a: Args) -> list[tuple[str, str]]:
    h = np.asarray(a["num_heads"])
    x = np.asarray(a["x"])
    if h.ndim != 0:
        return [("num_heads", f"expected one int (shape ()), found shape {h.shape}")]
    d = x.shape[-1] if x.ndim else 0
    if int(h) < 1 or d % int(h):
        return [("num_heads", f"expected a divisor of d_model = {d}, found {int(h)}")]
    problems = []
    if "theta" in a:
        if (d // int(h)) % 2:
            problems.append(
                ("num_heads", f"expected an even d_head for RoPE, found d_model / num_heads = {d // int(h)}")
            )
        theta = np.asarray(a["theta"])
        if theta.ndim != 0 or int(theta) < 1:
            problems.append(("theta", f"expected one int >= 1, found {theta.tolist()}"))
        positions = np.asarray(a["token_positions"])
        seq = x.shape[-2] if x.ndim >= 2 else 0
        if not positions.shape or positions.shape[-1] != seq or any(n != 1 for n in positions.shape[:-1]):
            problems.append(("token_positions", f"expected shape (seq,) = ({seq},), found {positions.shape}"))
        elif np.any(positions < 0):
            problems.append(("token_positions", f"expected positions >= 0, found {positions.tolist()}"))
    return problems


# ---------------------------------------------------------------------------------------------
# the contracts


def _configure(base: Contract, options: Options, kept: tuple[str, ...]) -> Contract:
    """``base`` with its options fixed: reference, golden twin and error bounds bound to them."""
    configured = dataclasses.replace(base, options=options)
    return dataclasses.replace(
        configured,
        reference=_reference_of(configured),
        golden_fn=_golden_of(configured),
        error_fn=_error_of(configured),
        low_error_fn=_low_error_of(configured),
    )


_WEIGHT = ("d_model", "d_model")
_BOUND_TEXT = "u·(each projection's d_model·Σ|x_c W_dc|, carried through RoPE, attention and W_o)"


def _contract(name: str, parameters: tuple[tuple[str, tuple[str, ...]], ...], rotary: bool = False) -> Contract:
    options: Options = RotaryMultiheadOptions() if rotary else MultiheadOptions()
    ints = {"num_heads", "theta", "token_positions"} if rotary else {"num_heads"}
    samples: tuple[Any, ...] = ((((("causal", True),), tuple(n for n, _ in parameters))),)
    if rotary:
        samples += (((("causal", True), ("pairing", "rotate_half")), tuple(n for n, _ in parameters)),)
    unconfigured = Contract(
        name=name,
        family=MEMBER,
        parameters=parameters,
        returns=("...", parameters[0][1][1], "d_model"),
        reference=reference.attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=options,
        configure=_configure,
        samples=samples,
        bound_text=_BOUND_TEXT,
        int_parameters=frozenset(ints),
        integer_fn=_rope_integers if rotary else _heads_integers,
        integer_check=_integer_check,
    )
    return _configure(unconfigured, options, unconfigured.parameter_names)


CONTRACTS = (
    _contract(
        "multihead_self_attention",
        (("x", ("...", "seq", "d_model")), ("W_q", _WEIGHT), ("W_k", _WEIGHT), ("W_v", _WEIGHT), ("W_o", _WEIGHT),
         ("num_heads", ())),
    ),
    _contract(
        "multihead_cross_attention",
        (("x", ("...", "n_q", "d_model")), ("context", ("...", "n_k", "d_model")), ("W_q", _WEIGHT),
         ("W_k", _WEIGHT), ("W_v", _WEIGHT), ("W_o", _WEIGHT), ("num_heads", ())),
    ),
    _contract(
        "multihead_self_attention_packed",
        (("x", ("...", "seq", "d_model")), ("c_attn", ("d_qkv", "d_model")), ("W_o", _WEIGHT), ("num_heads", ())),
    ),
    _contract(
        "multihead_self_attention_rope",
        (("x", ("...", "seq", "d_model")), ("W_q", _WEIGHT), ("W_k", _WEIGHT), ("W_v", _WEIGHT), ("W_o", _WEIGHT),
         ("num_heads", ()), ("theta", ()), ("token_positions", ("seq",))),
        rotary=True,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# gradients: the float64 chain rule through the parts


def gradient_parts(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any, absolute: bool = False) -> Gradients:
    """The float64 gradients of every float parameter by the chain rule: ``dW_o = Σ dOᵀ C``,
    ``dC = dO W_o``, each head's attention gradients (:func:`attnscore.maths.gradient_formulas.attention`),
    RoPE's transpose (the rotation by ``−m θ_i``), ``dW = Σ dQᵀ x`` and ``dx = dQ W_q (+ dK W_k + dV W_v)``.
    With ``absolute``, the same chain on absolute values with every difference made a sum (the
    error scales, :func:`gradient_scales`): attention's part from
    :func:`~attnscore.maths.families.attention.attention_scales`, RoPE's as the sum over each pair."""
    causal, pairing = conventions(contract)
    p = _golden_parts(contract, args)
    Q, K, V, O_h = signed_heads(p, causal, pairing)
    C = merged(O_h)  # (..., n_q, d_model)
    keep = keep_of(p, causal)
    dO = f64(d_out)
    if absolute:
        p = p._replace(**{n: np.abs(cleaned(getattr(p, n))) for n in ("x", "context", "W_q", "W_k", "W_v", "W_o")})
        C, dO = np.abs(cleaned(C)), np.abs(cleaned(dO))
    h = p.num_heads
    dW_o = weight_grad(dO, C)
    dC = heads_of(dO @ p.W_o, h)  # (..., h, n_q, d_head)
    dC = np.broadcast_to(dC, np.broadcast_shapes(dC.shape, O_h.shape))
    if absolute:
        _, core = attention_scales({"Q": Q, "K": K, "V": V}, keep, np.asarray(dC))
        dQ, dK, dV = core["Q"], core["K"], core["V"]
    else:
        dQ, dK, dV = attention_gradients(Q, K, V, keep, dC)
    if p.theta is not None and absolute:
        dQ, dK = pair_sum(dQ, pairing), pair_sum(dK, pairing)  # |Rᵀ g| <= |g_a| + |g_b|
    elif p.theta is not None:
        positions = np.asarray(p.token_positions, dtype=np.float64)
        dQ, dK = rotate_golden(dQ, -positions, p.theta, pairing), rotate_golden(dK, -positions, p.theta, pairing)
    dQ, dK, dV = merged(dQ), merged(dK), merged(dV)  # (..., n, d_model)
    grads = {"W_q": weight_grad(dQ, p.x), "W_k": weight_grad(dK, p.context), "W_v": weight_grad(dV, p.context)}
    dx = dQ @ p.W_q
    dctx = dK @ p.W_k + dV @ p.W_v
    names = contract.parameter_names
    out: Gradients = {}
    if "context" in names:
        out["x"] = sum_to(dx, np.shape(args["x"]))
        out["context"] = sum_to(dctx, np.shape(args["context"]))
    else:
        out["x"] = sum_to(dx + dctx, np.shape(args["x"]))
    if "c_attn" in names:
        out["c_attn"] = np.concatenate([grads["W_q"], grads["W_k"], grads["W_v"]], axis=0)
    else:
        out.update(grads)
    out["W_o"] = dW_o
    return {n: out[n] for n in names if n in out}


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """:func:`gradient_parts`: the gradient of every float parameter (the weights included)."""
    return gradient_parts(contract, args, d_out)


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """``(n, {parameter: M})``: :func:`gradient_parts` on absolute values; ``n`` adds the longest
    sums: attention's (``d_head + n_k + d_head + n_q + 2``), two projections' ``d_model`` each and
    the weights' gradients' sum over every batch item and token."""
    scales = gradient_parts(contract, args, d_out, absolute=True)
    x = np.shape(args["x"])
    d = x[-1]
    h = int(np.asarray(args["num_heads"]))
    n_k = np.shape(args["context"])[-2] if "context" in args else x[-2]
    tokens = int(np.prod(np.shape(d_out)[:-1])) if np.ndim(d_out) else 1
    n = 2 * (d // max(h, 1)) + n_k + x[-2] + 2 + 2 * d + tokens
    return n, scales


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions | None:
    """None: multi-head attention is graded by its own chain rule."""
    return None


# ``causal`` never leaves a key out of every query (query n − 1 keeps them all), and the keys are
# projections of x: the catalogue's masked_entries_get_no_gradient does not apply
unused_keys = no_unused_keys
attention_changed = not_general_attention
