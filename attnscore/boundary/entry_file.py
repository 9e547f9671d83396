"""Which file of a submission is imported: the one top-level ``.py`` file that defines the graded
function (read with ``ast``, nothing run), conventional names breaking a tie; a notebook's conversion
named as the student knows it.
"""

from __future__ import annotations

import os
from typing import Any

_CONVENTIONAL = ("solution.py", "submission.py", "main.py", "answer.py")


def _module_level(body: list[Any]) -> list[Any]:
    """Statements that run at module level: the body, and the blocks of top-level if/try/with."""
    import ast

    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.With, ast.For, ast.While)):
            out += _module_level(node.body) + _module_level(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            out += _module_level(node.body) + _module_level(node.orelse) + _module_level(node.finalbody)
            for handler in node.handlers:
                out += _module_level(handler.body)
    return out


def _binds(node: Any, name: str) -> int:
    """How ``node`` binds ``name`` at module level: 3 def/class, 2 assignment, 1 import, 0 not."""
    import ast

    def targets(target: Any) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for t in target.elts for n in targets(t)]
        return []

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return 3 if node.name == name else 0
    if isinstance(node, ast.Assign):
        return 2 if any(name in targets(t) for t in node.targets) else 0
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) or type(node).__name__ == "NamedExpr":
        return 2 if name in targets(getattr(node, "target", None)) else 0
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return 1 if any((a.asname or a.name).split(".")[0] == name for a in node.names) else 0
    return 0


NOTEBOOK_HEADER = b"# Definitions taken from the notebook "
"""How the grader's conversion of a notebook begins (:mod:`attnscore.submission.notebook`)."""


def is_notebook(path: str) -> bool:
    """Whether the file ``path`` is the grader's conversion of a notebook (it starts with
    :data:`NOTEBOOK_HEADER`)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(NOTEBOOK_HEADER)) == NOTEBOOK_HEADER
    except OSError:
        return False


def _shown(folder: str, name: str) -> str:
    """A file as the student knows it: ``hw3.py`` converted from a notebook is ``hw3.ipynb``."""
    try:
        with open(os.path.join(folder, name), "rb") as f:
            if f.read(len(NOTEBOOK_HEADER)) == NOTEBOOK_HEADER:
                return name[: -len(".py")] + ".ipynb"
    except OSError:
        pass
    return name


def choose_entry(folder: str, function_name: str | tuple[str, ...]) -> tuple[str | None, str]:
    """The one top-level ``.py`` file of ``folder`` that defines ``function_name`` (read with ``ast``,
    nothing is run), or ``(None, why not)``. With several names (an assignment's functions), the
    file that defines the most of them, then the strongest binding (def or class over assignment
    over import), conventional names breaking a tie."""
    import ast

    names = (function_name,) if isinstance(function_name, str) else tuple(function_name)
    files = sorted(n for n in os.listdir(folder) if n.endswith(".py") and os.path.isfile(os.path.join(folder, n)))
    if not files:
        return None, "your submission has no .py file at its top level"
    if len(files) == 1:
        return files[0], ""
    # per file: (how many of the names it binds, strongest binding: 3 def or class, 2 assignment, 1 import)
    strength: dict[str, tuple[int, int]] = {}
    for name in files:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                tree = ast.parse(f.read(), name)
        except BaseException:  # noqa: BLE001 - a file that does not parse cannot be the chosen entry
            continue
        kinds: dict[str, int] = {}
        for node in _module_level(tree.body):
            for wanted in names:
                kind = _binds(node, wanted)
                if kind:
                    kinds[wanted] = max(kinds.get(wanted, 0), kind)
        if kinds:
            strength[name] = (len(kinds), max(kinds.values()))
    best = max(strength.values(), default=(0, 0))
    defining = sorted(n for n, k in strength.items() if k == best)
    conventional = [n for n in defining if n in (*(f"{wanted}.py" for wanted in names), *_CONVENTIONAL)]
    if len(defining) > 1 and len(conventional) == 1:
        defining = conventional
    if len(defining) == 1:
        return defining[0], ""
    from attnscore.boundary.untrusted import shown_list

    listed = shown_list([_shown(folder, n) for n in files[:12]] + files[12:])  # the first 12 named
    what = repr(names[0]) if len(names) == 1 else f"any of {shown_list(list(names))}"
    if not defining:
        return None, f"none of your files defines a function named {what} (files: {listed})"
    return None, (
        f"more than one of your files defines {what} ({shown_list([_shown(folder, n) for n in defining])}); "
        "keep it in one file, or ask your instructor which file is graded"
    )
