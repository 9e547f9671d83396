"""The FlashAttention-2 assignment (:attr:`ContractFamily.FLASH_ATTENTION_2`): ``forward(ctx, Q, K, V,
is_causal=False)`` of a ``torch.autograd.Function``, as Stanford CS336 assignment 2 hands it out,
and its logsumexp ``L``; its one keyword in :class:`FlashAttention2Options`.

``O = softmax(S) V`` with ``S = Q Kᵀ / √d`` (one width ``d`` for Q, K and V), and with
``is_causal`` query ``i`` keeps key ``j`` only when ``j <= i`` (top-left, as CS336 and PyTorch's
``is_causal``). The forward saves ``L_i = logsumexp_j S_ij`` (natural log, over the kept keys) for
the backward, which recomputes ``P = exp(S − L)`` (Dao (2023), FlashAttention-2, Algorithms 1 and 2).
Reference :func:`attnscore.maths.reference.attention`, golden :func:`attnscore.maths.golden.attention`,
the error bound of plain attention (:mod:`attnscore.maths.error_scales`), the gradients of plain
attention with the causal flag as a mask (:mod:`attnscore.maths.families.attention`). The reference
``torch.autograd.Function`` itself is :mod:`attnscore.maths.flash_reference` (defining it imports
torch, which loading a spec need not).
"""

from __future__ import annotations

# ruff: noqa: E741  (O and L: the paper's names for the output and the logsumexp)
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.dtypes import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.boundary.lazy_torch import torch
from attnscore.maths import golden
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms
from attnscore.maths.families import attention
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, not_general_attention, options_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view
from attnscore.maths.options import Options, causal_keyword

MEMBER = ContractFamily.FLASH_ATTENTION_2
SHARED_MASKS = False


@dataclass(frozen=True)
class FlashAttention2Options(Options):
    """The Function's keyword, as a spec fixes it."""

    is_causal: bool = causal_keyword("top_left", "top-left, CS336's and PyTorch's is_causal")


def keep_of(n_q: int, n_k: int, is_causal: bool) -> np.ndarray | None:
    """The keep mask ``(n_q, n_k)`` of the causal form (top-left), or None without ``is_causal``."""
    return golden.causal_keep(n_q, n_k, "top_left") if is_causal else None


def _as_attention(a: Args, is_causal: bool) -> dict[str, np.ndarray]:
    Q, K, V = as_float64(a, "Q"), as_float64(a, "K"), as_float64(a, "V")
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = keep_of(n_q, n_k, is_causal)
    S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
    mask = np.broadcast_to(np.ones((n_q, n_k), dtype=bool) if keep is None else keep, S_shape)
    return {"Q": Q, "K": K, "V": V, "mask": mask}


def logsumexp_golden(Q: Any, K: Any, is_causal: bool) -> np.ndarray:
    """``L = logsumexp(Q Kᵀ / √d)`` per query over the kept keys, float64 ``(..., n_q)``.

    Example (two keys with scores 0 and 0: ``L = log 2``; with ``is_causal`` query 0 keeps one key):
        >>> logsumexp_golden([[1.0], [1.0]], [[0.0], [0.0]], False).round(6).tolist()
        [0.693147, 0.693147]
        >>> logsumexp_golden([[1.0], [1.0]], [[0.0], [0.0]], True).round(6).tolist()
        [0.0, 0.693147]
    """
    Q, K = np.asarray(Q, dtype=np.float64), np.asarray(K, dtype=np.float64)
    with np.errstate(all="ignore"):
        S = golden.scaled_dot_products(Q, K)  # (..., n_q, n_k)
        keep = keep_of(Q.shape[-2], K.shape[-2], is_causal)
        if keep is not None:
            S = np.where(keep, S, -np.inf)
        m = np.max(S, axis=-1, keepdims=True)
        m_safe = np.where(np.isfinite(m), m, 0.0)
        return (m_safe + np.log(np.sum(np.exp(S - m_safe), axis=-1, keepdims=True)))[..., 0]


def logsumexp_allowed(Q: Any, K: Any, is_causal: bool, dtype: str, factor: float) -> np.ndarray:
    """The allowed error of each entry of ``L`` ``(..., n_q)`` in ``dtype``.

    A score's error is at most ``d · u · Σ|q_i k_i| / √d + u·|s|``; ``logsumexp`` moves by at most
    the largest of its inputs' errors, plus ``(n_k + 2) · u`` for the sum of exponentials and the
    log, plus ``u · |L|`` for the result's own rounding: ``factor`` times that, with a subnormal floor.
    """
    Q, K = np.asarray(Q, dtype=np.float64), np.asarray(K, dtype=np.float64)
    u = UNIT_ROUNDOFF[dtype]
    d, n_k = Q.shape[-1], K.shape[-2]
    with np.errstate(all="ignore"):
        mags = golden.dot_magnitudes(Q, K) / np.sqrt(d)  # (..., n_q, n_k)
        err = d * u * mags + u * np.abs(golden.scaled_dot_products(Q, K))
        keep = keep_of(Q.shape[-2], n_k, is_causal)
        if keep is not None:
            err = np.where(keep, err, 0.0)
        worst = np.max(np.nan_to_num(err, nan=0.0, posinf=0.0), axis=-1)
        L = np.nan_to_num(logsumexp_golden(Q, K, is_causal), nan=0.0, posinf=0.0, neginf=0.0)
    return factor * (worst + (n_k + 2) * u + u * np.abs(L)) + 4 * SMALLEST_SUBNORMAL[dtype]


def _flash_reference() -> Any:
    from attnscore.maths.flash_reference import FlashReference  # a torch class: torch loaded here

    return FlashReference


def __getattr__(name: str) -> Any:
    """``FlashReference`` (:mod:`attnscore.maths.flash_reference`), imported on first use: defining a
    ``torch.autograd.Function`` imports torch, which loading a spec need not."""
    if name == "FlashReference":
        return _flash_reference()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def returning_logsumexp(function: Any) -> Any:
    """``function`` (a Function's ``.apply`` or a callable of ``(Q, K, V, is_causal)``) as the
    ``returned`` form wants it: ``(O, L)``, ``L`` read from the output's saved tensors (index 4, as
    :class:`FlashReference` saves it) or computed from Q and K when the output has no graph."""

    def with_lse(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
        O = function(Q, K, V, **kw)
        if O.grad_fn is not None and len(O.grad_fn.saved_tensors) > 4:
            return O, O.grad_fn.saved_tensors[4]
        S = (Q @ K.transpose(-2, -1)) * Q.shape[-1] ** -0.5
        if kw.get("is_causal"):
            S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        return O, torch.logsumexp(S, dim=-1)

    return with_lse


def _configure(base: Contract, options: FlashAttention2Options, kept: tuple[str, ...]) -> Contract:
    """The contract for a spec's ``is_causal`` (no optional parameters)."""
    is_causal = bool(options.is_causal)

    def ref(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = is_causal) -> torch.Tensor:
        return _flash_reference().apply(Q, K, V, is_causal)

    def gold(a: Args) -> np.ndarray:
        if is_causal:
            return golden.causal_attention(a["Q"], a["K"], a["V"], "top_left")
        return golden.attention(a["Q"], a["K"], a["V"], None)

    return dataclasses.replace(
        base,
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: attention_error(_as_attention(a, is_causal)),
        low_error_fn=lambda a, dtype, factor: attention_low_terms(_as_attention(a, is_causal), dtype, factor),
        key_view_fn=lambda a: key_view(_as_attention(a, is_causal)),
        options=options,
    )


def flash_attention_2_contract() -> Contract:
    """``forward(ctx, Q (..., n_q, d), K (..., n_k, d), V (..., n_k, d), is_causal=False) -> O (..., n_q, d)``.

    The spec's ``function.keywords`` fixes ``is_causal`` (passed by name: ``F.apply(Q, K, V,
    is_causal=True)``); a ``torch.autograd.Function`` subclass is called through ``.apply``.
    Its kind ``"flash_attention_2"`` selects the FlashAttention catalogue entries
    (:mod:`attnscore.catalogue.mistakes.flash_attention`, :mod:`attnscore.catalogue.properties.flash_attention`).
    """
    unconfigured = Contract(
        name="flash_attention_2",
        family=MEMBER,
        parameters=(("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k")), ("V", ("...", "n_k", "d_k"))),
        returns=("...", "n_q", "d_k"),
        reference=lambda Q, K, V, is_causal=False: _flash_reference().apply(Q, K, V, is_causal),
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=FlashAttention2Options(),
        configure=_configure,
        samples=(((("is_causal", True),), ("Q", "K", "V")),),
        bound_text="u·(error of scores and weights propagated through V)",
    )
    return _configure(unconfigured, FlashAttention2Options(), unconfigured.parameter_names)


CONTRACTS = (flash_attention_2_contract(),)


def _as_plain_attention(contract: Contract, args: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A call's arguments as plain ``attention``'s: its causal flag (top-left) as a mask."""
    Q, K = np.asarray(args["Q"]), np.asarray(args["K"])
    n_q, n_k = Q.shape[-2], K.shape[-2]
    is_causal = options_of(contract, FlashAttention2Options).is_causal
    keep = golden.causal_keep(n_q, n_k, "top_left") if is_causal else np.ones((n_q, n_k), bool)
    return {"Q": Q, "K": K, "V": np.asarray(args["V"]), "mask": keep}


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """Plain attention's gradients with the causal flag as a mask."""
    plain = attention.CONTRACTS[0]
    return attention.gradients(plain, _as_plain_attention(contract, args), d_out)


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """Plain attention's gradient scales with the causal flag as a mask."""
    plain = attention.CONTRACTS[0]
    return attention.gradient_scales(plain, _as_plain_attention(contract, args), d_out)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: graded through plain attention's closed forms, not general attention's options."""
    return None


# its is_causal is not asked about here: the check covers variants of general attention
unused_keys = no_unused_keys
attention_changed = not_general_attention
