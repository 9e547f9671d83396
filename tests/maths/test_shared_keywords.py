"""The keywords several families take are declared once (:mod:`attnscore.maths.options`): each
family's field has the shared kind, default and description."""

from __future__ import annotations

import dataclasses

import pytest

from attnscore.maths.families.flash import FlashOptions
from attnscore.maths.families.flash_attention_2 import FlashAttention2Options
from attnscore.maths.families.flash_varlen import VarlenOptions
from attnscore.maths.families.kernel_attention import KernelOptions
from attnscore.maths.families.key_padding import KeyPaddingOptions
from attnscore.maths.families.sdpa import SDPAOptions
from attnscore.maths.options import Keyword, Options, causal_keyword, keyword, scale_keyword, window_keyword


def _keyword(options: type[Options], name: str) -> Keyword:
    return {k.name: k for k in options.keywords()}[name]


def _without_name(k: Keyword) -> tuple[str, object, str]:
    return k.kind, k.default, k.description


@pytest.mark.parametrize(
    ("options", "name"),
    [
        pytest.param(SDPAOptions, "scale", id="sdpa scale"),
        pytest.param(KernelOptions, "scale", id="kernel scale"),
        pytest.param(KeyPaddingOptions, "scale", id="key padding scale"),
        pytest.param(FlashOptions, "softmax_scale", id="flash softmax_scale"),
    ],
)
def test_every_scale_keyword_is_the_shared_one(options: type[Options], name: str) -> None:
    """SDPA's, the kernel's and key padding's ``scale`` and FlashAttention's ``softmax_scale`` are one keyword."""
    assert _without_name(_keyword(options, name)) == (
        "positive_or_null",
        None,
        "the factor of Q Kᵀ; null means 1/√d_k",
    )


@pytest.mark.parametrize(
    ("options", "name", "description"),
    [
        pytest.param(
            SDPAOptions,
            "is_causal",
            "keep key j for query i only when j <= i (top-left, torch.ones(n_q, n_k).tril())",
            id="sdpa top-left",
        ),
        pytest.param(
            FlashAttention2Options,
            "is_causal",
            "keep key j for query i only when j <= i (top-left, CS336's and PyTorch's is_causal)",
            id="flash attention 2 top-left",
        ),
        pytest.param(
            KernelOptions,
            "is_causal",
            "keep key j for query i only when j <= i + n_k - n_q (bottom-right, FlashAttention's causal)",
            id="kernel bottom-right",
        ),
        pytest.param(
            VarlenOptions,
            "causal",
            "per sequence, keep key j for query i only when j <= i + n_k - n_q of that sequence (bottom-right)",
            id="varlen per sequence",
        ),
    ],
)
def test_causal_keyword_states_its_alignment_rule(options: type[Options], name: str, description: str) -> None:
    """Each family's causal flag is a bool, default false, its rule the alignment's."""
    assert _without_name(_keyword(options, name)) == ("bool", False, description)


def test_window_keyword_per_sequence_says_so() -> None:
    """FlashAttention's window and the packed batches' differ only in "per sequence"."""
    flash, packed = _keyword(FlashOptions, "window_size"), _keyword(VarlenOptions, "window_size")
    assert (flash.kind, flash.default, packed.kind, packed.default) == ("window", (-1, -1), "window", (-1, -1))
    assert packed.description == flash.description.replace("(left, right):", "(left, right) per sequence:")
    assert packed.description != flash.description


def test_shared_keyword_fields_are_keyword_fields() -> None:
    """A shared declaration is the same dataclass field as :func:`keyword` makes."""
    made, shared = keyword("positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"), scale_keyword()
    assert (shared.default, dict(shared.metadata)) == (made.default, dict(made.metadata))
    assert isinstance(window_keyword(), dataclasses.Field)


def test_causal_keyword_refuses_an_unknown_alignment() -> None:
    """An alignment other than top-left and bottom-right is a KeyError naming it."""
    with pytest.raises(KeyError, match="middle"):
        causal_keyword("middle", "nowhere")
