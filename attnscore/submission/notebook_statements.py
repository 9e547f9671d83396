"""Which top-level statements of a notebook are kept: each classified as a "Run All" that produces no
output would run it (definitions, imports, assignments that call nothing always; assignments that
call something when kept code reads them; output, shell and magics never), and the notes that name
what kept code reads but only a left-out statement sets (:mod:`attnscore.submission.notebook`)."""

from __future__ import annotations

import ast
import builtins
import symtable
from dataclasses import dataclass

from attnscore.submission.notebook_bounds import NotebookError

__all__ = ["Statement", "classify", "first_line", "keep", "notes"]


def _calls_something(node: ast.AST) -> bool:
    """Whether evaluating ``node`` may run code: a call, await, yield or walrus outside a lambda."""
    if isinstance(node, ast.Lambda):
        return _calls_something(node.args)  # defaults are evaluated now; the body only when called
    if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return True
    return any(_calls_something(child) for child in ast.iter_child_nodes(node))


def _plain_target(target: ast.AST) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(t) for t in target.elts)
    if isinstance(target, ast.Starred):
        return _plain_target(target.value)
    return False


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _is_definition(stmt: ast.stmt) -> bool:
    """The rule of the module docstring: is this top-level statement a definition?"""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, ast.Assign):
        return all(_plain_target(t) for t in stmt.targets) and not _calls_something(stmt.value)
    if isinstance(stmt, ast.AnnAssign):
        return (
            isinstance(stmt.target, ast.Name)
            and not _calls_something(stmt.annotation)
            and (stmt.value is None or not _calls_something(stmt.value))
        )
    if isinstance(stmt, ast.If):
        return (
            not _is_main_guard(stmt.test)
            and not _calls_something(stmt.test)
            and all(_is_definition(s) for s in stmt.body + stmt.orelse)
        )
    if isinstance(stmt, ast.Try):
        body = stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
        handlers_plain = all(h.type is None or not _calls_something(h.type) for h in stmt.handlers)
        return handlers_plain and all(_is_definition(s) or isinstance(s, ast.Pass) for s in body)
    return False


def _definition(stmt: ast.stmt, cell: int) -> bool:
    try:
        return _is_definition(stmt)
    except RecursionError:
        raise NotebookError("the code is too deeply nested to read", cell) from None


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 60 else line[:57] + "..."


@dataclass
class Statement:
    """One top-level statement of a cell, as the conversion sees it."""

    cell: int
    text: str
    kind: str  # "future", "definition" (always kept), "constant" (call-free assignment), "assignment", "out"
    binds: frozenset[str] = frozenset()
    now: frozenset[str] = frozenset()  # module-level names read when the statement runs
    later: frozenset[str] = frozenset()  # module-level names read when a function it defines is called
    why: str = ""  # for "out": why it is left out
    label: str = ""  # what the student calls it: a function's or class's name, else its first line


_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__builtins__"}

_SHELL_CALLS = frozenset({"get_ipython", "system", "popen", "getoutput", "run_line_magic", "run_cell_magic"})
_SHELL_ROOTS = frozenset({"subprocess", "IPython", "shutil", "webbrowser"})
_OUTPUT_CALLS = frozenset(
    {"print", "display", "pprint", "input", "help", "breakpoint", "exit", "quit", "show", "plot", "imshow"}
    | {"savefig", "write", "writelines", "interact"}
)
_OUTPUT_ROOTS = frozenset({"plt", "pyplot", "matplotlib", "sns", "seaborn", "logging", "tqdm", "ipywidgets"})


def _dotted(func: ast.expr) -> list[str]:
    """``a.b.c(...)``'s callee as ``["a", "b", "c"]`` (``[]`` for anything else, such as ``f()()``)."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    if isinstance(func, ast.Call):
        return _dotted(func.func) + parts if parts else _dotted(func.func)
    return [func.id, *parts] if isinstance(func, ast.Name) else parts


def _side_effect(stmt: ast.stmt) -> str:
    """Why running ``stmt`` at the top of the module would not be grading: it runs shell code or a
    magic, or it prints, displays, plots or writes (``""`` when neither, as far as can be read)."""
    for node in _top_nodes(stmt):
        if not isinstance(node, ast.Call):
            continue
        path = _dotted(node.func)
        if not path:
            continue
        if path[-1] in _SHELL_CALLS or path[0] in _SHELL_ROOTS or path[:2] == ["os", "system"] or "get_ipython" in path:
            return "it runs shell code or an IPython magic"
        if path[-1] in _OUTPUT_CALLS or path[0] in _OUTPUT_ROOTS:
            return f"it calls {'.'.join(path)}(), and grading produces no output"
    return ""


def _binding(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` only binds plain names at module level: an assignment to names, or an
    ``if``/``try`` block made of such assignments, imports and definitions."""
    if isinstance(stmt, ast.Assign):
        return all(_plain_target(t) for t in stmt.targets)
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(stmt.target, ast.Name)
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(stmt, ast.If):
        return not _is_main_guard(stmt.test) and all(_binding(s) for s in stmt.body + stmt.orelse)
    if isinstance(stmt, ast.Try):
        body = stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
        return all(_binding(s) for s in body)
    return False


def _names(stmt: ast.stmt) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``(binds, now, later)`` of a top-level statement, by Python's own scoping (:mod:`symtable`):
    the module-level names it binds, those it reads when it runs (a right side, a decorator, a
    default), and those a function or class it defines reads later, when called.

    Raises:
        SyntaxError: the statement does not compile (``return`` or ``nonlocal`` at the top level...).
    """
    table = symtable.symtable(ast.unparse(stmt), "<cell>", "exec")
    binds = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    now = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    later: set[str] = set()
    tables = list(table.get_children())
    while tables:
        child = tables.pop()
        later |= {s.get_name() for s in child.get_symbols() if s.is_referenced() and s.is_global()}
        tables += child.get_children()
    return frozenset(binds), frozenset(now), frozenset(later)


def classify(stmt: ast.stmt, cell: int, text: str) -> Statement:
    """What the conversion does with one top-level statement (the rules of the module docstring)."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return Statement(cell, text, "future")
    if isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
        return Statement(cell, text, "out", why="it is under `if __name__ == '__main__':`")
    effect = _side_effect(stmt)
    if not _binding(stmt):
        return Statement(cell, text, "out", *_names_or_none(stmt), why=effect or _not_binding(stmt))
    try:
        binds, now, later = _names(stmt)
    except SyntaxError as exc:
        return Statement(cell, text, "out", why=f"it does not compile ({exc.msg})")
    if effect and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return Statement(cell, text, "out", binds, now, later, why=effect)
    if _definition(stmt, cell):
        kind = "constant" if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else "definition"
        label = stmt.name if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        return Statement(cell, text, kind, binds, now, later, label=label)
    if any(isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in _top_nodes(stmt)):
        return Statement(cell, text, "out", binds, now, later, why="it awaits, yields or uses :=")
    return Statement(cell, text, "assignment", binds, now, later)


def _top_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes of ``stmt`` evaluated when it runs (not inside a lambda or a function it defines)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)) or node is stmt:
            todo += ast.iter_child_nodes(node)
    return out


def _names_or_none(stmt: ast.stmt) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    try:
        return _names(stmt)
    except SyntaxError:
        return frozenset(), frozenset(), frozenset()


def _not_binding(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.Expr):
        return "grading runs no call or expression at the top of a cell"
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return "it sets an attribute or an item"
    kind = type(stmt).__name__.lower().replace("async", "async ")
    return f"grading runs no top-level `{kind}` block"


def keep(statements: list[Statement]) -> set[int]:
    """The statements to keep, by index: the future imports, definitions and constants, and each
    assignment whose name kept code reads (transitively); then, in notebook order, every
    constant or assignment that reads a module-level name nothing kept before it sets is left
    out (it would stop the whole module at its import with a NameError)."""
    kept = {i for i, s in enumerate(statements) if s.kind in ("future", "definition", "constant")}
    needed: set[str] = set().union(*(statements[i].now | statements[i].later for i in kept))
    changed = True
    while changed:
        changed = False
        for i, s in enumerate(statements):
            if i not in kept and s.kind == "assignment" and s.binds & needed:
                kept.add(i)
                needed |= s.now | s.later
                changed = True
    bound: set[str] = set(_BUILTINS)
    for i, s in enumerate(statements):
        if i not in kept:
            continue
        if s.kind in ("constant", "assignment") and not s.now <= bound:
            kept.discard(i)
            missing = sorted(s.now - bound)
            statements[i] = Statement(
                s.cell,
                s.text,
                "out",
                s.binds,
                s.now,
                s.later,
                label=s.label,
                why=f"it reads {', '.join(missing)}, which nothing kept before it sets",
            )
            continue
        bound |= s.binds
    return kept


def notes(statements: list[Statement], kept: set[int], skipped: list[tuple[int, str]]) -> list[str]:
    """One line per module-level name that kept code reads and nothing kept sets, naming the
    cell and statement that set it and why that was left out; then the skipped cells."""
    bound = set(_BUILTINS).union(*(statements[i].binds for i in kept))
    notes: list[str] = []
    seen: set[str] = set()
    for i in sorted(kept):
        user = statements[i]
        for name in sorted((user.now | user.later) - bound - seen):
            setters = [s for j, s in enumerate(statements) if j not in kept and name in s.binds]
            if not setters and not skipped:
                continue
            seen.add(name)
            what = f"{user.label or first_line(user.text)} (cell {user.cell}) uses {name}"
            if setters:
                s = setters[-1]
                notes.append(
                    f"{what}, which cell {s.cell} sets in `{first_line(s.text)}`; that was left out because {s.why}"
                )
            else:
                cells = ", ".join(str(cell) for cell, _ in skipped)
                notes.append(f"{what}, which no cell that could be read sets (skipped: cell {cells})")
    notes += [f"cell {cell} was skipped: {reason}" for cell, reason in skipped]
    return notes
