"""The interface a spec states for its function, beyond the contract's own legend.

A course states more than the contract's ``(..., n_q, d_k)``: CS336 passes ``(batch, n, d)``
exactly, passes its masks in the scores' full shape, and makes the mask optional
(``mask=None``). A spec says so in ``function.parameters``:

- **named leading dims**: ``shape: [batch, n_q, d_k]`` (or ``[batch, heads, n_q, d_k]``) in place
  of ``["...", n_q, d_k]``: every parameter and the result whose legend starts with ``...`` names
  the same dims (a mask may keep ``...``: it then comes in any form that broadcasts, at that rank),
  inputs have exactly that rank, each named dim has one size throughout;
- **full-shape masks**: ``full_shape: true`` on a mask (implied by naming its leading dims): drawn
  masks have the scores' full shape, never size-1 broadcast dims nor one ``(n_q, n_k)`` mask
  shared by the batch;
- **optional masks**: ``optional: true``: calls sometimes leave the mask out and sometimes pass
  None; either means every key is kept. Only a mask that no required positional parameter
  follows (a call can leave out trailing arguments only);
- **unit leading dims**: ``shape: [1, seq]`` for a parameter whose legend has no ``...``
  (``token_positions (seq,)``): the course passes it with leading dims of size 1 (CS336 passes
  RoPE's positions as ``(1, seq)`` to multi-head attention), so every drawn input has them too.

:func:`read_interface` reads these, reports each problem located, and gives the declared shapes
with ``...`` back in place of the names (for :func:`attnscore.spec.examples.shape_ties`) and the
:class:`Interface` the contract is then narrowed with
(:meth:`attnscore.maths.contract.Contract.interfaced`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnscore.maths.contract import Contract
from attnscore.spec.examples import legend_shape_text
from attnscore.spec.located import Positioned, SpecProblem
from attnscore.spec.schema import found_text

__all__ = ["Interface", "read_interface"]


@dataclass(frozen=True)
class Interface:
    """What a spec states about its function's arguments (see the module docstring).

    Attributes:
        leading: the named leading dims (``("batch",)``), or None for the open ``...``.
        full_masks: the masks that come in the scores' full shape.
        omittable: the masks the course makes optional.
        unit_dims: ``(parameter, count)``: parameters passed with ``count`` leading dims of size 1.
    """

    leading: tuple[str, ...] | None = None
    full_masks: frozenset[str] = field(default_factory=frozenset)
    omittable: frozenset[str] = field(default_factory=frozenset)
    unit_dims: tuple[tuple[str, int], ...] = ()


def _unit_lead(legend: tuple[str, ...], declared: list[Any]) -> int:
    """How many leading ``1``s ``declared`` has before a legend without ``...`` (0: none, or not
    that form)."""
    if legend[:1] == ("...",) or len(declared) <= len(legend):
        return 0
    count = len(declared) - len(legend)
    lead, rest = declared[:count], declared[count:]
    ok = all(n == 1 and not isinstance(n, bool) for n in lead) and list(rest) == list(legend)
    return count if ok else 0


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value.isidentifier()


def _lead_text(lead: tuple[str, ...] | None) -> str:
    return "..." if lead is None else "[" + ", ".join(lead) + "]" if lead else "no leading dims"


def _split(
    doc: Positioned,
    path: tuple[Any, ...],
    legend: tuple[str, ...],
    declared: list[Any],
    symbols: set[str],
    problems: list[SpecProblem],
) -> tuple[tuple[str, ...] | None, tuple[Any, ...]]:
    """``(leading names or None, the shape with "..." back in their place)`` of one declared shape
    whose contract legend starts with ``...``; a leading entry that cannot name a dim is a problem."""
    if legend[:1] != ("...",) or not declared or declared[0] == "..." or len(declared) < len(legend) - 1:
        return None, tuple(declared)
    count = len(declared) - (len(legend) - 1)
    lead, rest = declared[:count], declared[count:]
    ok = True
    for k, name in enumerate(lead):
        if not _is_name(name) or name in symbols:
            problems.append(
                doc.problem(
                    path + (k,),
                    "expected a name for a leading dim (e.g. batch, heads), not a legend symbol, "
                    f"before {legend_shape_text(legend[1:])}, found {found_text(name)}",
                )
            )
            ok = False
    if len(set(lead)) != len(lead):
        problems.append(
            doc.problem(path, f"expected each leading dim named once, found {legend_shape_text(tuple(lead))}")
        )
        ok = False
    return (tuple(str(n) for n in lead) if ok else None), ("...", *rest)


def read_interface(
    doc: Positioned, contract: Contract, fn: dict[str, Any], problems: list[SpecProblem]
) -> tuple[list[tuple[str, tuple[Any, ...]]], tuple[Any, ...], Interface]:
    """The declared parameter shapes and result shape with ``...`` in place of named leading dims,
    and the :class:`Interface` of ``fn`` (a spec's ``function``); each problem is added to
    ``problems``, located (a name that cannot name a dim, leading dims that differ between
    parameters, ``optional`` or ``full_shape`` on a parameter that is not a mask, an optional mask
    that a required positional parameter follows)."""
    legends = dict(contract.parameters)
    symbols = {sym for legend in (*legends.values(), contract.returns) for sym in legend} - {"..."}
    declared: list[tuple[str, tuple[Any, ...]]] = []
    leads: list[tuple[tuple[Any, ...], str, tuple[str, ...] | None, bool]] = []  # (path, name, lead, is_mask)
    masks = contract.mask_parameters
    full: set[str] = set()
    omittable: set[str] = set()
    units: list[tuple[str, int]] = []
    for i, raw in enumerate(fn["parameters"]):
        name, shape = raw["name"], list(raw["shape"])
        path: tuple[Any, ...] = ("function", "parameters", i)
        legend = legends.get(name)
        if legend is None:  # not the contract's parameter: the shape check says so
            declared.append((name, tuple(shape)))
            continue
        unit = _unit_lead(legend, shape)
        if unit:
            units.append((name, unit))
            shape = shape[unit:]
        before = len(problems)
        lead, normal = _split(doc, path + ("shape",), legend, shape, symbols, problems)
        declared.append((name, normal))
        # a shape already refused, or too short for its legend (the shape check says so), is not compared
        if legend[:1] == ("...",) and len(problems) == before and len(shape) >= len(legend) - 1:
            leads.append((path + ("shape",), name, lead, name in masks))
        for flag, chosen in (("optional", omittable), ("full_shape", full)):
            if raw.get(flag) is not True:
                continue
            if name not in masks:
                known = ", ".join(sorted(masks)) or "none"
                problems.append(
                    doc.problem(
                        path + (flag,),
                        f"expected {flag} only on a mask parameter of contract {contract.name} ({known}), "
                        f"found it on {name}",
                        key=True,
                    )
                )
            elif flag == "full_shape" and legend[:1] != ("...",):
                problems.append(
                    doc.problem(
                        path + (flag,), f"expected full_shape on a mask with leading dims, found {name}", key=True
                    )
                )
            else:
                chosen.add(name)
    returns_raw = list(fn["returns"]["shape"])
    before = len(problems)
    returns_lead, returns = _split(
        doc, ("function", "returns", "shape"), contract.returns, returns_raw, symbols, problems
    )
    if contract.returns[:1] == ("...",) and len(problems) == before and len(returns_raw) >= len(contract.returns) - 1:
        leads.append((("function", "returns", "shape"), "the result", returns_lead, False))
    leading = _common_leading(doc, leads, problems)
    for _, name, lead, is_mask in leads:
        if is_mask and lead is not None and lead == leading:
            full.add(name)  # a mask with the named dims has the scores' full shape
    _check_optional_order(doc, contract, fn, omittable, problems)
    return declared, returns, Interface(leading, frozenset(full), frozenset(omittable), tuple(units))


def _common_leading(
    doc: Positioned,
    leads: list[tuple[tuple[Any, ...], str, tuple[str, ...] | None, bool]],
    problems: list[SpecProblem],
) -> tuple[str, ...] | None:
    """The leading dims every batched parameter and the result name (None: all ``...``); a
    parameter that names others (a mask may keep ``...``) is a located problem."""
    first = next(((name, lead) for _, name, lead, is_mask in leads if not is_mask and lead is not None), None)
    if first is None:
        first = next(((name, lead) for _, name, lead, _ in leads if lead is not None), None)
    if first is None:
        return None
    owner, leading = first
    for path, _, lead, is_mask in leads:
        if lead == leading or (is_mask and lead is None):
            continue
        problems.append(
            doc.problem(
                path,
                f"expected the leading dims {_lead_text(leading)} as {owner} names them"
                + (" (a mask may keep ...)" if is_mask else "")
                + f", found {_lead_text(lead)}",
            )
        )
    return leading


def _check_optional_order(
    doc: Positioned, contract: Contract, fn: dict[str, Any], omittable: set[str], problems: list[SpecProblem]
) -> None:
    """An optional positional parameter must come after every required positional one: a call can
    leave out only trailing positional arguments (by-name ones anywhere)."""
    positional = [
        (i, raw["name"]) for i, raw in enumerate(fn["parameters"]) if raw["name"] not in contract.keyword_parameters
    ]
    seen: str | None = None
    for i, name in positional:
        if name in omittable:
            seen = seen or name
        elif seen is not None:
            problems.append(
                doc.problem(
                    ("function", "parameters", i, "name"),
                    f"expected every required positional parameter before the optional {seen} (a call can leave "
                    f"out only trailing arguments), found {name} after it",
                )
            )
            return
