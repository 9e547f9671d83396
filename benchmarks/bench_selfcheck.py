"""Self-check cold time: ``attnscore check`` in a fresh process against ``import torch`` alone.

Usage: ``.venv/bin/python benchmarks/bench_selfcheck.py [--runs N]``.
In the same run, alternating so that machine load hits both alike, it times N cold processes of
each: ``python -c "import torch"`` (the floor: the baseline any torch-based check pays) and
``attnscore check examples/submissions/scores/correct_matmul.py --spec specs/dot_product_scores.yaml``.
It prints wall and CPU seconds (median and best) and, from one in-process run, where the check's
own time goes (importing attnscore's modules, building the visible cases, judging them). CPU
seconds are the figure to compare on a shared machine: wall time there includes waiting for a core.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
TORCH = [PYTHON, "-c", "import torch"]
CHECK = [
    PYTHON,
    "-m",
    "attnscore",
    "check",
    str(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"),
    "--spec",
    str(ROOT / "specs" / "dot_product_scores.yaml"),
]
BREAKDOWN = """
import time
t0 = time.perf_counter(); c0 = time.process_time()
import torch
t1 = time.perf_counter(); c1 = time.process_time()
from attnscore.selfcheck import check_path, visible_cases
from attnscore.spec.load import load_spec
t2 = time.perf_counter(); c2 = time.process_time()
spec = load_spec(SPEC)
visible_cases(spec)
t3 = time.perf_counter(); c3 = time.process_time()
assert check_path(SOLUTION, spec).passed
t4 = time.perf_counter(); c4 = time.process_time()
print(f"import torch {t1 - t0:.2f} s wall / {c1 - c0:.2f} s cpu")
print(f"import attnscore.selfcheck and the rest {t2 - t1:.2f} / {c2 - c1:.2f}")
print(f"load spec and build the visible cases {t3 - t2:.2f} / {c3 - c2:.2f}")
print(f"check (cases again, judge, render-free) {t4 - t3:.2f} / {c4 - c3:.2f}")
"""


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=command is TORCH, stdout=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    samples: dict[str, list[tuple[float, float]]] = {"import torch": [], "attnscore check": []}
    for _ in range(args.runs):
        samples["import torch"].append(timed(TORCH))
        samples["attnscore check"].append(timed(CHECK))
    for name, runs in samples.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"{name:16} wall median {statistics.median(walls):.2f} s (best {min(walls):.2f}), "
            f"cpu median {statistics.median(cpus):.2f} s (best {min(cpus):.2f})  [{args.runs} cold runs]"
        )
    floor = statistics.median(c for _, c in samples["import torch"])
    check = statistics.median(c for _, c in samples["attnscore check"])
    print(f"check over the torch floor: +{check - floor:.2f} s cpu (ratio {check / floor:.2f})")
    solution = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    spec = ROOT / "specs" / "dot_product_scores.yaml"
    code = f"SPEC = {str(spec)!r}\nSOLUTION = {str(solution)!r}\n" + BREAKDOWN
    subprocess.run([PYTHON, "-c", code], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
