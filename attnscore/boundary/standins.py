"""Stand-ins for what a graded file imports but the grader does not give it.

Two things a correct submission imports are missing in the worker's world:

- **the student self-check** (``from attnscore.selfcheck import check``, as the docs tell students
  to run it): the worker's ``attnscore`` package holds only :mod:`attnscore.boundary`, so the
  worker puts :func:`selfcheck_module` in its place before the submission is imported. Its
  ``check``, ``check_path`` and ``check_function`` run nothing and print nothing, and return a
  :class:`NotRun` (``passed`` is True, so code that asserts on it still imports): the grade comes
  from the grader's own cases.
- **a package a notebook imports that the grader lacks** (``import pandas as pd`` in a scratch
  cell): a converted notebook (:mod:`attnscore.submission.notebook`) is run statement by
  statement (:func:`run_notebook`), as Jupyter runs cells one by one; an import that fails binds
  each name it would have bound to a :class:`MissingImport` that says which cell's import failed
  and why, the first time it is used once the notebook has been imported. A function that needs
  the package fails with that sentence (``cell 3: `import pandas as pd` failed: pandas is not
  installed on this grader``); every other function is graded as if the cell had not been there.
  While the notebook itself is being imported a stand-in gives stand-ins (an annotation
  ``Float[Tensor, "n d"]``, a decorator ``@jaxtyped(typechecker=beartype)``, a base class), so
  that a definition that merely mentions the package still defines its name.

Imports nothing of attnscore outside :mod:`attnscore.boundary` (the worker's package).
"""

from __future__ import annotations

import ast
import sys
import types
from typing import Any

__all__ = ["MissingImport", "NotRun", "failed_import_text", "run_notebook", "selfcheck_module"]

_NAMES = ("_why", "_missing", "_namespace")


class MissingImport:
    """What the names of a failed notebook import are bound to (see the module docstring).

    ``why`` is the sentence every use raises (as :class:`ModuleNotFoundError` naming ``missing``,
    the module that is not installed, else as :class:`ImportError`); ``namespace`` is the
    notebook module's globals: while a statement of that module runs at its top level, attribute
    access, calls and subscripts give this stand-in back instead of raising."""

    __slots__ = _NAMES

    def __init__(self, why: str, missing: str | None, namespace: dict[str, Any]) -> None:
        object.__setattr__(self, "_why", why)
        object.__setattr__(self, "_missing", missing)
        object.__setattr__(self, "_namespace", namespace)

    def _importing(self) -> bool:
        """Whether the notebook's own top-level code is running (its import, not a graded call)."""
        namespace = object.__getattribute__(self, "_namespace")
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
                return True
            frame = frame.f_back
        return False

    def _fail(self) -> Any:
        why, missing = object.__getattribute__(self, "_why"), object.__getattribute__(self, "_missing")
        if missing:
            raise ModuleNotFoundError(why, name=missing)
        raise ImportError(why)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self if self._importing() else self._fail()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self if self._importing() else self._fail()

    def __getitem__(self, key: Any) -> Any:
        return self if self._importing() else self._fail()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        """As a base class (``class Net(nn.Module)`` with ``nn`` missing): a class whose instances
        cannot be made, saying why."""
        stand_in = self

        def refuse(cls: type, *args: Any, **kwargs: Any) -> Any:
            return stand_in._fail()

        return (type("MissingBase", (), {"__new__": refuse, "__slots__": ()}),)

    def __setattr__(self, name: str, value: Any) -> None:
        self._fail()

    def __repr__(self) -> str:
        return f"<not imported: {object.__getattribute__(self, '_why')}>"

    def _always_fail(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail()

    __bool__ = __iter__ = __len__ = __contains__ = __enter__ = __exit__ = _always_fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __matmul__ = __rmatmul__ = _always_fail
    __truediv__ = __rtruediv__ = __floordiv__ = __pow__ = __neg__ = __abs__ = __float__ = __int__ = _always_fail
    __lt__ = __le__ = __gt__ = __ge__ = _always_fail


def failed_import_text(
    where: str, statement: str, exc: BaseException, machine: str = "this grader"
) -> tuple[str, str | None]:
    """``(sentence, missing module)`` for an import ``statement`` (its first line) at ``where``
    (``cell 3``, ``line 4``) that raised ``exc``: for a top-level module that is not found, ``"cell 3:
    `import pandas as pd` failed: pandas is not installed on this grader, and no file of yours is
    named pandas.py"`` (``machine``: where it is not installed; the second half for a helper module
    left out of an upload); for a submodule of a package that imported, that there is no such
    module; else the exception's type and message. The missing module's name, or None.

    Example:
        >>> text, missing = failed_import_text("line 3", "import pandas as pd", ModuleNotFoundError("x", name="pandas"))
        >>> where, why = text.split(" failed: ")
        >>> where
        'line 3: `import pandas as pd`'
        >>> why
        'pandas is not installed on this grader, and no file of yours is named pandas.py'
    """
    code = statement.strip().splitlines()[0][:120] if statement.strip() else "import"
    missing = None
    try:
        if isinstance(exc, ModuleNotFoundError) and isinstance(exc.name, str) and exc.name:
            missing = exc.name[:200]
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        kind = type(exc).__name__
    except BaseException:  # noqa: BLE001 - a hostile exception's attributes
        detail, kind = "", "an exception"
    if missing:
        top = missing.split(".")[0]
        if top != missing and top in sys.modules:  # the package is there, not this part of it
            return f"{where}: `{code}` failed: there is no module {missing} (on {machine})", missing
        why = f"{top} is not installed on {machine}, and no file of yours is named {top}.py"
        return f"{where}: `{code}` failed: {why}", missing
    return f"{where}: `{code}` failed: {kind}" + (f": {detail}" if detail else ""), None


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The names an import statement binds (none for ``from x import *``)."""
    names = []
    for alias in node.names:
        if alias.name == "*":
            continue
        names.append(alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name))
    return names


def _cell_of(lines: list[str], line: int) -> str:
    """``cell N`` from the ``# cell N`` comment above ``line`` (1-based) of a converted notebook."""
    for text in reversed(lines[: max(0, line - 1)]):
        if text.startswith("# cell ") and text[len("# cell ") :].strip().isdigit():
            return f"cell {text[len('# cell ') :].strip()}"
    return f"line {line}"


def run_notebook(module: types.ModuleType, source: str, path: str) -> None:
    """Run a converted notebook's ``source`` (its file: ``path``) in ``module``'s namespace one
    top-level statement at a time, as Jupyter runs cells one after the other: an ``import`` or
    ``from ... import`` that raises binds its names to :class:`MissingImport` stand-ins naming the
    cell; anything else that raises stops the import (as a file's would). ``from __future__``
    imports apply to the statements after them. Line numbers in tracebacks are the file's.

    Raises:
        SyntaxError: ``source`` does not parse (a conversion always parses).
        BaseException: what a statement other than an import raises.
    """
    import __future__

    tree = ast.parse(source, path)
    lines = source.splitlines()
    namespace = module.__dict__
    flags = 0
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            flags |= sum(getattr(__future__, a.name).compiler_flag for a in node.names if hasattr(__future__, a.name))
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            exec(code, namespace)
            continue
        try:
            exec(code, namespace)
        except Exception as exc:  # noqa: BLE001 - the cell's failure: its names say so when used
            statement = ast.get_source_segment(source, node) or ""
            why, missing = failed_import_text(_cell_of(lines, node.lineno), statement, exc)
            stand_in = MissingImport(why, missing, namespace)
            for name in _bound_names(node):
                namespace[name] = stand_in


class NotRun:
    """What the worker's ``attnscore.selfcheck.check`` returns: nothing was run (the grader grades
    with its own cases). ``passed`` is True and the text says so, so that a submission that
    asserts on its self-check or prints it still imports."""

    passed = True
    hidden = 0
    result = None

    def text(self, width: int = 100) -> str:
        return "attnscore self-check: not run inside the grader (the grader runs its own cases)"

    def footer(self) -> str:
        return ""

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return self.text()


def _not_run(*args: Any, **kwargs: Any) -> NotRun:
    """The worker's stand-in of the self-check: runs nothing, prints nothing."""
    return NotRun()


def selfcheck_module() -> types.ModuleType:
    """The worker's ``attnscore.selfcheck``: ``check``, ``check_path``, ``check_function`` and
    ``visible_cases`` that run nothing (:class:`NotRun`), and ``SelfCheck`` (the class they
    return)."""
    module = types.ModuleType("attnscore.selfcheck", "The self-check as the grader's worker has it: runs nothing.")
    names: dict[str, Any] = {"check": _not_run, "check_path": _not_run, "check_function": _not_run}
    names.update(SelfCheck=NotRun, visible_cases=lambda *args, **kwargs: ([], 0))
    for name, value in names.items():
        setattr(module, name, value)
    setattr(module, "__all__", sorted(names))  # noqa: B010 - a module made here
    return module
