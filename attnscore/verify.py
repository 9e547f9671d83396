"""Verifying specs: the reference implementation must pass every case of every spec.

``attnscore verify`` loads each spec, runs all of its cases in each of its dtypes against the
reference contract in process, and reports the results. A spec the reference fails is a broken
spec (or a broken reference); either way nothing should be graded with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attnscore.cases import build_cases
from attnscore.results import SubmissionResult
from attnscore.run import run_cases
from attnscore.runner import InProcessRunner
from attnscore.spec import Spec

__all__ = ["verify_spec", "bundled_spec_paths"]


def bundled_spec_paths() -> list[Path]:
    """The spec files shipped in the project's ``specs/`` folder, sorted by name."""
    folder = Path(__file__).resolve().parent.parent / "specs"
    return sorted(folder.glob("*.yaml"))


def verify_spec(spec: Spec, dtypes: Sequence[str] | None = None) -> list[SubmissionResult]:
    """Run the reference against every case of ``spec``, once per dtype (default: the spec's)."""
    results = []
    for dtype in dtypes or spec.dtypes:
        runner = InProcessRunner(spec.contract.reference)
        results.append(run_cases(spec, build_cases(spec, dtype), runner, dtype=dtype, device="cpu",
                                 submission=f"reference:{spec.contract.name}", seed=spec.seed))
    return results
