"""A spec re-configured with other keyword values: the reference, golden values, error bounds and
properties follow them, and the worked examples whose expected values no longer hold are left out.

``attnscore test --keyword window_size=3,0`` and ``--sweep`` run a spec under options the spec does
not fix (:mod:`attnscore.check.engineer_options`): the spec's contract is configured again with the
new values merged over the spec's own ``function.keywords``
(:meth:`attnscore.maths.contract.Contract.configured`), then given the interface the spec states
(ties, named leading dims, optional masks, bounds) as the loader gave it. A worked example is kept
when its written values still hold: its expected value (and its expected gradients and logsumexp,
when written) equal the float64 golden values under the new options with the loader's comparison
(:data:`HOLDS_RTOL`, :data:`HOLDS_ATOL`), and a convention corner it tests still occurs.

A worked example that tests a convention corner (``convention: fully_masked_row``) is the only case
judged there: every property sets the corner aside. When its written value no longer holds but the
corner still applies and still occurs in its inputs, it is not left out (a kernel wrong only there
would pass) but *recomputed*: its expected value becomes the float64 golden value under the new
options, and its title and explanation say so (:func:`recomputed_example`).

Example:
    >>> from attnscore.spec.load import load_spec
    >>> from attnscore.check.verify import bundled_spec_path
    >>> done = reconfigured(load_spec(bundled_spec_path("sliding_window")), {"window_size": (3, 0), "causal": True})
    >>> done.spec.contract.option("window_size"), done.assumed, done.chosen
    ((3, 0), 'causal=false, window_size=(2, 1)', 'causal=true, window_size=(3, 0)')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.maths.contract import Contract
from attnscore.spec.model import Spec, WorkedExample

__all__ = [
    "HOLDS_ATOL",
    "HOLDS_RTOL",
    "Reconfigured",
    "example_holds",
    "reconfigured",
    "recomputed_example",
    "shown_value",
]

HOLDS_RTOL = 1e-9
HOLDS_ATOL = 1e-9
"""The loader's comparison of a written value with the golden one (``np.allclose``, NaN equal to NaN)."""


@dataclass(frozen=True)
class Reconfigured:
    """What :func:`reconfigured` made of a spec.

    Attributes:
        spec: the spec under the new options (its contract configured again; the examples that
            hold and the properties that apply kept).
        unheld: ids of the worked examples left out: their expected values assume the spec's options.
        recomputed: ids of the worked examples testing a convention corner whose expected values were
            recomputed under the new options (:func:`recomputed_example`), in :attr:`spec`.
        unapplied: names of the properties left out: they do not apply under the new options.
        assumed: the spec's values of the changed keywords, ``"causal=false, window_size=(2, 1)"``.
        chosen: their new values, ``"causal=true, window_size=(3, 0)"``.
    """

    spec: Spec
    unheld: tuple[str, ...] = ()
    unapplied: tuple[str, ...] = ()
    assumed: str = ""
    chosen: str = ""
    recomputed: tuple[str, ...] = ()


def shown_value(value: Any) -> str:
    """A keyword's value as the options spell it: ``true``, ``null``, ``(3, 0)``, ``0.125``, ``valid_length``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, tuple | list):
        return "(" + ", ".join(shown_value(v) for v in value) + ")"
    return str(value)


def _close(written: Any, golden: Any) -> bool:
    written, golden = np.asarray(written, dtype=np.float64), np.asarray(golden, dtype=np.float64)
    return written.shape == golden.shape and bool(
        np.allclose(written, golden, rtol=HOLDS_RTOL, atol=HOLDS_ATOL, equal_nan=True)
    )


def example_holds(contract: Contract, ex: WorkedExample) -> bool:
    """Whether worked example ``ex``'s written values hold for ``contract``: its expected value,
    expected gradients and expected logsumexp equal the float64 golden ones (the loader's comparison,
    :data:`HOLDS_RTOL`/:data:`HOLDS_ATOL`), and the convention corner it tests occurs in its inputs.
    Inputs the contract cannot take (a shape it refuses) do not hold."""
    from attnscore.catalogue.conventions import applicable_corners, corner_region

    try:
        with np.errstate(all="ignore"):
            golden = contract.golden(ex.inputs)
            if not _close(ex.expected, golden):
                return False
            if ex.upstream is not None and ex.expected_gradients:
                from attnscore.maths import golden_gradients

                grads = golden_gradients.contract_gradients(contract, ex.inputs, ex.upstream)
                if any(name not in grads or not _close(g, grads[name]) for name, g in ex.expected_gradients.items()):
                    return False
            if ex.expected_logsumexp is not None:
                from attnscore.maths.families.flash_attention_2 import logsumexp_golden

                lse = logsumexp_golden(ex.inputs["Q"], ex.inputs["K"], bool(contract.option("is_causal")))
                if not _close(ex.expected_logsumexp, lse):
                    return False
    except (ValueError, TypeError, KeyError, IndexError):
        return False
    if ex.convention:
        return ex.convention in applicable_corners(contract) and (
            corner_region(ex.convention, contract, ex.inputs, golden.shape) is not None
        )
    return True


def recomputed_example(contract: Contract, ex: WorkedExample, chosen: str) -> WorkedExample | None:
    """``ex``, a worked example testing a convention corner, with its expected value recomputed from
    the float64 golden path of ``contract`` (configured under ``chosen``, ``"causal=true"``), when the
    corner still applies to ``contract`` and occurs in the example's inputs; None otherwise (and for
    an example with written gradients or logsumexp, which are not recomputed).

    Example:
        >>> from attnscore.spec.load import load_spec
        >>> from attnscore.check.verify import bundled_spec_path
        >>> spec = load_spec(bundled_spec_path("sliding_window"))
        >>> fresh = reconfigured(spec, {"causal": True, "window_size": (3, 0)}).spec
        >>> ex = next(e for e in spec.worked_examples if e.id == "window_before_every_key")
        >>> recomputed_example(fresh.contract, ex, "causal=true").expected[0, :, 0, 0].tolist()
        [0.0, 0.0, 0.0, 5.0]
    """
    from attnscore.catalogue.conventions import applicable_corners, corner_region

    if not ex.convention or ex.expected_gradients or ex.expected_logsumexp is not None:
        return None
    if ex.convention not in applicable_corners(contract):
        return None
    try:
        with np.errstate(all="ignore"):
            golden = np.asarray(contract.golden(ex.inputs), dtype=np.float64)
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    if corner_region(ex.convention, contract, ex.inputs, golden.shape) is None:
        return None
    note = (
        f"Recomputed for {chosen}: the expected value is the float64 reference's under these options; "
        "the explanation above assumes the spec's own."
    )
    return dataclasses.replace(
        ex,
        expected=golden,
        title=f"{ex.title} (recomputed for {chosen})",
        explanation=f"{ex.explanation.rstrip()} {note}".strip(),
    )


def _again(contract: Contract, values: Mapping[str, Any]) -> Contract:
    """``contract`` (a loaded spec's) configured again with ``values`` merged over its own options,
    then given the interface the spec stated (ties, leading dims, masks, unit dims, bounds, sizes).

    Raises:
        ValueError: a keyword the contract does not take, or a value of the wrong kind.
    """
    from attnscore.maths.contracts import CONTRACTS

    merged = {**contract.options.stated(), **values}
    fresh = CONTRACTS[contract.name].configured(merged, contract.parameter_names)
    if contract.ties:
        fresh = fresh.tied(dict(contract.ties))
    fresh = fresh.interfaced(contract.leading, contract.full_masks, contract.omittable, contract.unit_dims)
    fresh = fresh.bounded(contract.bounds)
    return dataclasses.replace(fresh, fixed_sizes=contract.fixed_sizes)


def reconfigured(spec: Spec, values: Mapping[str, Any]) -> Reconfigured:
    """``spec`` with its contract's keywords ``values`` (name -> a value its :class:`Keyword` accepts)
    merged over the spec's own ``function.keywords``; the worked examples that no longer hold
    (:func:`example_holds`) and the properties, mistakes and convention corners that no longer apply
    are left out. Values equal to the spec's change nothing (one equal to the default of a keyword
    the spec left unset is passed to the implementation from then on, as the spec's keywords are).

    Raises:
        ValueError: a keyword the spec's contract does not take, or a value of the wrong kind
            (the message names it and what was expected).
    """
    from attnscore.catalogue.conventions import applicable_corners
    from attnscore.catalogue.mistakes import mistakes_for

    contract = spec.contract
    for name, value in values.items():
        try:
            kw = contract.keyword(name)
        except KeyError:
            known = ", ".join(k.name for k in contract.keywords) or "none"
            raise ValueError(f"expected a keyword of contract {contract.name} ({known}), found {name!r}") from None
        if not kw.accepts(value):
            raise ValueError(f"keyword {name}: expected {kw.expected()}, found {value!r}")
    normalised = {n: contract.keyword(n).normalised(v) for n, v in values.items()}
    changed = {n: v for n, v in normalised.items() if contract.option(n) != v}
    # a value equal to the default the spec left unset changes nothing but is passed from now on
    to_set = {n: v for n, v in normalised.items() if n in changed or n not in contract.options.given}
    if not to_set:
        return Reconfigured(spec)
    fresh = _again(contract, to_set)
    if not changed:
        return Reconfigured(dataclasses.replace(spec, contract=fresh))
    names = sorted(changed)
    chosen = ", ".join(f"{n}={shown_value(changed[n])}" for n in names)
    kept_list: list[WorkedExample] = []
    recomputed: list[str] = []
    for ex in spec.worked_examples:
        if example_holds(fresh, ex):
            kept_list.append(ex)
        elif (again := recomputed_example(fresh, ex, chosen)) is not None:
            kept_list.append(again)
            recomputed.append(ex.id)
    kept = tuple(kept_list)
    kept_ids = {ex.id for ex in kept}
    properties = tuple(use for use in spec.properties if spec.find_property(use.name).applies(fresh))
    mistakes = spec.mistakes
    if mistakes is not None:
        applying = {m.id for m in mistakes_for(fresh)} | {m.id for m in spec.own_mistakes}
        mistakes = tuple(m for m in mistakes if m in applying)
    corners = set(applicable_corners(fresh))
    new = dataclasses.replace(
        spec,
        contract=fresh,
        worked_examples=kept,
        properties=properties,
        mistakes=mistakes,
        set_aside=tuple(c for c in spec.set_aside if c in corners),
        not_asked=tuple(c for c in spec.not_asked if c in corners),
    )
    return Reconfigured(
        spec=new,
        unheld=tuple(ex.id for ex in spec.worked_examples if ex.id not in kept_ids),
        unapplied=tuple(use.name for use in spec.properties if use not in properties),
        assumed=", ".join(f"{n}={shown_value(contract.option(n))}" for n in names),
        chosen=chosen,
        recomputed=tuple(recomputed),
    )
