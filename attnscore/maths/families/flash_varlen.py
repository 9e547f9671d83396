"""FlashAttention's packed variable-length batches (:attr:`ContractFamily.FLASH_VARLEN`), its
keywords fixed per spec (:class:`VarlenOptions`, ``flash_attn_func``'s applied per sequence).

``flash_attn_varlen`` is ``flash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1))``
as FlashAttention 2.1+ defines it, configured per spec by its keywords:

- ``q`` ``(total_q, h_q, d_k)``, ``k`` ``(total_k, h_kv, d_k)``, ``v`` ``(total_k, h_kv, d_v)``: the
  ``b`` sequences of a batch packed along axis 0; the result is ``(total_q, h_q, d_v)``; query head
  ``h`` uses key/value head ``h // (h_q / h_kv)``;
- ``cu_seqlens_q``, ``cu_seqlens_k``: int32 ``(b + 1,)``, ``0 = c_0 <= c_1 <= ... <= c_b = total``:
  sequence ``s`` owns query rows ``cu_seqlens_q[s] .. cu_seqlens_q[s+1] - 1`` and key rows
  ``cu_seqlens_k[s] .. cu_seqlens_k[s+1] - 1``, and attends only inside itself;
- ``max_seqlen_q``, ``max_seqlen_k``: Python ints, the longest sequence (``max(diff(cu_seqlens))``);
  in this package's specs they are integer parameters of shape ``()``, derived from the offsets;
- ``causal`` and ``window_size`` are aligned **bottom-right per sequence**: query ``i`` of sequence
  ``s`` sits at key position ``i + n_k_s - n_q_s`` of that sequence (FlashAttention 2.1+);
- ``softmax_scale`` defaults to ``1/√d_k``; ``dropout_p`` is 0; a query without keys gets zeros.

Reference :func:`attnscore.maths.variants.varlen_attention`, golden twin
:func:`attnscore.maths.golden_variants.varlen_attention`; the error bound is attention's
(:mod:`attnscore.maths.error_scales`) with the sequence blocks and windows folded into a bool mask;
the gradients are ``flash_attn``'s per sequence (:mod:`attnscore.maths.families.flash`).

Source: FlashAttention README and ``flash_attn_interface.flash_attn_varlen_func``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths import golden_variants, variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import as_float64
from attnscore.maths.families import flash
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, options_of
from attnscore.maths.families.flash import (
    FlashOptions,
    flash_keep,
    flash_window,
    general_options,
    rescaled_and_grouped,
    through_attention,
)
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import f64
from attnscore.maths.key_view import packed_rows
from attnscore.maths.options import causal_keyword, window_keyword
from attnscore.maths.reference import ScoreInputError

MEMBER = ContractFamily.FLASH_VARLEN
SHARED_MASKS = False


@dataclass(frozen=True)
class VarlenOptions(FlashOptions):
    """``flash_attn_varlen_func``'s keywords: ``flash_attn_func``'s, applied in each sequence."""

    causal: bool = causal_keyword("bottom_right", "bottom-right", per_sequence=True)
    window_size: tuple[int, int] = window_keyword(per_sequence=True)


_VARLEN_NAMES = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")


varlen_window = flash_window
"""The ``(left, right)`` window a ``flash_attn_varlen`` contract keeps in each sequence, with
``causal`` folded in (right side 0); ``(-1, -1)`` is full attention inside each sequence."""


def sequence_slices(cu_seqlens: Any) -> list[slice]:
    """The rows of each sequence: ``[0, 2, 5]`` -> ``[slice(0, 2), slice(2, 5)]``."""
    c = [int(x) for x in np.asarray(cu_seqlens).reshape(-1)]
    return [slice(a, b) for a, b in zip(c[:-1], c[1:], strict=True)]


def packed_keep(window: tuple[int, int], cu_seqlens_q: Any, cu_seqlens_k: Any) -> np.ndarray:
    """``(total_q, total_k)`` bool: True where packed query row ``i`` keeps packed key row ``j``: the
    same sequence, inside that sequence's ``window`` aligned bottom-right (:func:`flash_keep`)."""
    rows, cols = sequence_slices(cu_seqlens_q), sequence_slices(cu_seqlens_k)
    total_q = rows[-1].stop if rows else 0
    total_k = cols[-1].stop if cols else 0
    keep = np.zeros((total_q, total_k), dtype=bool)
    for r, c in zip(rows, cols, strict=True):
        keep[r, c] = flash_keep(window, r.stop - r.start, c.stop - c.start)
    return keep


def offsets_problem(cu: np.ndarray, total: int, what: str) -> str | None:
    """What is wrong with offsets ``cu`` over ``total`` rows (``what``: ``"total_q, q's first dim"``), or None."""
    c = [int(x) for x in np.asarray(cu).reshape(-1)]
    if np.ndim(cu) != 1 or len(c) < 2:
        return f"expected offsets of shape (b + 1,) with at least 2 entries, found shape {tuple(np.shape(cu))}"
    if c[0] != 0:
        return f"expected offsets starting at 0, found {c}"
    for s in range(len(c) - 1):
        if c[s + 1] < c[s]:
            return f"expected non-decreasing offsets, found {c} ({c[s]} then {c[s + 1]} at entry {s + 1})"
    if c[-1] != total:
        return f"expected offsets ending at {what} {total}, found {c} (ending at {c[-1]})"
    return None


def _varlen_check(a: Args) -> list[tuple[str, str]]:
    """The integer parameters of a worked example against its ``q`` and ``k``."""
    problems = []
    for suffix, tensor in (("q", "q"), ("k", "k")):
        name = f"cu_seqlens_{suffix}"
        total = int(np.shape(a[tensor])[0]) if np.ndim(a[tensor]) else 0
        problem = offsets_problem(a[name], total, f"total_{suffix} ({tensor}'s first dim)")
        if problem:
            problems.append((name, problem))
            continue
        longest = int(np.max(np.diff(np.asarray(a[name]).astype(np.int64)), initial=0))
        given = int(np.asarray(a[f"max_seqlen_{suffix}"]))
        if given != longest:
            problems.append(
                (
                    f"max_seqlen_{suffix}",
                    f"expected the longest sequence of cu_seqlens_{suffix}, {longest}, found {given}",
                )
            )
    if not problems and np.size(a["cu_seqlens_q"]) != np.size(a["cu_seqlens_k"]):
        problems.append(
            (
                "cu_seqlens_k",
                f"expected {np.size(a['cu_seqlens_q'])} offsets (b + 1) as cu_seqlens_q has, "
                f"found {np.size(a['cu_seqlens_k'])}",
            )
        )
    return problems


def _varlen_integers(pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``b`` in 1..3 sequences of 1..4 queries and 0..5 keys each (drawn independently, so a
    sequence may have more queries than keys, or no key at all: its queries keep none and get the
    zero vector, a fully masked corner); at least one sequence has a key (``total_k >= 1``);
    ``total_q``, ``total_k`` and ``b+1`` follow."""
    b = pick(1, 3)
    lens_q = [pick(1, 4) for _ in range(b)]
    lens_k = [pick(0, 5) for _ in range(b)]
    if not any(lens_k):
        lens_k[-1] = pick(1, 5)
    cu_q, cu_k = np.cumsum([0, *lens_q]), np.cumsum([0, *lens_k])
    sizes = {**sizes, "total_q": int(cu_q[-1]), "total_k": int(cu_k[-1]), "b+1": b + 1}
    ints = {
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "max_seqlen_q": np.asarray(max(lens_q)),
        "max_seqlen_k": np.asarray(max(lens_k)),
    }
    return sizes, ints


def _max_seqlen(x: Any, name: str, cu: Any) -> int:
    """``max_seqlen_*`` as an int (a Python int, or a 0-d integer tensor); at least the longest sequence."""
    if is_tensor(x):
        if x.ndim != 0 or x.dtype.is_floating_point or x.dtype == torch.bool:
            raise ScoreInputError(name, f"expected an int, found a tensor of shape {tuple(x.shape)}, dtype {x.dtype}")
        x = int(x.item())
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        raise ScoreInputError(name, f"expected an int, found {type(x).__name__}")
    c = np.asarray(cu.cpu() if is_tensor(cu) else cu).astype(np.int64).reshape(-1)
    longest = int(np.max(np.diff(c), initial=0))
    if int(x) < longest:
        raise ScoreInputError(name, f"expected at least the longest sequence, {longest}, found {int(x)}")
    return int(x)


def _configure(base: Contract, options: VarlenOptions, kept: tuple[str, ...]) -> Contract:
    """The ``flash_attn_varlen`` contract for fixed keywords (``causal``, ``window_size``, ``softmax_scale``)."""
    configured = dataclasses.replace(base, options=options)
    causal, window, scale = bool(options.causal), options.window_size, options.softmax_scale
    keep_window = varlen_window(configured)

    def ref(
        q: Any,
        k: Any,
        v: Any,
        cu_seqlens_q: Any,
        cu_seqlens_k: Any,
        max_seqlen_q: Any,
        max_seqlen_k: Any,
        dropout_p: float = 0.0,
        softmax_scale: float | None = scale,
        causal: bool = causal,
        window_size: tuple[int, int] = window,
    ) -> torch.Tensor:
        # flash_attn_varlen_func's signature; every mask aligned bottom-right inside each sequence
        _max_seqlen(max_seqlen_q, "max_seqlen_q", cu_seqlens_q)
        _max_seqlen(max_seqlen_k, "max_seqlen_k", cu_seqlens_k)
        return variants.varlen_attention(
            q,
            k,
            v,
            cu_seqlens_q,
            cu_seqlens_k,
            is_causal=causal,
            alignment="bottom_right",
            window=(int(window_size[0]), int(window_size[1])),
            scale=softmax_scale,
        )

    def gold(a: Args) -> np.ndarray:
        return golden_variants.varlen_attention(
            as_float64(a, "q"),
            as_float64(a, "k"),
            as_float64(a, "v"),
            a["cu_seqlens_q"],
            a["cu_seqlens_k"],
            general_options(options),
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        """Plain ``attention`` arguments with the same kept scores, weights and output: heads first
        over the packed rows, Q rescaled so that ``Q' Kᵀ/√d_k = scale·Q Kᵀ``, K and V grouped, the
        sequence blocks and their windows folded into one bool mask."""
        Q, K, V = (np.swapaxes(as_float64(a, n), 0, 1) for n in ("q", "k", "v"))  # (h, total, d)
        Q, K, V = rescaled_and_grouped(Q, K, V, scale, 0)
        keep = packed_keep(keep_window, a["cu_seqlens_q"], a["cu_seqlens_k"])  # (total_q, total_k)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, (Q.shape[0], *keep.shape))}

    # (h_q, total_q, d_v) -> (total_q, h_q, d_v)
    return through_attention(configured, ref, gold, as_attention, (0, 1), packed_rows)


def flash_attn_varlen_contract() -> Contract:
    """FlashAttention's ``flash_attn_varlen_func`` with ``dropout_p = 0`` (see the module docstring
    for the layout and the per-sequence bottom-right alignment); its keywords (``causal``,
    ``window_size``, ``softmax_scale``) fixed by the spec. ``cu_seqlens_q``, ``cu_seqlens_k`` are
    int32 tensors, ``max_seqlen_q``, ``max_seqlen_k`` Python ints.

    Example:
        >>> c = flash_attn_varlen_contract().configured({"causal": True})
        >>> q = torch.zeros(3, 1, 1); v = torch.tensor([1.0, 2.0, 4.0]).reshape(3, 1, 1)
        >>> cu = torch.tensor([0, 2, 3], dtype=torch.int32)
        >>> c.reference(q, q, v, cu, cu, 2, 2).flatten().tolist()  # sequences [0, 1] and [2]
        [1.0, 1.5, 4.0]
    """
    unconfigured = Contract(
        name="flash_attn_varlen",
        family=MEMBER,
        parameters=(
            ("q", ("total_q", "h_q", "d_k")),
            ("k", ("total_k", "h_kv", "d_k")),
            ("v", ("total_k", "h_kv", "d_v")),
            ("cu_seqlens_q", ("b+1",)),
            ("cu_seqlens_k", ("b+1",)),
            ("max_seqlen_q", ()),
            ("max_seqlen_k", ()),
        ),
        returns=("total_q", "h_q", "d_v"),
        reference=variants.varlen_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=VarlenOptions(),
        configure=_configure,
        samples=(((("causal", True),), _VARLEN_NAMES),),
        bound_text="u·(error of scores and weights propagated through V), per sequence",
        int_parameters=frozenset({"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"}),
        integer_fn=_varlen_integers,
        integer_check=_varlen_check,
    )
    return _configure(unconfigured, VarlenOptions(), unconfigured.parameter_names)


CONTRACTS = (flash_attn_varlen_contract(),)


def _sequences(contract: Contract, args: Mapping[str, np.ndarray]) -> tuple[Contract, list[tuple[slice, slice]]]:
    """The ``flash_attn`` contract with a packed call's keywords, and each sequence's
    ``(query rows, key rows)`` of the packed ``(total, h, d)`` arrays (sequences without queries or
    keys left out)."""
    names = ("causal", "window_size", "softmax_scale")
    one = flash.CONTRACTS[0].configured({n: contract.option(n) for n in names}, ("q", "k", "v"))
    cu_q = [int(x) for x in np.asarray(args["cu_seqlens_q"]).reshape(-1)]
    cu_k = [int(x) for x in np.asarray(args["cu_seqlens_k"]).reshape(-1)]
    spans = [(slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])) for b in range(len(cu_q) - 1)]
    return one, [(rows, keys) for rows, keys in spans if rows.stop > rows.start and keys.stop > keys.start]


def _one_sequence(args: Mapping[str, np.ndarray], d_out: Any, rows: slice, keys: slice) -> tuple[Args, Any]:
    """Sequence ``rows``/``keys`` of a packed call as a ``flash_attn`` call of batch 1 ``(1, n, h, d)``."""
    one = {"q": f64(args["q"])[rows][None], "k": f64(args["k"])[keys][None], "v": f64(args["v"])[keys][None]}
    return one, f64(d_out)[rows][None]


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """The float64 gradients of a packed call with respect to ``q``, ``k``, ``v`` (each
    ``(total, h, d)``): sequence ``b`` (rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` of ``q``,
    ``cu_seqlens_k[b]:cu_seqlens_k[b+1]`` of ``k``/``v``) is ``flash_attn`` on its own (causal and
    window bottom-right per sequence); rows of no sequence, and a sequence without queries or keys,
    get zeros. The offsets and lengths get none.

    Source: FlashAttention's ``flash_attn_varlen_func`` (each sequence attends only inside itself).
    """
    one, spans = _sequences(contract, args)
    grads = {n: np.zeros(np.shape(args[n]), dtype=np.float64) for n in ("q", "k", "v")}
    for rows, keys in spans:
        a, d_one = _one_sequence(args, d_out, rows, keys)
        g = flash.gradients(one, a, d_one)
        grads["q"][rows] += g["q"][0]
        grads["k"][keys] += g["k"][0]
        grads["v"][keys] += g["v"][0]
    return grads


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """Each sequence's ``flash_attn`` gradient scales in its rows, ``n`` the longest over the sequences."""
    one, spans = _sequences(contract, args)
    scales = {n: np.zeros(np.shape(args[n]), dtype=np.float64) for n in ("q", "k", "v")}
    longest = 1
    for rows, keys in spans:
        a, d_one = _one_sequence(args, d_out, rows, keys)
        n, m = flash.gradient_scales(one, a, d_one)
        longest = max(longest, n)
        scales["q"][rows] += m["q"][0]
        scales["k"][keys] += m["k"][0]
        scales["v"][keys] += m["v"][0]
    return longest, scales


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: a packed call is graded sequence by sequence as ``flash_attn`` calls."""
    return None


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The packed call on ``args`` (``q, k, v, cu_seqlens_q, cu_seqlens_k, ...`` tensors) by general
    attention with ``change`` in each sequence (:func:`attnscore.maths.variants.varlen_attention`):
    ``causal`` and ``window_size`` aligned bottom-right per sequence, ``softmax_scale``;
    ``(total_q, h_q, d_v)``."""
    q, k, v, cu_q, cu_k = args[:5]
    options = general_options(options_of(contract, VarlenOptions))
    return variants.varlen_attention(q, k, v, cu_q, cu_k, options, change=change)


# per-sequence causal and windows in the packed layout are not asked about here
unused_keys = no_unused_keys
