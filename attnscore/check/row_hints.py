"""Hints about the rows of a wrong output, read off which keys each row keeps.

A failing call whose wrong entries sit in particular rows often says what went wrong even when no
catalogue mistake can be named: non-finite entries in a query with no kept key (softmax over all
``-inf`` is 0/0), in a query that masks a key holding ``+inf`` or NaN (``inf + (-inf)``), or wrong
values only in the rows of queries that keep no key (an output from ``torch.empty`` whose rows are
written only where a key is kept). Which keys a row keeps comes from the contract's own
:meth:`~attnscore.maths.contract.Contract.key_view` (a mask or ``attn_mask``, key lengths, a causal
flag, a window, packed sequence boundaries), so every contract family with softmax weights gets
the same hints; what masks them is named from the contract's features (:func:`masking_words`).

A hint is a sentence said beside the comparison (``Likely cause: ...``), never a diagnosis: it
names no catalogue mistake, and for rows never written it says what the values suggest, since
memory left unwritten holds different values from one call to the next and cannot be confirmed.
"""

from __future__ import annotations

import numpy as np

from attnscore.boundary.outputs import Received
from attnscore.catalogue.families import causal, masked_scores
from attnscore.check.cases import Call
from attnscore.maths.contract import Contract
from attnscore.spec.model import Spec

__all__ = ["empty_rows_wrong", "masking_words", "nonfinite_hint", "unwritten_rows_hint"]

# What masks keys, by the contract's features: its parameters, then its keywords.
_MASKING_PARAMETERS = (
    ("mask", "the mask"),
    ("attn_mask", "attn_mask"),
    ("key_padding_mask", "key_padding_mask"),
    ("key_lengths", "key_lengths (the keys past a batch item's length)"),
    ("cu_seqlens_k", "cu_seqlens_k (the keys of other sequences)"),
)
_MASKING_KEYWORDS = (
    ("is_causal", "is_causal (the keys after the query)"),
    ("causal", "causal (the keys after the query)"),
    ("window_size", "window_size (the keys outside the window)"),
)


def masking_words(contract: Contract) -> str:
    """What masks keys in ``contract``, in words (``"attn_mask"``, ``"is_causal (the keys after the
    query)"``, ``"key_lengths (...) and causal (...)"``), from its parameters and the keywords it is
    configured with (a causal flag that is set, a window that is bounded), and a causal family's own
    mask; ``"the mask"`` when none is found (a ``mask`` argument)."""
    names = set(contract.parameter_names)
    words = [text for name, text in _MASKING_PARAMETERS if name in names]
    keywords = {kw.name for kw in contract.keywords}
    for name, text in _MASKING_KEYWORDS:
        if name not in keywords:
            continue
        value = contract.option(name)
        if name == "window_size" and (value is None or tuple(value) == (-1, -1)):
            continue
        if name != "window_size" and not value:
            continue
        words.append(text)
    if causal(contract):  # a causal family: its mask is the flag's, with no keyword to name
        words.append("the causal mask (the keys after the query)")
    if not words:
        return "the mask"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _fallback_keep(spec: Spec, values: dict[str, np.ndarray]) -> np.ndarray | None:
    """The keep mask of a contract without softmax weights (masked scores: its ``mask`` argument)."""
    return np.asarray(values["mask"], dtype=bool) if "mask" in values else None


def _rows(spec: Spec, call: Call, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keep, nonfinite)``, bool ``(*rows, n_k)`` in the output's row layout (``shape[:-1]``): which
    keys each output row keeps and which of them hold a non-finite value; None when the contract
    cannot say (no mask, or an output of another shape)."""
    contract = spec.contract
    values = dict(zip(contract.parameter_names, call.args.values(), strict=True))
    try:
        with np.errstate(all="ignore"):
            view = contract.key_view(values)
    except Exception:  # noqa: BLE001 - a call the view cannot read gives no hint
        view = None
    if view is not None:
        keep, nonfinite = view.keep, view.nonfinite
    else:
        found = _fallback_keep(spec, values)
        if found is None:
            return None
        keep, nonfinite = found, np.zeros(np.shape(found), dtype=bool)
    if keep.ndim == 0 or len(shape) < 1:
        return None
    try:
        target = (*shape[:-1], keep.shape[-1])
        return np.broadcast_to(keep, target), np.broadcast_to(nonfinite, target)
    except ValueError:
        return None


def nonfinite_hint(spec: Spec, call: Call, received: Received) -> str | None:
    """A masking-specific cause for the first unexpected non-finite output entry, else None.

    Its row (query) is looked up in the contract's key view (:func:`_rows`): a query with no kept key
    (softmax of all ``-inf`` is 0/0), a query that masks a key holding ``+inf`` or NaN, or one that
    keeps some keys and masks others (its mask kept none, or a masked huge or non-finite score
    reached the softmax) gets a sentence about that, naming what masks keys in this contract
    (:func:`masking_words`), instead of the generic "look for a division by zero" hint. For masked
    scores themselves (no softmax): adding ``-inf`` to a masked ``+inf`` or NaN.
    """
    got = received.array.astype(np.float64)
    golden = np.asarray(call.golden, dtype=np.float64)
    if got.shape != golden.shape or got.ndim < 1:
        return None
    found = _rows(spec, call, got.shape)
    if found is None:
        return None
    keep, nonfinite = found
    bad = ~np.isfinite(got) & np.isfinite(golden)
    if not bad.any():
        return None
    row = tuple(int(i) for i in np.argwhere(bad)[0])[:-1]
    kept, held = keep[row], nonfinite[row]
    if masked_scores(spec.contract):
        return (
            "a masked entry became non-finite: adding -inf to a masked score of +inf or NaN gives NaN; "
            "replace masked entries instead, scores.masked_fill(~mask, float('-inf'))"
        )
    what = masking_words(spec.contract)
    if not kept.any():
        return (
            f"this query keeps no key ({what} masks every key): softmax over scores that are all -inf is "
            "0/0 = NaN; give a query with no kept key zero weights (e.g. torch.where(keep.any(-1, keepdim=True), "
            "torch.softmax(masked, dim=-1), 0), or torch.nan_to_num on the weights)"
        )
    if (held & ~kept).any():
        return (
            "this query has masked keys: a masked score that is +inf or NaN (or a huge score taken into "
            "the row max) must not reach the softmax; replace masked scores with "
            "scores.masked_fill(~mask, float('-inf')) before the max and exp, instead of adding -inf "
            "(inf + (-inf) = NaN) or multiplying exp by the mask afterwards"
        )
    if not kept.all():
        return (
            f"this query has masked keys ({what}) and keeps {int(kept.sum())} of {kept.size}: a NaN here "
            "means your code masked every key of this query (check which keys it keeps: softmax over all "
            "-inf is 0/0), or a masked score that is +inf or NaN (or a huge score taken into the row max) "
            "reached the softmax; mask with scores.masked_fill(~keep, float('-inf')) before the max and exp"
        )
    return None


def empty_rows_wrong(spec: Spec, call: Call, received: Received, allowed: np.ndarray | float) -> np.ndarray | None:
    """bool ``(*rows,)``: the wrong rows of a same-shape output when every one of them belongs to a
    query that keeps no key (the contract's key view) and every other row is right within
    ``allowed``; None otherwise (or when the contract cannot say which keys a row keeps)."""
    got = received.array.astype(np.float64)
    golden = np.asarray(call.golden, dtype=np.float64)
    if got.shape != golden.shape or got.ndim < 1 or got.size == 0 or masked_scores(spec.contract):
        return None
    found = _rows(spec, call, got.shape)
    if found is None:
        return None
    empty = ~found[0].any(axis=-1)  # (*rows,): queries that keep no key
    if not empty.any():
        return None
    tol = np.broadcast_to(np.where(np.isfinite(allowed), allowed, 0.0), got.shape) if np.ndim(allowed) else allowed
    with np.errstate(all="ignore"):
        wrong = ~((got == golden) | (np.abs(got - golden) <= tol)).all(axis=-1)  # (*rows,)
    if not wrong.any() or (wrong & ~empty).any():
        return None
    return wrong


def unwritten_rows_hint(spec: Spec, call: Call, wrong: np.ndarray, changed: bool) -> str:
    """The note for :func:`empty_rows_wrong`'s rows (``wrong``): what a query with no kept key should
    give, and the two common ways code gives something else there. ``changed``: a second call on the
    same inputs gave other values in those rows, so they are memory the code never writes.

    Rows left unwritten after ``torch.empty`` hold whatever that memory held, which changes from call
    to call: the note says so, and never names a mistake.
    """
    golden = np.asarray(call.golden, dtype=np.float64)
    rows = golden[wrong]  # (count, last)
    stated = "the zero vector" if np.all(rows == 0) else "the value the spec states for it"
    text = (
        f"every wrong row ({int(wrong.sum())} of {wrong.size}) belongs to a query that keeps no key "
        f"({masking_words(spec.contract)} masks every key) and every other row is right; such a query "
        f"should give {stated}"
    )
    if changed:
        return text + (
            ", and these rows changed between two calls on the same inputs: your code never writes them "
            "(an output from torch.empty or empty_like keeps whatever that memory held); write those rows too "
            "(start from torch.zeros, or set them explicitly)"
        )
    return text + (
        ": rows left unwritten after torch.empty (or empty_like) hold whatever that memory held, and a large "
        "negative fill instead of -inf gives uniform weights over every key (for attention, the mean of the "
        "values); write those rows explicitly"
    )
