"""Tolerances in specs: reading them, and the rule that a tolerance must be able to fail a wrong answer."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from attnscore.maths.contract import Contract
from attnscore.maths.expectation import expect
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.located import Positioned, SpecProblem
from attnscore.spec.model import WorkedExample


def as_fraction(value: float | int) -> Fraction:
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def read_tolerance(raw: dict[str, Any] | None, default: Tolerance) -> Tolerance:
    if raw is None:
        return default
    return Tolerance(mode=raw["mode"], rtol=raw.get("rtol"), atol=raw.get("atol"), factor=float(raw.get("factor", 2.0)))


def _weakest_field(raw: Any) -> str | None:
    """The field of a tolerance mapping that a problem with its strength points at."""
    if not isinstance(raw, dict):
        return None
    rtol = raw.get("rtol")
    if isinstance(rtol, (int, float)) and rtol >= 1:  # rtol >= 1 alone accepts 0 for every value
        return "rtol"
    return next((f for f in ("atol", "rtol", "factor") if f in raw), "mode")


def tolerance_strength_problems(
    doc: Positioned, contract: Contract, examples: list[WorkedExample], default_tol: Tolerance, dtypes: Sequence[str]
) -> list[SpecProblem]:
    """Tolerances under which a trivial answer passes a worked example (the rule in the module docstring)."""
    found: list[SpecProblem] = []
    spec_raw = doc.data.get("tolerance")
    raws = doc.data["worked_examples"]
    index = {raw.get("id"): i for i, raw in reversed(list(enumerate(raws))) if isinstance(raw, dict)}
    reported: set[tuple[Any, ...]] = set()
    for ex in examples:
        i = index.get(ex.id, 0)
        candidates: list[tuple[Tolerance, tuple[Any, ...], Any]] = []
        if ex.tolerance is not None:
            candidates.append((ex.tolerance, ("worked_examples", i, "tolerance"), raws[i].get("tolerance")))
        if spec_raw is not None:
            candidates.append((default_tol, ("tolerance",), spec_raw))
        if not candidates:
            continue
        with np.errstate(all="ignore"):
            golden = contract.golden(ex.inputs)
        finite = np.isfinite(golden)
        nonzero = finite & (golden != 0)
        wrong = np.zeros_like(golden) if nonzero.any() else np.where(finite, golden + 1.0, golden)
        what = "an all-zero output" if nonzero.any() else "an output off by 1 in every entry"
        for tol, where, raw in candidates:
            if where in reported or tol.mode == "exact":
                continue
            for dtype in dtypes:
                with np.errstate(all="ignore"):
                    # the grader's own question (loading imports no torch: the ratio mode's reference error is bounded)
                    allowed = expect(contract, ex.inputs, dtype, tol, reference="a_priori").allowed
                    passes = bool(np.all(~finite | (np.abs(wrong - golden) <= allowed)))
                if passes:
                    field = _weakest_field(raw)
                    found.append(
                        doc.problem(
                            where + ((field,) if field else ()),
                            f"expected a tolerance under which {what} fails worked example {ex.id!r} (largest "
                            f"|expected| {float(np.max(np.abs(np.where(finite, golden, 0)), initial=0)):g}), found one "
                            f"that accepts it in {dtype} (allowed error up to "
                            f"{float(np.max(np.where(finite, allowed, 0), initial=0)):.3g})",
                        )
                    )
                    reported.add(where)
                    break
    return found


# Which tolerance fields each mode reads; any other field would be silently ignored.
_TOLERANCE_FIELDS = {"exact": set(), "close": {"rtol", "atol"}, "dot_bound": {"factor"}, "ratio": {"factor"}}


def tolerance_field_problems(doc: Positioned) -> list[SpecProblem]:
    """Tolerance fields that the chosen mode would ignore (``rtol`` under ``mode: exact``)."""
    found = []
    places: list[tuple[Any, ...]] = [("tolerance",)]
    places += [("worked_examples", i, "tolerance") for i in range(len(doc.data["worked_examples"]))]
    for path in places:
        raw: Any = doc.data
        for part in path:
            raw = raw.get(part) if isinstance(raw, dict) else raw[part] if isinstance(raw, list) else None
        if not isinstance(raw, dict):
            continue
        mode: Any = raw.get("mode")
        for field in sorted(set(raw) - {"mode"} - _TOLERANCE_FIELDS.get(mode, set())):
            uses = ", ".join(sorted(_TOLERANCE_FIELDS.get(mode, set()))) or "no other field"
            found.append(
                doc.problem(path + (field,), f"expected only fields mode {mode} uses ({uses}), found {field}", key=True)
            )
    return found
