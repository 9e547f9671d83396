"""attnscore: spec-driven verification and grading toolkit for attention scores."""

from attnscore.maths.reference import (
    ScoreInputError,
    additive_scores,
    attention,
    attention_weights,
    bilinear_scores,
    causal_mask,
    masked_scores,
    scaled_score_matrix,
    score,
    score_matrix,
    scores,
)

__all__ = [
    "ScoreInputError",
    "score",
    "score_matrix",
    "scores",
    "scaled_score_matrix",
    "bilinear_scores",
    "additive_scores",
    "causal_mask",
    "masked_scores",
    "attention_weights",
    "attention",
]
