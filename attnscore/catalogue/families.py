"""Which contracts a catalogue entry applies to, as predicates on the contract's features.

Properties (``Property.applies``) and mistakes (``Mistake.applies``) select the contracts they
apply to the same way: by what a contract *is* (a Q Kᵀ view, scaled by 1/√d_k, a mask, weights,
attention, causal; one query or many), never by a list of contract names, so a contract added
later is covered by every entry whose features it has. Each predicate takes a
:class:`attnscore.maths.contract.Contract` and returns a bool.
"""

from __future__ import annotations

from collections.abc import Callable

from attnscore.maths.contract import Contract
from attnscore.maths.family import KEYWORD_FAMILIES, ContractFamily

__all__ = [
    "Applies",
    "every",
    "dot_product",
    "raw_dot_product",
    "scaled_dot_product",
    "score_function",
    "bilinear",
    "additive",
    "masked",
    "weights",
    "rows_can_be_fully_masked",
    "gives_weights",
    "softmax_over_keys",
    "weighs_values",
    "attention",
    "causal",
    "scaled",
    "many_queries",
    "many_keys",
    "batch_items",
    "open_leading_dims",
    "sdpa",
    "sdpa_scale_given",
    "sdpa_bool_mask",
    "sdpa_float_mask",
    "sdpa_grouped_heads",
    "sdpa_causal",
    "differentiable",
    "flash_attention_2",
    "flash_attention_2_causal",
    "masked_scores",
    "attention_with_mask",
    "kernel",
    "flash",
    "varlen",
    "key_padding",
    "rotary",
    "general_attention_variant",
    "own_reference",
    "leading_symbol",
    "multihead",
    "multihead_causal",
    "multihead_separate_weights",
    "multihead_rotary",
    "per_head_scaled",
]

Applies = Callable[[Contract], bool]


def _has(c: Contract, parameter: str) -> bool:
    return parameter in c.parameter_names


def every(c: Contract) -> bool:
    """Every contract."""
    return True


def dot_product(c: Contract) -> bool:
    """A view of ``Q Kᵀ`` (one score, a vector of scores, the matrix; raw or scaled)."""
    return c.is_qk_view


def raw_dot_product(c: Contract) -> bool:
    """A view of the raw ``Q Kᵀ``, not scaled."""
    return c.qk is not None and not c.qk.scaled


def scaled_dot_product(c: Contract) -> bool:
    """A view of ``Q Kᵀ / √d_k``."""
    return c.qk is not None and c.qk.scaled


def score_function(c: Contract) -> bool:
    """A score function: dot-product, bilinear or additive scores (no mask, no softmax)."""
    return c.family is ContractFamily.SCORES


def bilinear(c: Contract) -> bool:
    """Bilinear scores ``Q W Kᵀ``."""
    return score_function(c) and _has(c, "W")


def additive(c: Contract) -> bool:
    """Additive (Bahdanau) scores ``tanh(Q W_q + K W_k) v``."""
    return score_function(c) and _has(c, "v")


def masked(c: Contract) -> bool:
    """A contract with a mask argument: masked scores, their weights, attention with a mask."""
    return c.family in (ContractFamily.MASK, ContractFamily.WEIGHTS, ContractFamily.ATTENTION)


def weights(c: Contract) -> bool:
    """The weights contract: softmax of (masked) scores."""
    return c.family is ContractFamily.WEIGHTS


def rows_can_be_fully_masked(c: Contract) -> bool:
    """A contract where a query can keep no key: a mask argument, or causal attention aligned
    bottom-right (with more queries than keys, the first queries keep none)."""
    return masked(c) or (causal(c) and c.name.endswith("bottom_right"))


def gives_weights(c: Contract) -> bool:
    """A contract that applies softmax: the weights, or attention (mask or causal flag)."""
    return c.family in (ContractFamily.WEIGHTS, ContractFamily.ATTENTION, ContractFamily.CAUSAL)


def softmax_over_keys(c: Contract) -> bool:
    """A contract whose output is softmax weights over keys or made from them (the weights,
    attention and every variant: SDPA, kernels, FlashAttention's layouts, key padding, packed
    batches): it can say which keys each output row keeps (:attr:`Contract.key_view_fn`)."""
    return c.key_view_fn is not None


def weighs_values(c: Contract) -> bool:
    """A contract whose output weighs value vectors by softmax weights over key vectors (attention
    and every variant), not the weights themselves."""
    return softmax_over_keys(c) and not weights(c)


def attention(c: Contract) -> bool:
    """``softmax(Q Kᵀ / √d_k) V``, with a mask argument or a causal flag."""
    return c.family in (ContractFamily.ATTENTION, ContractFamily.CAUSAL)


def causal(c: Contract) -> bool:
    """Attention with a causal flag instead of a mask argument."""
    return c.family is ContractFamily.CAUSAL


def scaled(c: Contract) -> bool:
    """A contract whose scores are scaled by ``1/√d_k``: scaled ``Q Kᵀ`` and attention."""
    return scaled_dot_product(c) or attention(c)


def many_queries(c: Contract) -> bool:
    """A contract that takes a matrix of queries (not one query vector)."""
    return not c.single_query


def many_keys(c: Contract) -> bool:
    """A contract that takes several keys (not one key vector)."""
    return not c.single_key


def batch_items(c: Contract) -> bool:
    """Inputs can have leading (batch, head) dims: the contract's legend has ``...`` and the spec did
    not state an exact rank without any (``[n_q, d_k]``)."""
    return c.batched and c.leading != ()


def open_leading_dims(c: Contract) -> bool:
    """Any number of leading dims, that broadcast against each other (the open ``...``): not a spec
    that names them (``[batch, n_q, d_k]``: one size per named dim, so nothing to broadcast)."""
    return c.batched and c.leading is None


def sdpa(c: Contract) -> bool:
    """A drop-in for ``torch.nn.functional.scaled_dot_product_attention`` (keywords fixed by the spec)."""
    return c.family is ContractFamily.SDPA


def sdpa_scale_given(c: Contract) -> bool:
    """SDPA with an explicit ``scale`` keyword (not the default ``1/√d_k``)."""
    return sdpa(c) and c.option("scale") is not None


def sdpa_bool_mask(c: Contract) -> bool:
    """SDPA with a bool ``attn_mask`` (True = takes part)."""
    return sdpa(c) and "attn_mask" in c.bool_parameters


def sdpa_float_mask(c: Contract) -> bool:
    """SDPA with a float ``attn_mask`` added to the scaled scores (``-inf`` masks)."""
    return sdpa(c) and "attn_mask" in c.additive_parameters


def sdpa_grouped_heads(c: Contract) -> bool:
    """SDPA with ``enable_gqa``: K and V may have fewer heads than Q."""
    return sdpa(c) and bool(c.option("enable_gqa"))


def sdpa_causal(c: Contract) -> bool:
    """SDPA with ``is_causal`` (top-left)."""
    return sdpa(c) and bool(c.option("is_causal"))


def differentiable(c: Contract) -> bool:
    """A contract whose output is differentiable in its float inputs and has a closed-form gradient
    (:mod:`attnscore.maths.golden_gradients`): every score function, masking, weights, attention, the
    keyword contracts (SDPA, the kernel variants, FlashAttention's layout) and FlashAttention-2 Functions."""
    return c.family in tuple(ContractFamily) and any(n not in c.bool_parameters for n in c.parameter_names)


def flash_attention_2(c: Contract) -> bool:
    """A FlashAttention-2 ``torch.autograd.Function`` assignment (:mod:`attnscore.maths.families.flash_attention_2`)."""
    return c.family is ContractFamily.FLASH_ATTENTION_2


def flash_attention_2_causal(c: Contract) -> bool:
    """A FlashAttention-2 assignment with ``is_causal`` set (top-left)."""
    return flash_attention_2(c) and bool(c.option("is_causal"))


def masked_scores(c: Contract) -> bool:
    """The masked scores themselves (``masked_fill(S, ~mask, -inf)``), no softmax."""
    return c.family is ContractFamily.MASK


def attention_with_mask(c: Contract) -> bool:
    """Attention with a mask argument (not a causal flag, not a keyword contract)."""
    return c.family is ContractFamily.ATTENTION


def kernel(c: Contract) -> bool:
    """An attention kernel with FlashAttention's options in SDPA's layout (``kernel_attention``)."""
    return c.family is ContractFamily.KERNEL_ATTENTION


def flash(c: Contract) -> bool:
    """FlashAttention's ``flash_attn_func`` (keywords fixed by the spec)."""
    return c.family is ContractFamily.FLASH


def varlen(c: Contract) -> bool:
    """FlashAttention's ``flash_attn_varlen_func`` (keywords fixed by the spec)."""
    return c.family is ContractFamily.FLASH_VARLEN


def key_padding(c: Contract) -> bool:
    """Attention with valid key lengths per batch item (``key_lengths``)."""
    return c.family is ContractFamily.KEY_PADDING


def rotary(c: Contract) -> bool:
    """Rotary position embeddings (RoPE) of a vector at explicit token positions (``rope``): the
    pairing convention the spec states is the contract's ``pairing`` option."""
    return c.family is ContractFamily.ROPE


def general_attention_variant(c: Contract) -> bool:
    """A variant of general attention with keywords (SDPA, the kernel variants, FlashAttention's
    layout, key padding: :data:`attnscore.maths.family.KEYWORD_FAMILIES`), whose gradients follow from
    its options (:func:`attnscore.maths.golden_gradients.keyword_attention_options`) and the keys it
    leaves out from its family's ``unused_keys``."""
    return c.family in KEYWORD_FAMILIES


def multihead(c: Contract) -> bool:
    """Multi-head attention with its four projections (:mod:`attnscore.maths.families.multihead`):
    the self-attention, cross-attention, packed ``c_attn`` and RoPE forms."""
    return c.family is ContractFamily.MULTIHEAD


def multihead_causal(c: Contract) -> bool:
    """Multi-head attention whose spec fixes ``causal: true`` (query i keeps keys j <= i)."""
    return multihead(c) and bool(c.option("causal"))


def multihead_separate_weights(c: Contract) -> bool:
    """Multi-head attention given ``W_q``, ``W_k``, ``W_v`` as three ``(d_model, d_model)`` matrices
    (not one packed ``c_attn``)."""
    return multihead(c) and _has(c, "W_q")


def multihead_rotary(c: Contract) -> bool:
    """Multi-head attention with RoPE on each head's queries and keys (``theta``, ``token_positions``)."""
    return multihead(c) and _has(c, "theta")


def per_head_scaled(c: Contract) -> bool:
    """A contract whose scores are divided by a per-head width: scaled ``Q Kᵀ`` and attention
    (``√d_k``), multi-head attention (``√d_head``, not ``√d_model``)."""
    return scaled(c) or multihead(c)


def own_reference(c: Contract) -> bool:
    """An instructor's own reference function (``function.reference`` in a spec,
    :mod:`attnscore.maths.families.instructor`): only the generic properties apply, and its own."""
    return c.family is ContractFamily.INSTRUCTOR


def leading_symbol(c: Contract) -> str | None:
    """The dim that indexes independent items of an instructor's function or of RoPE (:func:`rotary`),
    or None: ``"..."`` when the result's shape starts with it, else the result's first symbol when some
    parameter's shape starts with it too (``[batch, seq, d_model]``) and the spec does not fix its size to 1."""
    if not (own_reference(c) or rotary(c)) or not c.returns:
        return None
    first = c.returns[0]
    if first != "..." and dict(c.fixed_sizes).get(first, 2) < 2:
        return None
    if any(legend[:1] == (first,) for _, legend in c.parameters):
        return first
    return None
