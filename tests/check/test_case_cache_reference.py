"""The case cache keys on a spec's own reference file too: an edited reference never reuses cached
golden values (attnscore.check.case_cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.check import case_cache
from attnscore.check.case_cache import cached_cases
from attnscore.spec.load import load_spec

SPEC = """format: attnscore-spec/1
id: own_double
version: 1
title: twice x, the instructor's own reference
function:
  name: double
  reference: double_reference.py
  parameters:
    - {name: x, shape: ["...", n]}
  returns: {shape: ["...", n]}
dtypes: [float32]
worked_examples:
  - id: one
    inputs: {x: [1, -2]}
    expected: EXPECTED
    explanation: twice each entry
    points: 1
properties:
  - {name: matches_reference, points: 1, examples: 5, statement: matches}
"""


def write(folder: Path, factor: int) -> Path:
    (folder / "double_reference.py").write_text(f"def double(x):\n    return {factor} * x\n", encoding="utf-8")
    spec = folder / "own_double.yaml"
    spec.write_text(SPEC.replace("EXPECTED", str([factor, -2 * factor])), encoding="utf-8")
    return spec


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "attnscore" / "cases"


def test_an_edited_reference_gets_a_new_key(tmp_path: Path, cache: Path) -> None:
    """The same spec file with its reference edited: a new entry, the new golden values; the
    unchanged reference reads its entry back without building."""
    path = write(tmp_path, 2)
    first = cached_cases(load_spec(path), "float32")
    key = case_cache._key(load_spec(path), "float32", None)
    (tmp_path / "double_reference.py").write_text("def double(x):\n    return 2.0 * x + 0\n", encoding="utf-8")
    edited = load_spec(path)
    assert case_cache._key(edited, "float32", None) != key
    cached_cases(edited, "float32")
    assert len(list(cache.iterdir())) == 2
    np.testing.assert_array_equal(first[0].calls[0].golden, [2.0, -4.0])


def test_a_new_reference_never_reuses_golden_values(tmp_path: Path, cache: Path) -> None:
    """Golden values follow the reference's content, whatever the cache holds."""
    path = write(tmp_path, 2)
    cached_cases(load_spec(path), "float32")
    write(tmp_path, 3)  # the spec's expected value changes with it, so it still loads
    again = cached_cases(load_spec(path), "float32")
    np.testing.assert_array_equal(again[0].calls[0].golden, [3.0, -6.0])
    drawn = again[1].calls[0]
    np.testing.assert_allclose(drawn.golden, 3 * drawn.args["x"].astype(np.float64))


def test_a_same_size_edit_within_the_same_second_is_never_read_from_stale_bytecode(tmp_path: Path, cache: Path) -> None:
    """The reference edited to a file of the same size and the same mtime (an edit within the same
    second): Python's bytecode cache in ``__pycache__`` still looks current for it, but the new
    key's golden values are the new reference's, and the old key's stay the old one's."""
    import importlib.util
    import os
    import py_compile

    path = write(tmp_path, 2)
    reference = tmp_path / "double_reference.py"
    stamp = reference.stat().st_mtime_ns
    # the old reference's bytecode, as any import of it (an older attnscore's, the instructor's own) leaves it
    py_compile.compile(str(reference), cfile=importlib.util.cache_from_source(str(reference)), doraise=True)
    first = cached_cases(load_spec(path), "float32")
    write(tmp_path, 3)
    os.utime(reference, ns=(stamp, stamp))
    again = cached_cases(load_spec(path), "float32")
    np.testing.assert_array_equal(first[0].calls[0].golden, [2.0, -4.0])
    np.testing.assert_array_equal(again[0].calls[0].golden, [3.0, -6.0])
    drawn = again[1].calls[0]
    np.testing.assert_allclose(drawn.golden, 3 * drawn.args["x"].astype(np.float64))
