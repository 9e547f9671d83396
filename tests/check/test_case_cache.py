"""The case cache: built cases kept on disk for cold grading runs (attnscore.check.case_cache)."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnscore.check import case_cache
from attnscore.check.case_cache import cache_folder, cached_cases
from attnscore.check.cases import build_cases
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "attnscore" / "cases"


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "dot.yaml"
    shutil.copy(ROOT / "specs" / "dot_product_scores.yaml", path)
    return load_spec(path)


def _same(a, b):
    assert [c.id for c in a] == [c.id for c in b]
    for x, y in zip(a, b, strict=True):
        assert (x.points, x.visibility, x.location, len(x.calls)) == (y.points, y.visibility, y.location, len(y.calls))
        for cx, cy in zip(x.calls, y.calls, strict=True):
            assert cx.args.keys() == cy.args.keys()
            for name in cx.args:
                assert cx.args[name].dtype == cy.args[name].dtype
                np.testing.assert_array_equal(cx.args[name], cy.args[name])
            np.testing.assert_array_equal(cx.golden, cy.golden)
            np.testing.assert_array_equal(cx.allowed, cy.allowed)
            assert cx.group == cy.group and (cx.check is None) == (cy.check is None)


def test_cached_cases_are_the_built_ones_and_the_second_run_builds_nothing(cache, spec, monkeypatch):
    first = cached_cases(spec, "float32")
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".cases"
    assert entries[0].stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    monkeypatch.setattr(case_cache, "build_cases", lambda *a: pytest.fail("built again despite the cache"))
    second = cached_cases(spec, "float32")
    _same(second, first)
    _same(second, build_cases(spec, "float32"))


@pytest.mark.slow
def test_every_bundled_spec_round_trips(cache):
    """Every bundled spec's cases can be stored (nothing unpicklable in them) and come back equal."""
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path)
        built = cached_cases(spec, spec.dtypes[0])
        assert len(list(cache.glob("*.cases"))) >= 1, path.name
        _same(cached_cases(spec, spec.dtypes[0]), built)


@pytest.mark.slow
def test_key_changes_with_the_spec_dtype_and_seed(cache, spec):
    cached_cases(spec, "float32")
    cached_cases(spec, "float64")
    cached_cases(spec, "float32", seed=7)
    path = Path(spec.path)
    path.write_text(path.read_text().replace("version: 1", "version: 2", 1))
    changed = load_spec(path)
    cached_cases(changed, "float32")
    assert len(list(cache.glob("*.cases"))) == 4


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o707])
def test_a_folder_others_can_read_or_write_is_not_used(cache, spec, mode):
    cached_cases(spec, "float32")
    os.chmod(cache, mode)
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    calls = []
    original = case_cache.build_cases
    case_cache.build_cases = lambda *a: calls.append(a) or original(*a)
    try:
        cached_cases(spec, "float32")
    finally:
        case_cache.build_cases = original
    assert len(calls) == 1  # built, not read
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before  # and nothing written there


def test_a_parent_others_can_write_is_not_used(cache, spec):
    cached_cases(spec, "float32")
    os.chmod(cache.parent, 0o777)
    try:
        assert case_cache._open_folder() is None
    finally:
        os.chmod(cache.parent, 0o755)
    assert case_cache._open_folder() is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_an_entry_of_another_owner_is_not_read(cache, spec, monkeypatch):
    cached_cases(spec, "float32")
    (entry,) = cache.iterdir()
    os.chown(entry, 12345, 12345)
    monkeypatch.setattr(case_cache, "build_cases", lambda *a: ["built"])
    assert cached_cases(spec, "float32") == ["built"]


def test_a_symlinked_or_damaged_entry_is_rebuilt(cache, spec, tmp_path, monkeypatch):
    cached_cases(spec, "float32")
    (entry,) = cache.iterdir()
    planted = tmp_path / "planted"
    planted.write_bytes(entry.read_bytes())
    os.chmod(planted, 0o600)
    entry.unlink()
    entry.symlink_to(planted)
    built = []
    original = case_cache.build_cases
    monkeypatch.setattr(case_cache, "build_cases", lambda *a: built.append(1) or original(*a))
    cached_cases(spec, "float32")
    assert built == [1] and not entry.is_symlink()  # not followed; replaced by a real entry
    entry.write_bytes(b"not a pickle")
    cached_cases(spec, "float32")
    assert built == [1, 1]
    assert pickle.loads(entry.read_bytes())["key"] == entry.stem


def test_oldest_entries_and_dead_runs_temporary_files_are_removed(cache, spec, monkeypatch):
    monkeypatch.setattr(case_cache, "KEEP", 2)
    past = time.time() - 1000
    for seed in (1, 2, 3):
        cached_cases(spec, "float32", seed=seed)
        for n, entry in enumerate(sorted(cache.glob("*.cases"), key=lambda p: p.stat().st_mtime)):
            os.utime(entry, (past + n, past + n))  # last use in store order, whatever the clock's grain
    assert len(list(cache.glob("*.cases"))) == 2
    stale = cache / ".abc.123.456.tmp"
    stale.write_bytes(b"half written")
    old = time.time() - 2 * case_cache._STALE_TEMP_S
    os.utime(stale, (old, old))
    fresh = cache / ".def.123.456.tmp"  # a live run's: left alone
    fresh.write_bytes(b"being written")
    cached_cases(spec, "float32", seed=4)
    assert not stale.exists() and fresh.exists()


def test_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "attnscore" / "cases"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_folder() == Path(os.path.expanduser("~")) / ".cache" / "attnscore" / "cases"


_NO_TORCH = """
import sys
from attnscore.cli import run
sys.argv = ["attnscore", "grade", sys.argv[1], "--spec", sys.argv[2]]
try:
    run()
except SystemExit as exc:
    print("exit", exc.code)
print("torch imported:", "torch" in sys.modules)
"""


@pytest.mark.slow
def test_a_cold_run_on_a_cached_spec_never_imports_torch_for_a_correct_submission(tmp_path):
    """The grader process itself needs no torch when the cases come from the cache and nothing
    fails (the worker template imports it in its own process); a wrong submission's diagnosis does."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    spec = str(ROOT / "specs" / "dot_product_scores.yaml")
    right = tmp_path / "right.py"
    right.write_text("def scores(q, keys):\n    return keys @ q\n")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def scores(q, keys):\n    return -(keys @ q)\n")

    def run(path):
        done = subprocess.run(
            [sys.executable, "-c", _NO_TORCH, str(path), spec], capture_output=True, text=True, env=env, cwd=ROOT
        )
        return done.stdout

    first = run(right)  # builds the cases (with torch) and stores them
    assert "Score: 11/11" in first and "torch imported: True" in first
    second = run(right)
    assert "Score: 11/11" in second and "exit 0" in second and "torch imported: False" in second
    assert first.split("Score:")[0] == second.split("Score:")[0]  # the same report, case by case
    third = run(wrong)
    assert "exit 1" in third and "torch imported: True" in third
