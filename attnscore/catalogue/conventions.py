"""Conventions: corners of the output where implementations legitimately differ, set aside on request.

A spec states one convention for each corner (a fully masked row's weights are 0, so its output is
0), but real code follows others: ``finfo.min`` masking gives a fully masked row uniform weights
(the mean of V), ``-inf`` masking gives NaN. Such a corner must neither hide a second bug nor
cost an engineer every case when their convention is deliberate:

- **Set aside** (a spec's ``conventions: {fully_masked_row: any}``, ``attnscore test --allow
  fully_masked_row``, the pytest plugin's ``--attnscore-allow`` or an ``allow:fully_masked_row``
  line of its xfail file): the corner's entries are taken as right (:func:`set_aside`) and every
  other entry of the case is still compared and checked.
- **Judged** (the default): a failure there is reported, and judging goes on with that corner set
  aside to find a second cause elsewhere (:func:`attnscore.check.judge.judge_case`), reported
  beside the first, so a float32 softmax or a missing scale is never hidden behind the corner.

A corner is a boolean region of one call's output, computed from the call's arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnscore.maths.golden import causal_keep

if TYPE_CHECKING:
    from attnscore.boundary.outputs import Received
    from attnscore.maths.contract import Contract

__all__ = ["Corner", "CORNERS", "get_corner", "corner_region", "set_aside", "applicable_corners"]


@dataclass(frozen=True)
class Corner:
    """One corner of the output that a convention governs.

    Attributes:
        name: the corner's name, as written in ``conventions:`` and ``--allow``.
        summary: where it is, in words ("rows whose every key is masked").
        stated: the spec's own convention there, in words.
        applies: ``contract -> bool``.
        region: ``(contract, args by contract parameter name) -> bool array`` of which output
            entries lie in the corner (broadcast to the output's shape by the caller), or None.
    """

    name: str
    summary: str
    stated: str
    applies: Callable[[Contract], bool]
    region: Callable[[Contract, Mapping[str, np.ndarray]], np.ndarray | None]


def _rows_without_keys(contract: Contract, args: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """``(..., n_q, 1)``: True for the query rows that keep no key (mask or causal flag)."""
    if contract.kind == "causal":
        n_q, n_k = np.shape(args["Q"])[-2], np.shape(args["K"])[-2]
        alignment = "top_left" if contract.name.endswith("top_left") else "bottom_right"
        keep = causal_keep(n_q, n_k, alignment)
    else:
        masks = [name for name in contract.parameter_names if name in contract.bool_parameters]
        if not masks:
            return None
        keep = np.asarray(args[masks[0]], dtype=bool)
    return np.asarray(~keep.any(axis=-1, keepdims=True))


CORNERS: dict[str, Corner] = {
    corner.name: corner
    for corner in (
        Corner(
            name="fully_masked_row",
            summary="rows whose every key is masked (no key to attend to)",
            stated="weights 0, so the output row is 0",
            applies=lambda c: c.kind in ("weights", "attention", "causal"),
            region=_rows_without_keys,
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
    contract's parameter names), as a bool array of ``shape``; None when none do or it cannot say."""
    corner = CORNERS[name]
    if not corner.applies(contract):
        return None
    rows = corner.region(contract, args)
    if rows is None:
        return None
    try:
        region = np.broadcast_to(rows, shape)
    except ValueError:
        return None
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
