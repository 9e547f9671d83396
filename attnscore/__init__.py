"""attnscore: spec-driven verification and grading toolkit for attention scores."""

from attnscore.reference import ScoreInputError, score, score_matrix, scores

__all__ = ["ScoreInputError", "score", "score_matrix", "scores"]
