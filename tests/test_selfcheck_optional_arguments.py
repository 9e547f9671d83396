"""The self-check leaves an optional argument out of the call as the grader does: the student's
default applies, never a marker object (`attnscore check` on a spec with an optional mask)."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from attnscore.selfcheck import check_function

ROOT = Path(__file__).resolve().parent.parent
SDPA = ROOT / "examples" / "courses" / "cs336" / "scaled_dot_product_attention.yaml"


def _sdpa(Q, K, V, mask=None):
    """CS336's signature: the mask optional, True = attend."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0) @ V


def test_an_omitted_mask_reaches_the_function_as_its_default():
    """Every argument the function receives is a tensor or its own default None, and the case that
    leaves the mask out passes."""
    received: list[type] = []

    def recording(Q, K, V, mask=None):
        received.append(type(mask))
        return _sdpa(Q, K, V, mask)

    outcome = check_function(recording, SDPA)
    by_id = {c.id: c for c in outcome.result.cases}
    assert by_id["example:no_mask"].verdict == "passed", by_id["example:no_mask"].message
    assert set(received) <= {torch.Tensor, type(None)}, received
    assert type(None) in received  # the mask-free cases did run
    graded = [c for c in outcome.result.cases if c.max_points > 0]
    assert all(c.verdict == "passed" for c in graded), [
        (c.id, c.verdict, c.message) for c in graded if c.verdict != "passed"
    ]
