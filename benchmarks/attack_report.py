"""Attack report: grade every hostile submission and print the figures quoted in the README.

Usage: ``.venv/bin/python benchmarks/attack_report.py`` (exit 1 if any figure is not as required).
Figures: attacks tried, points wrongly awarded (above the expected score), grader crashes, results
lost (a result missing a case), total and per-submission seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hostile.expectations import EXPECTATIONS  # noqa: E402
from hostile.harness import LIMITS, grade_attacks  # noqa: E402

from graders.sandbox import protections  # noqa: E402


def main() -> int:
    results, seconds = grade_attacks()
    wrongly = crashes = lost = 0
    for name, result in results.items():
        if isinstance(result, BaseException):
            crashes += 1
            print(f"{name}: GRADER CRASH {result!r}")
            continue
        lost += len(result.cases) != 6
        extra = result.score - EXPECTATIONS[name][0]
        wrongly += max(extra, 0)
        print(
            f"{name:26s} {result.score}/{result.max_score}  {result.duration_s:5.1f} s  "
            + " ".join(c.verdict.value for c in result.cases)
        )
    print(f"\nsandbox: {protections(LIMITS)}")
    print(f"attacks tried: {len(results)}")
    print(f"points wrongly awarded: {wrongly}")
    print(f"grader crashes: {crashes}")
    print(f"results lost: {lost}")
    print(
        f"wall time: {seconds:.1f} s for {len(results)} submissions, 2 at a time "
        f"({seconds / len(results):.2f} s per submission)"
    )
    return 0 if wrongly == crashes == lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
