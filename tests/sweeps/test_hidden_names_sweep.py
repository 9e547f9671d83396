"""The hidden-names sweep: every case of every bundled spec, made hidden and failed, is named only
"hidden case N" (with its points) in every student-facing result (attnscore.report.redact.for_students)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.report.gradescope import gradescope_results
from attnscore.report.redact import hidden_case_label
from attnscore.report.results import points_out
from attnscore.spec.load import load_spec
from tests.report.test_hidden_names import hidden_names, judged, student_outputs

pytestmark = pytest.mark.slow

SPECS = Path(__file__).resolve().parents[2] / "attnscore" / "bundled_specs"


@pytest.mark.parametrize("spec_name", sorted(p.stem for p in SPECS.glob("*.yaml")))
def test_every_hidden_case_of_every_bundled_spec_stays_unnamed(spec_name):
    """Every case of every bundled spec made hidden and failed (wrong values): no student-facing
    result holds any case's id, title, statement or spec line; the hidden cases are numbered 1..N
    in spec order with their points."""
    spec = load_spec(SPECS / f"{spec_name}.yaml")

    def wrong(*args):
        return spec.contract.reference(*args) * 1.5 + 0.25

    result, _ = judged(spec_name, wrong, all_hidden=True)
    names = hidden_names(result, spec)
    for fmt, text in student_outputs(result).items():
        for name in names:
            assert name not in text, (spec_name, fmt, name)
    tests = gradescope_results(result)["tests"]
    assert [t["name"] for t in tests] == [hidden_case_label(n) for n in range(1, len(result.cases) + 1)]
    assert [t["max_score"] for t in tests] == [points_out(c.max_points) for c in result.cases]
