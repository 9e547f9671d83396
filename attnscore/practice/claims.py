"""Option claims: the machine-checkable statement behind each multiple-choice option.

A claim is plain data, ``(tag, ...)``: ``("highest", j)`` and ``("key_highest", j)`` (key ``j``
scores highest), ``("score_is", j, v)``, ``("negative", j)``, ``("perpendicular", j)`` and
``("are_weights",)``. :func:`claim_truth` judges a claim on exact scores (the generator and the
solutions), :func:`claim_holds` on float64 scores (``--verify``'s independent check), so the two
are written apart on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from attnscore.practice.richtext import Rich, math, plain, text
from attnscore.practice.worked import num

__all__ = ["EPS", "claim_text", "claim_text_length", "claim_truth", "claim_holds"]

#: Absolute slack of the float64 comparisons (relative above 1).
EPS = 1e-9


def claim_text(claim: tuple[Any, ...]) -> Rich:
    """A statement option's text (a claim of ``true_statement``).

    Raises:
        ValueError: an unknown claim.
    """
    tag = claim[0]
    if tag == "highest":
        return text(f"Key {claim[1] + 1} has the highest score.")
    if tag == "score_is":
        return text(f"The score of key {claim[1] + 1} is ") + math(num(claim[2])) + text(".")
    if tag == "negative":
        return text(f"Key {claim[1] + 1} points away from the query: its score is negative.")
    if tag == "perpendicular":
        return text(f"Key {claim[1] + 1} is perpendicular to the query: its score is zero.")
    if tag == "are_weights":
        return text("The raw scores are already attention weights: they are positive and add up to 1.")
    raise ValueError(f"unknown claim {claim!r}")


def claim_text_length(claim: tuple[Any, ...]) -> int:
    """Length of a statement option's plain text (what ``--verify`` ranks by)."""
    return len(plain(claim_text(claim)))


def claim_truth(claim: tuple[Any, ...], s: Sequence[Fraction]) -> bool:
    """Whether a statement claim holds for the exact scores ``s`` (shape ``(n_k,)``)."""
    tag = claim[0]
    if tag == "highest":
        return all(s[claim[1]] > v for j, v in enumerate(s) if j != claim[1])
    if tag == "score_is":
        return s[claim[1]] == claim[2]
    if tag == "negative":
        return s[claim[1]] < 0
    if tag == "perpendicular":
        return s[claim[1]] == 0
    if tag == "are_weights":
        return all(v >= 0 for v in s) and sum(s) == 1
    raise ValueError(f"unknown claim {claim!r}")


def claim_holds(claim: tuple[Any, ...], s: list[float]) -> bool:
    """Whether a claim holds for the float64 scores ``s`` (shape ``(n_k,)``), with :data:`EPS` slack.

    Raises:
        ValueError: an unknown claim.
    """
    tag = claim[0]
    if tag == "highest" or tag == "key_highest":
        j = claim[1]
        return all(s[j] > v + EPS for i, v in enumerate(s) if i != j)
    if tag == "score_is":
        return abs(s[claim[1]] - float(claim[2])) <= EPS * max(1.0, abs(s[claim[1]]))
    if tag == "negative":
        return s[claim[1]] < -EPS
    if tag == "perpendicular":
        return abs(s[claim[1]]) <= EPS
    if tag == "are_weights":
        return all(v >= 0 for v in s) and abs(sum(s) - 1) <= EPS
    raise ValueError(f"unknown claim {claim!r}")
