"""Which contracts a catalogue entry applies to, as predicates on the contract's features.

Properties (``Property.applies``) and mistakes (``Mistake.applies``) select the contracts they
apply to the same way: by what a contract *is* (a Q Kᵀ view, scaled by 1/√d_k, a mask, weights,
attention, causal; one query or many), never by a list of contract names, so a contract added
later is covered by every entry whose features it has. Each predicate takes a
:class:`attnscore.maths.contract.Contract` and returns a bool.
"""

from __future__ import annotations

from collections.abc import Callable

from attnscore.maths.bounds import Bound
from attnscore.maths.contract import Contract
from attnscore.maths.families.base import not_general_attention
from attnscore.maths.families.registry import family_of
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
    "keys_masked_by_own_rule",
    "queries_can_outnumber_keys",
    "bottom_right_band",
    "through_general_attention",
    "kv_heads_grouped",
    "kv_heads_own",
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
    """A contract where a query can keep no key: a mask argument (bool, or SDPA's float ``attn_mask``
    with a row of ``-inf``), valid key lengths (a batch item with none), or keys kept by their
    position relative to a query aligned bottom-right (:func:`bottom_right_band`) where queries can
    outnumber keys (the first queries keep none)."""
    return (
        masked(c)
        or (sdpa(c) and "attn_mask" in c.parameter_names)
        or key_padding(c)
        or (bottom_right_band(c) and queries_can_outnumber_keys(c))
    )


def keys_masked_by_own_rule(c: Contract) -> bool:
    """A contract where a query can keep no key by a rule the implementation applies itself (a bool
    mask, causal or a window, valid lengths): :func:`rows_can_be_fully_masked` but SDPA's float
    ``attn_mask``, whose ``-inf`` entries come with the call and are added as they are."""
    return rows_can_be_fully_masked(c) and not sdpa_float_mask(c)


def queries_can_outnumber_keys(c: Contract) -> bool:
    """No shape bound of the contract keeps ``n_q <= n_k`` (``where: ["n_q <= n_k"]``, a KV cache)."""
    keeping = {Bound("n_q", "<=", "n_k"), Bound("n_q", "<", "n_k"), Bound("n_k", ">=", "n_q"), Bound("n_k", ">", "n_q")}
    return not keeping & set(c.bounds)


def bottom_right_band(c: Contract) -> bool:
    """Keys kept by their position relative to a query aligned bottom-right (query ``i`` at key
    ``i + n_k - n_q``): causal attention aligned bottom-right (the flag form, a kernel's
    ``is_causal``, FlashAttention's ``causal``) or a sliding window (``window_size``, per sequence
    in a packed batch)."""
    if causal(c):
        return c.name.endswith("bottom_right")
    if kernel(c):
        return bool(c.option("is_causal"))
    if flash(c) or varlen(c):
        return bool(c.option("causal")) or tuple(c.option("window_size")) != (-1, -1)
    return False


def through_general_attention(c: Contract) -> bool:
    """A variant of general attention in its own layout and keywords (SDPA, the kernel variants,
    FlashAttention's layout, packed batches, key padding): its family maps a call onto general
    attention (the family module's ``attention_changed``), so every mistake built as a change of
    general attention (:class:`attnscore.maths.attention_changes.AttentionChange`) applies to it,
    and to a family added later that maps its calls so too."""
    return family_of(c).attention_changed is not not_general_attention


def kv_heads_own(c: Contract) -> bool:
    """The key and value have heads of their own symbol, ``h_kv`` (not tied to ``h_q``)."""
    return any("h_kv" in legend for _, legend in c.parameters)


def kv_heads_grouped(c: Contract) -> bool:
    """Grouped-query heads: a variant of general attention (:func:`through_general_attention`) whose
    ``h_q`` query heads share ``h_kv`` key/value heads (query head ``h`` uses KV head
    ``h // (h_q / h_kv)``): SDPA with ``enable_gqa``, a kernel, FlashAttention's layouts and key
    padding with their own ``h_kv``."""
    if sdpa(c) and not sdpa_grouped_heads(c):
        return False
    return through_general_attention(c) and kv_heads_own(c)


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
    if first == "..." and c.leading == ():  # a spec that states no leading dims: no items to split
        return None
    if first != "..." and dict(c.fixed_sizes).get(first, 2) < 2:
        return None
    if any(legend[:1] == (first,) for _, legend in c.parameters):
        return first
    return None
