"""The property registry: named, documented checks with their input strategies.

A spec lists properties by name (``properties: - name: perpendicular_keys_score_zero``) with
points and a student-facing statement; the behaviour lives here, in Python, never in YAML.

Each property generates inputs with a hypothesis strategy (see :mod:`attnscore.strategies`)
chosen so that the property is what the inputs exercise, and each generated input is checked by
comparing the implementation's result with the float64 golden value under the spec's tolerance.
On failure the property adds a hint in its own terms (``hint``) to the comparison's message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from attnscore.contracts import Contract
from attnscore.strategies import QK, perpendicular_qk, random_qk

__all__ = ["Property", "PROPERTIES", "get_property", "register"]


@dataclass(frozen=True)
class Property:
    """A registered property.

    Attributes:
        name: registry name, used in specs.
        summary: what it checks, for documentation and as the default statement.
        strategy: ``(contract, max_value) -> strategy of (Q, K)``.
        hint: ``(got, golden) -> str | None``: a sentence in the property's terms explaining a
            failing output, or None when it has nothing specific to say.
        default_max_value: default bound on input magnitudes.
    """

    name: str
    summary: str
    strategy: Callable[[Contract, float], st.SearchStrategy[QK]]
    hint: Callable[[np.ndarray, np.ndarray], str | None]
    default_max_value: float = 10.0


PROPERTIES: dict[str, Property] = {}


def register(prop: Property) -> Property:
    """Add ``prop`` to the registry; its name must be new."""
    if prop.name in PROPERTIES:
        raise ValueError(f"property {prop.name!r} is already registered")
    PROPERTIES[prop.name] = prop
    return prop


def get_property(name: str) -> Property:
    """Return the property called ``name``; raise KeyError naming the known ones."""
    try:
        return PROPERTIES[name]
    except KeyError:
        raise KeyError(f"unknown property {name!r}; known: {', '.join(sorted(PROPERTIES))}") from None


def _no_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return None


def _perpendicular_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return "every key here is perpendicular to the queries (q · k = 0), so every score must be 0"


def _normalisation_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    if got.shape != golden.shape or got.size == 0 or not np.isfinite(got).all():
        return None
    rows = got.reshape(-1, golden.shape[-1]) if golden.ndim else got.reshape(1, 1)
    if np.allclose(rows.sum(axis=-1), 1.0, atol=1e-3):
        return "your scores sum to 1: raw scores are not weights, so do not apply softmax or normalise them"
    if (got >= 0).all() and (golden < 0).any():
        return "your scores are never negative, but q · k is negative when a key points away from the query"
    return None


def _not_normalised_inputs(contract: Contract, max_value: float) -> st.SearchStrategy[QK]:
    def revealing(qk: QK) -> bool:
        S = np.einsum("...id,...jd->...ij", *qk)
        return bool((S < -0.5).any()) and bool((np.abs(S.sum(axis=-1) - 1.0) > 0.25).all())

    return random_qk(contract, max_value).filter(revealing)


register(Property(
    name="equals_qk_entries",
    summary="Each score equals the matching entry of Q Kᵀ (the dot product of that query and key).",
    strategy=lambda c, m: random_qk(c, m),
    hint=_no_hint,
))
register(Property(
    name="perpendicular_keys_score_zero",
    summary="A key perpendicular to the query scores exactly zero.",
    strategy=lambda c, m: perpendicular_qk(c, m),
    hint=_perpendicular_hint,
    default_max_value=3.0,
))
register(Property(
    name="scores_not_normalised",
    summary="Raw scores are not normalised: they can be negative and need not sum to one.",
    strategy=_not_normalised_inputs,
    hint=_normalisation_hint,
))
