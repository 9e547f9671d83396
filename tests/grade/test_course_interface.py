"""attnscore grade on a spec that states a course's interface (examples/specs/attention_batched.yaml):
correct code written to that interface gets full marks in the sandbox, wrong code still fails, and
the worker leaves an optional mask out or passes None exactly as the cases say."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "specs" / "attention_batched.yaml"
SUBMISSIONS = ROOT / "examples" / "submissions" / "attention_batched"
LIMITS = Limits(call_timeout_s=30.0)

OMITTING = {  # the cases whose calls leave the mask out or pass None
    "example:no_mask",
    "example:mask_none",
    "property:matches_reference",
    "property:inputs_not_mutated",
    "property:dtype_device_follow_inputs",
    "property:deterministic",
}


@pytest.mark.slow
def test_course_submissions_graded_in_the_sandbox():
    """Rank-3-only, mask-optional and mask[b] code gets 15/15; a required mask and a wrong axis still fail."""
    spec = load_spec(SPEC)
    paths = sorted(SUBMISSIONS.glob("*.py"))
    results = {Path(r.submission).name: r for r in grade_many(paths, spec, limits=LIMITS, shrink_steps=0)}
    scores = {name: (int(r.score), int(r.max_score)) for name, r in results.items()}
    assert scores == {
        "correct_mask_per_item.py": (15, 15),
        "correct_unpacks_batch.py": (15, 15),
        "correct_where_mask.py": (15, 15),
        "raises_without_mask.py": (6, 15),
        "softmax_over_queries.py": (0, 15),  # wrong values earn no property points (points only for computing)
    }, scores
    needs_mask = results["raises_without_mask.py"]
    assert {c.id for c in needs_mask.cases if not c.passed} == OMITTING
    assert {c.verdict for c in needs_mask.cases if not c.passed} == {Verdict.EXCEPTION}
    wrong_axis = results["softmax_over_queries.py"]
    assert {c.diagnosis["id"] for c in wrong_axis.cases if c.diagnosis} == {"softmax_wrong_axis"}


@pytest.mark.slow
def test_the_worker_tells_a_left_out_mask_from_none(tmp_path):
    """A submission that treats "no argument" and None differently fails only where None is passed."""
    sub = tmp_path / "default_only.py"
    sub.write_text(
        "import torch\n\n\n"
        "def attention(Q, K, V, mask='absent'):\n"
        "    if mask is None:\n"
        "        raise ValueError('passed None')\n"
        "    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5\n"
        "    if not isinstance(mask, str):\n"
        "        S = S.masked_fill(~mask, float('-inf'))\n"
        "    return torch.softmax(S, dim=-1) @ V\n"
    )
    (result,) = grade_many([sub], load_spec(SPEC), limits=LIMITS, shrink_steps=0)
    failed = {c.id: c for c in result.cases if not c.passed}
    assert "example:no_mask" not in failed
    assert "\nraised ValueError: passed None\n" in failed["example:mask_none"].message
    assert "property:matches_reference" in failed  # a third of its calls pass None
    assert "Layout: mask was passed as None." in failed["property:matches_reference"].message
