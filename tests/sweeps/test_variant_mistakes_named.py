"""Student-style files with one catalogued mistake on each variant spec (SDPA, its float mask, the KV
cache, the sliding window, key padding, packed batches): each loses points and the mistake is named
on at least one of its failing cases, in process (``run_impl``), in float32.

The files live in ``examples/submissions/variants/<spec id>/<mistake>.py``; the file's name says the
mistake (:data:`EXPECTED`). A correct file of each spec gets full marks (the reformulation sweep
covers many more)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from attnscore.check.implementation import run_impl
from attnscore.spec.load import load_spec

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "submissions" / "variants"

EXPECTED = {
    "not_scaled": "not_scaled",
    "mask_ignored": "mask_ignored",
    "nan_rows": "nan_fully_masked",
    "large_negative": "masked_with_large_negative",
    "softmax_wrong_axis": "softmax_wrong_axis",
    "kv_tiled": "kv_heads_tiled",
    "subtracted": "sdpa_float_mask_subtracted",
    "causal_only_without_cache": "kv_cache_causal_ignored",
}

FILES = sorted(FOLDER.glob("*/*.py"))


def _function(path: Path, name: str):
    module_spec = importlib.util.spec_from_file_location(f"variant_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def test_every_file_names_its_mistake_in_the_table():
    assert len(FILES) >= 20
    assert {p.stem for p in FILES} <= set(EXPECTED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_mistake_loses_points_and_is_named(path):
    spec = load_spec(ROOT / "specs" / f"{path.parent.name}.yaml")
    result = run_impl(spec, _function(path, spec.function), dtype="float32", shrink=False)
    names = {(c.diagnosis or {}).get("id") for c in result.cases if not c.passed} - {None}
    assert result.score < result.max_score
    assert EXPECTED[path.stem] in names, names
