"""Tests for notebooks graded as Jupyter runs them (attnscore.submission.notebook): every cell that
parses is kept, assignments and imports that definitions use are kept, output and shell code is
never run, and what was left out is named by cell and statement in the feedback."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions
from attnscore.submission.notebook import convert_notebook

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
v4 = nbformat.v4


def notebook(*cells: str) -> bytes:
    """A real nbformat 4 notebook, with a markdown cell first and an output on every code cell."""
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# Homework 3")])
    for i, source in enumerate(cells, start=1):
        cell = v4.new_code_cell(source, execution_count=i)
        cell.outputs = [v4.new_output("stream", name="stdout", text="tensor([1., 0.])\n")]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nbformat.writes(nb).encode("utf-8")


def body(source: str) -> list[str]:
    """The converted source without its header and cell comments."""
    return [line for line in source.splitlines()[1:] if line and not line.startswith("# cell")]


SCALED = "def scores(q, keys):\n    return (keys @ q) * scale / scale"


def test_a_scratch_cell_with_a_syntax_error_is_skipped_and_named():
    """An unfinished cell no longer zeroes the notebook: the other cells are kept, the skipped one named."""
    out = convert_notebook(notebook("import torch", "def scores(q, keys):\n    return keys @ q", "x = = 1\nprint(x"))
    assert body(out.source) == ["import torch", "def scores(q, keys):", "    return keys @ q"]
    assert out.skipped == ((4, "SyntaxError: invalid syntax at line 1 of the cell (the cell begins 'x = = 1')"),)
    assert out.notes == (
        "cell 4 was skipped: SyntaxError: invalid syntax at line 1 of the cell (the cell begins 'x = = 1')",
    )


@pytest.mark.parametrize(
    "cells, expected",
    [
        pytest.param(
            ["import math\nd = 4\nscale = math.sqrt(d)", SCALED],
            ["import math", "d = 4", "scale = math.sqrt(d)", *SCALED.splitlines()],
            id="an assignment that calls something, used by the function",
        ),
        pytest.param(
            ["import torch\nW = torch.eye(2)\nV = W.T.contiguous()", "def scores(q, keys):\n    return keys @ (V @ q)"],
            [
                "import torch",
                "W = torch.eye(2)",
                "V = W.T.contiguous()",
                "def scores(q, keys):",
                "    return keys @ (V @ q)",
            ],
            id="transitively: V needs W",
        ),
        pytest.param(
            ["import torch\nq = torch.ones(2)\nd = q.shape[-1]", "def scores(q, keys):\n    return keys @ q / d"],
            ["import torch", "q = torch.ones(2)", "d = q.shape[-1]", "def scores(q, keys):", "    return keys @ q / d"],
            id="a constant's own needs are kept",
        ),
        pytest.param(
            [
                "import torch\nout = scores(torch.ones(2), torch.eye(2))\nq = torch.ones(2)",
                "def scores(q, keys):\n    return keys @ q",
            ],
            ["import torch", "def scores(q, keys):", "    return keys @ q"],
            id="unused results and a parameter of the same name are not kept",
        ),
        pytest.param(
            [
                "import torch\nif torch.cuda.is_available():\n    DEVICE = 'cuda'\nelse:\n    DEVICE = 'cpu'",
                "def scores(q, keys):\n    return (keys @ q).to(DEVICE)",
            ],
            [
                "import torch",
                "if torch.cuda.is_available():",
                "    DEVICE = 'cuda'",
                "else:",
                "    DEVICE = 'cpu'",
                "def scores(q, keys):",
                "    return (keys @ q).to(DEVICE)",
            ],
            id="an if block of assignments",
        ),
        pytest.param(
            ["import math\nscale = 1.0\nscale *= math.sqrt(4)", SCALED],
            ["import math", "scale = 1.0", "scale *= math.sqrt(4)", *SCALED.splitlines()],
            id="augmented assignment in order",
        ),
    ],
)
def test_assignments_and_imports_definitions_use_are_kept(cells, expected):
    """Module-level values a function reads are kept with what they read, as written, in notebook order."""
    out = convert_notebook(notebook(*cells))
    assert body(out.source) == expected
    assert out.notes == ()
    compile(out.source, "hw.py", "exec")


@pytest.mark.parametrize(
    "cell, why",
    [
        pytest.param("scale = print(2.0) or 2.0", "it calls print(), and grading produces no output", id="print"),
        pytest.param("scale = display(2.0)", "it calls display(), and grading produces no output", id="display"),
        pytest.param("scale = plt.plot([1])[0]", "it calls plt.plot(), and grading produces no output", id="plot"),
        pytest.param("scale = !nproc", "it runs shell code or an IPython magic", id="shell"),
        pytest.param("scale = %time 2.0", "it runs shell code or an IPython magic", id="line magic"),
        pytest.param("for scale in [2.0]:\n    pass", "grading runs no top-level `for` block", id="loop"),
        pytest.param("with open('x') as f:\n    scale = 2.0", "grading runs no top-level `with` block", id="with"),
        pytest.param(
            "import os\nscale = os.system('echo 2') or 2.0", "it runs shell code or an IPython magic", id="os.system"
        ),
    ],
)
def test_output_and_shell_code_is_never_kept_and_its_users_are_told(cell, why):
    """An assignment that prints, displays, plots or runs shell code is left out even when used; the note says where."""
    out = convert_notebook(notebook("import torch", cell, SCALED), "hw3.ipynb")
    assert "scale" not in "\n".join(body(out.source)).replace("* scale / scale", "")
    first = cell.splitlines()[0].replace("!nproc", "get_ipython().getoutput('nproc')")
    first = first.replace("%time 2.0", "get_ipython().run_line_magic('time', '2.0')")
    if cell.startswith("import os"):
        first = cell.splitlines()[1]
    assert out.notes == (
        f"scores (cell 4) uses scale, which cell 3 sets in `{first}`; that was left out because {why}",
    )


def test_the_conversion_still_runs_nothing(tmp_path):
    """Kept assignments are text: converting a notebook whose used values would write files runs none of them."""
    marker = tmp_path / "ran"
    out = convert_notebook(
        notebook(f"import pathlib\nP = pathlib.Path({str(marker)!r})\nP.write_text('x')", "def f():\n    return P")
    )
    assert not marker.exists()
    assert body(out.source) == ["import pathlib", f"P = pathlib.Path({str(marker)!r})", "def f():", "    return P"]


def test_a_value_read_before_it_is_set_is_left_out_and_named():
    """An assignment that reads what nothing before it sets would stop the module's import: left out and named."""
    out = convert_notebook(notebook("import math\nscale = math.sqrt(d)", "d = 4", SCALED))
    assert body(out.source) == ["import math", "d = 4", *SCALED.splitlines()]
    assert out.notes == (
        "scores (cell 4) uses scale, which cell 2 sets in `scale = math.sqrt(d)`; that was left out because "
        "it reads d, which nothing kept before it sets",
    )


def test_a_name_only_a_skipped_cell_could_set_is_named():
    """The function reads a value no readable cell sets: the note points at the skipped cells."""
    out = convert_notebook(notebook("scale = = 2", SCALED))
    assert out.notes == (
        "scores (cell 3) uses scale, which no cell that could be read sets (skipped: cell 2)",
        "cell 2 was skipped: SyntaxError: invalid syntax at line 1 of the cell (the cell begins 'scale = = 2')",
    )


def test_builtins_parameters_and_locals_need_nothing():
    """Names a function binds itself, its parameters and builtins never make notes or keep anything."""
    out = convert_notebook(
        notebook(
            "total = print(1)",
            "def scores(q, keys):\n    total = keys @ q\n    return abs(total) * len(keys) / len(keys)",
        )
    )
    assert out.notes == () and "total = print(1)" not in out.source


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "import math",
                "d = 4",
                "scale = math.sqrt(d)",
                "x = = 1",
                "print(scale)",
                SCALED,
                "scale = display(d)",
                "!pip install torch",
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_every_conversion_compiles_and_keeps_each_parsable_definition(cells):
    """Any mix of cells converts to compilable source that keeps every `def` of a cell that parses."""
    out = convert_notebook(notebook(*cells))
    compile(out.source, "hw.py", "exec")
    parsed = [i for i, c in enumerate(cells, start=2) if c != "x = = 1"]
    assert {cell for cell, _ in out.skipped} == {i for i, c in enumerate(cells, start=2) if c == "x = = 1"}
    assert out.source.count("def scores") == sum(cells[i - 2] == SCALED for i in parsed)
    assert all("print" not in line and "display" not in line and "get_ipython" not in line for line in body(out.source))


def test_feedback_names_the_cell_and_statement_left_out(tmp_path):
    """Graded in the sandbox: the NameError comes with the cell and statement that set the value."""
    (tmp_path / "hw3.ipynb").write_bytes(
        notebook(
            "import torch",
            "W = torch.eye(2)\nprint(W)\nscale = print(W) or 1.0",
            "oops = = 1",
            "def scores(q, keys):\n    return (keys @ q) / scale",
        )
    )
    (tmp_path / "fine.ipynb").write_bytes(notebook("import math\nscale = math.sqrt(1)", "oops = = 1", SCALED))
    spec = load_spec(SPEC)
    fine, hw3 = grade_many(find_submissions([str(tmp_path)]), spec, shrink_steps=0)
    assert fine.all_passed and fine.error == ""  # notes only when some case did not pass
    assert fine.score == spec.max_points
    assert {c.verdict for c in hw3.cases} == {Verdict.EXCEPTION}
    assert "NameError" in hw3.cases[0].message
    assert hw3.error.splitlines() == [
        "your notebook hw3.ipynb: scores (cell 5) uses scale, which cell 3 sets in `scale = print(W) or 1.0`; "
        "that was left out because it calls print(), and grading produces no output",
        "your notebook hw3.ipynb: cell 4 was skipped: SyntaxError: invalid syntax at line 1 of the cell "
        "(the cell begins 'oops = = 1')",
    ]


def test_notes_travel_to_a_dask_worker_with_the_submission(tmp_path):
    """The plain data a cluster task carries keeps the notebook's notes (JSON-able, as sent)."""
    import json

    from attnscore.grade.cluster import _submission_data

    (tmp_path / "hw3.ipynb").write_bytes(notebook("oops = = 1", SCALED))
    [submission] = find_submissions([str(tmp_path / "hw3.ipynb")])
    data = json.loads(json.dumps({k: v for k, v in _submission_data(submission).items() if k != "files"}))
    assert data["notes"] == list(submission.notes) and len(submission.notes) == 2
