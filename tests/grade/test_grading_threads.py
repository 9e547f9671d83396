"""attnscore.grade.grading: a grader that first uses torch while it grades (a cold grade, torch loaded
only for a diagnosis) computes with one torch thread, and gives torch its own count back afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]

COLD_GRADE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ.pop("OMP_NUM_THREADS", None)
from attnscore.boundary import lazy_torch
from attnscore.grade.grading import grade_many
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

spec = load_spec(sys.argv[2])
loaded_before = lazy_torch.loaded()
seen = []
def note(result):
    seen.append(lazy_torch.torch.get_num_threads() if lazy_torch.loaded() else None)
[result] = grade_many([sys.argv[3]], spec, limits=Limits(template=False), on_result=note, cache_cases=True)
diagnosed = sorted({c.diagnosis["id"] for c in result.cases if c.diagnosis})
import torch
print(json.dumps({"loaded_before": loaded_before, "during": seen, "after": torch.get_num_threads(),
                  "score": float(result.score), "diagnosed": diagnosed}))
"""


def _fresh_default() -> int:
    """torch's own thread count in a fresh interpreter (no OMP_NUM_THREADS)."""
    env = {"PATH": "/usr/bin:/bin"}
    code = "import torch; print(torch.get_num_threads())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    return int(done.stdout.strip())


@pytest.mark.slow
def test_a_cold_grade_diagnoses_with_one_torch_thread_and_gives_the_default_back(tmp_path):
    """As `attnscore grade` runs: the cases read from the case cache (the first run builds them, with
    torch), so that in the second run torch is first used by the diagnosis, while grading."""
    spec = ROOT / "specs" / "dot_product_scores.yaml"
    wrong = ROOT / "examples" / "submissions" / "scores" / "cosine_similarity.py"
    # no OMP_NUM_THREADS from an xdist worker (torch's own default); a case cache of this test's own
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path)}
    command = [sys.executable, "-c", COLD_GRADE, str(ROOT), str(spec), str(wrong)]
    runs = [subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT)]
    runs.append(subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT))
    for done in runs:
        assert done.returncode == 0, done.stdout + done.stderr
    first, seen = (json.loads(done.stdout.strip().splitlines()[-1]) for done in runs)
    assert first["during"] == [1] and first["after"] == _fresh_default()  # torch loaded as the cases were built
    assert seen["loaded_before"] is False
    assert seen["diagnosed"], seen  # the diagnosis ran, so torch was loaded during grading
    assert seen["during"] == [1]
    assert seen["after"] == _fresh_default()
    assert seen["score"] < 11
