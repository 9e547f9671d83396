"""Benchmark practice-problem generation: variants per second per family, against a naive baseline.

Run: ``.venv/bin/python benchmarks/bench_practice.py [--count 1000] [--class-count 10000]``

Figures printed, per family and for ``count`` variants:

- ``gen/s``: variants generated per second (exact answers, constraints, worked solutions);
- ``+check/s``: generation plus the independent float64 check of ``--verify``;
- ``md/s`` and ``moodle/s``: generation plus rendering a Markdown worksheet (no figures) or a
  Moodle XML bank;
- ``accept``: accepted draws / all draws.

Class scale (issue 13), per family at ``--class-count`` variants (default 10,000):

- ``var/s``: variants generated per second at that count; ``capacity``: the stated bound on
  distinct variants; ``dup@1000`` and ``dup@N``: duplicate variants among the first 1,000 and
  among all N (birthday law: about ``n / (2 x effective capacity)``);
- the option-balance chi-square tests of ``--verify`` (the right option's rank by position,
  text length, magnitude, signed value, key length): counts per rank, statistic and p-value.

Baseline in the same run: the naive way to get perpendicular keys (``one-score``), drawing random
vectors until ``q · k = 0``, against the constructive draw the generator uses.
"""

from __future__ import annotations

import argparse
import random
import time
from fractions import Fraction
from pathlib import Path

from attnscore.practice.export_moodle import moodle_xml
from attnscore.practice.families import load_families
from attnscore.practice.generators import _perpendicular, capacity, generate_family, givens_key
from attnscore.practice.render_md import render_worksheet_md
from attnscore.practice.solutions import Rejected, dot
from attnscore.practice.verify import CLASS_SIZE, _check_problem, duplicate_rate, verify_families
from attnscore.practice.worksheet import Worksheet

SPECS = Path(__file__).resolve().parents[1] / "specs" / "practice"


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _perpendicular_pairs(count: int, naive: bool) -> tuple[float, int]:
    """Seconds and draws to make ``count`` perpendicular 2-D pairs on the [-4, 4] grid."""
    grid = [Fraction(x) for x in range(-4, 5)]
    rng = random.Random(0)
    draws = made = 0
    start = time.perf_counter()
    while made < count:
        draws += 1
        q = (rng.choice(grid), rng.choice(grid))
        if not any(q):
            continue
        try:
            k = _perpendicular(rng, grid, q) if not naive else (rng.choice(grid), rng.choice(grid))
        except Rejected:
            continue
        if any(k) and dot(q, k) == 0:
            made += 1
    return time.perf_counter() - start, draws


def _class_scale(count: int) -> None:
    """Throughput, capacity and duplicate rates at class scale, then the option-balance tests."""
    print(f"\nclass scale, {count} variants per family")
    print(f"{'family':<18} {'var/s':>8} {'capacity':>9} {'dup@' + str(CLASS_SIZE):>9} {'dup@' + str(count):>10}")
    families = load_families(SPECS)
    for fam in families:
        t0 = time.perf_counter()
        problems, _ = generate_family(fam, count, 0)
        seconds = time.perf_counter() - t0
        keys = [givens_key(p) for p in problems]
        print(
            f"{fam.id:<18} {_rate(count, seconds):>8.0f} {capacity(fam):>9.2g} "
            f"{duplicate_rate(keys[:CLASS_SIZE]):>9.2%} {duplicate_rate(keys):>10.2%}"
        )
    report = verify_families(families, count, 0, render_sample=0)
    print(f"\noption balance at {count} variants (chi-square against uniform ranks; fail below p = 0.001)")
    for r in report.families:
        for test in r.balance:
            print(f"{r.family_id:<18} {test.describe()}")
    print(f"verify at {count}: {'OK' if report.ok else report.failures[:3]}")


def main() -> None:
    """Print the table and the baseline comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--class-count", type=int, default=10_000, help="variants per family for the class-scale table")
    args = parser.parse_args()
    sheet = Worksheet("bench", 0, None, "bench")
    print(f"{'family':<18} {'gen/s':>9} {'+check/s':>9} {'md/s':>9} {'moodle/s':>9} {'accept':>7}")
    for fam in load_families(SPECS):
        t0 = time.perf_counter()
        problems, stats = generate_family(fam, args.count, 0)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        failures = [f for p in problems for f in _check_problem(p)]
        t_check = time.perf_counter() - t0
        t0 = time.perf_counter()
        render_worksheet_md(problems, sheet)
        t_md = time.perf_counter() - t0
        t0 = time.perf_counter()
        moodle_xml(problems, sheet)
        t_moodle = time.perf_counter() - t0
        if failures:
            raise SystemExit(f"{fam.id}: {failures[0]}")
        print(
            f"{fam.id:<18} {_rate(args.count, t_gen):>9.0f} {_rate(args.count, t_gen + t_check):>9.0f} "
            f"{_rate(args.count, t_gen + t_md):>9.0f} {_rate(args.count, t_gen + t_moodle):>9.0f} "
            f"{stats.acceptance_rate:>7.1%}"
        )
    _class_scale(args.class_count)
    n = max(100, args.count // 4)
    naive_s, naive_draws = _perpendicular_pairs(n, naive=True)
    built_s, built_draws = _perpendicular_pairs(n, naive=False)
    print(
        f"\nbaseline, {n} perpendicular 2-D pairs: naive rejection {_rate(n, naive_s):.0f}/s "
        f"({n / naive_draws:.1%} of draws accepted); constructive {_rate(n, built_s):.0f}/s "
        f"({n / built_draws:.1%} accepted); speed-up {naive_s / built_s:.1f}x"
    )


if __name__ == "__main__":
    main()
