"""Grading throughput: seconds per submission, sequential against parallel grader processes.

Usage: ``.venv/bin/python benchmarks/bench_grading.py [--copies N] [--jobs J]``.
Grades ``copies`` copies of the bundled example submissions for ``scores`` (correct ones and
mistakes, the hanging one excluded so the figure is about throughput, not timeouts) once with
``jobs=1`` (the baseline) and once with ``jobs=J`` in the same run, and prints both.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from attnscore.grade.grading import grade_many
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=2, help="copies of the example submissions")
    parser.add_argument("--jobs", type=int, default=2, help="parallel grader processes to compare")
    args = parser.parse_args()
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    sources = [p for p in sorted((ROOT / "examples" / "submissions" / "scores").glob("*.py")) if "hangs" not in p.name]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for copy in range(args.copies):
            for src in sources:
                dst = Path(tmp) / f"{copy}_{src.name}"
                shutil.copyfile(src, dst)
                paths.append(dst)
        print(f"{len(paths)} submissions against {spec.id}")
        scores = {}
        for jobs in (1, args.jobs):
            start = time.perf_counter()
            results = grade_many(paths, spec, jobs=jobs)
            seconds = time.perf_counter() - start
            scores[jobs] = [r.score for r in results]
            print(
                f"jobs={jobs}: {seconds:6.1f} s in all, {seconds / len(paths):5.2f} s per submission, "
                f"{60 * len(paths) / seconds:6.1f} submissions per minute"
            )
        print("same scores:", scores[1] == scores[args.jobs])


if __name__ == "__main__":
    main()
