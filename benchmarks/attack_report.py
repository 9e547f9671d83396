"""Attack report: grade every hostile submission and print the figures quoted in docs/sandbox.md.

Usage: ``.venv/bin/python benchmarks/attack_report.py [--no-bwrap] [--no-landlock] [--no-template]`` (exit 1 if any
figure is not as required). The flags turn a layer off, to measure the machines that lack it.

Three parts, in the same sandbox shape: the attack suite against specs/dot_product_scores.yaml
(``tests/hostile/submissions``), the attacks graded against their own specs (``tests/hostile/
{backward,aliasing,null,messages,rules}``: the backward pass, aliasing, null implementations, long
descriptions, assignment rules), and a class of three files graded before a file that searches its
own memory for their names (``tests/hostile/classmates``). Figures: attacks tried, points wrongly
awarded (above what the attack's right values earn), grader crashes, results lost (a result missing
a case), leaks (classmates' names found in a later student's worker), the wall time, and the load
average before and after.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnscore.check.cases import build_cases  # noqa: E402
from attnscore.sandbox.launch import protections  # noqa: E402
from attnscore.spec.load import load_spec  # noqa: E402
from tests.hostile.expectations import EXPECTATIONS, SPEC_ATTACKS  # noqa: E402
from tests.hostile.harness import (  # noqa: E402
    LIMITS,
    SPEC_PATH,
    classmates_found,
    grade_attacks,
    grade_classmates,
    grade_spec_attacks,
)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min)"


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
    load_before = _load()
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
    print()
    own, own_seconds = grade_spec_attacks(limits=limits)
    for name, result in own.items():
        if isinstance(result, BaseException):
            crashes += 1
            print(f"{name}: GRADER CRASH {result!r}")
            continue
        expected = SPEC_ATTACKS[name]
        built = len(build_cases(load_spec(expected.spec)))
        lost += len(result.cases) != built
        wrongly += max(result.score - expected.most, 0)
        failed = [c.id.split(":", 1)[1] for c in result.cases if not c.passed]
        print(
            f"{name:45s} {result.score}/{result.max_score} (earns at most {expected.most})  "
            f"{result.duration_s:5.1f} s  lost: {', '.join(failed) or '-'}"
        )
    print()
    with tempfile.TemporaryDirectory() as folder:
        names, searched, class_seconds = grade_classmates(Path(folder), limits=limits)
    found = classmates_found(searched)
    leaks = sum(name in searched.output for name in names) if found is None else found[0]
    print(f"classmates: {searched.output.strip()} ({searched.score}/{searched.max_score})")
    tried = len(results) + len(own) + 1
    total = seconds + own_seconds + class_seconds
    print(f"\nsandbox: {protections(limits)}")
    parts = f"{len(results)} against dot_product_scores, {len(own)} against their own specs, 1 class"
    print(f"attacks tried: {tried} ({parts})")
    print(f"points wrongly awarded: {wrongly}")
    print(f"grader crashes: {crashes}")
    print(f"results lost: {lost}")
    print(f"leaks: {leaks} (classmates' names found in a later student's worker)")
    print(f"wall time: {total:.1f} s ({seconds:.1f} + {own_seconds:.1f} + {class_seconds:.1f}), 2 at a time")
    print(f"load average: {load_before} before, {_load()} after ({os.cpu_count()} cores)")
    sys.exit(0 if wrongly == crashes == lost == leaks == 0 else 1)


if __name__ == "__main__":
    main()
