"""Tests for notebook submissions: conversion of real notebooks (made with nbformat) and grading them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec
from attnscore.submission.files import SubmissionError, find_submissions
from attnscore.submission.notebook import NotebookError, convert_notebook

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
v4 = nbformat.v4

CORRECT = "def scores(q, keys):\n    return keys @ q"


def notebook(*cells: str, markdown: str | None = None) -> bytes:
    """A real nbformat 4 notebook with these code cells (and outputs, which must be ignored)."""
    nb = v4.new_notebook()
    if markdown is not None:
        nb.cells.append(v4.new_markdown_cell(markdown))
    for i, source in enumerate(cells, start=1):
        cell = v4.new_code_cell(source, execution_count=i)
        cell.outputs = [v4.new_output("stream", name="stdout", text="print(1)\nx = 2\n")]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nbformat.writes(nb).encode("utf-8")


def body(source: str) -> list[str]:
    """The converted source without its header and cell comments."""
    return [line for line in source.splitlines()[1:] if line and not line.startswith("# cell")]


@pytest.mark.parametrize(
    "cells, expected",
    [
        pytest.param(["import torch\n" + CORRECT], ["import torch", *CORRECT.splitlines()], id="imports and a def"),
        pytest.param(
            ["!pip install torch\n%matplotlib inline\nimport torch"], ["import torch"], id="shell line and line magic"
        ),
        pytest.param(["%%time\n" + CORRECT], CORRECT.splitlines(), id="%%time keeps its body"),
        pytest.param(["%%capture\nimport math"], ["import math"], id="%%capture keeps its body"),
        pytest.param(["%%bash\necho def scores", "import os"], ["import os"], id="%%bash cell dropped"),
        pytest.param(["%%writefile x.py\nimport os"], [], id="%%writefile cell dropped"),
        pytest.param(
            ["D_K = 4\nNAMES: tuple = ('q', 'k')\na, b = 1, -2.5\nhalf = lambda x: x / 2"],
            ["D_K = 4", "NAMES: tuple = ('q', 'k')", "a, b = 1, -2.5", "half = lambda x: x / 2"],
            id="call-free assignments kept",
        ),
        pytest.param(
            ["import torch\nW = torch.randn(2, 2)\nout = scores(1, 2)\nfiles = !ls\nx = (y := 3)"],
            ["import torch"],
            id="assignments that call something dropped",
        ),
        pytest.param(
            ["import torch\nprint('hi')\nplt.plot([1])\nfor i in range(3):\n    pass\nassert True\ntorch.x = 1"],
            ["import torch"],
            id="calls, loops, asserts and attribute assignments dropped",
        ),
        pytest.param(
            ["try:\n    import numpy as np\nexcept ImportError:\n    np = None"],
            ["try:", "    import numpy as np", "except ImportError:", "    np = None"],
            id="try of imports kept",
        ),
        pytest.param(["if __name__ == '__main__':\n    import os"], [], id="main guard dropped"),
        pytest.param(["import os; print(os.getcwd())"], ["import os"], id="two statements on one line"),
        pytest.param(
            ["@functools.cache\n" + CORRECT, "class Helper:\n    size = print('runs')"],
            ["@functools.cache", *CORRECT.splitlines(), "class Helper:", "    size = print('runs')"],
            id="decorators and class bodies kept whole",
        ),
        pytest.param(
            ["x = 1", "from __future__ import annotations"],
            ["from __future__ import annotations", "x = 1"],
            id="future import moved first",
        ),
    ],
)
def test_conversion_keeps_only_definitions(cells, expected):
    """Each rule of the conversion: what a cell keeps, as written."""
    assert body(convert_notebook(notebook(*cells)).source) == expected


def test_conversion_marks_cells_and_reports_dropped_statements():
    """Kept statements sit under '# cell N' (counted over all cells); dropped ones are listed."""
    out = convert_notebook(notebook("import torch", "scores(1, 2)\n" + CORRECT, markdown="# Title"), "hw.ipynb")
    lines = out.source.splitlines()
    assert lines[0].startswith("# Definitions taken from the notebook 'hw.ipynb'")
    assert "# cell 2" in lines and "# cell 3" in lines and "# cell 1" not in lines
    assert out.dropped == ((3, "scores(1, 2)"),)
    assert out.kept == ((2, "import torch"), (3, "def scores(q, keys):"))
    compile(out.source, "hw.py", "exec")


def test_conversion_never_executes_the_notebook(tmp_path):
    """Converting a notebook whose cells would write a file runs none of them."""
    marker = tmp_path / "ran"
    out = convert_notebook(notebook(f"open({str(marker)!r}, 'w').write('x')", f"!touch {marker}"))
    assert not marker.exists()
    assert body(out.source) == []


@pytest.mark.parametrize(
    "content, cell, message",
    [
        pytest.param(b"{not json", None, "not a notebook: invalid JSON at line 1, column 2", id="bad JSON"),
        pytest.param(b"\xff\xfe", None, "not UTF-8 text", id="not UTF-8"),
        pytest.param(b"[1, 2]", None, "expected a JSON object with an integer 'nbformat' field", id="JSON list"),
        pytest.param(
            json.dumps({"nbformat": 5, "nbformat_minor": 0, "cells": [], "metadata": {}}).encode(),
            None,
            "expected nbformat 4 (or 3), found nbformat 5",
            id="wrong nbformat",
        ),
        pytest.param(
            json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code"}], "metadata": {}}).encode(),
            None,
            "not a valid nbformat 4 notebook",
            id="invalid cell",
        ),
    ],
)
def test_unreadable_notebooks_raise_located_errors(content, cell, message):
    """Bad JSON, a wrong nbformat and an invalid cell each say what and where."""
    with pytest.raises(NotebookError) as info:
        convert_notebook(content)
    assert message in str(info.value)
    assert info.value.cell == cell


def test_notebook_submissions_are_read_as_python_files(tmp_path):
    """A notebook (alone, in a class, in a folder) becomes <stem>.py; a cell that does not parse a note naming it."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.ipynb").write_bytes(notebook("import torch", CORRECT))
    (klass / "bob.ipynb").write_bytes(notebook("def scores(q, keys)\n    pass"))
    (klass / "carol").mkdir()
    (klass / "carol" / "work.ipynb").write_bytes(
        notebook("from helper import dot", "def scores(q, keys):\n    return dot(q, keys)")
    )
    (klass / "carol" / "helper.py").write_text("def dot(q, keys):\n    return keys @ q\n")
    (klass / "notes.txt").write_text("ignored")
    alice, bob, carol = find_submissions([str(klass)])
    assert alice.entry == "alice.py" and [name for name, _ in alice.files] == ["alice.py"]
    assert b"def scores(q, keys):" in alice.files[0][1] and alice.problem is None
    assert bob.problem is None and bob.notes == (
        "your notebook bob.ipynb: cell 1 was skipped: SyntaxError: expected ':' at line 1 of the cell "
        "(the cell begins 'def scores(q, keys)')",
    )
    assert sorted(name for name, _ in carol.files) == ["helper.py", "work.py"] and carol.problem is None
    (single,) = find_submissions([str(klass / "alice.ipynb")])
    assert single.files == alice.files
    (entry,) = find_submissions([str(klass / "carol")], entry="work.ipynb")
    assert entry.entry == "work.py"


def test_folder_with_both_py_and_notebook_grades_the_py(tmp_path):
    """A folder holding solution.py and solution.ipynb is graded on the .py file."""
    (tmp_path / "solution.py").write_text(CORRECT + "\n")
    (tmp_path / "solution.ipynb").write_bytes(notebook("def scores(q, keys):\n    return q"))
    (sub,) = find_submissions([str(tmp_path)], one=True)
    assert dict(sub.files) == {"solution.py": (CORRECT + "\n").encode()}


def test_other_suffixes_are_still_refused(tmp_path):
    """A .txt file is a usage error that names both accepted kinds."""
    path = tmp_path / "solution.txt"
    path.write_text("x")
    with pytest.raises(SubmissionError, match="expected a Python file ending in .py or a notebook ending in .ipynb"):
        find_submissions([str(path)])


def test_notebooks_are_graded_in_the_sandbox_like_files(tmp_path):
    """A correct notebook with magics scores full marks; one whose function's cell does not parse is told which cell."""
    (tmp_path / "good.ipynb").write_bytes(
        notebook("%matplotlib inline\n!pip install torch\nimport torch", "%%time\n" + CORRECT, "print(scores(1, 2))")
    )
    (tmp_path / "bad.ipynb").write_bytes(notebook("import torch", "def scores(q, keys)\n    return keys @ q"))
    spec = load_spec(SPEC)
    bad, good = grade_many(find_submissions([str(tmp_path)]), spec, shrink_steps=0)
    assert good.all_passed and good.score == spec.max_points
    assert bad.score == 0
    assert {c.verdict for c in bad.cases} == {Verdict.FUNCTION_MISSING}
    assert "your notebook bad.ipynb: cell 2 was skipped: SyntaxError: expected ':'" in bad.error


def _raw_notebook(*sources: str, **extra: str) -> bytes:
    """A notebook written as JSON text by hand (``extra``: more top-level fields, as raw JSON text)."""
    cells = [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
        for i, s in enumerate(sources)
    ]
    text = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    for key, value in extra.items():
        text = text[:-1] + f", {json.dumps(key)}: {value}}}"
    return text.encode()


HOSTILE_NOTEBOOKS = {
    # name: (notebook bytes, the problem it must be, or None when it is graded as usual)
    "deep_metadata": (_raw_notebook(CORRECT, deep="[" * 100_000 + "]" * 100_000), "nested too deeply to read"),
    "huge_integer": (_raw_notebook(CORRECT, big="9" * 5000), "an integer of 5000 digits (at most 4000 are read)"),
    "echo_600": (_raw_notebook("\n".join(["!echo hi"] * 600) + "\n" + CORRECT), None),
    "help_3x499": (_raw_notebook(*["\n".join(["x?"] * 499)] * 3, CORRECT), None),
    "code_15_mib": (
        _raw_notebook(CORRECT + "\n" + ("s = '" + "a" * 1000 + "'\n") * (15 * 1024)),
        "expected at most 0.2 MiB of code in the code cells, found 14.8 MiB",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_NOTEBOOKS))
def test_hostile_notebooks_convert_or_fail_as_a_notebook_error(name):
    """Deep JSON, huge integers, huge code and many escapes convert, or raise NotebookError with a clear line."""
    content, problem = HOSTILE_NOTEBOOKS[name]
    if problem is None:
        converted = convert_notebook(content)
        assert body(converted.source) == CORRECT.splitlines()
        assert len(converted.dropped) in (600, 3 * 499)
    else:
        with pytest.raises(NotebookError, match=re.escape(problem)):
            convert_notebook(content)


def test_hostile_notebooks_are_their_students_verdicts_and_the_class_is_graded(tmp_path):
    """In one class, each hostile notebook is its own student's problem; everyone else is graded."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.ipynb").write_bytes(notebook("import torch", CORRECT))
    for name, (content, _) in HOSTILE_NOTEBOOKS.items():
        (klass / f"{name}.ipynb").write_bytes(content)
    submissions = find_submissions([str(klass)])
    problems = {Path(s.path).stem: s.problem for s in submissions}
    for name, (_, problem) in HOSTILE_NOTEBOOKS.items():
        if problem is None:
            assert problems[name] is None
        else:
            assert problems[name].startswith(f"your notebook {name}.ipynb could not be read: ")
            assert problem in problems[name] and "\n" not in problems[name]
    spec = load_spec(SPEC)
    results = {Path(r.submission).stem: r for r in grade_many(submissions, spec, shrink_steps=0)}
    for name in ("alice", "echo_600", "help_3x499"):
        assert results[name].all_passed and results[name].score == spec.max_points, name
    for name in ("deep_metadata", "huge_integer", "code_15_mib"):
        assert results[name].score == 0 and {c.verdict for c in results[name].cases} == {Verdict.FUNCTION_MISSING}
        assert results[name].error == problems[name]


@pytest.mark.parametrize("error", [RecursionError("deep"), MemoryError(), RuntimeError("loop"), ValueError("x")])
@pytest.mark.parametrize("reader", ["_ipython_to_python", "_statement_text", "_decode"])
def test_any_reader_failure_is_a_notebook_error_or_a_skipped_cell(monkeypatch, reader, error):
    """Whatever a reader raises on student data (IPython's transforms, ast, nbformat) is a NotebookError,
    or, for the reading of one cell, that cell skipped with a one-line reason."""
    import attnscore.submission.notebook as module

    def broken(*args, **kwargs):
        raise error

    content = notebook(CORRECT)
    monkeypatch.setattr(module, reader, broken)
    try:
        converted = convert_notebook(content)
    except NotebookError as info:
        assert reader != "_ipython_to_python"
        assert str(info).count("\n") == 0
        assert type(error).__name__ in str(info) or "too deeply or too large" in str(info)
    else:
        assert reader != "_decode"
        assert converted.kept == () and [cell for cell, _ in converted.skipped] == [1]
        assert "\n" not in converted.skipped[0][1] and converted.notes == (
            f"cell 1 was skipped: {converted.skipped[0][1]}",
        )


def test_too_much_ipython_syntax_names_the_cell():
    """More lines of IPython syntax than MAX_IPYTHON_LINES is a NotebookError naming the cell that went over."""
    from attnscore.submission.notebook import MAX_IPYTHON_LINES

    with pytest.raises(NotebookError) as info:
        convert_notebook(_raw_notebook(CORRECT, "\n".join(f"x{i}?" for i in range(MAX_IPYTHON_LINES + 1))))
    assert info.value.cell == 2
    assert f"expected at most {MAX_IPYTHON_LINES} lines of IPython syntax" in str(info.value)


_FRAGMENTS = [
    "x = 1",
    "!echo hi",
    "!echo 'it",
    "x = (1,",
    "%time f(\\",
    "%matplotlib inline",
    "x?",
    "obj.attr??",
    "y = !ls",
    "z = %time 1",
    "def f(a):",
    "    !pip install torch",
    "    a?",
    "    return a",
    "s = '''",
    "!inside a string",
    "'''",
    "v = [1,",
    "  2]",
    "# a question?",
    "print(1)  # why?",
    "",
    "    ",
]


@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=12))
@settings(max_examples=150, deadline=None)
def test_line_by_line_transform_matches_ipython(lines):
    """The bounded transform gives exactly what IPython's own transform_cell gives, where that is Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    from attnscore.submission.notebook import _ipython_to_python

    cell = "\n".join(lines)
    try:
        expected = TransformerManager().transform_cell(cell)
        ast.parse(expected)
    except Exception:  # noqa: BLE001 - IPython cannot read it, or it is no Python (a SyntaxError either way)
        return
    assert _ipython_to_python(cell) == expected


@pytest.mark.slow
def test_open_brackets_in_shell_lines_cannot_make_reading_quadratic():
    """Lines like `!echo (it` make the rest of the cell be read again; past a budget, a NotebookError."""
    filler = "x = 1\n" * 2000  # 12 KB after each of them, 234 KiB in all
    cell = ("!echo (it\n" + filler) * 20
    with pytest.raises(NotebookError, match="leaves too many quotes or brackets open to read") as info:
        convert_notebook(_raw_notebook(CORRECT, cell))
    assert info.value.cell == 2
    few = convert_notebook(_raw_notebook(CORRECT, "!echo (it\nimport os\n!echo '''it\nd_k = 4\n"))
    assert body(few.source) == [*CORRECT.splitlines(), "import os", "d_k = 4"]


def test_cells_without_ids_are_read_without_a_warning():
    """A notebook whose cells have no ``id`` (nbformat 4.5 asks for one; older Jupyter and hand-made
    notebooks omit it) converts with nothing on stderr: nbformat adds the ids and its warning is
    not the grader's to print."""
    import warnings

    cell = {"cell_type": "code", "metadata": {}, "source": "def f(x):\n    return x\n", "outputs": []}
    cell["execution_count"] = None
    content = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        notebook = convert_notebook(content)
    assert [str(w.message) for w in seen] == []
    assert "def f(x):\n    return x" in notebook.source
