"""Function contracts: what a graded function takes and returns, and how its truth is computed.

A contract ties a spec's ``function.contract`` name to the reference implementation
(:mod:`attnscore.reference`), the independent float64 golden path (:mod:`attnscore.golden`),
the parameters' shapes in the shape legend, and the per-entry error scale used by the
dot-product error bound.

Every contract here is a view of the same computation, ``S = Q Kᵀ``: ``score`` is one query and
one key, ``scores`` one query and ``n_k`` keys, ``score_matrix`` the general batched case. A
contract says how its arguments become ``(Q, K)`` and how ``S`` becomes its return value, so
properties can generate ``(Q, K)`` once and reach every contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from attnscore import golden, reference

__all__ = ["Contract", "CONTRACTS", "get_contract"]

Args = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Contract:
    """One function contract.

    Attributes:
        name: the contract's name, as written in a spec's ``function.contract``.
        parameters: ``(name, shape)`` pairs; a shape is a tuple of legend symbols
            (``"..."``, ``"n_q"``, ``"n_k"``, ``"d_k"``).
        returns: the return shape in the same legend.
        reference: the torch reference implementation.
        to_qk: maps the arguments to ``(Q, K)`` of shapes ``(..., n_q, d_k)``, ``(..., n_k, d_k)``.
        from_scores: maps ``S = Q Kᵀ`` of shape ``(..., n_q, n_k)`` to this contract's return value.
        pack: maps ``(Q, K)`` back to this contract's arguments (the inverse of ``to_qk``);
            valid only for ``Q``/``K`` shapes the contract can express (see ``batched`` etc.).
        batched: whether batch dims ``...`` are allowed.
        single_query: whether ``n_q`` is fixed to 1 (no query dim in the arguments).
        single_key: whether ``n_k`` is fixed to 1 (no key dim in the arguments).
    """

    name: str
    parameters: tuple[tuple[str, tuple[str, ...]], ...]
    returns: tuple[str, ...]
    reference: Callable[..., object]
    to_qk: Callable[[Args], tuple[np.ndarray, np.ndarray]]
    from_scores: Callable[[np.ndarray], np.ndarray]
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]
    batched: bool
    single_query: bool
    single_key: bool

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parameters)

    def golden(self, args: Args) -> np.ndarray:
        """The float64 golden value for ``args`` (numpy path, independent of the reference)."""
        return self.from_scores(golden.dot_products(*self.to_qk(args)))

    def error_scale(self, args: Args) -> tuple[int, np.ndarray]:
        """``(d_k, Σ|q_i k_i|)`` per output entry, for the dot-product error bound."""
        Q, K = self.to_qk(args)
        return int(Q.shape[-1]), self.from_scores(golden.dot_magnitudes(Q, K))


CONTRACTS: dict[str, Contract] = {
    c.name: c
    for c in (
        Contract(
            name="score",
            parameters=(("q", ("d_k",)), ("k", ("d_k",))),
            returns=(),
            reference=reference.score,
            to_qk=lambda a: (a["q"][None, :], a["k"][None, :]),
            from_scores=lambda S: S[0, 0],
            pack=lambda Q, K: {"q": Q[0], "k": K[0]},
            batched=False,
            single_query=True,
            single_key=True,
        ),
        Contract(
            name="scores",
            parameters=(("q", ("d_k",)), ("keys", ("n_k", "d_k"))),
            returns=("n_k",),
            reference=reference.scores,
            to_qk=lambda a: (a["q"][None, :], a["keys"]),
            from_scores=lambda S: S[0],
            pack=lambda Q, K: {"q": Q[0], "keys": K},
            batched=False,
            single_query=True,
            single_key=False,
        ),
        Contract(
            name="score_matrix",
            parameters=(("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k"))),
            returns=("...", "n_q", "n_k"),
            reference=reference.score_matrix,
            to_qk=lambda a: (a["Q"], a["K"]),
            from_scores=lambda S: S,
            pack=lambda Q, K: {"Q": Q, "K": K},
            batched=True,
            single_query=False,
            single_key=False,
        ),
    )
}


def get_contract(name: str) -> Contract:
    """Return the contract called ``name``; raise KeyError naming the known ones."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}") from None
