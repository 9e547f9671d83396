"""A module handed in, as a spec states it: ``function.module``.

``function.module`` makes the spec grade a ``torch.nn.Module`` subclass named ``function.name``
instead of a function::

    function:
      name: BilinearScore
      contract: bilinear_scores
      module:
        init: {d_q: {size: d_q}, d_k: {size: d_k}, bias: false}   # constructor keyword arguments
                                      # ({value: num_heads}: a scalar integer parameter's value)
        weights: {W: weight}          # contract parameter -> the module's parameter name
        forward: [Q, K]               # optional: forward's order of the other parameters

The contract and its parameters stay as they are (golden values, tolerances, properties and
mistakes see ``W`` as an input); the worker builds the module per call and passes the drawn
weights under the stated names (:mod:`attnscore.boundary.modules`). :func:`read_module` checks
the meaning (the schema has checked the form) and reports each problem located.
"""

from __future__ import annotations

from typing import Any

from attnscore.boundary.modules import InitValue, ModuleConfig, SizeOf, ValueOf
from attnscore.spec.located import Positioned, SpecProblem
from attnscore.spec.schema import found_text

__all__ = ["read_module"]


def _symbols(parameters: list[dict[str, Any]]) -> dict[str, SizeOf]:
    """Each shape symbol of the written parameters -> where its size is read: the first parameter
    that has it, its axis counted from the last (so leading batch dims do not matter)."""
    where: dict[str, SizeOf] = {}
    for p in parameters:
        shape = [s for s in p["shape"] if isinstance(s, str)]
        for i, symbol in enumerate(shape):
            if symbol != "..." and symbol.isidentifier():
                where.setdefault(symbol, SizeOf(p["name"], i - len(shape), symbol))
    return where


def read_module(
    doc: Positioned, fn: dict[str, Any], masks: frozenset[str], problems: list[SpecProblem]
) -> ModuleConfig | None:
    """``function.module`` of the spec's ``fn`` as a :class:`ModuleConfig`, or None when the spec
    has none or it has problems (appended to ``problems``, each located). ``masks``: the contract's
    bool and int parameters, which cannot be weights.

    Rules: each ``weights`` key is one of ``function.parameters``, a float tensor without leading
    dims (a module's parameter has one shape), and each module name is stated once; ``forward``
    lists exactly the parameters that are neither weights nor taken by the constructor; a
    ``{value: PARAMETER}`` names a parameter of shape ``[]`` (a whole number such as ``num_heads``),
    which then goes to the constructor only; a ``{size: SYMBOL}`` names a shape symbol of
    ``function.parameters``; ``function.factory`` is not set too.
    """
    raw = fn.get("module")
    if raw is None:
        return None
    before = len(problems)
    where = ("function", "module")
    parameters = fn["parameters"]
    shapes = {p["name"]: list(p["shape"]) for p in parameters}
    names = list(shapes)
    if fn.get("factory"):
        problems.append(
            doc.problem(
                ("function", "factory"),
                "expected function.module or function.factory, not both (a module is built from its class)",
                key=True,
            )
        )
    weights: list[tuple[str, str]] = []
    holder: dict[str, str] = {}
    for parameter, module_name in (raw.get("weights") or {}).items():
        at = (*where, "weights", parameter)
        if parameter not in shapes:
            problems.append(
                doc.problem(
                    at,
                    f"expected a parameter of function.parameters ({', '.join(names)}), found {parameter!r}",
                    key=True,
                )
            )
        elif parameter in masks:
            problems.append(
                doc.problem(
                    at, f"expected a float parameter as a weight, found {parameter!r} (a mask or an integer)", key=True
                )
            )
        elif "..." in shapes[parameter] or len(shapes[parameter]) == 0:
            problems.append(
                doc.problem(
                    at,
                    "expected a weight of one fixed shape (no leading dims '...', at least one axis), found "
                    f"{parameter} with shape [{', '.join(map(str, shapes[parameter]))}]",
                    key=True,
                )
            )
        elif module_name in holder:
            problems.append(
                doc.problem(
                    at,
                    f"expected each module parameter name once, found {module_name!r} again (it already holds "
                    f"{holder[module_name]})",
                )
            )
        else:
            holder[module_name] = parameter
            weights.append((parameter, module_name))
    weight_params = {p for p, _ in (raw.get("weights") or {}).items()}
    init_params = {
        v["value"] for v in (raw.get("init") or {}).values() if isinstance(v, dict) and isinstance(v.get("value"), str)
    }
    others = [n for n in names if n not in weight_params and n not in init_params]
    forward = list(raw.get("forward", []))
    if "forward" in raw:
        for i, name in enumerate(forward):
            if name not in shapes:
                problems.append(
                    doc.problem(
                        (*where, "forward", i),
                        f"expected a parameter of function.parameters ({', '.join(names)}), found {name!r}",
                    )
                )
            elif name in weight_params:
                problems.append(
                    doc.problem(
                        (*where, "forward", i),
                        f"expected a parameter that is not a weight ({', '.join(others) or 'none'}), found the weight "
                        f"{name!r} (the module holds it)",
                    )
                )
        if sorted(forward) != sorted(others) and len(problems) == before:
            what = "a weight or a constructor value" if init_params else "a weight"
            problems.append(
                doc.problem(
                    (*where, "forward"),
                    f"expected every parameter that is not {what} once, in forward's order ({', '.join(others)} in "
                    f"some order), found [{', '.join(forward)}]",
                )
            )
    symbols = _symbols(parameters)
    init: list[tuple[str, InitValue | SizeOf | ValueOf]] = []
    for name, value in (raw.get("init") or {}).items():
        if isinstance(value, dict) and "value" in value:
            parameter = value["value"]
            if parameter not in shapes or shapes[parameter] != []:
                scalars = ", ".join(n for n in names if shapes[n] == []) or "none"
                problems.append(
                    doc.problem(
                        (*where, "init", name, "value"),
                        f"expected a parameter of function.parameters with shape [] (a whole number; here: {scalars}), "
                        f"found {parameter!r}"
                        + (f" with shape [{', '.join(map(str, shapes[parameter]))}]" if parameter in shapes else ""),
                    )
                )
                continue
            init.append((name, ValueOf(parameter)))
        elif isinstance(value, dict):
            symbol = value["size"]
            if symbol not in symbols:
                problems.append(
                    doc.problem(
                        (*where, "init", name, "size"),
                        f"expected a shape symbol of function.parameters ({', '.join(sorted(symbols))}), found "
                        f"{found_text(symbol)}",
                    )
                )
                continue
            init.append((name, symbols[symbol]))
        else:
            init.append((name, tuple(value) if isinstance(value, list) else value))
    if len(problems) > before:
        return None
    return ModuleConfig(tuple(init), tuple(weights), tuple(forward))
