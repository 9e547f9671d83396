"""Grading time per submission with and without the gradient properties, in one run.

Grades three submissions of ``attention(Q, K, V, mask)`` in the sandbox (one worker template for
the batch, as a class run does): a correct one, one whose output is detached, and an autograd
Function whose backward leaves the scale out of dK. Each is graded against the bundled
``attention`` spec (forward only) and against the same spec with ``gradients_match_golden`` (20
examples) and ``masked_entries_get_no_gradient`` (10 examples) added, so both figures come from
the same machine at the same load. In the same run, the FlashAttention-2 assignment
(``specs/flash_attention_2.yaml``, an autograd Function with the saved ``L`` checked): the correct
student file and two catalogued mistakes from ``examples/submissions/flash_attention_2/`` (``D``
omitted, ``L`` in base 2). Prints seconds per submission and the scores.

    .venv/bin/python benchmarks/bench_gradients.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_gradient_properties import (  # noqa: E402
    SANDBOXED_DETACHED,
    SANDBOXED_NO_SCALE_IN_DK,
    SANDBOXED_RIGHT,
)

from attnscore.grade.grading import grade_many  # noqa: E402
from attnscore.spec.load import load_spec  # noqa: E402

GRADIENT_PROPERTIES = """  - {name: gradients_match_golden, points: 4, examples: 20, statement: "backward(dO) is right"}
  - {name: masked_entries_get_no_gradient, points: 1, examples: 10, statement: "masked keys get no gradient"}
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        forward = (ROOT / "specs" / "attention.yaml").read_text(encoding="utf-8")
        at = forward.index("\nproperties:\n") + len("\nproperties:\n")
        backward = forward[:at] + GRADIENT_PROPERTIES + forward[at:]
        backward = backward.replace("id: attention\n", "id: attention_backward\n", 1)
        (base / "forward.yaml").write_text(forward, encoding="utf-8")
        (base / "backward.yaml").write_text(backward, encoding="utf-8")
        subs = []
        for name, source in (("right", SANDBOXED_RIGHT), ("detached", SANDBOXED_DETACHED),
                             ("dk_unscaled", SANDBOXED_NO_SCALE_IN_DK)):  # fmt: skip
            path = base / f"{name}.py"
            path.write_text(source, encoding="utf-8")
            subs.append(path)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        for label in ("forward", "backward"):
            spec = load_spec(base / f"{label}.yaml")
            start = time.perf_counter()
            results = grade_many(subs, spec)
            total = time.perf_counter() - start
            for path, result in zip(subs, results, strict=True):
                print(f"{label:8} {path.stem:12} {float(result.score):5.1f}/{float(result.max_score):<5.1f} "
                      f"{result.duration_s:6.2f} s")  # fmt: skip
            print(f"{label:8} {'(batch)':12} {'':11} {total:6.2f} s for {len(subs)} submissions")
        flash = ROOT / "examples" / "submissions" / "flash_attention_2"
        fa2 = [flash / f"{n}.py" for n in ("correct_tiled", "backward_d_term_omitted", "logsumexp_base_2")]
        spec = load_spec(ROOT / "specs" / "flash_attention_2.yaml")
        start = time.perf_counter()
        results = grade_many(fa2, spec)
        total = time.perf_counter() - start
        for path, result in zip(fa2, results, strict=True):
            named = sorted({c.diagnosis["id"] for c in result.cases if c.diagnosis})
            print(f"{'fa2':8} {path.stem:24} {float(result.score):5.1f}/{float(result.max_score):<5.1f} "
                  f"{result.duration_s:6.2f} s {', '.join(named)}")  # fmt: skip
        print(f"{'fa2':8} {'(batch)':24} {'':11} {total:6.2f} s for {len(fa2)} submissions")


if __name__ == "__main__":
    main()
