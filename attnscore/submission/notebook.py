"""Notebook submissions: a Jupyter ``.ipynb`` file turned into the Python source that is graded.

The conversion reads the notebook as data and never executes it: it happens in the grader, before
the sandbox, and the sandbox then grades the resulting ``.py`` file exactly as a file submission.

What is taken, cell by cell (code cells only; markdown, raw cells and every output are ignored):

1. IPython syntax is rewritten by IPython's own transforms
   (:class:`IPython.core.inputtransformer2.TransformerManager`), one logical line at a time (the
   cell is tokenised once; only lines that hold IPython syntax are transformed, each on its own, so
   the work grows with the cell's length, never with its square): ``%matplotlib inline`` and
   ``!pip install x`` become calls such as ``get_ipython().system(...)``, which rule 3 leaves out.
   A cell that starts with the cell magic ``%%time``, ``%%timeit`` or ``%%capture`` keeps its body
   (these run their body as Python); a cell under any other cell magic (``%%bash``,
   ``%%writefile``, ``%%html``...) is dropped whole.
2. The cell is parsed. A cell that does not parse (an unfinished scratch cell, a syntax error) is
   skipped, as Jupyter would fail that cell alone, and named in :attr:`Notebook.skipped` and
   :attr:`Notebook.notes`; every other cell is read.
3. Each top-level statement is kept or left out, as a fresh "Run All" that produces no output
   would run it:

   - always kept: ``import`` and ``from ... import`` (``from __future__`` imports are moved to the
     top); ``def``, ``async def`` and ``class`` (with their decorators, bodies untouched);
     assignments to plain names whose right side calls nothing (``d_k = 4``, ``a, b = 1, 2``,
     ``half = lambda x: x / 2``); ``if``/``try`` blocks made of such statements, but never
     ``if __name__ == "__main__":``;
   - kept when kept code reads the name it binds (transitively, by Python's own scoping read
     with :mod:`symtable`: a parameter or local of the same name does not count): assignments
     to plain names that call something (``scale = math.sqrt(d)``, ``W = torch.eye(2)``),
     augmented assignments (``scale *= 2``), and ``if``/``try`` blocks of them;
   - never kept: a statement that prints, displays, plots, writes or runs shell code or a
     magic (``print``, ``display``, ``plt.*``, ``.show()``, ``.write()``, ``get_ipython()``, which
     ``!cmd`` and ``%magic`` become, ``os.system``, ``subprocess``), even when a function reads what
     it sets; calls and expressions at the top of a cell; loops, ``with``, ``assert``, ``del``;
     attribute or item assignments (``torch.x = ...``, ``a[0] = 1``); results nothing reads
     (``out = scores(q, k)``).

   Then, in notebook order, an assignment that reads a module-level name nothing kept before it
   sets is left out too (it would stop the whole module with a ``NameError`` at its import).
4. Each name a kept function (or value) reads that nothing kept sets, and that a left-out
   statement sets, becomes a note naming the cell and statement and why it was left out
   (``scores (cell 5) uses scale, which cell 3 sets in `scale = print(W) or 1.0`; that was left out
   because it calls print(), and grading produces no output``). Grading shows the notes with the
   result when some case did not pass, so a ``NameError`` is never bare.

The source keeps each kept statement's text as written, under a ``# cell N`` comment (cells
counted from 1 over all cells, as they appear in the notebook), so a traceback points at
recognisable code.

Bounds: a notebook is student data read by the grader, so reading it is bounded and can only fail
as a :class:`NotebookError` (that student's problem, never the class's): at most
:data:`MAX_NOTEBOOK_BYTES` in the file and :data:`MAX_CODE_CHARS` in its code cells (checked before
nbformat validates anything), JSON nested too deeply or integers too long to read are errors with
their own message, and any other failure of the readers (``RecursionError``, ``MemoryError``, a
``RuntimeError`` of IPython...) is caught at :func:`convert_notebook` and reported as one line.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import symtable
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import nbformat
from IPython.core.inputtransformer2 import HelpEnd, TokenTransformBase, TransformerManager, make_tokens_by_line
from nbformat.warnings import MissingIDFieldWarning

__all__ = [
    "NotebookError",
    "Notebook",
    "convert_notebook",
    "PYTHON_CELL_MAGICS",
    "MAX_NOTEBOOK_BYTES",
    "MAX_CODE_CHARS",
    "MAX_IPYTHON_LINES",
]

MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024
"""Largest ``.ipynb`` file accepted, in bytes (outputs such as images count; they are ignored)."""

MAX_CODE_CHARS = 256 * 1024
"""Most characters of source over all code cells (a graded notebook holds definitions, not data;
reading this much, IPython syntax included, takes the grader a few seconds at most)."""

MAX_IPYTHON_LINES = 2000
"""Most logical lines with IPython syntax (magics, ``!`` commands, ``?`` help) in one notebook."""

_MAX_TRANSFORMS_PER_LINE = 8
"""Most IPython transforms one logical line may need (one escape at its start, one help at its end)."""

_MAX_TOKENISED = 2 * MAX_CODE_CHARS
"""Most characters tokenised for one notebook: each cell once, and again after a line with IPython
syntax whose quotes or brackets stay open (the rest of its cell is read again)."""

# A line that may hold IPython syntax: an escape (% ! ?) first, a help ? last, or `x = !cmd` / `x = %magic`.
_MAYBE_IPYTHON = re.compile(r"^[ \t]*[%!?]|\?[ \t]*$|=[ \t]*[%!]", re.MULTILINE)
_TRANSFORMS = TransformerManager()

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
"""Cell magics whose body is Python run as is: the body is kept, the magic line dropped."""


class NotebookError(ValueError):
    """A notebook cannot be converted: not JSON, not a valid nbformat 4 notebook, or over a bound
    (a code cell with a syntax error is skipped, not an error).

    Attributes:
        cell: the failing cell, counted from 1 over all cells (``None`` for the whole file).
        reason: what is wrong, without the cell.
    """

    def __init__(self, reason: str, cell: int | None = None) -> None:
        self.cell = cell
        self.reason = reason
        super().__init__(f"cell {cell}: {reason}" if cell is not None else reason)


@dataclass(frozen=True)
class Notebook:
    """A converted notebook.

    Attributes:
        source: the Python source to grade (UTF-8 text).
        kept: ``(cell, first line)`` of every statement taken, in order.
        dropped: ``(cell, first line)`` of every top-level statement left out, in order (a cell
            under a non-Python cell magic counts as one statement).
        skipped: ``(cell, reason)`` of every code cell that does not parse, in order.
        notes: one line per skipped cell and per module-level name that kept code reads but that
            only a left-out statement sets (which cell, which statement, why), for the student.
    """

    source: str
    kept: tuple[tuple[int, str], ...]
    dropped: tuple[tuple[int, str], ...]
    skipped: tuple[tuple[int, str], ...] = ()
    notes: tuple[str, ...] = ()


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


def _cell_body(source: str, budget: list[int] | None = None) -> tuple[str | None, int]:
    """The Python text of a cell after IPython's transformer (None for a non-Python cell magic),
    and how many leading blank lines it lost (line ``n`` of the text is line ``n + offset`` of the cell).
    ``budget``: ``[lines with IPython syntax, characters to tokenise]`` still allowed, shared by
    the notebook's cells."""
    lines = source.splitlines()
    offset = 0
    while offset < len(lines) and not lines[offset].strip():
        offset += 1
    source = "\n".join(lines[offset:])
    if source.startswith("%%"):
        first, _, rest = source.partition("\n")
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            return None, offset
        source = f"# {first}\n{rest}"  # a comment keeps the line count
    return _ipython_to_python(source, budget), offset


def _ipython_to_python(cell: str, budget: list[int] | None = None) -> str:
    """``cell`` with IPython syntax rewritten as Python, in time linear in its length.

    The result is what ``TransformerManager().transform_cell`` gives, but the cell is tokenised once
    and each logical line that holds IPython syntax is transformed on its own (IPython's own loop
    tokenises the whole cell again after every transform, and gives up after 500 of them).

    Raises:
        NotebookError: a logical line that needs more than a handful of transforms, or more
            lines with IPython syntax or characters to tokenise than ``budget`` (``[lines,
            characters]``, decreased) allows (no cell).
    """
    budget = budget if budget is not None else [MAX_IPYTHON_LINES, _MAX_TOKENISED]
    lines = (cell if cell.endswith("\n") else cell + "\n").splitlines(keepends=True)
    transforms: list[Any] = [*_TRANSFORMS.cleanup_transforms, *_TRANSFORMS.line_transforms]
    finders: list[Any] = list(_TRANSFORMS.token_transformers)
    for transform in transforms:
        lines = transform(lines)
    if not _MAYBE_IPYTHON.search("".join(lines)):
        return "".join(lines)
    out: list[str] = []
    done = 0  # physical lines of `lines` already in `out`
    while done < len(lines):
        base, restart, changed = done, None, False
        budget[1] -= sum(len(line) for line in lines[base:])
        if budget[1] < 0:
            raise NotebookError(
                "its IPython syntax leaves too many quotes or brackets open to read "
                f"(more than {_MAX_TOKENISED} characters to tokenise in the notebook)"
            )
        for group in make_tokens_by_line(lines[base:]):
            if not group:
                continue
            first = base + min(t.start[0] for t in group) - 1
            last = base + max(t.end[0] for t in group)  # exclusive, 0-based
            if first < done or last > len(lines) or last <= first:
                continue
            found = [f for f in (finder.find([group]) for finder in finders) if f]
            changed = bool(found)  # whether the last logical line read in this pass was transformed
            if not found:
                out += lines[done:last]
                done = last
                continue
            budget[0] -= 1
            if budget[0] < 0:
                raise NotebookError(
                    f"expected at most {MAX_IPYTHON_LINES} lines of IPython syntax (magics, ! commands, ? help) "
                    "in the notebook, found more"
                )
            # An escape takes its line and the lines a backslash continues it onto; a help `?` the
            # whole logical line. Tokens after that are read again (a quote in a shell command
            # does not open a string over the lines that follow).
            chosen = min(found, key=TokenTransformBase.sortby)  # the one IPython would apply first
            start = min(max(base + int(chosen.start_line), first), last - 1)
            start, end = (first, last) if isinstance(chosen, HelpEnd) else (start, start + 1)
            while end < len(lines) and lines[end - 1].rstrip("\r\n").endswith("\\"):
                end += 1
            out += lines[done:start] + _transform_line(chosen, lines[start:end], start - base, start + 1)
            done = end
            if end < last:
                restart = end
                break
        if restart is None and changed and done < len(lines):
            restart = done  # the tokeniser stopped in a transformed line (an open quote): read on after it
        if restart is None:
            break
    return "".join(out + lines[done:])


def _transform_line(chosen: Any, part: list[str], shift: int, line: int) -> list[str]:
    """One logical line's physical lines ``part`` after the transform ``chosen`` (found ``shift``
    lines further down the text it was found in) and any IPython's loop would apply after it."""
    for name in ("start_line", "q_line"):
        if isinstance(getattr(chosen, name, None), int):
            setattr(chosen, name, getattr(chosen, name) - shift)
    try:
        part = chosen.transform(part)
    except SyntaxError:  # IPython skips a transform that cannot apply
        pass
    for _ in range(_MAX_TRANSFORMS_PER_LINE):
        changed, part = _TRANSFORMS.do_one_token_transform(part)
        if not changed:
            return part
    raise NotebookError(
        f"line {line} holds more IPython syntax than can be read (more than {_MAX_TRANSFORMS_PER_LINE} escapes)"
    )


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 60 else line[:57] + "..."


def _statement_text(stmt: ast.stmt, lines: list[str], shared: set[int]) -> str:
    """The statement as written (decorators included); regenerated when it shares a line with
    another statement (``import os; print(1)``)."""
    decorators = getattr(stmt, "decorator_list", [])
    start = min([stmt.lineno] + [d.lineno for d in decorators])
    end = stmt.end_lineno or stmt.lineno
    if start in shared or end in shared:
        return ast.unparse(stmt)
    return "\n".join(lines[start - 1 : end])


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def _code_chars(raw: dict[str, Any]) -> int:
    """Characters of source in the code cells of a parsed notebook (nbformat 4 ``cells``, or the
    ``worksheets`` of nbformat 3; ``source``/``input`` a string or a list of strings)."""
    cells = raw.get("cells")
    if not isinstance(cells, list):
        sheets = raw.get("worksheets")
        sheets = sheets if isinstance(sheets, list) else []
        cells = [c for w in sheets if isinstance(w, dict) and isinstance(w.get("cells"), list) for c in w["cells"]]
    total = 0
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input", ""))
        parts = source if isinstance(source, list) else [source]
        total += sum(len(p) for p in parts if isinstance(p, str))
    return total


def _long_int(text: str) -> int:
    if len(text) > 4000:
        raise NotebookError(f"not a notebook: it holds an integer of {len(text)} digits (at most 4000 are read)")
    return int(text)


def _decode(content: bytes) -> nbformat.NotebookNode:
    if len(content) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            f"expected a notebook of at most {_mib(MAX_NOTEBOOK_BYTES)}, found {_mib(len(content))} "
            "(clear large outputs, such as images, before submitting)"
        )
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not UTF-8 text (byte {exc.start}): save the notebook from Jupyter again") from None
    try:
        raw = json.loads(text, parse_int=_long_int)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
        ) from None
    except RecursionError:
        raise NotebookError("not a notebook: its JSON is nested too deeply to read") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("nbformat"), int):
        raise NotebookError("not a notebook: expected a JSON object with an integer 'nbformat' field")
    if raw["nbformat"] not in (3, 4):
        raise NotebookError(f"expected nbformat 4 (or 3), found nbformat {raw['nbformat']}")
    code = _code_chars(raw)
    if code > MAX_CODE_CHARS:
        raise NotebookError(
            f"expected at most {_mib(MAX_CODE_CHARS)} of code in the code cells, found {_mib(code)} "
            "(keep data out of code cells: compute or load it in your function)"
        )
    try:
        with warnings.catch_warnings():  # cells without ids (older Jupyter): nbformat adds them; no stderr noise
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            notebook = nbformat.reads(text, as_version=4)
            nbformat.validate(notebook)
    except Exception as exc:  # noqa: BLE001 - nbformat raises several types for a malformed file
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"not a valid nbformat 4 notebook: {message[:300]}") from None
    return notebook


def convert_notebook(content: bytes, name: str = "notebook.ipynb") -> Notebook:
    """Convert a notebook's bytes into the Python source of its definitions (see the module doc).

    Args:
        content: the ``.ipynb`` file as read (JSON, UTF-8; nbformat 4, or 3 which is upgraded).
        name: the notebook's file name, quoted in the source's first line.

    Returns:
        The :class:`Notebook`: ``source`` holds the imports, definitions and the assignments they
        use (module docstring); nothing of the notebook is executed.

    Raises:
        NotebookError: invalid JSON or UTF-8, an unsupported nbformat, a file that fails nbformat's
            validation, or more code or IPython syntax than the bounds allow (``cell`` says where).

    Example:
        >>> import nbformat
        >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%matplotlib inline\\nx = 1\\nprint(x)")])
        >>> convert_notebook(nbformat.writes(nb).encode()).source.splitlines()[-2:]
        ['# cell 1', 'x = 1']
    """
    try:
        return _convert(content, name)
    except NotebookError:
        raise
    except (RecursionError, MemoryError):
        raise NotebookError("the notebook is nested too deeply or too large to read") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a reader on student data is that notebook's
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        raise NotebookError(f"the notebook could not be read ({detail})") from None


@dataclass
class _Statement:
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


def _classify(stmt: ast.stmt, cell: int, text: str) -> _Statement:
    """What the conversion does with one top-level statement (the rules of the module docstring)."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return _Statement(cell, text, "future")
    if isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
        return _Statement(cell, text, "out", why="it is under `if __name__ == '__main__':`")
    effect = _side_effect(stmt)
    if not _binding(stmt):
        return _Statement(cell, text, "out", *_names_or_none(stmt), why=effect or _not_binding(stmt))
    try:
        binds, now, later = _names(stmt)
    except SyntaxError as exc:
        return _Statement(cell, text, "out", why=f"it does not compile ({exc.msg})")
    if effect and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return _Statement(cell, text, "out", binds, now, later, why=effect)
    if _definition(stmt, cell):
        kind = "constant" if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else "definition"
        label = stmt.name if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        return _Statement(cell, text, kind, binds, now, later, label=label)
    if any(isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in _top_nodes(stmt)):
        return _Statement(cell, text, "out", binds, now, later, why="it awaits, yields or uses :=")
    return _Statement(cell, text, "assignment", binds, now, later)


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


def _keep(statements: list[_Statement]) -> set[int]:
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
            statements[i] = _Statement(
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


def _notes(statements: list[_Statement], kept: set[int], skipped: list[tuple[int, str]]) -> list[str]:
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
            what = f"{user.label or _first_line(user.text)} (cell {user.cell}) uses {name}"
            if setters:
                s = setters[-1]
                notes.append(
                    f"{what}, which cell {s.cell} sets in `{_first_line(s.text)}`; that was left out because {s.why}"
                )
            else:
                cells = ", ".join(str(cell) for cell, _ in skipped)
                notes.append(f"{what}, which no cell that could be read sets (skipped: cell {cells})")
    notes += [f"cell {cell} was skipped: {reason}" for cell, reason in skipped]
    return notes


def _convert(content: bytes, name: str) -> Notebook:
    notebook = _decode(content)
    statements: list[_Statement] = []
    skipped: list[tuple[int, str]] = []
    budget = [MAX_IPYTHON_LINES, _MAX_TOKENISED]
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        begins = f"(the cell begins {_first_line(cell.source)!r})"
        try:
            python, offset = _cell_body(cell.source, budget)
        except NotebookError as exc:
            if exc.reason.startswith("expected at most") or "too many quotes" in exc.reason:
                raise NotebookError(exc.reason, number) from None  # the notebook's bounds: never a skip
            skipped.append((number, f"{exc.reason} {begins}"))
            continue
        except (RecursionError, MemoryError, RuntimeError, ValueError) as exc:
            skipped.append((number, f"its IPython syntax could not be read ({type(exc).__name__}) {begins}"))
            continue
        if python is None:
            statements.append(
                _Statement(
                    number,
                    _first_line(cell.source),
                    "out",
                    why="grading runs no cell magic but %%time, %%timeit and %%capture",
                )
            )
            continue
        try:
            tree = ast.parse(python)
        except (RecursionError, MemoryError):
            skipped.append((number, f"the code is too deeply nested to read {begins}"))
            continue
        except SyntaxError as exc:
            where = f" at line {exc.lineno + offset} of the cell" if exc.lineno else ""
            skipped.append((number, f"SyntaxError: {exc.msg}{where} {begins}"))
            continue
        lines = python.splitlines()
        touched = Counter(
            line for stmt in tree.body for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
        )
        shared = {line for line, count in touched.items() if count > 1}  # `import os; print(1)`
        try:
            statements += [_classify(stmt, number, _statement_text(stmt, lines, shared)) for stmt in tree.body]
        except (RecursionError, NotebookError):
            skipped.append((number, f"the code is too deeply nested to read {begins}"))
    kept = _keep(statements)
    future = [s.text for i, s in enumerate(statements) if i in kept and s.kind == "future"]
    body: list[str] = []
    for i, s in enumerate(statements):
        if i in kept and s.kind != "future":
            if body and body[-1].startswith(f"# cell {s.cell}\n"):
                body[-1] += "\n" + s.text
            else:
                body.append(f"# cell {s.cell}\n{s.text}")
    header = f"# Definitions taken from the notebook {name!r} by attnscore; outputs and other statements left out."
    source = "\n\n".join([header, *future, *body]) + "\n"
    return Notebook(
        source,
        tuple((s.cell, _first_line(s.text)) for i, s in enumerate(statements) if i in kept),
        tuple((s.cell, _first_line(s.text)) for i, s in enumerate(statements) if i not in kept),
        tuple(skipped),
        tuple(_notes(statements, kept, skipped)),
    )
