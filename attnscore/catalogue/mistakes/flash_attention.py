"""Mistakes of a FlashAttention-2 ``torch.autograd.Function`` (:mod:`attnscore.maths.families.flash_attention_2`).

Each is written as the students' own code is: a tiled forward with an online softmax over key
tiles (:func:`flash_function` builds the ``torch.autograd.Function``) that saves ``(Q, K, V, O, L)``,
and a hand-written backward that recomputes ``P = exp(S − L)``; one switch turns one known mistake
on. Most are visible only in the backward pass or in the saved ``L`` (``backward=True``: the
diagnosis compares the gradients and ``L`` too, :mod:`attnscore.check.diagnosis`). The ones that
depend on the tile size (a missing rescale, causal tiles skipped) fit it to the output first.

Source: Dao (2023), FlashAttention-2, Algorithms 1 and 2; the field notes' "bugs that hide on
small shapes" (a missing rescale is exact while a row fits in one tile, ``L`` as the running max
is exact for one key, a base-2 ``L`` is visible only in ``L`` itself).
"""

from __future__ import annotations

# ruff: noqa: E741  (O and L: the paper's names for the output and the logsumexp)
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import flash_attention_2, flash_attention_2_causal
from attnscore.catalogue.mistakes.registry import add
from attnscore.maths.contract import Contract
from attnscore.maths.unbroadcast import sum_to_shape

__all__ = ["flash_function", "online_softmax", "TILES"]

TILES = (1, 2, 3, 4, 8, 16, 32, 64, 128)
"""The key-tile sizes a tile-dependent mistake is fitted over (powers of two and 3)."""


def _visible(n_q: int, n_k: int, is_causal: bool, tile: int, skip: int, device: Any) -> torch.Tensor:
    """Which keys each query's tiles reach ``(n_q, n_k)``: every key, or with ``is_causal`` the keys
    ``j <= i`` of the key tiles the loop visits. ``skip`` 0: tiles up to the one holding the
    query's own position (correct); 1: the loop stops one tile early (``range(t)`` for query tile
    ``t``, tiles of ``tile`` queries and keys), so the diagonal tile is never read; 2: one tile too
    many, and the causal mask is applied on the diagonal tile only (the next tile leaks the future)."""
    i = torch.arange(n_q, device=device)[:, None]
    j = torch.arange(n_k, device=device)[None, :]
    if not is_causal:
        return torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    q_tile, k_tile = i // tile, j // tile
    if skip == 1:
        return (k_tile < q_tile) & (j <= i)
    if skip == 2:
        return (k_tile < q_tile) | ((k_tile == q_tile) & (j <= i)) | (k_tile == q_tile + 1)
    return j <= i


def online_softmax(
    S: torch.Tensor, V: torch.Tensor, tile: int, rescale: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2's online softmax over key tiles of ``tile`` scaled scores ``S``
    ``(..., n_q, n_k)`` (masked entries ``-inf``) and values ``V`` ``(..., n_k, d_v)``: the final
    running max ``m`` and sum ``l`` ``(..., n_q)`` and the unnormalised output ``acc``
    ``(..., n_q, d_v)``, so that ``O = acc / l`` and ``L = m + log l``.

    ``rescale`` as :func:`flash_function`'s: 0 the running sum and the output are rescaled by
    ``exp(m_old − m_new)`` when the running max grows (Dao 2023, Algorithm 1), 1 neither, 2 only the
    output, 3 only the sum. Computed for all tiles at once: after tile ``t`` the running max is
    ``m_t = max(m_{t−1}, rowmax(S_t))``, each tile's terms are ``exp(S_t − m_t)``, and the rescales
    that follow multiply them by ``exp(m_t − m)``. Over one or two tiles (cheaper so), and where a
    score is NaN or ``+inf``, the tiles are walked one by one (:func:`_online_softmax_loop`), as the
    code itself does."""
    n_k = S.shape[-1]
    tiles = -(-n_k // tile)
    if tiles <= 2 or not bool(((S < float("inf")) & ~torch.isnan(S)).all()):
        return _online_softmax_loop(S, V, tile, rescale)
    pad = tiles * tile - n_k
    S_t = torch.nn.functional.pad(S, (0, pad), value=float("-inf")).unflatten(-1, (tiles, tile))
    V_t = torch.nn.functional.pad(V, (0, 0, 0, pad)).unflatten(-2, (tiles, tile))  # (..., tiles, tile, d_v)
    m_t = torch.cummax(S_t.amax(dim=-1), dim=-1).values  # (..., n_q, tiles): the running max after each tile
    base = torch.where(torch.isfinite(m_t), m_t, torch.zeros_like(m_t))
    p = torch.exp(S_t - base[..., None])  # (..., n_q, tiles, tile)
    sums = p.sum(dim=-1)  # (..., n_q, tiles)
    outs = (p.movedim(-2, -3) @ V_t).movedim(-3, -2)  # (..., n_q, tiles, d_v): each tile times its values
    m = m_t[..., -1]
    last = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    carried = torch.exp(m_t - last[..., None])  # the rescales after tile t: exp(m_t − m); 0 before any key
    total = (sums if rescale in (1, 2) else sums * carried).sum(dim=-1)
    acc = (outs if rescale in (1, 3) else outs * carried[..., None]).sum(dim=-2)
    return m, total, acc


def _online_softmax_loop(
    S: torch.Tensor, V: torch.Tensor, tile: int, rescale: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`online_softmax` tile by tile, as a student's loop runs it (NaN and ``+inf`` scores
    propagate through the running max as they do there)."""
    rows = S.shape[:-1]
    m = torch.full(rows, float("-inf"), dtype=S.dtype, device=S.device)
    total = torch.zeros(rows, dtype=S.dtype, device=S.device)
    acc = torch.zeros((*rows, V.shape[-1]), dtype=S.dtype, device=S.device)
    for start in range(0, S.shape[-1], tile):
        block = S[..., start : start + tile]
        m_new = torch.maximum(m, block.amax(dim=-1))
        base = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(block - base[..., None])
        alpha = torch.exp(m - base)  # 0 on the first tile (m = -inf)
        total = (total if rescale in (1, 2) else alpha * total) + p.sum(dim=-1)
        acc = (acc if rescale in (1, 3) else alpha[..., None] * acc) + p @ V[..., start : start + tile, :]
        m = m_new
    return m, total, acc


@functools.cache
def flash_function(
    *,
    is_causal: bool = False,
    tile: int = 16,
    rescale: int = 0,
    lse: str = "natural",
    use_d: bool = True,
    scale_dq: bool = True,
    scale_dk: bool = True,
    dv_normalised: bool = True,
    skip: int = 0,
    drop_last: int = 0,
    collect: bool = False,
) -> type[torch.autograd.Function]:
    """A FlashAttention-2 ``torch.autograd.Function`` over key tiles of ``tile`` keys, with mistakes.

    Args:
        is_causal: the default of ``forward``'s ``is_causal`` (a call may pass its own).
        tile: key (and, for the causal tile rule, query) tile size.
        rescale: 0 the online softmax rescales the running sum ``l`` and output ``acc`` by
            ``exp(m_old − m_new)``; 1 neither is rescaled; 2 only ``l`` is not; 3 only ``acc`` is not.
        lse: what is saved as ``L``: ``"natural"`` ``m + log l``; ``"max"`` the running max ``m``
            only; ``"base2"`` ``log2`` of the sum (``L / ln 2``, the backward using it consistently).
        use_d, scale_dq, scale_dk, dv_normalised: False leaves ``D = rowsum(dO ⊙ O)`` out of ``dS``,
            the scale out of ``dQ`` or ``dK``, or computes ``dV`` from ``exp(S − rowmax S)``.
        skip: the causal key-tile rule (:func:`_visible`).
        drop_last: the loops' tile counts: 0 ``ceil(n / tile)`` (correct); 1 ``n // tile`` for the
            query tiles and the key tiles, so the rows past the last full query tile are never
            written and the keys past the last full key tile never read; 2 the key tiles only
            (every row is computed, over the full key tiles alone: ``0/0 = NaN`` when there is
            none); 3 the query tiles only. An unwritten row of ``O`` and ``L`` holds 0 here.
        collect: with ``drop_last``, each query tile's ``O`` and ``L`` are collected and
            concatenated (``torch.cat``) instead of written into tensors of the full length, so
            ``O`` and ``L`` come out short (and ``torch.cat`` of no tile raises).

    Returns:
        The class; ``forward(ctx, Q, K, V, is_causal)`` saves ``(Q, K, V, O, L)``. One class per
        set of switches, made once (a fit tries each tile size on every failing call).
    """

    def forward_tiles(
        Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scale = Q.shape[-1] ** -0.5
        n_q, n_k = Q.shape[-2], K.shape[-2]
        keep = _visible(n_q, n_k, causal, tile, skip, Q.device)
        read_k = (n_k // tile) * tile if drop_last in (1, 2) else n_k  # the keys the key loop reaches
        S = (Q @ K[..., :read_k, :].transpose(-2, -1)) * scale  # (..., n_q, read_k)
        S = S.masked_fill(~keep[:, :read_k], float("-inf"))
        m, total, acc = online_softmax(S, V[..., :read_k, :], tile, rescale)
        O = acc / total[..., None]
        L = m + torch.log(total)
        if lse == "max":
            L = m
        elif lse == "base2":
            L = L / math.log(2.0)
        if drop_last in (1, 3):  # the query loop stops at the last full tile
            written = (n_q // tile) * tile
            if collect:
                if written == 0:
                    raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
                O, L = O[..., :written, :], L[..., :written]
            else:
                O, L = O.clone(), L.clone()
                O[..., written:, :] = 0.0
                L[..., written:] = 0.0
        return O, L, keep

    class FlashAttention2Mistaken(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = is_causal) -> Any:
            O, L, _ = forward_tiles(Q, K, V, bool(is_causal))
            ctx.save_for_backward(Q, K, V, O, L)
            ctx.is_causal = bool(is_causal)
            return O

        @staticmethod
        def backward(ctx: Any, dO: torch.Tensor) -> Any:
            Q, K, V, O, L = ctx.saved_tensors
            scale = Q.shape[-1] ** -0.5
            keep = _visible(Q.shape[-2], K.shape[-2], ctx.is_causal, tile, skip, Q.device)
            S = ((Q @ K.transpose(-2, -1)) * scale).masked_fill(~keep, float("-inf"))
            L_e = L * math.log(2.0) if lse == "base2" else L  # exp2(S·log2 e − L₂) = exp(S − L)
            P = torch.exp(S - L_e[..., None])
            if dv_normalised:
                W = P
            else:
                row_max = S.amax(dim=-1, keepdim=True)
                W = torch.exp(S - torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)))
            dV = W.transpose(-2, -1) @ dO
            dP = dO @ V.transpose(-2, -1)
            D = (dO * O).sum(dim=-1, keepdim=True) if use_d else torch.zeros_like(dO[..., :1])
            dS = P * (dP - D)
            dQ = (dS @ K) * (scale if scale_dq else 1.0)
            dK = (dS.transpose(-2, -1) @ Q) * (scale if scale_dk else 1.0)
            return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape), None

    FlashAttention2Mistaken.forward_tiles = staticmethod(forward_tiles)  # type: ignore[attr-defined]
    return FlashAttention2Mistaken


def _call(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, **switches: Any) -> Any:
    """The mistaken Function applied as the spec calls it (``is_causal`` from the contract), returning
    ``(O, L)`` when the spec reads ``L`` from a returned tuple."""
    is_causal = bool(c.option("is_causal")) if c.keywords else False
    fn = flash_function(is_causal=is_causal, **switches)
    O = fn.apply(Q, K, V, is_causal)
    if spec is not None and getattr(spec, "logsumexp", None) and spec.logsumexp[0] == "returned":
        return O, fn.forward_tiles(Q.detach(), K.detach(), V.detach(), is_causal)[1]  # type: ignore[attr-defined]
    return O


def _switched(**switches: Any) -> Callable[..., Any]:
    """A mistake's ``fn``: the mistaken Function with ``switches`` (:func:`flash_function`'s keywords)."""

    def wrong(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> Any:
        return _call(c, spec, Q, K, V, **switches)

    return wrong


def _tiled(switch: str, **switches: Any) -> Callable[..., Any]:
    """A mistake's ``fn`` with the parameters ``tile`` and ``variant``: the mistaken Function over key
    tiles of ``tile`` with its keyword ``switch`` set to ``variant`` (and the fixed ``switches``)."""

    def wrong(
        c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, tile: float = 16, variant: float = 1
    ) -> Any:
        return _call(c, spec, Q, K, V, tile=int(tile), **{switch: int(variant)}, **switches)

    return wrong


def _fit_tiles(variants: tuple[int, ...], switch: str, causal_only: bool = False) -> Any:
    """A fit of ``(tile, variant)``: the first pair whose forward output is the observed one."""

    def fit(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> dict[str, float] | None:
        Q, K, V = args[:3]
        is_causal = bool(c.option("is_causal")) if c.keywords else False
        if causal_only and not is_causal:
            return None
        for tile in TILES:
            for variant in variants:
                with torch.no_grad():
                    switches: dict[str, Any] = {switch: variant}
                    O = flash_function(is_causal=is_causal, tile=tile, **switches).apply(Q, K, V, is_causal)
                want = O.detach().numpy()
                if want.shape == got.shape and np.allclose(want, got, rtol=1e-3, atol=1e-4, equal_nan=True):
                    return {"tile": float(tile), "variant": float(variant)}
        return None

    return fit


add(
    "online_softmax_not_rescaled",
    "online softmax without rescaling the running sum or the output",
    flash_attention_2,
    "your online softmax does not rescale the running sum l and the output accumulator when the running max "
    "grows (key tiles of {tile}): after m_new = max(m, rowmax(S_j)), multiply both by exp(m − m_new) before "
    "adding the new tile's exp(S_j − m_new) terms; it is exact only while a row fits in one tile",
    fit=_fit_tiles((1, 2, 3), "rescale"),
    defaults=(("tile", 16.0), ("variant", 1.0)),
    backward=True,
)(_tiled("rescale"))


add(
    "logsumexp_is_running_max",
    "L saved as the running max only",
    flash_attention_2,
    "the L you save is the running max m alone: L = m + log(l), the logsumexp of the scaled scores, so that "
    "the backward's exp(S − L) are the softmax weights (with L = m they do not sum to 1; exact only for one key)",
    backward=True,
)(_switched(lse="max"))


add(
    "logsumexp_base_2",
    "L saved in base 2 instead of base e",
    flash_attention_2,
    "the L you save is in base 2 (log2 of the sum of 2^(S·log2 e), i.e. L / ln 2): your backward undoes it "
    "consistently, so the gradients are right, but L must be the natural-log logsumexp m + ln(l); multiply "
    "by ln 2 before saving",
    backward=True,
)(_switched(lse="base2"))


add(
    "backward_d_term_omitted",
    "D = rowsum(dO ⊙ O) left out of dS",
    flash_attention_2,
    "your backward computes dS = P ⊙ dP: the softmax's Jacobian needs dS = P ⊙ (dP − D) with "
    "D = rowsum(dO ⊙ O) per query (FlashAttention-2, Algorithm 2, line 4)",
    backward=True,
)(_switched(use_d=False))


add(
    "backward_dq_unscaled",
    "the scale 1/√d missing from dQ",
    flash_attention_2,
    "your dQ is √d times too large: S = Q Kᵀ / √d, so dQ = dS K / √d (the same scale as the forward)",
    backward=True,
)(_switched(scale_dq=False))


add(
    "backward_dk_unscaled",
    "the scale 1/√d missing from dK",
    flash_attention_2,
    "your dK is √d times too large: S = Q Kᵀ / √d, so dK = dSᵀ Q / √d (the same scale as the forward)",
    backward=True,
)(_switched(scale_dk=False))


add(
    "causal_tiles_off_by_one",
    "causal key tiles skipped off by one",
    flash_attention_2_causal,
    "your causal loop over key tiles is off by one tile (tiles of {tile}): a query tile must visit every key "
    "tile up to and including the one holding its own last position, with the mask j <= i applied inside it; "
    "stopping one tile early drops the diagonal tile, and one tile more without the mask leaks future keys",
    fit=_fit_tiles((1, 2), "skip", causal_only=True),
    defaults=(("tile", 16.0), ("variant", 1.0)),
    backward=True,
)(_tiled("skip"))


add(
    "backward_dv_unnormalised",
    "dV from unnormalised weights",
    flash_attention_2,
    "your dV uses the unnormalised weights exp(S − rowmax S): dV = Pᵀ dO with the softmax weights "
    "P = exp(S − L), recomputed from the saved logsumexp L",
    backward=True,
)(_switched(dv_normalised=False))


# ---------------------------------------------------------------------------------------------
# tile edges: n not a multiple of the tile size

EDGE_TILES = (8, 16, 32, 64, 128)
"""The tile sizes a tile-edge mistake is fitted over (CS336 asks for tiles of at least 16)."""

EDGE_CONFIRMATION = {"n_q": 17, "n_k": 17}
"""The further confirmation input of the tile-edge mistakes: one full tile of 16 and one more."""

EDGE_PROBES = tuple({"n_q": n, "n_k": n} for n in (25, 49, 97))
"""Probe inputs that tell the tile sizes apart: n = 1.5·tile + 1 gives each of 16, 32 and 64 a last
full tile the next smaller and larger tile sizes do not have."""


def _lengths(args: tuple[torch.Tensor, ...]) -> tuple[int, int]:
    return int(args[0].shape[-2]), int(args[1].shape[-2])


def _unwritten_rows(c: Contract, args: tuple[torch.Tensor, ...], params: dict[str, float]) -> np.ndarray | None:
    """The entries of ``O`` the loops never compute (True): the rows past the last full query tile
    (variants 1 and 3: ``n_q // tile`` query tiles), and every row when the key loop reaches no key
    at all (variants 1 and 2 with ``n_k < tile``: what such a row holds, ``0/0`` or zero, depends on
    the code, not on the inputs)."""
    variant, tile = int(params.get("variant", 1)), int(params.get("tile", 16))
    Q, K, V = args[:3]
    n_q, n_k = int(Q.shape[-2]), int(K.shape[-2])
    rows = torch.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,))
    free = np.zeros((*rows, int(V.shape[-1])), dtype=bool)
    if variant in (1, 2) and n_k < tile:
        free[...] = True
    if variant in (1, 3):
        free[..., (n_q // tile) * tile :, :] = True
    return free if free.any() else None


def _fit_dropped(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> list[dict[str, float]] | None:
    """Every ``(tile, variant)`` of :data:`EDGE_TILES` × (rows and keys, keys, rows) whose output
    agrees with ``got`` on the rows it writes (the concatenating form too): a failing call often
    cannot tell the tile sizes apart, the further inputs do."""
    Q, K, V = args[:3]
    is_causal = bool(c.option("is_causal")) if c.keywords else False
    n_q = int(Q.shape[-2])
    rows = int(got.shape[-2]) if got.ndim >= 2 else -1
    found = []
    for variant in (1, 2, 3):
        for tile in EDGE_TILES:
            params = {"tile": float(tile), "variant": float(variant)}
            short = (n_q // tile) * tile if variant in (1, 3) else n_q  # the rows the collecting form returns
            forms = [collect for collect in (False, True) if rows == (short if collect else n_q)]
            for collect in forms:
                try:
                    with torch.no_grad():
                        fn = flash_function(is_causal=is_causal, tile=tile, drop_last=variant, collect=collect)
                        want = fn.apply(Q, K, V, is_causal).detach().numpy()
                except RuntimeError:
                    continue
                if want.shape != got.shape:
                    continue
                free = None if collect else _unwritten_rows(c, args, params)
                if free is not None:
                    want = np.where(free, got, want)
                if np.allclose(want, got, rtol=1e-3, atol=1e-4, equal_nan=True):
                    found.append(params)
                    break
    return found or None


def _dropped_collected(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, tile: float = 16, variant: float = 1
) -> Any:
    """The same loops, each query tile's O and L concatenated: both come out short (n // tile rows)."""
    return _call(c, spec, Q, K, V, tile=int(tile), drop_last=int(variant), collect=True)


add(
    "last_partial_tile_dropped",
    "the last, partial tile never processed",
    flash_attention_2,
    "your loops run over n // tile tiles, so the last tile, shorter than the others when n_q or n_k is not a "
    "multiple of your tile size, is never processed: the query rows past the last full tile are never written "
    "(O and L keep whatever memory held, or come out short), and the keys past the last full key tile are "
    "never read; loop over ceil(n / tile) = (n + tile - 1) // tile tiles and let slicing make the last one "
    "shorter (the course's n = 128 is a multiple of every tile size, so its test cannot see this)",
    fit=_fit_dropped,
    defaults=(("tile", 16.0), ("variant", 1.0)),
    forms=(_dropped_collected,),
    unwritten=_unwritten_rows,
    confirm_sizes=(EDGE_CONFIRMATION,),
    probe_sizes=EDGE_PROBES,
)(_tiled("drop_last"))


def _tile_multiple(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, tile: float = 16, edge: float = 17
) -> Any:
    """Q, K and V cut into tiles with ``reshape(..., n // tile, tile, d)``: raises unless n_q and
    n_k are multiples of ``tile``, and is right when they are."""
    size = int(tile)
    for t in (Q, K, V):
        n = int(t.shape[-2])
        t.reshape(*t.shape[:-2], n // size, size, t.shape[-1])  # RuntimeError: shape '[...]' is invalid for input
    return _call(c, spec, Q, K, V, tile=size)


def _padded_unmasked(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, tile: float = 16, edge: float = 17
) -> Any:
    """Q, K and V padded with zero rows to a multiple of ``tile`` and the padding keys never masked:
    each scores 0 and takes weight, so every row is wrong unless n_k is a multiple of ``tile``."""
    size = int(tile)

    def padded(t: torch.Tensor) -> torch.Tensor:
        n = int(t.shape[-2])
        return torch.nn.functional.pad(t, (0, 0, 0, (-n) % size))

    O = _call(c, spec, padded(Q), padded(K), padded(V), tile=size)
    if isinstance(O, tuple):
        return O[0][..., : Q.shape[-2], :], O[1][..., : Q.shape[-2]]
    return O[..., : Q.shape[-2], :]


def _fit_multiple(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> list[dict[str, float]] | None:
    """Every tile size of :data:`EDGE_TILES` whose zero-padded, unmasked form gives ``got``."""
    found = []
    for tile in EDGE_TILES:
        with torch.no_grad():
            want = _padded_unmasked(c, None, args[0], args[1], args[2], tile=tile)
        want = np.asarray(want.detach().numpy())
        if want.shape == got.shape and np.allclose(want, got, rtol=1e-3, atol=1e-4, equal_nan=True):
            found.append({"tile": float(tile), "edge": float(tile + 1)})
    return found or None


def _raises_multiple(c: Contract, args: tuple[torch.Tensor, ...]) -> list[dict[str, float]]:
    """The tile sizes that n_q or n_k is not a multiple of, smallest first: under each the kernel raises."""
    n_q, n_k = _lengths(args)
    return [{"tile": float(t), "edge": float(t + 1)} for t in EDGE_TILES if n_q % t or n_k % t]


def _multiple_witnesses(params: dict[str, float]) -> list[dict[str, int]]:
    """n = tile (runs, and right) and n = tile + 1 (raises)."""
    tile = int(params["tile"])
    return [{"n_q": tile, "n_k": tile}, {"n_q": tile + 1, "n_k": tile + 1}]


@add(
    "tile_multiple_required",
    "works only when n is a multiple of the tile size",
    flash_attention_2,
    "your kernel works only when n_q and n_k are multiples of its tile size ({tile}): it cuts Q, K and V into "
    "tiles with a reshape or view (or pads them without masking the padding keys), so n = {edge} raises or "
    "gives wrong rows; loop over ceil(n / tile) tiles with slices, which make the last tile shorter (or mask the "
    "padding keys with -inf); the course's n = 128 is a multiple of every tile size, so its test cannot see this",
    fit=_fit_multiple,
    defaults=(("tile", 16.0), ("edge", 17.0)),
    forms=(_padded_unmasked,),
    raises=_raises_multiple,
    witnesses=_multiple_witnesses,
    confirm_sizes=(EDGE_CONFIRMATION,),
    probe_sizes=EDGE_PROBES,
)
def _tile_multiple_required(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, tile: float = 16, edge: float = 17
) -> Any:
    return _tile_multiple(c, spec, Q, K, V, tile, edge)
