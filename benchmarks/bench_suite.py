"""Time `make test`: its three parts and its 20 slowest tests, with the machine's load.

Run: ``.venv/bin/python benchmarks/bench_suite.py [--tier full|fast] [--jobs auto|N] [--baseline DIR]``
(``make bench-suite`` runs the full tier).

The three parts are the ones `make test` runs, each as its own process, in this order:

1. ``attnscore verify`` (every bundled spec, in parallel processes);
2. ``attnscore practice --verify --count 300``;
3. ``pytest`` with the xdist options of the checkout's own Makefile (its ``PYTEST`` line: ``-n JOBS``
   and what follows, e.g. ``--maxprocesses 4 --dist loadfile``), with ``--durations=20``; ``--tier
   fast`` adds ``-m "not slow"`` (``make test-fast``, pytest only).

Printed: each part's wall time and exit code, the test counts pytest reports, the tests that
failed, the 20 slowest test phases (setup, call or teardown), the load average (1, 5 and 15
minutes) before and after each part and the share of the machine's CPU time in use during it (the
room left for more test workers while tests wait on sandbox workers), and the test files that took
longest in all (each test's setup, call and teardown summed per file, from pytest's JUnit XML):
where to look first for time.
``--baseline DIR`` times the same parts in another checkout (its own ``.venv``, e.g. a ``git
worktree`` of an earlier commit) right after, in the same run, and prints both side by side.
A part that fails is reported with its exit code and the run goes on; the script exits 1 then.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Part:
    """One timed part of the run."""

    name: str
    seconds: float
    code: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    summary: str = ""
    slowest: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    by_file: list[tuple[str, float, int]] = field(default_factory=list)
    busy: float | None = None  # the share of the machine's CPU time in use during the part (all processes)


def _load() -> tuple[float, float, float]:
    return os.getloadavg()


def _cpu_ticks(stat: str = "/proc/stat") -> tuple[int, int] | None:
    """``(busy, total)`` CPU ticks of the whole machine so far (``stat``'s first line: idle and
    iowait are not busy), or None where there is no such file or it holds no numbers."""
    try:
        with open(stat) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:  # user, nice, system and idle at least
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the CPU time between two :func:`_cpu_ticks` readings that was in use, 0 to 1
    (how much room the machine had left: idle cores while tests wait on sandbox workers), or None.

    >>> busy_share((100, 400), (250, 600))
    0.75
    """
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def xdist_options(makefile: Path) -> list[str]:
    """The options after ``-n $(PYTEST_JOBS)`` on the Makefile's ``PYTEST :=`` line (how `make test`
    hands tests to the xdist workers), so that the figure is the one `make test` gives.

    Raises SystemExit with what was expected where the Makefile has no such line."""
    for line in makefile.read_text(encoding="utf-8").splitlines():
        if line.startswith("PYTEST :=") and "-n $(PYTEST_JOBS)" in line:
            return line.split("-n $(PYTEST_JOBS)", 1)[1].split()
    raise SystemExit(f"error: expected a line 'PYTEST := ... -n $(PYTEST_JOBS) ...' in {makefile}, found none")


def _commands(checkout: Path, tier: str, jobs: str) -> list[tuple[str, list[str]]]:
    python = checkout / ".venv" / "bin" / "python"
    attnscore = checkout / ".venv" / "bin" / "attnscore"
    pytest = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=20", "-rfE"]
    if jobs != "0":
        pytest += ["-n", jobs, *xdist_options(checkout / "Makefile")]
    if tier == "fast":
        return [("pytest (fast tier)", [*pytest, "-m", "not slow"])]
    return [
        ("attnscore verify", [str(attnscore), "verify"]),
        ("practice --verify", [str(attnscore), "practice", "--verify", "--count", "300"]),
        ("pytest", pytest),
    ]


def _summary_and_slowest(output: str) -> tuple[str, list[str]]:
    """pytest's last summary line and its ``--durations`` lines."""
    lines = output.splitlines()
    summary = next((line.strip("= ") for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), "")
    slowest: list[str] = []
    if "slowest" in output:
        after = output.split("slowest", 1)[1].splitlines()[1:]
        slowest = [line for line in after if re.match(r"\s*[\d.]+s (call|setup|teardown)", line)][:20]
    return summary, slowest


def _by_file(junit: Path, top: int = 15) -> list[tuple[str, float, int]]:
    """``(file, seconds, tests)`` of the ``top`` test files with the most time in all, from a JUnit XML
    (each testcase's time is its setup, call and teardown); empty when pytest wrote none."""
    if not junit.exists():
        return []
    seconds: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):
        file = case.get("file") or case.get("classname", "?")
        seconds[file] += float(case.get("time", 0.0))
        counts[file] += 1
    return [(file, total, counts[file]) for file, total in seconds.most_common(top)]


def time_checkout(checkout: Path, tier: str, jobs: str) -> list[Part]:
    """Run each part in ``checkout`` (its own venv), one after the other."""
    if not (checkout / ".venv" / "bin" / "python").exists():
        raise SystemExit(f"error: expected a venv at {checkout / '.venv'} (run `make install` there), found none")
    parts = []
    for name, command in _commands(checkout, tier, jobs):
        with tempfile.TemporaryDirectory(prefix="bench-suite-") as scratch:
            junit = Path(scratch) / "junit.xml"
            if "pytest" in name:
                command = [*command, f"--junitxml={junit}", "-o", "junit_family=xunit1"]  # xunit1 names the file
            before, ticks = _load(), _cpu_ticks()
            start = time.perf_counter()
            done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            busy = busy_share(ticks, _cpu_ticks())
            by_file = _by_file(junit)
        output = done.stdout + done.stderr
        summary, slowest = _summary_and_slowest(output) if "pytest" in name else ("", [])
        failed = [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]
        parts.append(Part(name, seconds, done.returncode, before, _load(), summary, slowest, failed, by_file, busy))
        print(f"  {checkout.name}: {name} {seconds:.1f} s (exit {done.returncode})", file=sys.stderr, flush=True)
    return parts


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def report(label: str, parts: list[Part]) -> None:
    print(f"\n{label}")
    for part in parts:
        load = f"load {part.load_before[0]:.2f} -> {part.load_after[0]:.2f} (5 min {part.load_after[1]:.2f})"
        if part.busy is not None:
            load += f", CPU {part.busy:.0%} busy"
        print(f"  {part.name:<22} {_minutes(part.seconds):>14}   exit {part.code}   {load}")
        if part.summary:
            print(f"  {'':<22} {part.summary}")
    print(f"  {'total':<22} {_minutes(sum(p.seconds for p in parts)):>14}")
    for part in parts:
        if part.failed:  # what failed, so that a failing run need not be repeated to find out
            print(f"\n  failed ({part.name}):")
            for line in part.failed:
                print(f"    {line}")
    for part in parts:
        if part.slowest:
            print(f"\n  20 slowest test phases ({part.name}):")
            for line in part.slowest:
                print(f"    {line.strip()}")
    for part in parts:
        if part.by_file:
            print(f"\n  test files with the most time in all ({part.name}; setup + call + teardown, summed):")
            for file, seconds, count in part.by_file:
                print(f"    {seconds:8.1f} s  {count:4d} tests  {file}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tier", choices=("full", "fast"), default="full", help="full: make test; fast: make test-fast"
    )
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers (-n); 0 runs pytest in one process")
    parser.add_argument("--baseline", type=Path, help="another checkout (with its own .venv) timed in the same run")
    args = parser.parse_args(argv)
    print(f"cores: {os.cpu_count()}, load before: {' '.join(f'{x:.2f}' for x in _load())}", flush=True)
    ours = time_checkout(ROOT, args.tier, args.jobs)
    report(f"this checkout ({ROOT})", ours)
    failed = any(p.code for p in ours)
    if args.baseline is not None:
        theirs = time_checkout(args.baseline.resolve(), args.tier, args.jobs)
        report(f"baseline ({args.baseline})", theirs)
        failed |= any(p.code for p in theirs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
