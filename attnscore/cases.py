"""Cases: the spec's rubric items turned into concrete calls with golden values.

Worked examples come first, in spec order, then properties. Each case holds the calls to make
(arguments already cast to the tested dtype), and for each call the float64 golden value and the
per-entry allowed error. Generated inputs are derandomised: the seed of a property's examples is
derived from (spec id, spec version, base seed, property name, dtype), so the same spec always
gives the same cases.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from attnscore.properties import get_property
from attnscore.spec import Spec
from attnscore.strategies import draw_examples
from attnscore.tolerance import Tolerance, allowed_error

__all__ = ["Call", "Case", "build_cases", "cast", "derive_seed"]

_TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Call:
    """One call of the implementation: arguments, golden value and allowed error."""

    args: dict[str, np.ndarray]
    golden: np.ndarray
    allowed: np.ndarray


@dataclass(frozen=True)
class Case:
    """One rubric item made concrete.

    Attributes:
        id: ``example:<id>`` or ``property:<name>``.
        kind: ``"example"`` or ``"property"``.
        title: one line.
        statement: for properties, the spec's student-facing statement; for examples, "".
        calls: the calls to make; a case passes when every call passes.
        points: exact points.
        visibility: ``"visible"`` or ``"hidden"``.
        location: ``file:line`` in the spec.
        tolerance: the tolerance applied.
        property_name: the registered property's name, or "".
    """

    id: str
    kind: str
    title: str
    statement: str
    calls: tuple[Call, ...]
    points: Fraction
    visibility: str
    location: str
    tolerance: Tolerance
    property_name: str = ""


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from a SHA-256 of the parts (stable across runs and machines)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def cast(array: np.ndarray, dtype: str) -> np.ndarray:
    """Round ``array`` to ``dtype`` (bfloat16 values come back stored as float32)."""
    t = torch.as_tensor(np.asarray(array, dtype=np.float64)).to(_TORCH_DTYPES[dtype])
    if dtype == "bfloat16":
        t = t.to(torch.float32)
    return np.array(t.numpy(), order="C")


def _call(spec: Spec, args: dict[str, np.ndarray], dtype: str, tolerance: Tolerance) -> Call:
    received_args = {name: cast(args[name], dtype) for name in spec.parameter_names}
    golden = spec.contract.golden(received_args)
    d_k, scale = spec.contract.error_scale(received_args)
    return Call(received_args, golden, allowed_error(tolerance, golden, dtype, d_k, scale))


def build_cases(spec: Spec, dtype: str | None = None, seed: int | None = None) -> list[Case]:
    """Build every case of ``spec`` for ``dtype`` (default: the spec's first) and base ``seed``."""
    dtype = dtype or spec.dtypes[0]
    base_seed = spec.seed if seed is None else seed
    cases = []
    for ex in spec.worked_examples:
        tol = ex.tolerance or spec.tolerance
        cases.append(Case(
            id=f"example:{ex.id}", kind="example", title=ex.title, statement="",
            calls=(_call(spec, ex.inputs, dtype, tol),), points=ex.points, visibility=ex.visibility,
            location=spec.location(ex.line), tolerance=tol,
        ))
    for use in spec.properties:
        prop = get_property(use.name)
        prop_seed = derive_seed(spec.id, spec.version, base_seed, use.name, dtype)
        examples = draw_examples(prop.strategy(spec.contract, use.max_value), use.examples, prop_seed)
        calls = tuple(_call(spec, spec.contract.pack(Q, K), dtype, spec.tolerance) for Q, K in examples)
        cases.append(Case(
            id=f"property:{use.name}", kind="property", title=use.statement, statement=use.statement,
            calls=calls, points=use.points, visibility=use.visibility, location=spec.location(use.line),
            tolerance=spec.tolerance, property_name=use.name,
        ))
    return cases
