"""The mistake catalogue: named wrong implementations that students and engineers really write.

Each :class:`Mistake` has an id, the contracts it applies to, a wrong implementation (a torch
function with the contract's parameters) and a student-facing message. The catalogue serves two
jobs:

- **diagnosis** (:mod:`attnscore.check.diagnosis`): a failing output is compared with each applicable
  mistake recomputed on the same inputs; a match names the mistake in the feedback;
- **spec quality** (``attnscore verify``): every applicable mistake must fail at least one case of
  a spec and be diagnosed as itself, else the spec has a blind spot.

Mistakes are plain functions ``fn(contract, spec, *args)``; ``spec`` is only used by the
"hard-coded worked examples" mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attnscore.maths import reference
from attnscore.maths.contracts import Contract

__all__ = ["Mistake", "MISTAKES", "get_mistake", "mistakes_for"]

RAW = ("score", "scores", "score_matrix")
SCALED = ("scaled_score_matrix",)
QK = RAW + SCALED
MASKED = ("masked_scores", "attention_weights", "attention")
CAUSAL = ("causal_attention_top_left", "causal_attention_bottom_right")
ALL = QK + ("bilinear_scores", "additive_scores") + MASKED + CAUSAL
ATTENTION = ("attention",) + CAUSAL  # softmax(Q Kᵀ / √d_k) V, with a mask argument or the causal flag
SCALE = SCALED + ATTENTION  # the contracts whose scores are scaled by 1/√d_k


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation.

    Attributes:
        id: stable snake_case id.
        title: a few words.
        contracts: names of the contracts it applies to.
        fn: ``(contract, spec, *args, **params) -> result``, the wrong implementation.
        message: feedback for a student whose output matches it (what and how to fix); it may hold
            ``{name}`` fields filled from the mistake's parameters (:meth:`describe`).
        forms: other ways real code makes the same mistake, each like ``fn``; they differ only
            where conventions differ (a query with no kept key: zeros, NaN or the mean of the
            values). The diagnosis accepts any form that holds on every input it sees.
        fit: ``(contract, args, got) -> params | None``: the mistake's parameters read from a
            failing output (a constant scale ratio, a fill value), or None when no parameter
            explains it; the diagnosis then confirms the fitted mistake on further inputs.
        defaults: the parameters ``bind`` uses when none are given (as ``(name, value)`` pairs).
        computes_in: the precision the mistake computes in: its output is matched within that
            precision's rounding error, not the tested dtype's (``"float32"`` for float64 work done
            in float32).
        dtypes: the tested dtypes in which the mistake can happen (empty: every dtype).
        not_dtypes: the tested dtypes in which it cannot (its message would be false there).
    """

    id: str
    title: str
    contracts: tuple[str, ...]
    fn: Callable[..., Any]
    message: str
    forms: tuple[Callable[..., Any], ...] = ()
    fit: Callable[[Contract, tuple[torch.Tensor, ...], np.ndarray], dict[str, float] | None] | None = None
    defaults: tuple[tuple[str, float], ...] = ()
    computes_in: str | None = None
    dtypes: tuple[str, ...] = ()
    not_dtypes: tuple[str, ...] = ()

    def bind(self, contract: Contract, spec: Any = None, form: int = 0, **params: float) -> Callable[..., Any]:
        """The wrong implementation (``form`` 0 is ``fn``, 1.. are ``forms``) as a plain function of
        the contract's arguments, with ``params`` over :attr:`defaults`."""
        fn = (self.fn, *self.forms)[form]
        values = {**dict(self.defaults), **params}

        def wrong(*args: Any) -> Any:
            return fn(contract, spec, *args, **values)

        wrong.__name__ = f"mistake_{self.id}"
        return wrong

    @property
    def form_count(self) -> int:
        """How many forms the mistake has (``fn`` and :attr:`forms`)."""
        return 1 + len(self.forms)

    def applies_in(self, dtype: str) -> bool:
        """Whether the mistake can happen when the inputs have ``dtype``."""
        return (not self.dtypes or dtype in self.dtypes) and dtype not in self.not_dtypes

    def describe(self, params: dict[str, float] | None = None) -> str:
        """The message with its ``{name}`` fields filled (numbers to 3 significant digits)."""
        values = {**dict(self.defaults), **(params or {})}
        if not values:
            return self.message
        return self.message.format(**{k: f"{float(v):.3g}" for k, v in values.items()})


MISTAKES: dict[str, Mistake] = {}


def _add(
    id: str, title: str, contracts: tuple[str, ...], message: str, **extra: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if id in MISTAKES:
            raise ValueError(f"mistake {id!r} is already registered")
        MISTAKES[id] = Mistake(id, title, contracts, fn, message, **extra)
        return fn

    return deco


def get_mistake(id: str) -> Mistake:
    """The mistake called ``id``; KeyError naming the known ones otherwise."""
    try:
        return MISTAKES[id]
    except KeyError:
        raise KeyError(f"unknown mistake {id!r}; known: {', '.join(sorted(MISTAKES))}") from None


def mistakes_for(contract_name: str) -> list[Mistake]:
    """The catalogue's mistakes that apply to ``contract_name``, in catalogue order."""
    return [m for m in MISTAKES.values() if contract_name in m.contracts]


# ---------------------------------------------------------------------------------------------
# helpers: every Q Kᵀ view as (Q, K) and back


def _qk(c: Contract, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q, K)`` of the arguments: the contract's own geometry for Q Kᵀ views, else the first two."""
    return c.qk_operands(*args) if c.qk_operands is not None else (args[0], args[1])


def _out(c: Contract, S: torch.Tensor) -> torch.Tensor:
    """Scores ``S`` (..., n_q, n_k) back in the contract's output shape."""
    return c.from_scores(S) if c.from_scores is not None else S  # type: ignore[arg-type, return-value]


def _factor(c: Contract, Q: torch.Tensor) -> float:
    return 1.0 / float(np.sqrt(Q.shape[-1])) if c.name in SCALE else 1.0


def _causal_keep(Q: torch.Tensor, K: torch.Tensor, alignment: str) -> torch.Tensor:
    """The causal mask (True = keep), ``(n_q, n_k)``: ``j <= i`` top-left, ``j <= i + n_k - n_q`` bottom-right."""
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device)
    return keep.tril() if alignment == "top_left" else keep.tril(n_k - n_q)


def _alignment(c: Contract) -> str:
    return "top_left" if c.name.endswith("top_left") else "bottom_right"


def _qkvm(c: Contract, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """``(Q, K, V, mask)`` of an attention contract; the causal flag form gets its causal mask."""
    if c.name in CAUSAL:
        Q, K, V = args
        return Q, K, V, _causal_keep(Q, K, _alignment(c))
    return args


def _correct(c: Contract, *args: torch.Tensor) -> torch.Tensor:
    return c.reference(*args)


def _attention_with(
    weights_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    scale: Callable[[torch.Tensor], float],
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    S = (Q @ K.transpose(-2, -1)) * scale(Q)
    return weights_fn(S, mask) @ V


def _weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return reference.attention_weights(S, mask)


# ---------------------------------------------------------------------------------------------
# scaling


def _scaled_by(c: Contract, args: tuple[torch.Tensor, ...], scale: Callable[[torch.Tensor], float]) -> torch.Tensor:
    if c.name in ATTENTION:
        return _attention_with(_weights, scale, *_qkvm(c, args))
    Q, K = _qk(c, args)
    return _out(c, (Q @ K.transpose(-2, -1)) * scale(Q))


@_add(
    "not_scaled",
    "scores not divided by √d_k",
    SCALE,
    "your scores equal Q Kᵀ without the 1/√d_k factor: divide the scores by √d_k (d_k = the key width)",
)
def _not_scaled(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: 1.0)


@_add(
    "scaled_by_dk",
    "divided by d_k (or by √d_k twice)",
    SCALE,
    "your scores equal Q Kᵀ / d_k: divide by √d_k once (not by d_k, and not by √d_k twice)",
)
def _scaled_by_dk(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: 1.0 / Q.shape[-1])


@_add(
    "scaled_by_half_dk",
    "d_k ** 1/2 (divided by d_k/2)",
    SCALE,
    "your scores equal Q Kᵀ / (d_k / 2): d_k ** 1/2 is read as (d_k ** 1) / 2 because ** binds tighter than /; "
    "write d_k ** 0.5 or math.sqrt(d_k)",
)
def _scaled_by_half_dk(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: 2.0 / Q.shape[-1])


@_add(
    "scaled_by_two_dk",
    "S / d_k ** 1/2 inline (divided by 2·d_k)",
    SCALE,
    "your scores equal Q Kᵀ / (2·d_k): in S / d_k ** 1/2, ** binds tighter than / and the divisions run left to "
    "right, so it is (S / d_k) / 2; write S / d_k ** 0.5 or S / math.sqrt(d_k)",
)
def _scaled_by_two_dk(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: 0.5 / Q.shape[-1])


@_add(
    "scaled_by_sqrt_d_model",
    "divided by √d_model instead of √d_k",
    SCALE,
    "your scores are divided by √(heads·d_k) = √d_model: with heads, scale by the per-head width √d_k",
)
def _scaled_by_sqrt_d_model(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: 1.0 / float(np.sqrt(Q.shape[-1] * (Q.shape[-3] if Q.ndim >= 3 else 1))))


_FIT_ENTRIES = 2_000_000  # score entries evaluated at once while fitting a scale ratio


def _fit_scale_ratio(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> dict[str, float] | None:
    """The constant ``r`` for which scores scaled by ``r/√d_k`` give ``got`` (least squares), or None.

    Scores are linear in ``r``; attention is fitted on a grid of ``log2 r`` in [-6, 6], refined by
    golden-section search. The fitted ``r`` is only a candidate: the diagnosis confirms it.
    """
    if not np.isfinite(got).all():
        return None
    if c.name in SCALED:
        Q, K = _qk(c, args)
        g = _out(c, (Q @ K.transpose(-2, -1)) * _factor(c, Q)).double().numpy()
        if g.shape != got.shape or not np.isfinite(g).all() or not (g * g).sum() > 0:
            return None
        r = float((got * g).sum() / (g * g).sum())
        return {"r": r} if np.isfinite(r) and r > 0 else None
    Q, K, V, m = _qkvm(c, args)
    S0 = (Q @ K.transpose(-2, -1)) * _factor(c, Q)  # (..., n_q, n_k)
    target = torch.as_tensor(got, dtype=S0.dtype)
    if not torch.isfinite(S0).all() or target.shape != torch.broadcast_shapes(S0.shape[:-1], V.shape[:-2] + (1,)) + (
        V.shape[-1],
    ):
        return None

    keep = torch.broadcast_to(m, S0.shape).unsqueeze(0)  # (1, ..., n_q, n_k): one rank above S0

    if S0.numel() > _FIT_ENTRIES:
        return None  # too large to fit here; a name needs evidence we cannot afford to gather
    chunk = max(1, _FIT_ENTRIES // max(1, S0.numel()))

    def error(log_r: torch.Tensor) -> torch.Tensor:  # (G,) -> (G,), a few grid points at a time
        parts = []
        for part in log_r.split(chunk):
            r = torch.exp2(part).reshape(-1, *[1] * S0.ndim)
            out = reference.attention_weights(r * S0, keep) @ V  # (g, ..., n_q, d_v)
            parts.append(((out - target) ** 2).flatten(1).sum(dim=1))
        return torch.cat(parts)

    grid = torch.linspace(-6.0, 6.0, 193, dtype=S0.dtype)
    best = int(torch.argmin(error(grid)))
    lo, hi = float(grid[max(best - 1, 0)]), float(grid[min(best + 1, len(grid) - 1)])
    golden = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        ea, eb = error(torch.tensor([a, b], dtype=S0.dtype)).tolist()
        lo, hi = (lo, b) if ea <= eb else (a, hi)
    return {"r": float(2.0 ** ((lo + hi) / 2.0))}


@_add(
    "scaled_by_constant_factor",
    "scores scaled by a constant factor times 1/√d_k",
    SCALE,
    "your scores are scaled by a constant factor r = {r} times the right scale 1/√d_k, for every d_k (an extra "
    "constant in the scale, a temperature, or a factor applied to Q and to K): multiply Q Kᵀ by exactly 1/√d_k "
    "(math.sqrt(d_k) with d_k = Q.shape[-1])",
    fit=_fit_scale_ratio,
    defaults=(("r", 0.5),),
)
def _scaled_by_constant_factor(c: Contract, spec: Any, *args: torch.Tensor, r: float = 0.5) -> torch.Tensor:
    return _scaled_by(c, args, lambda Q: r / float(np.sqrt(Q.shape[-1])))


@_add(
    "scaled_raw_scores",
    "raw scores divided by √d_k",
    RAW,
    "your scores are divided by √d_k: this function returns raw scores q · k, without scaling",
)
def _scaled_raw(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = _qk(c, args)
    return _out(c, (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1])))


# ---------------------------------------------------------------------------------------------
# shapes and axes


@_add(
    "keys_not_transposed",
    "Q K instead of Q Kᵀ",
    ("score_matrix",) + SCALED,
    "your scores equal Q K (K not transposed), which pairs rows with columns: use Q @ K.transpose(-2, -1)",
)
def _keys_not_transposed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = _qk(c, args)
    return (Q @ K) * _factor(c, Q)


@_add(
    "all_axes_reversed",
    ".T on batched keys",
    ("score_matrix",) + SCALED + ("bilinear_scores",),
    "your result mixes batch items: K.T (or .permute with every axis reversed) also swaps the batch axes; "
    "swap only the last two with K.transpose(-2, -1)",
)
def _all_axes_reversed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    K_T = args[1].permute(*reversed(range(args[1].ndim)))  # what K.T does to a batched K
    if c.name == "bilinear_scores":
        Q, W = args[0], args[2]
        return Q @ W @ K_T  # (b, n_q, d_q) @ (d_q, d_k) @ (d_k, n_k, b): runs when b = d_k = n_k
    Q = args[0]
    return (Q @ K_T) * _factor(c, Q)


@_add(
    "output_transposed",
    "K Qᵀ instead of Q Kᵀ",
    ("score_matrix",) + SCALED + ("bilinear_scores", "additive_scores"),
    "your matrix is transposed (K Qᵀ): rows must be queries and columns keys, shape (..., n_q, n_k)",
)
def _output_transposed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _correct(c, *args).transpose(-2, -1)


@_add(
    "keys_reversed",
    "keys in reverse order",
    ("scores", "score_matrix") + SCALED,
    "your scores come out in reverse key order: column j must be the score of key j",
)
def _keys_reversed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.flip(_correct(c, *args), dims=[-1])


@_add(
    "elementwise_not_summed",
    "q * k without the sum",
    ("score", "scores"),
    "your result is the elementwise product q * k: a dot product also sums over the d_k coordinates",
)
def _elementwise(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return args[1] * args[0]


# ---------------------------------------------------------------------------------------------
# wrong score functions


@_add(
    "softmax_applied",
    "softmax applied to raw scores",
    ("scores", "score_matrix") + SCALED + ("bilinear_scores", "additive_scores"),
    "your scores equal softmax of the scores (each row sums to 1): raw scores must not be normalised",
)
def _softmax_applied(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.softmax(_correct(c, *args), dim=-1)


@_add(
    "cosine_similarity",
    "cosine similarity instead of the dot product",
    QK,
    "your scores equal the cosine similarity q·k / (|q| |k|): the score is the plain dot product, "
    "so vector lengths matter",
)
def _cosine(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = _qk(c, args)
    Qn, Kn = torch.nn.functional.normalize(Q, dim=-1), torch.nn.functional.normalize(K, dim=-1)
    return _out(c, (Qn @ Kn.transpose(-2, -1)) * _factor(c, Q))


@_add(
    "absolute_value",
    "absolute value of the scores",
    QK + ("bilinear_scores",),
    "your scores are never negative (|q · k|): a key pointing away from the query has a negative score",
)
def _absolute(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _correct(c, *args).abs()


@_add(
    "bilinear_w_transposed",
    "Q Wᵀ Kᵀ instead of Q W Kᵀ",
    ("bilinear_scores",),
    "your scores equal Q Wᵀ Kᵀ: the bilinear score is q_iᵀ W k_j, with W of shape (d_q, d_k) untransposed",
)
def _bilinear_wt(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    return Q @ W.T @ K.transpose(-2, -1)


@_add(
    "additive_no_tanh",
    "additive score without tanh",
    ("additive_scores",),
    "your scores equal vᵀ(W_q q + W_k k): apply tanh to W_q q + W_k k before the dot product with v",
)
def _additive_no_tanh(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return ((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v


@_add(
    "additive_tanh_after_v",
    "tanh applied after the dot product with v",
    ("additive_scores",),
    "your scores equal tanh(vᵀ(W_q q + W_k k)): tanh belongs inside, on the hidden vector W_q q + W_k k, "
    "and the dot product with v comes after it: vᵀ tanh(W_q q + W_k k) (so a score can exceed 1 in size)",
)
def _additive_tanh_after_v(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return torch.tanh(((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v)


@_add(
    "additive_projection_not_transposed",
    "Q W_q instead of Q W_qᵀ",
    ("additive_scores",),
    "your projections are Q @ W_q and K @ W_k: W_q and W_k have shape (d_a, d_k) and map a query to W_q q, "
    "so rows of Q are projected by Q @ W_q.T (and K @ W_k.T); without the transpose the code only runs "
    "because d_a = d_k here",
)
def _additive_projection_not_transposed(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return torch.tanh((Q @ W_q).unsqueeze(-2) + (K @ W_k).unsqueeze(-3)) @ v  # needs d_a = d_k


@_add(
    "additive_weights_swapped",
    "W_q applied to keys and W_k to queries",
    ("additive_scores",),
    "your scores use W_k on the queries and W_q on the keys: project queries with W_q and keys with W_k",
)
def _additive_swapped(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return reference.additive_scores(Q, K, W_k, W_q, v)


# ---------------------------------------------------------------------------------------------
# masks and softmax


def _masked_variant(
    c: Contract,
    args: tuple[torch.Tensor, ...],
    logits_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    weights_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Apply a wrong masking rule ``logits_fn(S, mask)`` in the contract's own setting."""

    def weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits_fn(S, mask), dim=-1) if weights_fn is None else weights_fn(S, mask)

    if c.name == "masked_scores":
        return logits_fn(*args)
    if c.name == "attention_weights":
        return weights(*args)
    Q, K, V, mask = _qkvm(c, args)
    return _attention_with(weights, lambda Q: 1.0 / float(np.sqrt(Q.shape[-1])), Q, K, V, mask)


@_add(
    "softmax_without_max_subtraction",
    "softmax without subtracting the row max",
    ("attention_weights",),
    "exp of large logits overflows to inf (inf/inf = NaN): subtract each row's max before exp, or use torch.softmax",
)
def _unstable(c: Contract, spec: Any, S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    e = torch.where(mask, torch.exp(S), torch.zeros((), dtype=S.dtype))
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(mask, e / total, torch.zeros((), dtype=S.dtype))


@_add(
    "mask_ignored",
    "mask ignored",
    MASKED,
    "masked keys still count: your result equals the unmasked one; set masked scores to -inf before softmax",
)
def _mask_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(c, args, lambda S, m: S.clone())


@_add(
    "mask_inverted",
    "mask inverted (True = drop)",
    MASKED,
    "your mask is inverted: True means keep this key; you dropped the kept keys and kept the masked ones",
)
def _mask_inverted(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S.masked_fill(m, float("-inf"))

    if c.name == "masked_scores":
        return rule(*args)
    return _masked_variant(c, args, rule, lambda S, m: reference.attention_weights(S, ~m))


@_add(
    "additive_mask_nan",
    "(1 - mask)·(-inf) added to the scores",
    MASKED,
    "you added (1 - mask)·(-inf) to the scores: 0·(-inf) is NaN at every kept entry; use "
    "scores.masked_fill(~mask, float('-inf')) or torch.where",
)
def _additive_mask(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(c, args, lambda S, m: S + (1 - m.to(S.dtype)) * float("-inf"))


LARGE_NEGATIVE = -100.0  # a fill value at or below this is "a large negative number", not a score


def _fit_fill(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> dict[str, float] | None:
    """The large finite negative fill ``F`` read from the output: masked scores hold ``F`` (filled) or
    ``S + F`` (added as a bias), the same ``F`` at every masked entry with a finite score.

    Weights hide ``F`` (any large ``F`` gives a masked key weight 0), so there it is -1e9, and
    the forms tell filling (a query with no kept key gets 1/n_k each) from adding (softmax of the
    row's raw scores) apart.
    """
    if c.name != "masked_scores":
        return {"fill": -1e9}
    S, mask = (np.asarray(a.double().numpy() if a.dtype != torch.bool else a.numpy()) for a in args)
    S, mask = np.broadcast_arrays(S, mask)
    if got.shape != S.shape:
        return None
    spots = ~mask & np.isfinite(S)
    if not spots.any():
        return None
    for values in (got[spots], got[spots] - S[spots]):
        fill = float(np.median(values))
        if np.isfinite(fill) and fill <= LARGE_NEGATIVE and np.allclose(values, fill, rtol=1e-6, atol=0.0):
            return {"fill": fill}
    return None


def _fill_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    return _masked_variant(c, args, lambda S, m: S.masked_fill(~m, fill))


def _add_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S + torch.where(m, torch.zeros((), dtype=S.dtype), torch.full((), fill, dtype=S.dtype))

    return _masked_variant(c, args, rule)


_LARGE_NEGATIVE_CONTRACTS = MASKED + ("causal_attention_bottom_right",)


@_add(
    "masked_with_large_negative",
    "a large negative number instead of -inf for masked scores",
    _LARGE_NEGATIVE_CONTRACTS,
    "you set masked scores to a large finite negative number (-1e9, -1e4, torch.finfo(dtype).min, or such a "
    "number added to the scores) instead of -inf: a masked score must be exactly -inf, and a query whose keys "
    "are all masked then gets weights from the masked scores (equal weights 1/n_k: the mean of the values) "
    "instead of zeros; use scores.masked_fill(~mask, float('-inf')) and give the fully masked rows zero weights "
    "(e.g. torch.where(mask, torch.softmax(masked, dim=-1), 0))",
    forms=(_add_large_negative,),
    fit=_fit_fill,
    defaults=(("fill", -1e9),),
)
def _masked_with_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    return _fill_large_negative(c, spec, *args, fill=fill)


@_add(
    "mask_added_as_neg_inf_bias",
    "the mask added as a -inf bias: S + where(mask, 0, -inf)",
    MASKED,
    "you mask by adding -inf to the masked scores (S + where(mask, 0, -inf), a float mask of 0 and -inf, or "
    "where(mask, S, S - inf)): that is right for a finite masked score, but a masked score of +inf or NaN "
    "gives inf + (-inf) = NaN instead of -inf, and after "
    "softmax a query whose keys are all masked gets NaN (softmax of all -inf); replace the masked scores instead "
    "of adding to them, scores.masked_fill(~mask, float('-inf')), and give a query with no kept key zero "
    "weights (e.g. torch.where(mask, weights, 0))",
)
def _neg_inf_bias(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S + torch.where(m, torch.zeros((), dtype=S.dtype), torch.full((), float("-inf"), dtype=S.dtype))

    return _masked_variant(c, args, rule, lambda S, m: torch.softmax(rule(S, m), dim=-1))


@_add(
    "nan_hidden_after_softmax",
    "torch.nan_to_num after softmax",
    ("attention_weights", "attention"),
    "your weights hide a NaN: torch.nan_to_num (or replacing NaN by 0) after softmax turns a row whose kept key "
    "has a NaN score into zeros, so the caller never sees the bad input; let that NaN through and zero only the "
    "masked entries, e.g. torch.where(mask, torch.softmax(masked, dim=-1), 0)",
)
def _nan_hidden_after_softmax(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return torch.nan_to_num(torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1))

    return _masked_variant(c, args, lambda S, m: S, w)


@_add(
    "mask_applied_after_exp",
    "exp(S - max over all keys) times the mask",
    ("attention_weights", "attention"),
    "you multiply exp(S - max) by the mask after taking the max over every key, masked ones included: a masked "
    "key with a huge score (or inf, or NaN) sets the max, the kept keys' exp underflow to 0 and the row becomes "
    "0/0 = NaN; mask before the max: scores.masked_fill(~mask, float('-inf')), then softmax (and zero rows "
    "with no kept key)",
)
def _mask_applied_after_exp(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        e = torch.exp(S - S.max(dim=-1, keepdim=True).values) * m  # the max includes the masked keys
        return e / e.sum(dim=-1, keepdim=True)

    return _masked_variant(c, args, lambda S, m: S, w)


@_add(
    "nan_fully_masked",
    "NaN for fully masked rows",
    ("attention_weights", "attention", "causal_attention_bottom_right"),
    "a query whose keys are all masked gets NaN (softmax of all -inf); the convention here is all-zero "
    "weights: replace the NaN rows (e.g. torch.where(mask, weights, 0))",
)
def _nan_fully_masked(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(
        c,
        args,
        lambda S, m: S.masked_fill(~m, float("-inf")),
        lambda S, m: torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1),
    )


def _wrong_axis_zeroed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        out = torch.softmax(S.masked_fill(~m, float("-inf")), dim=-2)
        return torch.where(m, out, torch.zeros((), dtype=S.dtype))

    return _masked_variant(c, args, lambda S, m: S, w)


@_add(
    "softmax_wrong_axis",
    "softmax over the queries axis",
    ("attention_weights",) + ATTENTION,
    "your softmax runs over the queries (dim=-2, or dim=1 of a (batch, n_q, n_k) tensor): each query's weights "
    "over the keys must sum to 1, so use dim=-1",
    forms=(_wrong_axis_zeroed,),
)
def _softmax_wrong_axis(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:  # as written: a key no query keeps is NaN
        return torch.softmax(S.masked_fill(~m, float("-inf")), dim=-2)

    return _masked_variant(c, args, lambda S, m: S, w)


@_add(
    "uniform_weights",
    "uniform weights",
    ("attention_weights", "attention"),
    "your weights are uniform (1/n_k for every key): the weights are softmax of the scores",
)
def _uniform(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    if c.name == "attention_weights":
        S = args[0]
        return torch.full_like(S, 1.0 / S.shape[-1])
    Q, K, V, _ = args
    return V.mean(dim=-2, keepdim=True).expand(*torch.broadcast_shapes(Q.shape[:-1], V.shape[:-2] + (1,)), V.shape[-1])


@_add(
    "returned_weights",
    "attention weights returned instead of weights @ V",
    ATTENTION,
    "your result is the attention weights softmax(Q Kᵀ / √d_k), shape (..., n_q, n_k), not the output: multiply "
    "them by the values and return weights @ V, shape (..., n_q, d_v) (only the output, not (output, weights))",
)
def _returned_weights(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K, V, mask = _qkvm(c, args)
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))  # (..., n_q, n_k)
    return reference.attention_weights(S, mask)  # missing: @ V


_NOT_WEIGHTS = (
    "raw scores are not weights: they can be negative and need not sum to one; softmax turns them into "
    "weights (exp makes them positive, dividing by the row's sum makes them sum to one)"
)


@_add(
    "scores_used_as_weights",
    "raw scores used as weights (no softmax)",
    ("attention_weights",) + ATTENTION,
    f"your weights are the raw scores themselves: {_NOT_WEIGHTS}; apply torch.softmax over the keys (dim=-1)",
)
def _scores_as_weights(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S.masked_fill(~m, 0.0)

    return _masked_variant(c, args, lambda S, m: S, w)


@_add(
    "scores_divided_by_their_sum",
    "scores divided by their sum instead of softmax",
    ("attention_weights",) + ATTENTION,
    f"your weights are the scores divided by their row's sum: {_NOT_WEIGHTS}; a negative score stays "
    "negative and a row summing to 0 divides by 0: use torch.softmax over the keys (dim=-1)",
)
def _scores_over_sum(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def w(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        kept = S.masked_fill(~m, 0.0)
        return kept / kept.sum(dim=-1, keepdim=True)

    return _masked_variant(c, args, lambda S, m: S, w)


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
    keep = _causal_keep(Q, K, _other_alignment(c))
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))
    return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-1) @ V


def _other_alignment_uniform(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """The other corner written with a large negative fill: a query with no key gets the mean of V."""
    keep = _causal_keep(Q, K, _other_alignment(c))
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))
    return torch.softmax(S.masked_fill(~keep, torch.finfo(S.dtype).min), dim=-1) @ V


@_add(
    "causal_wrong_alignment",
    "causal mask aligned at the other corner",
    CAUSAL,
    "your causal mask is aligned at the other corner: with n_q != n_k, top-left keeps key j for query i when "
    "j <= i (torch.ones(n_q, n_k).tril(), PyTorch's is_causal=True) and bottom-right when j <= i + (n_k - n_q) "
    "(.tril(n_k - n_q)); use the alignment the spec states",
    forms=(_other_alignment_nan, _other_alignment_uniform),
)
def _causal_wrong_alignment(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _causal_with(c, args, _other_alignment(c))


@_add(
    "causal_flag_ignored",
    "no causal mask at all",
    CAUSAL,
    "every query sees every key: the causal flag means query i must not attend to keys after its own "
    "position; mask them (-inf before softmax) with the causal mask",
)
def _causal_flag_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _causal_with(c, args, None)


# ---------------------------------------------------------------------------------------------
# precision, side effects, shortcuts


@_add(
    "computed_in_float16",
    "computed in float16",
    QK + ("bilinear_scores", "additive_scores", "attention_weights") + ATTENTION,
    "your result has float16 rounding errors (or overflow): compute in the inputs' dtype, do not cast to half",
    not_dtypes=("float16",),
)
def _float16(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    dtype = next(a.dtype for a in args if a.dtype.is_floating_point)
    out = c.reference(*[a.half() if a.dtype.is_floating_point else a for a in args])
    return out.to(dtype)


@_add(
    "computed_in_float32",
    "float64 inputs computed in float32",
    # masked_scores only copies its inputs and its generated inputs are float32 values, so a float32
    # detour leaves no trace there (exact comparison): not a mistake its cases can show
    tuple(name for name in ALL if name != "masked_scores"),
    "your result has float32 rounding errors although the inputs are float64: part of your computation runs in "
    "float32 (e.g. .float(), softmax(x.float()).type_as(x), a float32 buffer or numpy array); compute in the "
    "inputs' dtype",
    computes_in="float32",
    dtypes=("float64",),
)
def _float32(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    dtype = next(a.dtype for a in args if a.dtype.is_floating_point)
    out = c.reference(*[a.float() if a.dtype.is_floating_point else a for a in args])
    return out.to(dtype)


@_add(
    "returned_float64",
    "a float64 result for float32 inputs",
    ALL,
    "your result is float64 although the inputs are not (e.g. torch.tensor(a_numpy_result), .double() or a "
    "float64 constant): the values are right, but the result must keep the inputs' dtype; compute in torch in "
    "the inputs' dtype, or convert back with .to(<first input>.dtype)",
)
def _returned_float64(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    # Right values, wrong dtype: the value diagnosis never matches it (it equals the golden value);
    # the dtype_device_follow_inputs property names it when the output really is float64.
    return _correct(c, *[a.double() if a.dtype.is_floating_point else a for a in args])


@_add(
    "inputs_mutated",
    "inputs changed in place",
    ALL,
    "your function changes its inputs in place (e.g. Q.mul_(...), S.masked_fill_(...)); compute into new tensors",
)
def _mutated(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    out = _correct(c, *args)
    args[0].add_(1.0)
    return out


@_add(
    "hard_coded_examples",
    "hard-coded worked examples",
    ALL,
    "your function returns a worked example's answer for other inputs: it looks hard-coded; compute the result "
    "from the inputs",
)
def _hard_coded(c: Contract, spec: Any, *args: torch.Tensor) -> Any:
    examples = list(getattr(spec, "worked_examples", ()))
    for ex in examples:
        given = [a.detach().cpu().double().numpy() if a.dtype != torch.bool else a.cpu().numpy() for a in args]
        if all(
            g.shape == np.shape(v) and np.allclose(g, v, rtol=1e-3, atol=1e-3)
            for g, v in zip(given, ex.inputs.values(), strict=False)
        ):
            return torch.tensor(ex.expected, dtype=args[0].dtype)
    if examples:
        return torch.tensor(examples[0].expected, dtype=args[0].dtype)
    return torch.zeros(())


@_add("all_zeros", "all zeros", ALL, "your result is all zeros: compute the values instead of returning a placeholder")
def _zeros(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(_correct(c, *args))
