"""Where a submission's code names the calls of a spec's rules, read statically before anything runs.

A spec's rules (:mod:`attnscore.spec.rules`) forbid or require calls by dotted name. This module
reads every ``.py`` file of a :class:`~attnscore.submission.files.Submission` (a notebook's kept
code included: its conversion keeps each statement under a ``# cell N`` comment, so a place is named
by its cell) with :mod:`ast`, resolves each name through the file's imports (``import
torch.nn.functional as F`` makes ``F.scaled_dot_product_attention`` the dotted name
``torch.nn.functional.scaled_dot_product_attention``; ``from torch.autograd import grad`` makes
``grad`` ``torch.autograd.grad``; ``getattr(F, "scaled_dot_product_attention")`` with a literal
name too), and lists the places that name a rule's call: anywhere for ``during: any``, inside a
function named ``backward`` for ``during: backward``, outside one for ``during: forward``. A rule
about ``torch.autograd.backward`` or ``torch.Tensor.backward`` also finds ``<tensor>.backward(...)``
method calls.

Nothing is run, so what is found is what the code says, not what it does: the worker's traps
(:mod:`attnscore.boundary.traps`) see what it does. Neither is a security boundary (a name built at
run time escapes this reading); see :mod:`attnscore.check.rule_cases` for how both are judged.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from attnscore.spec.rules import Rule
from attnscore.submission.files import Submission

__all__ = ["rule_places", "named_calls", "MOST_PLACES"]

MOST_PLACES = 5
"""Places named per rule (then how many more)."""

_NOTEBOOK = b"# Definitions taken from the notebook "
_BACKWARD_METHODS = ("torch.autograd.backward", "torch.Tensor.backward")


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import of the file (any depth)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    """The dotted name an expression stands for (a name, attributes of one, ``getattr(x, "literal")``)."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            root = names.get(node.id)
            return None if root is None else ".".join([root, *reversed(parts)])
        else:
            return None


def named_calls(source: str) -> list[tuple[str, int, bool]]:
    """``(dotted name, line, inside a function named backward)`` for every name of ``source`` that
    resolves through its imports, and ``("<method>.backward", line, inside)`` for every
    ``x.backward(...)`` call; ``[]`` when it does not parse.

    >>> named_calls("import torch.nn.functional as F\\ndef backward(ctx, g):\\n    return F.relu(g)\\n")
    [('torch.nn.functional', 1, False), ('torch.nn.functional.relu', 3, True), ('torch.nn.functional', 3, True)]
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = _aliases(tree)
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "backward":
            inside = True
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            dotted = _dotted(node, names)
            if dotted is not None:
                found.append((dotted, getattr(node, "lineno", 0), inside))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            found.append(("<method>.backward", node.lineno, inside))
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # the import itself names the module only
            for alias in node.names:
                module = getattr(node, "module", None)
                full = f"{module}.{alias.name}" if module else alias.name
                found.append((full, node.lineno, inside))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    try:
        visit(tree, False)
    except RecursionError:  # a hostile nesting depth: what was found so far
        pass
    return found


def _cell_of(lines: list[str], line: int) -> str | None:
    """The notebook cell holding ``line`` of a converted notebook (its nearest ``# cell N`` above)."""
    for text in reversed(lines[: max(line, 0)]):
        if text.startswith("# cell ") and text[7:].strip().isdigit():
            return text[7:].strip()
    return None


def _matches(rule: Rule, dotted: str, inside: bool) -> bool:
    if rule.during == "backward" and not inside or rule.during == "forward" and inside:
        return False
    if dotted == "<method>.backward":
        return any(n in _BACKWARD_METHODS for n in rule.names)
    return dotted in rule.names


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def rule_places(submission: Submission, rules: Sequence[Rule]) -> dict[str, tuple[str, ...]]:
    """For each rule id, where the submission's ``.py`` files name one of its calls in the rule's
    phase, one entry per file and name: ``"solution.py, lines 12 and 25"``, ``"hw3.ipynb, cell 4"``
    (prefixed with the call, ``"grad: solution.py, line 26"``, when the rule names several; at most
    :data:`MOST_PLACES` lines per entry, then how many more); an empty tuple when none does."""
    if not rules:
        return {}
    found: dict[str, dict[tuple[str, str], list[str]]] = {rule.id: {} for rule in rules}
    for name, content in submission.files:
        if not name.endswith(".py"):
            continue
        notebook = content.startswith(_NOTEBOOK)
        source = content.decode("utf-8", errors="replace")
        lines = source.splitlines()
        shown = name[: -len(".py")] + ".ipynb" if notebook else name
        for dotted, line, inside in named_calls(source):
            for rule in rules:
                if not _matches(rule, dotted, inside):
                    continue
                cell = _cell_of(lines, line) if notebook else None
                where = f"cell {cell}" if cell else f"line {line}"
                what = ".backward()" if dotted == "<method>.backward" else dotted.rsplit(".", 1)[-1]
                at = found[rule.id].setdefault((shown, what if len(rule.names) > 1 else ""), [])
                if where not in at:
                    at.append(where)
    out: dict[str, tuple[str, ...]] = {}
    for rule_id, places in found.items():
        entries = []
        for (shown, what), wheres in places.items():
            kind = wheres[0].split()[0]
            numbers = [w.split()[1] for w in wheres[:MOST_PLACES]]
            more = [f"{len(wheres) - MOST_PLACES} more"] if len(wheres) > MOST_PLACES else []
            text = f"{shown}, {kind}{'s' * (len(wheres) > 1)} {_joined(numbers + more)}"
            entries.append(f"{what}: {text}" if what else text)
        out[rule_id] = tuple(entries)
    return out
