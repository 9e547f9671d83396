"""The contract families: which kind of computation a contract is (:attr:`attnscore.maths.contract.Contract.family`).

A family decides which closed forms, properties and mistakes apply to a contract. Code asks a
contract for its family as a :class:`ContractFamily` member, never by comparing a name
(``tests/maths/test_contract_family.py`` fails on a contract's family compared with a string).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ContractFamily", "KEYWORD_FAMILIES"]


class ContractFamily(str, Enum):
    """The families of contracts; each member's value is the name the catalogue tables print (and
    what ``str()`` and f-strings give).

    >>> ContractFamily.SDPA.value, ContractFamily("flash")
    ('sdpa', <ContractFamily.FLASH: 'flash'>)
    """

    SCORES = "scores"
    """The score functions: dot products (raw or scaled), bilinear and additive scores."""
    MASK = "mask"
    """Masked scores (``masked_fill(S, ~mask, -inf)``)."""
    WEIGHTS = "weights"
    """Softmax weights over the keys, with a mask."""
    ATTENTION = "attention"
    """Attention with a mask argument."""
    CAUSAL = "causal"
    """Attention with a causal flag instead of a mask (top-left or bottom-right)."""
    SDPA = "sdpa"
    """PyTorch's ``scaled_dot_product_attention``, its keywords fixed by a spec."""
    KERNEL_ATTENTION = "kernel_attention"
    """A kernel's attention with FlashAttention's options (softcap, ALiBi, bottom-right causal)."""
    FLASH = "flash"
    """FlashAttention's ``flash_attn_func`` layout ``(batch, seqlen, heads, d)``."""
    FLASH_ATTENTION_2 = "flash_attention_2"
    """The FlashAttention-2 assignment's ``torch.autograd.Function`` and its logsumexp ``L``."""
    FLASH_VARLEN = "flash_varlen"
    """FlashAttention's packed batches (``flash_attn_varlen_func``)."""
    KEY_PADDING = "key_padding"
    """Attention over padded keys (valid key counts per batch item)."""
    ROPE = "rope"
    """Rotary position embeddings (RoPE) of queries or keys at explicit token positions."""
    MULTIHEAD = "multihead"
    """Multi-head attention with its projection weights (``W_q, W_k, W_v, W_o`` or a packed
    ``c_attn``), optionally causal, optionally with RoPE on queries and keys."""
    INSTRUCTOR = "instructor"
    """An instructor's own reference function (``function.reference`` in a spec): its contract is
    built from the spec, not bundled."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


KEYWORD_FAMILIES = (
    ContractFamily.SDPA,
    ContractFamily.KERNEL_ATTENTION,
    ContractFamily.FLASH,
    ContractFamily.KEY_PADDING,
)
"""The families whose options are keywords a spec fixes and that are variants of general attention:
their modules' ``attention_options`` give :func:`attnscore.maths.golden_gradients.keyword_attention_options`."""
