"""Conventions: corners of the output where implementations legitimately differ.

A spec states one convention for each corner (a row whose every key is masked comes out 0; a
masked key's ``inf`` or ``NaN`` changes nothing), but real code follows others: ``-inf`` masking
gives a fully masked row NaN, ``finfo.min`` or ``-1e9`` masking gives it the mean of V, and
PyTorch's own SDPA lets a ``NaN`` held at a masked key reach the output. A corner is a set of
output rows computed from one call's arguments (:mod:`attnscore.maths.key_view`: which keys each
row keeps), so it exists for every contract whose output is softmax weights over keys or is made
from them, whatever its layout (attention, SDPA, kernels, FlashAttention's layouts, key padding,
packed batches).

**A corner costs only its own cases.** The cases *dedicated* to a corner (a worked example with
``convention: <corner>``, a property registered with ``corner=``) judge it: a failure there is
reported with its own sentence ("your rows with every key masked come out NaN; this spec states
weights 0, so the output row is 0"), and judging goes on with the corner set aside to find a
second cause in the rest of the case, so a convention never hides another bug. Every other case
sets the corner aside (its entries are taken as right, :func:`set_aside`) and judges the rest, so
one deviation is charged once, in its own cases.

What a spec says of each corner (``conventions: {<corner>: <choice>}``, :data:`CHOICES`):

- ``stated`` (the default): the dedicated cases judge the spec's convention, for their points;
- ``not_asked``: the course does not ask about the corner: its dedicated cases still run and
  advise (their feedback says what the submission did there) but carry no points;
- ``any``: the corner is set aside everywhere (any value is taken as right there, as ``attnscore
  test --allow`` and the pytest plugin's ``allow:`` lines do); its dedicated cases carry no
  points either, since there is nothing left for them to judge in the corner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnscore.catalogue.families import softmax_over_keys, weighs_values

if TYPE_CHECKING:
    from attnscore.boundary.outputs import Received
    from attnscore.maths.contract import Contract
    from attnscore.maths.key_view import KeyView

__all__ = [
    "CHOICES",
    "Corner",
    "CORNERS",
    "get_corner",
    "corner_region",
    "set_aside",
    "applicable_corners",
    "found_text",
]

CHOICES = ("stated", "not_asked", "any")
"""What a spec may say of a corner (``conventions:``): judged for points, advice only, set aside."""


@dataclass(frozen=True)
class Corner:
    """One corner of the output that a convention governs.

    Attributes:
        name: the corner's name, as written in ``conventions:``, ``convention:`` and ``--allow``.
        summary: where it is, in words ("rows whose every key is masked").
        rows: how a student reads it ("your rows with every key masked").
        stated: the spec's own convention there, in words.
        applies: ``contract -> bool``.
        region: ``KeyView -> bool (*rows, 1)``: the output rows in the corner.
    """

    name: str
    summary: str
    rows: str
    stated: str
    applies: Callable[[Contract], bool]
    region: Callable[[KeyView], np.ndarray]


CORNERS: dict[str, Corner] = {
    corner.name: corner
    for corner in (
        Corner(
            name="fully_masked_row",
            summary="rows whose every key is masked (no key to attend to)",
            rows="your rows with every key masked",
            stated="weights 0, so the output row is 0",
            applies=softmax_over_keys,
            region=lambda view: view.rows_without_keys(),
        ),
        Corner(
            name="nonfinite_masked_key",
            summary="rows that mask a key holding inf or NaN (in its key or value vector)",
            rows="your rows that mask a key holding inf or NaN",
            stated="a masked key changes nothing, whatever it holds",
            applies=weighs_values,
            region=lambda view: view.rows_masking_nonfinite_keys(),
        ),
    )
}


def get_corner(name: str) -> Corner:
    """The corner called ``name``; ValueError naming the known ones."""
    try:
        return CORNERS[name]
    except KeyError:
        raise ValueError(f"expected a convention corner ({', '.join(sorted(CORNERS))}), found {name!r}") from None


def applicable_corners(contract: Contract) -> list[str]:
    """Names of the corners that apply to ``contract``."""
    return [name for name, corner in CORNERS.items() if corner.applies(contract)]


def corner_region(
    name: str, contract: Contract, args: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> np.ndarray | None:
    """Which entries of an output of ``shape`` lie in corner ``name`` for ``args`` (keyed by the
    contract's parameter names), as a bool array of ``shape``; None when none do or it cannot say
    (a contract without the corner, arguments whose shapes do not fit)."""
    corner = CORNERS[name]
    if not corner.applies(contract):
        return None
    try:
        view = contract.key_view(args)
        if view is None:
            return None
        region = np.broadcast_to(corner.region(view), shape)
    except (ValueError, KeyError, IndexError, TypeError):
        return None  # arguments a wrong call could not be made of: nothing is set aside
    return region if region.any() else None


def set_aside(
    received: Received,
    golden: np.ndarray,
    names: Iterable[str],
    contract: Contract,
    args: Mapping[str, np.ndarray],
) -> Received:
    """``received`` with the entries of the corners ``names`` replaced by the golden value there
    (taken as right), so that everything else is compared and checked as usual. A result of
    another shape is returned unchanged (the shape check judges it)."""
    if received.shape != np.shape(golden) or received.array.dtype.kind != "f":
        return received
    array = received.array
    for name in names:
        region = corner_region(name, contract, args, received.shape)
        if region is not None:
            array = np.where(region, np.asarray(golden, dtype=np.float64).astype(array.dtype), array)
    if array is received.array:
        return received
    return dataclasses.replace(received, array=np.ascontiguousarray(array))


def found_text(got: np.ndarray, golden: np.ndarray) -> str:
    """What a submission's entries in a corner came out as, for the corner's sentence: ``"NaN"``,
    ``"inf"`` or ``"NaN and inf"`` where it made finite entries non-finite, else ``"other values"``
    (``got`` and ``golden`` are the corner's entries, float64).

    >>> found_text(np.array([np.nan, np.nan]), np.zeros(2)), found_text(np.array([0.5, 1.5]), np.zeros(2))
    ('NaN', 'other values')
    """
    made = ~np.isfinite(got) & np.isfinite(golden)
    nan, inf = bool(np.isnan(got[made]).any()), bool(np.isinf(got[made]).any())
    return {(True, False): "NaN", (False, True): "inf", (True, True): "NaN and inf"}.get((nan, inf), "other values")
