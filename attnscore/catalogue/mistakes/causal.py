"""Mistakes of causal attention (the flag form): the other corner, no mask at all."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import causal, key_padding
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import causal_keep, or_changed
from attnscore.maths import reference
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# causal attention (the flag form)


def _causal_with(c: Contract, args: tuple[torch.Tensor, ...], alignment: str | None) -> torch.Tensor:
    Q, K, V = args
    if alignment is None:
        return reference.attention(Q, K, V)
    return reference.causal_attention(Q, K, V, alignment)


def _other_alignment(c: Contract) -> str:
    return "bottom_right" if c.name.endswith("top_left") else "top_left"


def _other_alignment_nan(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """The other corner written with masked_fill(-inf) and softmax: a query with no key gets NaN."""
    keep = causal_keep(Q, K, _other_alignment(c))
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))
    return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-1) @ V


def _other_alignment_uniform(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """The other corner written with a large negative fill: a query with no key gets the mean of V."""
    keep = causal_keep(Q, K, _other_alignment(c))
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))
    return torch.softmax(S.masked_fill(~keep, torch.finfo(S.dtype).min), dim=-1) @ V


@add(
    "causal_wrong_alignment",
    "causal mask aligned at the other corner",
    causal,
    "your causal mask is aligned at the other corner: with n_q != n_k, top-left keeps key j for query i when "
    "j <= i (torch.ones(n_q, n_k).tril(), PyTorch's is_causal=True) and bottom-right when j <= i + (n_k - n_q) "
    "(.tril(n_k - n_q)); use the alignment the spec states",
    forms=(_other_alignment_nan, _other_alignment_uniform),
)
def _causal_wrong_alignment(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _causal_with(c, args, _other_alignment(c))


def _causal_flag_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _causal_with(c, args, None)


def causal_key_padding(c: Contract) -> bool:
    """Key padding with ``is_causal`` set (:mod:`attnscore.maths.families.key_padding`)."""
    return key_padding(c) and bool(c.option("is_causal"))


add(
    "causal_flag_ignored",
    "no causal mask at all",
    lambda c: causal(c) or causal_key_padding(c),
    "every query sees every key: the causal flag means query i must not attend to keys after its own "
    "position; mask them (-inf before softmax) with the causal mask",
)(or_changed(_causal_flag_ignored, AttentionChange(options=(("is_causal", False),))))
