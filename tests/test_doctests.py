"""The examples in attnscore's docstrings run and print what they show (doctest)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "attnscore"
# Public functions whose docstrings must keep a runnable example (the house style asks for one).
REQUIRED = {
    "attnscore.atomic": "write_atomic",
    "attnscore.maths.reference": "scores",
    "attnscore.maths.golden": "dot_products",
    "attnscore.maths.tolerance": "allowed_error",
    "attnscore.report.results": "points_out",
    "attnscore.spec.located": "field_path",
    "attnscore.report.catalogue_markdown": "cell",
}


def _module_names() -> list[str]:
    """Every module of the package, namespace folders (attnscore/practice) included."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    return [t for t in doctest.DocTestFinder().find(module, name) if t.examples]


MODULES_WITH_EXAMPLES = [name for name in _module_names() if _examples(name)]


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES)
def test_docstring_examples_run(name):
    """Each docstring example of the module gives the output written under it."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in _examples(name):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {name} failed (see above)"


@pytest.mark.parametrize("name, function", sorted(REQUIRED.items()))
def test_public_functions_keep_their_examples(name, function):
    """The worked-example docstrings are not dropped in a later edit."""
    tests = {t.name: t for t in _examples(name)}
    assert f"{name}.{function}" in tests, f"{name}.{function} has no docstring example"


def test_examples_are_found_in_namespace_folders():
    """attnscore/practice has no __init__.py; its modules' examples are still collected."""
    assert "attnscore.practice.numbers" in MODULES_WITH_EXAMPLES
    assert sum(len(t.examples) for name in MODULES_WITH_EXAMPLES for t in _examples(name)) >= 60
