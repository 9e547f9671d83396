"""Attack: imports the grader to patch its comparison and scoring, returns wrong values."""
import sys

import torch

sys.path[:0] = ["/work/main", "/autograder/source", "."]
for name in ("attnscore.grade.grading", "attnscore.check.compare", "attnscore.check.judge", "attnscore.report.results", "attnscore.maths.reference"):
    try:
        module = __import__(name, fromlist=["x"])
    except Exception as exc:  # noqa: BLE001
        print("import", name, "failed:", type(exc).__name__)
        continue
    for attr in ("compare", "judge_case", "grade_submission"):
        if hasattr(module, attr):
            setattr(module, attr, lambda *a, **k: None)
    print("patched", name)


def scores(q, keys):
    return torch.ones(len(keys), dtype=q.dtype)
