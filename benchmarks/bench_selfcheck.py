"""Self-check cold time: ``attnscore check`` in a fresh process against ``import torch`` alone.

Usage: ``.venv/bin/python benchmarks/bench_selfcheck.py [--runs N] [--bytecode]``.

In the same run, alternating so that machine load hits each alike, it times N cold processes of:

- ``python -c "import torch"``: the floor any torch-based check pays;
- ``attnscore check examples/submissions/scores/correct_matmul.py --spec specs/dot_product_scores.yaml``
  as the ``attnscore`` command runs it (``python -m attnscore``: :func:`attnscore.cli.run`);
- the same check through :func:`attnscore.cli.main` without :func:`gc.freeze` (the baseline: how
  the command ran before it froze the imports' objects).

It prints wall and CPU seconds (median and best) and, from one in-process run laid out like the
command, where the check's own time goes. CPU seconds are the figure to compare on a shared
machine: wall time there includes waiting for a core.

Bytecode: where ``PYTHONDONTWRITEBYTECODE`` is set (as on the development machine) an editable
install recompiles attnscore's modules in every process. ``--bytecode`` measures what a ``pip
install`` gives instead: byte-compiled modules, in a temporary ``PYTHONPYCACHEPREFIX`` filled by
one uncounted run of each command first.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SOLUTION = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
CHECK_ARGS = ["check", str(SOLUTION), "--spec", str(SPEC)]
COMMANDS = {
    "import torch": [PYTHON, "-c", "import torch"],
    "attnscore check": [PYTHON, "-m", "attnscore", *CHECK_ARGS],
    "  without freeze": [PYTHON, "-c", "from attnscore.cli import main; main(prog_name='attnscore')", *CHECK_ARGS],
}
BREAKDOWN = """
import gc, time
t0 = time.perf_counter(); c0 = time.process_time()
import attnscore.cli
t1 = time.perf_counter(); c1 = time.process_time()
gc.freeze()
from attnscore.selfcheck import check_path, visible_cases
from attnscore.spec.load import load_spec
t2 = time.perf_counter(); c2 = time.process_time()
spec = load_spec(SPEC)
visible_cases(spec)
t3 = time.perf_counter(); c3 = time.process_time()
outcome = check_path(SOLUTION, spec)
assert outcome.passed
outcome.text()
t4 = time.perf_counter(); c4 = time.process_time()
print(f"  import torch and the command line  {t1 - t0:.2f} s wall / {c1 - c0:.2f} s cpu")
print(f"  import the self-check              {t2 - t1:.2f} / {c2 - c1:.2f}")
print(f"  load the spec, draw visible cases  {t3 - t2:.2f} / {c3 - c2:.2f}")
print(f"  check: cases again, judge, render  {t4 - t3:.2f} / {c4 - c3:.2f}")
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one run; exit 0 required."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bytecode", action="store_true", help="byte-compiled modules, as a pip install has them")
    args = parser.parse_args()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="attnscore-pycache-") as cache:
        if args.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
            for command in COMMANDS.values():
                timed(command, env)
        compiled = "byte-compiled modules" if args.bytecode else "no bytecode cache"
        if not args.bytecode and not env.get("PYTHONDONTWRITEBYTECODE"):
            compiled = "bytecode cache as this environment keeps it"
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {compiled}")
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                samples[name].append(timed(command, env))
        for name, runs in samples.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            print(
                f"{name:16} wall median {statistics.median(walls):.2f} s (best {min(walls):.2f}), "
                f"cpu median {statistics.median(cpus):.2f} s (best {min(cpus):.2f})  [{args.runs} cold runs]"
            )
        median = {name: statistics.median(c for _, c in runs) for name, runs in samples.items()}
        floor, check, unfrozen = median["import torch"], median["attnscore check"], median["  without freeze"]
        print(f"check over the torch floor: +{check - floor:.2f} s cpu (without freeze: +{unfrozen - floor:.2f} s)")
        print("where the check's time goes (one in-process run, laid out like the command):")
        code = f"SPEC = {str(SPEC)!r}\nSOLUTION = {str(SOLUTION)!r}\n" + BREAKDOWN
        subprocess.run([PYTHON, "-c", code], check=True, cwd=ROOT, env=env)


if __name__ == "__main__":
    main()
