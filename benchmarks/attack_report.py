"""Attack report: grade every hostile submission and print the figures quoted in the README.

Usage: ``.venv/bin/python benchmarks/attack_report.py [--no-bwrap] [--no-landlock] [--no-template]`` (exit 1 if any
figure is not as required). The flags turn a layer off, to measure the machines that lack it.
Figures: attacks tried, points wrongly awarded (above the expected score), grader crashes, results
lost (a result missing a case), total and per-submission seconds.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnscore.check.cases import build_cases  # noqa: E402
from attnscore.sandbox.launch import protections  # noqa: E402
from attnscore.spec.load import load_spec  # noqa: E402
from tests.hostile.expectations import EXPECTATIONS  # noqa: E402
from tests.hostile.harness import LIMITS, SPEC_PATH, grade_attacks  # noqa: E402


@click.command()
@click.option("--no-bwrap", is_flag=True, help="Grade without bubblewrap even where it works.")
@click.option("--no-landlock", is_flag=True, help="Grade without Landlock even where the kernel has it.")
@click.option("--no-template", is_flag=True, help="A fresh interpreter (a fresh bwrap, with bwrap) per worker.")
def main(no_bwrap: bool, no_landlock: bool, no_template: bool) -> None:
    limits = dataclasses.replace(
        LIMITS,
        bwrap=False if no_bwrap else LIMITS.bwrap,
        landlock=False if no_landlock else LIMITS.landlock,
        template=False if no_template else LIMITS.template,
    )
    cases = len(build_cases(load_spec(str(SPEC_PATH))))
    results, seconds = grade_attacks(limits=limits)
    wrongly = crashes = lost = 0
    for name, result in results.items():
        if isinstance(result, BaseException):
            crashes += 1
            print(f"{name}: GRADER CRASH {result!r}")
            continue
        lost += len(result.cases) != cases
        extra = result.score - EXPECTATIONS[name][0]
        wrongly += max(extra, 0)
        print(
            f"{name:26s} {result.score}/{result.max_score}  {result.duration_s:5.1f} s  "
            + " ".join(c.verdict.value for c in result.cases)
        )
    print(f"\nsandbox: {protections(limits)}")
    print(f"attacks tried: {len(results)}")
    print(f"points wrongly awarded: {wrongly}")
    print(f"grader crashes: {crashes}")
    print(f"results lost: {lost}")
    print(
        f"wall time: {seconds:.1f} s for {len(results)} submissions, 2 at a time "
        f"({seconds / len(results):.2f} s per submission)"
    )
    sys.exit(0 if wrongly == crashes == lost == 0 else 1)


if __name__ == "__main__":
    main()
