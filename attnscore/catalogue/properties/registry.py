"""The property registry: what a property is, and the table of registered ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.outputs import Received
from attnscore.catalogue.tables import add_new, named
from attnscore.maths.contract import Contract
from attnscore.maths.lazy_hypothesis import st

__all__ = [
    "Property",
    "CheckContext",
    "PROPERTIES",
    "first_index",
    "first_moved",
    "get_property",
    "register",
    "applicable_properties",
]

Args = dict[str, np.ndarray]


@dataclass(frozen=True)
class CheckContext:
    """What a property's ``check`` sees for one example.

    Attributes:
        outputs: the plain results of the example's calls, in call order; a backward call's is a
            :class:`attnscore.boundary.gradients.WithGradients` (its gradients keyed by the spec's names).
        args: the arguments of those calls (cast to the tested dtype).
        goldens, allowed: the float64 golden value and allowed error of each call.
        inspections: per call, the runner's ``last_inspection`` (``{"mutated": [...], "aliased": [...]}``)
            or None when the runner cannot inspect calls.
        dtype, device: the tested dtype and device.
        contract: the spec's contract.
        example: the drawn example the calls were made from.
        gradient_goldens, gradient_allowed: per call, the float64 golden gradients and allowed
            errors of a backward call (:mod:`attnscore.maths.golden_gradients`), else None.
    """

    outputs: Sequence[Received]
    args: Sequence[Args]
    goldens: Sequence[np.ndarray]
    allowed: Sequence[np.ndarray]
    inspections: Sequence[dict[str, list[str]] | None]
    dtype: str
    device: str
    contract: Contract
    example: Any = None
    gradient_goldens: Sequence[Mapping[str, np.ndarray] | None] = ()
    gradient_allowed: Sequence[Mapping[str, np.ndarray] | None] = ()

    def values(self, i: int) -> np.ndarray:
        return self.outputs[i].array.astype(np.float64)


def no_hint(got: np.ndarray, golden: np.ndarray) -> str | None:
    return None


def first_index(flags: np.ndarray) -> tuple[int, ...] | None:
    """The first index (C order) where the bool array ``flags`` is True, or None where none is."""
    found = np.argwhere(flags)
    return tuple(int(i) for i in found[0]) if len(found) else None


def first_moved(
    before: np.ndarray, after: np.ndarray, allowed: np.ndarray, among: np.ndarray | bool = True
) -> tuple[int, ...] | None:
    """The first index where ``after`` differs from ``before`` by more than twice ``allowed``, among
    the entries ``among`` selects (a bool array that broadcasts to them; True: all of them), or None
    where none does; a NaN on either side is no move (the properties that change some inputs and
    watch the outputs they must not change)."""
    with np.errstate(invalid="ignore"):
        return first_index((np.abs(after - before) > 2 * allowed) & among)


@dataclass(frozen=True)
class Property:
    """A registered property.

    Attributes:
        name: registry name, used in specs.
        summary: what it checks, for documentation and as the default statement.
        strategy: ``(contract, max_value) -> strategy of examples``.
        applies: ``contract -> bool``: whether the property makes sense for the contract.
        calls: ``(contract, example) -> list of argument dicts``; default: the example is the arguments.
        check: ``CheckContext -> str | None`` over all of an example's outputs, or None.
        golden: whether every call is also compared with the golden value.
        hint: ``(got, golden) -> str | None``: a sentence explaining a failing output.
        diagnosis: the catalogue mistake to report when ``check`` fails (see :mod:`attnscore.catalogue.mistakes`):
            its id, or ``CheckContext -> id | None``. Only for a mistake the check observes directly
            (an input the runner saw change, a float64 result with the right values), never one
            inferred from values: those go to the value diagnosis, which needs evidence on further
            inputs (:mod:`attnscore.check.diagnosis`; None here).
        default_max_value: default bound on input magnitudes.
        layouts: ``(contract, example) -> {argument: layout}``: the memory layout each argument of
            the example's *last* call is handed over in (:mod:`attnscore.boundary.layouts`); earlier calls
            and properties without it get fresh contiguous tensors.
        call_layouts: ``(contract, example) -> [{argument: layout} | None, ...]``, one entry per call
            (None: fresh contiguous tensors); when set it replaces ``layouts``, so that each call
            can hand over different arguments as views.
        every_dtype: whether each example is also called in every other dtype the spec lists
            (:func:`attnscore.check.cases.property_calls`), so that grading in one dtype still sees
            what the function returns for inputs of the others.
        upstream: ``(contract, example) -> dO`` (float64, the output's shape): the example's last
            call also runs its backward pass with this upstream gradient, and its output comes
            back with the gradients (:mod:`attnscore.catalogue.properties.gradients`); None: forward only.
        dtype: the dtype every call of the property is made in, whatever the case's (``"float64"``
            for ``gradcheck``'s finite differences); None: the case's dtype.
        omits: whether, for a spec that marks masks optional
            (:attr:`attnscore.maths.contract.Contract.omittable`), the property's examples also
            hand them over as the course's signature allows, in turn: given, left out, passed as
            None (:func:`attnscore.check.cases.property_calls`); only for properties whose check
            does not depend on the mask's values.
        corner: the convention corner the property is dedicated to (``"fully_masked_row"``;
            :mod:`attnscore.catalogue.conventions`): it judges the corner, every other case sets it
            aside; ``""`` for none.
    """

    name: str
    summary: str
    strategy: Callable[[Contract, float], st.SearchStrategy[Any]]
    applies: Callable[[Contract], bool] = lambda c: True
    calls: Callable[[Contract, Any], list[Args]] = lambda c, ex: [ex]
    check: Callable[[CheckContext], str | None] | None = None
    golden: bool = True
    hint: Callable[[np.ndarray, np.ndarray], str | None] = no_hint
    diagnosis: str | Callable[[CheckContext], str | None] | None = None
    default_max_value: float = 10.0
    tags: tuple[str, ...] = field(default_factory=tuple)
    layouts: Callable[[Contract, Any], dict[str, str]] | None = None
    call_layouts: Callable[[Contract, Any], list[dict[str, str] | None]] | None = None
    every_dtype: bool = False
    upstream: Callable[[Contract, Any], np.ndarray] | None = None
    dtype: str | None = None
    omits: bool = False
    corner: str = ""

    def examples(self, contract: Contract, max_value: float) -> st.SearchStrategy[Any]:
        """The strategy of this property's examples for ``contract``, inside its shape bounds.

        Without bounds this is ``strategy(contract, max_value)``; with bounds (``n_q <= n_k``,
        :mod:`attnscore.maths.bounds`) an example is kept only when every call it makes lies inside
        them, so a kernel that refuses other shapes is only tried on its domain.
        """
        drawn = self.strategy(contract, max_value)
        if not contract.bounds:
            return drawn
        from attnscore.maths.bounds import admits

        return drawn.filter(lambda ex: all(admits(contract, args) for args in self.calls(contract, ex)))

    def diagnosis_for(self, ctx: CheckContext) -> str | None:
        """The mistake id to report for this failing example, or None (see ``diagnosis``)."""
        return self.diagnosis(ctx) if callable(self.diagnosis) else self.diagnosis


PROPERTIES: dict[str, Property] = {}


def register(prop: Property) -> Property:
    """Add ``prop`` to the registry; its name must be new."""
    add_new(PROPERTIES, prop.name, prop, "property")
    return prop


def get_property(name: str) -> Property:
    """Return the property called ``name``; raise KeyError naming the known ones."""
    return named(PROPERTIES, name, "property")


def applicable_properties(contract: Contract) -> list[str]:
    """Names of the registered properties that apply to ``contract``."""
    return [p.name for p in PROPERTIES.values() if p.applies(contract)]
