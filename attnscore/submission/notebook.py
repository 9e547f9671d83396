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
import json
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import nbformat
from nbformat.warnings import MissingIDFieldWarning

from attnscore.submission.notebook_bounds import (
    MAX_CODE_CHARS,
    MAX_IPYTHON_LINES,
    MAX_NOTEBOOK_BYTES,
    MAX_TOKENISED,
    NotebookError,
)
from attnscore.submission.notebook_ipython import ipython_to_python as _ipython_to_python
from attnscore.submission.notebook_statements import Statement, classify, first_line, keep, notes

__all__ = [
    "NotebookError",
    "Notebook",
    "convert_notebook",
    "PYTHON_CELL_MAGICS",
    "MAX_NOTEBOOK_BYTES",
    "MAX_CODE_CHARS",
    "MAX_IPYTHON_LINES",
]

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
"""Cell magics whose body is Python run as is: the body is kept, the magic line dropped."""


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


def _convert(content: bytes, name: str) -> Notebook:
    notebook = _decode(content)
    statements: list[Statement] = []
    skipped: list[tuple[int, str]] = []
    budget = [MAX_IPYTHON_LINES, MAX_TOKENISED]
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        begins = f"(the cell begins {first_line(cell.source)!r})"
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
                Statement(
                    number,
                    first_line(cell.source),
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
            statements += [classify(stmt, number, _statement_text(stmt, lines, shared)) for stmt in tree.body]
        except (RecursionError, NotebookError):
            skipped.append((number, f"the code is too deeply nested to read {begins}"))
    kept = keep(statements)
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
        tuple((s.cell, first_line(s.text)) for i, s in enumerate(statements) if i in kept),
        tuple((s.cell, first_line(s.text)) for i, s in enumerate(statements) if i not in kept),
        tuple(skipped),
        tuple(notes(statements, kept, skipped)),
    )
