"""Grading throughput: the worker template against a fresh interpreter per submission, in one run.

Usage: ``.venv/bin/python benchmarks/bench_throughput.py [--copies N] [--jobs J] [--fresh-copies M] [--no-bwrap]``.

Grades ``N`` copies of the bundled correct ``dot_product_scores`` submissions
(``examples/submissions/scores/correct_*``) and ``N`` copies of its wrong ones (every mistake
but the one that hangs: wrong values, wrong shapes, import errors; shrinking included, default
settings) with ``grade_many(jobs=J)``, once through the worker template (the default) and once
through today's fresh-process path (``Limits(template=False)``, ``M`` copies: it is slow), and
prints submissions per second for each and the ratio. Scores must agree between the two paths.
Where bubblewrap is installed, both paths use it (the template inside one bwrap when the grader
is root; a fresh bwrap per worker otherwise); ``--no-bwrap`` measures both without it. The line
``sandbox:`` names the layers measured.
The machine's load average is printed with the figures: other work on the machine slows both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from attnscore.grade.grading import grade_many
from attnscore.sandbox.launch import Limits, protections, warm_template
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec
from attnscore.submission.files import find_submissions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "submissions" / "scores"


def _copies(sources: list[Path], copies: int, into: Path) -> list[Path]:
    into.mkdir()
    paths = []
    for copy in range(copies):
        for src in sources:
            dst = into / f"{copy}_{src.name}"
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copyfile(src, dst)
            paths.append(dst)
    return paths


def _rate(folder: Path, spec: Spec, limits: Limits, jobs: int) -> tuple[float, int, list[tuple[str, Fraction]]]:
    """Grade every submission in ``folder`` (a class: one per file or subfolder); the rate."""
    submissions = find_submissions([str(folder)])
    start = time.perf_counter()
    results = grade_many(submissions, spec, limits=limits, jobs=jobs)
    seconds = time.perf_counter() - start
    names = [s.path.name.split("_", 1)[1] for s in submissions]
    return len(results) / seconds, len(results), [(n, r.score) for n, r in zip(names, results, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10, help="copies of each example through the template")
    parser.add_argument("--fresh-copies", type=int, default=2, help="copies of each example on the fresh path")
    parser.add_argument("--jobs", type=int, default=2, help="grader processes")
    parser.add_argument("--no-bwrap", action="store_true", help="grade without bubblewrap even where it works")
    args = parser.parse_args()
    bwrap = False if args.no_bwrap else None
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    everything = sorted(EXAMPLES.iterdir())
    correct = [p for p in everything if p.name.startswith("correct_")]
    wrong = [p for p in everything if not p.name.startswith("correct_") and "hangs" not in p.name]
    # The template starts once per batch (about a second): not a per-submission cost.
    warm_template(Limits(call_timeout_s=spec.timeout_s, bwrap=bwrap))
    print(f"sandbox: {protections(Limits(bwrap=bwrap))}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"correct: {', '.join(p.name for p in correct)}")
    print(f"wrong:   {', '.join(p.name for p in wrong)}")
    for kind, sources in (("correct", correct), ("wrong", wrong)):
        with tempfile.TemporaryDirectory() as tmp:
            _copies(sources, args.copies, Path(tmp, "template"))
            _copies(sources, args.fresh_copies, Path(tmp, "fresh"))
            fast, many, fast_scores = _rate(
                Path(tmp, "template"), spec, Limits(call_timeout_s=spec.timeout_s, bwrap=bwrap), args.jobs
            )
            slow, few, slow_scores = _rate(
                Path(tmp, "fresh"), spec, Limits(call_timeout_s=spec.timeout_s, bwrap=bwrap, template=False), args.jobs
            )
            fresh = dict(slow_scores)
            differ = sorted({f"{n}: {a} vs {fresh[n]}" for n, a in fast_scores if n in fresh and a != fresh[n]})
            same = "yes" if not differ else "no (" + "; ".join(differ) + ")"
            print(
                f"{kind:7}: template {fast:6.2f} submissions/s ({many}), "
                f"fresh interpreters {slow:5.2f} submissions/s ({few}), ratio {fast / slow:5.1f}x, "
                f"same scores: {same}"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
