"""The self-check reads its cases from the grader's case cache: a second check draws nothing again."""

from __future__ import annotations

from pathlib import Path

from attnscore.check import case_cache
from attnscore.selfcheck import check_function, visible_cases
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"


def test_a_second_self_check_builds_no_cases(monkeypatch, tmp_path):
    """The first check builds and stores the cases; the second reads them (the same visible cases)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built: list[str] = []
    real = case_cache.build_cases

    def counting(spec, dtype, seed=None):
        built.append(dtype)
        return real(spec, dtype, seed)

    monkeypatch.setattr(case_cache, "build_cases", counting)
    first = check_function(lambda q, keys: keys @ q, SPEC)
    second = check_function(lambda q, keys: keys @ q, SPEC)
    assert built == ["float32"]
    assert first.passed and second.passed and first.result.score == second.result.score == 9
    spec = load_spec(SPEC)
    cases, hidden = visible_cases(spec)
    assert built == ["float32"] and hidden == 1
    assert [c.id for c in cases] == [c.id for c in first.result.cases]
