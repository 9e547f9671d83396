"""attnscore/__init__.py: the public API is a sorted __all__ of names that resolve, imported lazily."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import attnscore

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = {
    "ScoreInputError",
    "additive_scores",
    "attention",
    "attention_weights",
    "bilinear_scores",
    "causal_attention",
    "causal_mask",
    "masked_scores",
    "scaled_score_matrix",
    "score",
    "score_matrix",
    "scores",
}
TOOLKIT = {
    "load_spec": "attnscore.spec.load",
    "grade_many": "attnscore.grade.grading",
    "check_path": "attnscore.selfcheck",
    "run_impl": "attnscore.check.implementation",
    "verify_spec": "attnscore.check.verify",
    "SubmissionResult": "attnscore.report.results",
    "CaseResult": "attnscore.report.results",
    "Verdict": "attnscore.report.results",
    "Session": "attnscore.check.session",
    "Runner": "attnscore.check.runner",
}


def test_all_is_sorted_and_unique():
    """__all__ is sorted (capitalised names first, as sorted() puts them) and names each name once."""
    assert attnscore.__all__ == sorted(set(attnscore.__all__))


@pytest.mark.parametrize("name", attnscore.__all__)
def test_every_public_name_resolves_to_its_defining_object(name):
    """Each name of __all__ is there, and is the very object its module defines."""
    value = getattr(attnscore, name)
    module = attnscore._LAZY.get(name, "attnscore.maths.reference")
    assert value is getattr(importlib.import_module(module), name)


def test_the_toolkit_and_every_reference_function_are_exported():
    """Load a spec, grade, check, test, verify, the result and verdict types, the run protocol and
    every reference function (causal_attention included) are public."""
    from attnscore.maths import reference

    assert REFERENCE == set(reference.__all__) <= set(attnscore.__all__)
    for name, module in TOOLKIT.items():
        assert name in attnscore.__all__ and getattr(attnscore, name) is getattr(importlib.import_module(module), name)


def test_no_public_name_is_a_subpackage():
    """No exported name is also a subpackage (``attnscore.check`` would be replaced by the folder on its import)."""
    folders = {p.name for p in (ROOT / "attnscore").iterdir() if p.is_dir()} | {
        p.stem for p in (ROOT / "attnscore").glob("*.py")
    }
    assert not folders & set(attnscore.__all__)


def test_an_unknown_name_is_one_clear_error():
    """A name the package does not have says so and where the public names are."""
    with pytest.raises(AttributeError, match=r"module 'attnscore' has no attribute 'grade_all'; its public names"):
        attnscore.grade_all  # noqa: B018


def test_dir_lists_every_public_name():
    """dir(attnscore) offers every public name, lazy ones too (for completion in a notebook)."""
    assert set(attnscore.__all__) <= set(dir(attnscore))


@pytest.mark.slow
def test_importing_attnscore_loads_nothing_else():
    """``import attnscore`` imports no module of its own and not torch: the reference and the
    toolkit load on first use, and torch only when a tensor is made (the CLI starts the worker
    template before torch is imported; attnscore.boundary.lazy_torch)."""
    show = "print(sorted(m for m in sys.modules if m.startswith('attnscore')), 'torch' in sys.modules)"
    call = "attnscore.scores(torch.tensor([1.0]), torch.tensor([[2.0]]))"
    code = f"import sys, attnscore; {show}; attnscore.scores; {show}; import torch; print({call}.tolist())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.splitlines() == [
        "['attnscore'] False",
        "['attnscore', 'attnscore.boundary', 'attnscore.boundary.lazy_torch', 'attnscore.maths', "
        "'attnscore.maths.reference'] False",
        "[2.0]",
    ]


def test_bundled_spec_path_names_the_bundled_specs_when_the_id_is_unknown():
    """An id without a bundled spec is one ValueError listing the ids there are."""
    assert attnscore.bundled_spec_path("score_matrix").name == "score_matrix.yaml"
    with pytest.raises(ValueError, match=r"no bundled spec 'scores': expected one of additive_scores, .*score_matrix"):
        attnscore.bundled_spec_path("scores")


@pytest.mark.slow
def test_the_readmes_python_example_runs():
    """The README's Python lines (load, verify, test, check, grade a bundled spec) run as shown."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
