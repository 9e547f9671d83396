"""Cold start: one `attnscore grade` and one student's `attnscore check` of one file, a new process each, side by side.

Usage: ``.venv/bin/python benchmarks/bench_cold.py [--baseline PATH/TO/attnscore] [--rounds N]
[--submission FILE --spec SPEC] [--skip-grade]`` (default: a correct ``dot_product_scores`` file; a wrong file of a
FlashAttention-2 spec measures a cold grade whose diagnosis loads torch in the grader).

Each round runs, one after the other: ``python -c "import torch"`` (the floor), then for the
baseline command (another checkout's ``attnscore``, e.g. ``main``'s) and this checkout's: the
grade in every sandbox shape this machine offers the CLI (the default: bubblewrap around the
worker template where bwrap works; as root, the shape without bubblewrap: ``bwrap`` hidden from
``PATH``, the worker drops to its own uid and reads the interpreter through the readable mirror),
and the check (``attnscore check FILE --spec SPEC``: in process, no sandbox; a student's cold
check should cost at most ``import torch`` + 0.3 s). Before the rounds, each command grades and
checks the file once, uncounted, so that the case cache holds its cases (as a student's second
check, or a grader image built with its cases, has them), and each command's package is
byte-compiled (:func:`compile_ahead`), as ``pip install`` leaves it. Prints the median wall and CPU seconds
(user + system, the workers' and template's included when they were waited for) per command
and shape, and the median over the rounds of each figure less that round's ``import torch``, with
the load (``os.getloadavg``) before and after, so that the figures are compared under one load.
``benchmarks/bench_class.py`` takes its cold figures from :func:`measure`.
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
    grade's or check's ``Score:`` line is added to ``scores`` (every command must print the same one)."""
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


def compile_ahead(exe: str) -> None:
    """Write the bytecode of ``exe``'s attnscore package, as ``pip install`` does: a machine with
    ``PYTHONDONTWRITEBYTECODE`` set (this one) would otherwise compile ~190 modules on every run."""
    python = str(Path(exe).parent / "python")
    where = subprocess.run(
        [python, "-c", "import attnscore, os; print(os.path.dirname(attnscore.__file__))"],
        capture_output=True,
        text=True,
        cwd="/",  # not the folder the bench runs in: python -c would import that folder's attnscore
    ).stdout.strip()
    if where:
        subprocess.run([python, "-m", "compileall", "-q", where], capture_output=True)


def measure(
    commands: dict[str, str],
    shapes: dict[str, dict[str, str]],
    rounds: int,
    submission: Path = SUBMISSION,
    spec: Path = SPEC,
    python: str = sys.executable,
) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each figure in each round, interleaved: ``"import torch"`` (by
    ``python``), then for each command ``f"{name} grade {shape}"`` per shape and ``f"{name} check"``.
    Each command's package is byte-compiled and its cases cached first (one uncounted check, and a
    grade where ``shapes`` has any). Stops with the output of a run that fails, or where the
    commands disagree on a score."""
    grade = ["grade", str(submission.resolve()), "--spec", str(spec.resolve())]
    check = ["check", str(submission.resolve()), "--spec", str(spec.resolve())]
    scores: dict[str, set[str]] = {"grade": set(), "check": set()}
    for command in commands.values():
        compile_ahead(command)
        if shapes:
            _seconds([command, *grade], dict(os.environ), scores["grade"])
        _seconds([command, *check], dict(os.environ), scores["check"])
    times: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        times.setdefault("import torch", []).append(_seconds([python, "-c", "import torch"], dict(os.environ), set()))
        for name, command in commands.items():
            for shape, env in shapes.items():
                times.setdefault(f"{name} grade {shape}", []).append(_seconds([command, *grade], env, scores["grade"]))
            times.setdefault(f"{name} check", []).append(_seconds([command, *check], dict(os.environ), scores["check"]))
    for action, said in scores.items():
        if len(said) > 1:
            raise SystemExit(f"the commands' {action} disagree on the score: {sorted(said)}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another checkout's attnscore command, measured in the same rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--submission", type=Path, default=SUBMISSION, help="the file graded and checked")
    parser.add_argument("--spec", type=Path, default=SPEC, help="its spec")
    parser.add_argument(
        "--skip-grade", action="store_true", help="only the check and import torch (shorter rounds: less load drift)"
    )
    args = parser.parse_args()
    ours = str(Path(sys.executable).parent / "attnscore")
    commands = ({"baseline": args.baseline} if args.baseline else {}) | {"ours": ours}
    shapes = {} if args.skip_grade else {"default": dict(os.environ)}
    if not args.skip_grade and os.geteuid() == 0 and shutil.which("bwrap"):
        hidden = tempfile.mkdtemp(prefix="bench-cold-path-")  # an empty PATH folder: no bwrap found
        shapes["no-bwrap"] = {**os.environ, "PATH": hidden}
    load_before = os.getloadavg()
    times = measure(commands, shapes, args.rounds, args.submission, args.spec)
    load_after = os.getloadavg()
    print(f"{args.submission.name} on {args.spec.name}, {args.rounds} rounds")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} cores)")
    floor = [w for w, _ in times["import torch"]]
    for label, got in times.items():
        wall, cpu = statistics.median(w for w, _ in got), statistics.median(c for _, c in got)
        over = statistics.median(w - f for (w, _), f in zip(got, floor, strict=True))
        extra = "" if label == "import torch" else f", over import torch {over:+.2f} s"
        runs = ", ".join(f"{w:.2f}" for w, _ in got)
        print(f"{label:24s} median wall {wall:6.2f} s, cpu {cpu:5.2f} s{extra}  (wall of each run: {runs})")


if __name__ == "__main__":
    main()
