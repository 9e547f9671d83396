"""The problem kinds: one module per kind, and this registry, the one place the kind list is spelled.

:data:`REGISTRY` maps each kind's name to its :class:`~attnscore.practice.kinds.base.Kind`
object (validation, drawing, solution, independent check, PrairieLearn elements); every other
module asks it (:func:`get`) instead of branching on the kind's name. :data:`KINDS` (the names in
registry order) is what ``family.KINDS`` is.

Example:
    >>> get("scaled_score").d_k_widths
    (1, 4, 16, 64)
    >>> KINDS[:2]
    ('one_score', 'score_vector')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from attnscore.practice.kinds.base import Kind
from attnscore.practice.kinds.multiple_choice import MULTIPLE_CHOICE
from attnscore.practice.kinds.one_score import ONE_SCORE
from attnscore.practice.kinds.scaled_score import SCALED_SCORE
from attnscore.practice.kinds.score_matrix import SCORE_MATRIX
from attnscore.practice.kinds.score_vector import SCORE_VECTOR
from attnscore.practice.kinds.softmax import SOFTMAX

__all__ = ["KINDS", "REGISTRY", "UnknownKindError", "Kind", "get", "for_key_count"]

#: Kind name -> kind, in the order families are documented and listed.
REGISTRY: Mapping[str, Kind] = MappingProxyType(
    {k.name: k for k in (ONE_SCORE, SCORE_VECTOR, SCORE_MATRIX, SCALED_SCORE, SOFTMAX, MULTIPLE_CHOICE)}
)
#: The kind names (``kind:`` in a family file), in registry order.
KINDS: tuple[str, ...] = tuple(REGISTRY)


class UnknownKindError(KeyError):
    """No kind of this name (a :class:`~attnscore.practice.family.Family` built by hand with a typo).

    Attributes:
        kind: the name asked for.
    """

    def __init__(self, kind: str) -> None:
        super().__init__(f"unknown problem kind {kind!r}; expected one of {', '.join(KINDS)}")
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str) -> Kind:
    """The kind called ``name``.

    Raises:
        UnknownKindError: ``name`` is not in :data:`KINDS`.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownKindError(name) from None


def for_key_count(n: int) -> Kind:
    """The kind a ``--q/--k`` problem with ``n`` keys is, by default: the first (registry order) that
    takes exactly ``n`` keys, else the first that takes any number (``one_score`` for one key,
    ``score_vector`` for several).

    Raises:
        UnknownKindError: no kind takes ``n`` keys.
    """
    exact = [k for k in REGISTRY.values() if k.pair_keys == n]
    free = [k for k in REGISTRY.values() if k.pair_keys == 0]
    if not exact and not free:
        raise UnknownKindError(f"(a kind taking {n} --k)")
    return (exact or free)[0]
