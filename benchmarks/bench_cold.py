"""Cold start: one `attnscore grade` of one file, a new process each time, side by side.

Usage: ``.venv/bin/python benchmarks/bench_cold.py [--baseline PATH/TO/attnscore] [--rounds N]
[--submission FILE --spec SPEC]`` (default: a correct ``dot_product_scores`` file; a wrong file of a
FlashAttention-2 spec measures a cold grade whose diagnosis loads torch in the grader).

Each round runs, one after the other: ``python -c "import torch"`` (the floor), the baseline
command (another checkout's ``attnscore``, e.g. ``main``'s) and this checkout's, in every sandbox
shape this machine offers the CLI: the default (bubblewrap around the worker template where
bwrap works) and, as root, the shape without bubblewrap (``bwrap`` hidden from ``PATH``: the
worker drops to its own uid and reads the interpreter through the readable mirror). Prints the
median wall and CPU seconds (user + system, the workers' and template's included when
they were waited for) per command and shape, with the load (``os.getloadavg``) before and after, so
that the figures are compared under one load.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBMISSION = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"


def _seconds(argv: list[str], env: dict[str, str], scores: set[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of every process it waited for) of ``argv``; a
    grade's ``Score:`` line is added to ``scores`` (every command must print the same one)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    score = re.search(r"Score: \S+", done.stdout)
    if argv[-1] != "import torch":
        if done.returncode not in (0, 1) or score is None:  # 1: the submission lost points
            output = done.stdout[-1500:] + done.stderr[-1500:]
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{output}")
        scores.add(score.group(0))
    elif done.returncode != 0:
        raise SystemExit(f"import torch failed ({done.returncode}):\n{done.stderr[-1500:]}")
    return took, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another checkout's attnscore command, measured in the same rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--submission", type=Path, default=SUBMISSION, help="the file graded")
    parser.add_argument("--spec", type=Path, default=SPEC, help="its spec")
    args = parser.parse_args()
    ours = str(Path(sys.executable).parent / "attnscore")
    commands = {"ours": ours} | ({"baseline": args.baseline} if args.baseline else {})
    shapes = {"default": dict(os.environ)}
    if os.geteuid() == 0 and shutil.which("bwrap"):
        hidden = tempfile.mkdtemp(prefix="bench-cold-path-")  # an empty PATH folder: no bwrap found
        shapes["no-bwrap"] = {**os.environ, "PATH": hidden}
    grade = ["grade", str(args.submission.resolve()), "--spec", str(args.spec.resolve())]
    scores: set[str] = set()
    times: dict[str, list[tuple[float, float]]] = {}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        floor = _seconds([sys.executable, "-c", "import torch"], dict(os.environ), scores)
        times.setdefault("import torch", []).append(floor)
        for shape, env in shapes.items():
            for name, command in commands.items():
                times.setdefault(f"{name} {shape}", []).append(_seconds([command, *grade], env, scores))
    load_after = os.getloadavg()
    if len(scores) != 1:
        raise SystemExit(f"the commands disagree on the score: {sorted(scores)}")
    print(f"{args.submission.name} on {args.spec.name}: {scores.pop()}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} cores)")
    for label, got in times.items():
        wall, cpu = statistics.median(w for w, _ in got), statistics.median(c for _, c in got)
        runs = ", ".join(f"{w:.2f}" for w, _ in got)
        print(f"{label:24s} median wall {wall:6.2f} s, cpu {cpu:5.2f} s  (wall of each run: {runs})")


if __name__ == "__main__":
    main()
