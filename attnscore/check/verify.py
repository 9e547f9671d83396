"""Verifying specs: the reference passes every case, and every known mistake is caught.

``attnscore verify`` proves each spec's worth in two ways:

1. the reference implementation passes every case of the spec in each of its dtypes (a spec the
   reference fails is a broken spec, or a broken reference);
2. mutation testing: each catalogue mistake the spec targets (:mod:`attnscore.catalogue.mistakes`; by
   default every mistake that applies to its contract) fails at least one case and is diagnosed
   as itself on at least one failing case. The result is a mutation-score table, specs ×
   mistakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnscore.catalogue.mistakes import Mistake, get_mistake, mistakes_for
from attnscore.check.cases import Case, build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, judge_cases
from attnscore.report.results import SubmissionResult
from attnscore.spec.model import Spec

__all__ = ["verify_spec", "bundled_spec_paths", "MutationResult", "mutation_test", "targeted_mistakes"]


def bundled_spec_paths() -> list[Path]:
    """The bundled spec files, sorted by name.

    They are the repository's ``specs/`` folder, shipped in the package as ``attnscore/bundled_specs``
    (a link in a checkout, a copy in an installed wheel); paths are relative to the current
    directory when they lie below it.
    """
    folder = (Path(__file__).resolve().parents[1] / "bundled_specs").resolve()
    return sorted(_relative(p) for p in folder.glob("*.yaml"))


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def verify_spec(
    spec: Spec, dtypes: Sequence[str] | None = None, cases: dict[str, list[Case]] | None = None
) -> list[SubmissionResult]:
    """Run the reference against every case of ``spec``, once per dtype (default: the spec's)."""
    results = []
    for dtype in dtypes or spec.dtypes:
        runner = InProcessRunner(spec.contract.reference)
        built = cases[dtype] if cases and dtype in cases else build_cases(spec, dtype)
        results.append(
            judge_cases(
                spec,
                built,
                runner,
                dtype=dtype,
                device="cpu",
                submission=f"reference:{spec.contract.name}",
                seed=spec.seed,
                budget=NO_SHRINK,
            )
        )
    return results


@dataclass(frozen=True)
class MutationResult:
    """One mistake run against one spec.

    Attributes:
        spec_id, mistake_id: what was run.
        caught: at least one case failed.
        diagnosed: at least one failing case was diagnosed as this mistake.
        failed_cases: ids of the failing cases.
        diagnoses: the diagnosis ids that were given (any mistake).
    """

    spec_id: str
    mistake_id: str
    caught: bool
    diagnosed: bool
    failed_cases: tuple[str, ...]
    diagnoses: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.caught and self.diagnosed

    @property
    def cell(self) -> str:
        """Short table text: ``diagnosed``, ``caught only`` or ``MISSED``."""
        return "diagnosed" if self.ok else ("caught only" if self.caught else "MISSED")


def targeted_mistakes(spec: Spec) -> list[Mistake]:
    """The mistakes ``spec`` must catch: its ``mistakes`` list, else every one that applies."""
    if spec.mistakes is not None:
        return [get_mistake(m) for m in spec.mistakes]
    return mistakes_for(spec.contract.name)


def mutation_test(spec: Spec, cases: list[Case] | None = None, dtype: str | None = None) -> list[MutationResult]:
    """Run every targeted mistake against ``spec``'s cases (its first dtype) in process."""
    dtype = dtype or spec.dtypes[0]
    cases = cases if cases is not None else build_cases(spec, dtype)
    out = []
    for mistake in targeted_mistakes(spec):
        if not mistake.applies_in(dtype):
            continue  # e.g. computed_in_float32 in a float32 run: nothing to catch there
        runner = InProcessRunner(mistake.bind(spec.contract, spec))
        result = judge_cases(
            spec,
            cases,
            runner,
            dtype=dtype,
            device="cpu",
            submission=f"mistake:{mistake.id}",
            seed=spec.seed,
            budget=NO_SHRINK,
        )
        failed = tuple(c.id for c in result.cases if not c.passed)
        diagnoses = tuple(c.diagnosis["id"] for c in result.cases if c.diagnosis)
        out.append(MutationResult(spec.id, mistake.id, bool(failed), mistake.id in diagnoses, failed, diagnoses))
    return out
