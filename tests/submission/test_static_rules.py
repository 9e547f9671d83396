"""Where a submission's code names a rule's calls (attnscore.submission.static_rules): imports
resolved, getattr with a literal, .backward() calls, the backward's scope, notebooks by cell."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.spec.rules import Rule
from attnscore.submission.files import Submission, find_submissions
from attnscore.submission.static_rules import named_calls, rule_places

SDPA = "torch.nn.functional.scaled_dot_product_attention"
NO_SDPA = Rule("no_sdpa", "forbid", (SDPA,), "any", Fraction(1), "No SDPA.", 1)
NO_AUTOGRAD = Rule(
    "hand_written", "forbid", ("torch.autograd.grad", "torch.autograd.backward"), "backward", Fraction(1), "By hand.", 2
)


def _submission(**files: str) -> Submission:
    return Submission(Path("student"), tuple((name, text.encode()) for name, text in files.items()), None)


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        pytest.param("import torch.nn.functional as F\nout = F.scaled_dot_product_attention\n", "line 2", id="alias"),
        pytest.param(
            "from torch.nn import functional\nfunctional.scaled_dot_product_attention(q, k, v)\n", "line 2", id="from"
        ),
        pytest.param(  # importing the function itself names it too
            "from torch.nn.functional import scaled_dot_product_attention as f\nf(q, k, v)\n",
            "lines 1 and 2",
            id="name",
        ),
        pytest.param("import torch\ntorch.nn.functional.scaled_dot_product_attention(q, k, v)\n", "line 2", id="path"),
        pytest.param(
            "import torch.nn.functional as F\ngetattr(F, 'scaled_dot_product_attention')(q)\n", "line 2", id="getattr"
        ),
    ],
)
def test_every_way_of_naming_a_forbidden_call_is_found(source, lines):
    """Aliases, from-imports, full paths and getattr with a literal all resolve to the ruled name."""
    places = rule_places(_submission(**{"solution.py": source}), [NO_SDPA])
    assert places == {"no_sdpa": (f"solution.py, {lines}",)}


def test_names_that_only_look_alike_are_not_found():
    """A local function of the same name, a string, a comment and another module's attribute are not SDPA."""
    source = (
        "import torch\n"
        "def scaled_dot_product_attention(q, k, v):  # F.scaled_dot_product_attention is not called\n"
        "    return q\n"
        "text = 'torch.nn.functional.scaled_dot_product_attention'\n"
        "other = torch.scaled_dot_product_attention\n"
    )
    assert rule_places(_submission(**{"solution.py": source}), [NO_SDPA]) == {"no_sdpa": ()}


def test_a_backward_rule_looks_inside_functions_named_backward_only():
    """autograd in the forward is fine for a backward rule; in the backward, by name or .backward(), it is not."""
    source = (
        "import torch\n"
        "from torch.autograd import grad\n"
        "class F(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return torch.autograd.grad(x, x)\n"
        "    @staticmethod\n"
        "    def backward(ctx, d):\n"
        "        y = grad(d, d)\n"
        "        d.sum().backward()\n"
        "        return y\n"
    )
    places = rule_places(_submission(**{"solution.py": source}), [NO_AUTOGRAD])
    assert places == {"hand_written": ("grad: solution.py, line 9", ".backward(): solution.py, line 10")}


def test_places_are_grouped_per_file_and_cut(tmp_path):
    """Lines of one file are listed together; beyond five, how many more; each file of the submission."""
    many = "import torch.nn.functional as F\n" + "F.scaled_dot_product_attention\n" * 8
    helper = "from torch.nn.functional import scaled_dot_product_attention\n"
    places = rule_places(_submission(**{"solution.py": many, "helper.py": helper, "notes.txt": many}), [NO_SDPA])
    assert places == {"no_sdpa": ("solution.py, lines 2, 3, 4, 5, 6 and 3 more", "helper.py, line 1")}


def test_a_notebook_is_named_by_its_cells(tmp_path):
    """A converted notebook's places are its cells, and the file is named as the student knows it."""
    import json

    def code(source: str, number: int) -> dict:
        return {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": number}

    cells = [
        code("import torch.nn.functional as F", 1),
        {"cell_type": "markdown", "source": "Now the function.", "metadata": {}},
        code("def scores(q, keys):\n    return F.scaled_dot_product_attention(q, keys, keys)", 2),
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "hw3.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    (submission,) = find_submissions([str(path)], one=True)
    assert rule_places(submission, [NO_SDPA]) == {"no_sdpa": ("hw3.ipynb, cell 3",)}


def test_code_that_does_not_parse_names_nothing():
    """A syntax error (the worker reports it as the import failure) gives no places, never an exception."""
    assert named_calls("def broken(:\n") == []
    assert rule_places(_submission(**{"solution.py": "def broken(:\n"}), [NO_SDPA]) == {"no_sdpa": ()}
