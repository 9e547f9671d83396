"""The worker's stand-ins (attnscore.boundary.standins): a failed notebook import costs only what
needs it, the self-check runs nothing, and torch.compile's environment failures are recognised."""

from __future__ import annotations

import types

import pytest

from attnscore.boundary import failure_texts, standins, worker
from attnscore.boundary.standins import MissingImport, failed_import_text, run_notebook, selfcheck_module

MISSING = "attnscore_course_package_that_is_not_installed"


def _run(source: str, path: str = "/nowhere/hw.py") -> types.ModuleType:
    module = types.ModuleType("submission")
    module.__file__ = path
    run_notebook(module, source, path)
    return module


NOTEBOOK = f"""\
# Definitions taken from the notebook 'hw.ipynb' by attnscore; outputs and other statements left out.

from __future__ import annotations

# cell 2
import math
import {MISSING} as pd
from {MISSING}.typing import Float, checked

# cell 4
def scores(q, keys):
    return [sum(a * b for a, b in zip(k, q)) for k in keys]


def frame(q, keys) -> Float[list, "n"]:
    return pd.DataFrame(q)


@checked(strict=True)
def decorated(q, keys):
    return scores(q, keys)


class Table(pd.Base):
    pass


ROOT = math.sqrt(4)
"""


def test_a_failed_import_costs_only_the_functions_that_need_it():
    """The functions that do not use the missing package work; the ones that do raise the cell's sentence."""
    module = _run(NOTEBOOK)
    assert module.scores([1, 0], [[1, 0], [0, 1]]) == [1, 0]
    assert module.ROOT == 2.0  # the statements after the failed import still ran
    why = (
        f"cell 2: `import {MISSING} as pd` failed: {MISSING} is not installed on this grader, and no file of yours "
        f"is named {MISSING}.py"
    )
    with pytest.raises(ModuleNotFoundError) as raised:
        module.frame([1], [[1]])
    assert str(raised.value) == why and raised.value.name == MISSING
    with pytest.raises(ModuleNotFoundError, match=f"cell 2: `from {MISSING}.typing import Float, checked` failed"):
        module.decorated([1], [[1]])  # the decorator needed the package: the function is a stand-in
    with pytest.raises(ModuleNotFoundError, match="cell 2: `import"):
        module.Table()  # a base class from the missing package: no instances


@pytest.mark.parametrize(
    "use",
    [
        pytest.param(lambda m: m.pd + 1, id="arithmetic"),
        pytest.param(lambda m: bool(m.pd), id="truth"),
        pytest.param(lambda m: list(m.pd), id="iteration"),
        pytest.param(lambda m: m.pd.DataFrame, id="attribute"),
        pytest.param(lambda m: m.pd["x"], id="item"),
        pytest.param(lambda m: m.pd(), id="call"),
    ],
)
def test_every_use_after_the_import_says_why(use):
    """Once the notebook is imported, any use of a stand-in raises the sentence (never a value)."""
    module = _run(f"# cell 1\nimport {MISSING} as pd\n")
    assert isinstance(module.pd, MissingImport)
    with pytest.raises(ModuleNotFoundError, match=f"cell 1: `import {MISSING} as pd` failed"):
        use(module)


def test_an_error_other_than_an_import_still_stops_the_notebook():
    """Only imports are skipped: a statement that raises otherwise stops the import, as a file's would."""
    with pytest.raises(ZeroDivisionError):
        _run("# cell 1\nx = 1 / 0\n")


def test_an_import_that_raises_something_else_is_named_with_its_exception():
    """A package whose import raises (not a missing module) is named with the exception's type and text."""
    module = _run("# cell 3\nfrom math import does_not_exist\n")
    with pytest.raises(ImportError) as raised:
        module.does_not_exist(1)
    assert not isinstance(raised.value, ModuleNotFoundError)
    assert str(raised.value).startswith(  # then where math lives, which differs per machine
        "cell 3: `from math import does_not_exist` failed: ImportError: cannot import name 'does_not_exist' from 'math'"
    )


def test_future_imports_apply_to_the_statements_after_them():
    """A notebook's `from __future__ import annotations` holds for its later cells (annotations stay text)."""
    source = f"from __future__ import annotations\n# cell 1\nimport {MISSING} as t\n"
    source += "def f(x: t.Tensor) -> t.X:\n    return x\n"
    module = _run(source)
    assert module.f.__annotations__ == {"x": "t.Tensor", "return": "t.X"} and module.f(3) == 3


@pytest.mark.parametrize(
    "where, statement, exc, machine, expected",
    [
        pytest.param(
            "line 3",
            "import pandas_course as pd",
            ModuleNotFoundError("No module named 'pandas_course'", name="pandas_course"),
            "this grader",
            "line 3: `import pandas_course as pd` failed: pandas_course is not installed on this grader, and no file "
            "of yours is named pandas_course.py",
            id="a missing package (or a helper file left out)",
        ),
        pytest.param(
            "cell 2",
            "from einops_course.layers.torch import (\n    Rearrange,\n)",
            ModuleNotFoundError("No module named 'einops_course'", name="einops_course.layers"),
            "this machine",
            "cell 2: `from einops_course.layers.torch import (` failed: einops_course is not installed on this "
            "machine, and no file of yours is named einops_course.py",
            id="below a missing package, a statement over several lines",
        ),
        pytest.param(
            "line 2",
            "import json.nope",
            ModuleNotFoundError("No module named 'json.nope'", name="json.nope"),
            "this grader",
            "line 2: `import json.nope` failed: there is no module json.nope (on this grader)",
            id="a part of a package that is there",
        ),
        pytest.param(
            "line 1",
            "import broken",
            RuntimeError("needs a GPU"),
            "this grader",
            "line 1: `import broken` failed: RuntimeError: needs a GPU",
            id="an import that raises",
        ),
    ],
)
def test_failed_import_text(where, statement, exc, machine, expected):
    """The sentence names the place, the statement's first line and the missing package (or the exception)."""
    assert failed_import_text(where, statement, exc, machine)[0] == expected


def test_the_workers_selfcheck_runs_nothing():
    """check(), check_path(), check_function() return a stand-in that says nothing was run; nothing is printed."""
    module = selfcheck_module()
    assert module.__name__ == "attnscore.selfcheck"
    for name in ("check", "check_path", "check_function"):
        result = getattr(module, name)("scores", spec="specs/dot_product_scores.yaml")
        assert result.passed is True and bool(result) and result.hidden == 0
        assert repr(result) == "attnscore self-check: not run inside the grader (the grader runs its own cases)"
    assert module.visible_cases("spec") == ([], 0) and module.SelfCheck is standins.NotRun


def test_describe_import_error_names_the_students_line(tmp_path):
    """A file whose import statement fails: its line and the package, never a line inside the package."""
    path = tmp_path / "solution.py"
    path.write_text(f"import math\n\nimport {MISSING} as pd\n")
    try:
        exec(compile(path.read_text(), str(path), "exec"), {})
    except ModuleNotFoundError as exc:
        text = worker.describe_import_error(exc, str(path))
    assert text == (
        f"your file could not be imported: line 3: `import {MISSING} as pd` failed: {MISSING} is not installed on "
        f"this grader, and no file of yours is named {MISSING}.py"
    )


def test_describe_import_error_names_a_helper_files_line(tmp_path):
    """The failing import in a helper module of the submission is named with that file and line."""
    (tmp_path / "helper.py").write_text(f"\nfrom {MISSING} import thing\n")
    path = tmp_path / "solution.py"
    path.write_text("import helper\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        exec(compile(path.read_text(), str(path), "exec"), {})
    except ModuleNotFoundError as exc:
        text = worker.describe_import_error(exc, str(path), machine="this machine")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper", None)
    assert text == (
        f"your file could not be imported: helper.py, line 2: `from {MISSING} import thing` failed: {MISSING} is not "
        f"installed on this machine, and no file of yours is named {MISSING}.py"
    )


class _InvalidCxxCompiler(RuntimeError):
    """Named as Inductor names it."""


_InvalidCxxCompiler.__name__ = "InvalidCxxCompiler"


class _InductorError(RuntimeError):
    pass


_InductorError.__module__ = "torch._inductor.exc"


def _wrapped(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise _InductorError("InductorError") from exc
    except BaseException as outer:
        return outer


@pytest.mark.parametrize(
    "exc, clue",
    [
        pytest.param(_wrapped(_InvalidCxxCompiler("no compiler")), "no working C++ compiler", id="no compiler"),
        pytest.param(_wrapped(PermissionError(13, "denied", "/x")), "permission denied", id="a denied file"),
        pytest.param(_wrapped(OSError(28, "No space left")), "no room to write the compiled code", id="disk full"),
        pytest.param(_wrapped(ValueError("shape")), None, id="the student's own error inside a compiled function"),
        pytest.param(PermissionError(13, "denied", "/x"), None, id="not raised by torch.compile"),
    ],
)
def test_compiler_clue(exc, clue):
    """torch.compile's environment failures are recognised in the exception chain; nothing else is."""
    assert failure_texts.compiler_clue(exc) == clue
