"""Verifying specs: the reference passes every case, and every known mistake is caught.

``attnscore verify`` proves each spec's worth in two ways:

1. the reference implementation passes every case of the spec in every dtype it can be run in
   (:func:`verify_dtypes`: the spec's own dtypes, then the others that ``attnscore test --dtype``
   accepts; a spec the reference fails is a broken spec, or a broken reference);
2. mutation testing: each catalogue mistake the spec targets (:mod:`attnscore.catalogue.mistakes`; by
   default every mistake that applies to its contract) fails at least one case in *every* one of
   those dtypes (a default judgment that passes a mistake in bfloat16 is a wrong pass there), and
   is diagnosed as itself on at least one failing case in the spec's own (graded) dtypes. A
   mistake that is the correct implementation in a dtype (:data:`NOT_WRONG_IN`) is not run there.
   A null implementation (a mistake with ``scores_zero``: ``null_implementation``, which computes
   nothing) is held to more: every one of its forms must score 0 on every spec in every dtype,
   whatever the spec's ``mistakes`` list says (a spec where a placeholder earns a point rewards
   not computing). The result is a mutation-score table, specs × mistakes.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from attnscore.boundary import lazy_torch
from attnscore.boundary.dtypes import DTYPES
from attnscore.catalogue.mistakes import MISTAKES, Mistake, get_mistake
from attnscore.check.cases import Case, build_cases
from attnscore.check.judge import judge_case
from attnscore.check.rule_cases import judge_rules
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, Session
from attnscore.report.results import SubmissionResult
from attnscore.spec.bundled import bundled_spec_path, bundled_spec_paths
from attnscore.spec.model import Spec

__all__ = [
    "verify_spec",
    "verify_dtypes",
    "bundled_spec_path",
    "bundled_spec_paths",
    "MutationResult",
    "mutation_test",
    "mutation_test_all",
    "null_test",
    "targeted_mistakes",
    "NOT_WRONG_IN",
    "SpecVerification",
    "verify_one",
    "verify_all",
]

NOT_WRONG_IN: dict[str, tuple[str, ...]] = {
    "returned_float64": ("float64",),
    "computed_in_float16": ("float16", "bfloat16"),
}
"""The dtypes in which a mistake is not wrong, so verify does not run it there.

``returned_float64`` is the right dtype for float64 inputs; ``computed_in_float16`` is the tested
dtype itself in float16, and in bfloat16 it rounds more finely than the inputs' own dtype (it
differs only by float16's narrower range, values beyond 65,504, which only a spec with such
inputs can show).
"""


def verify_dtypes(spec: Spec) -> tuple[str, ...]:
    """Every dtype ``spec`` can be run in: its own ``dtypes`` first, then the others of
    :data:`attnscore.boundary.dtypes.DTYPES` (``attnscore test --dtype`` accepts any of them).

    >>> from types import SimpleNamespace
    >>> verify_dtypes(SimpleNamespace(dtypes=("float32", "float64")))
    ('float32', 'float64', 'float16', 'bfloat16')
    """
    return tuple(spec.dtypes) + tuple(d for d in DTYPES if d not in spec.dtypes)


def verify_spec(
    spec: Spec, dtypes: Sequence[str] | None = None, cases: dict[str, list[Case]] | None = None
) -> list[SubmissionResult]:
    """Run the reference against every case of ``spec``, once per dtype (default: the spec's).

    ``cases`` maps a dtype to its already built cases (built here for a dtype it lacks).
    """
    results = []
    for dtype in dtypes or spec.dtypes:
        built = cases[dtype] if cases and dtype in cases else build_cases(spec, dtype)
        session = Session(
            spec, tuple(built), dtype, "cpu", f"reference:{spec.contract.name}", spec.seed, budget=NO_SHRINK
        )
        reference = spec.contract.reference
        if spec.logsumexp is not None and spec.logsumexp[0] == "returned":
            from attnscore.maths.families.flash_attention_2 import returning_logsumexp

            reference = returning_logsumexp(reference)
        runner = InProcessRunner(spec.contract.binding(reference), logsumexp=spec.logsumexp)
        results.append(session.run(runner))
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
        dtype: the dtype it was run in ("" when not recorded).
        needs_diagnosis: whether :attr:`ok` requires the diagnosis too (in the spec's own dtypes,
            the ones students are graded in); elsewhere being caught is enough.
        score: for a null implementation (``Mistake.scores_zero``), the most any of its forms
            scored (every case judged; :attr:`ok` only at 0), with the spec's ``max_score``;
            None for the other mistakes.
        max_score: the spec's points in that dtype's cases (0 when ``score`` is None).
    """

    spec_id: str
    mistake_id: str
    caught: bool
    diagnosed: bool
    failed_cases: tuple[str, ...]
    diagnoses: tuple[str, ...]
    dtype: str = ""
    needs_diagnosis: bool = True
    score: Fraction | None = None
    max_score: Fraction = Fraction(0)

    @property
    def ok(self) -> bool:
        if self.score is not None:
            return self.score == 0
        return self.caught and (self.diagnosed or not self.needs_diagnosis)

    @property
    def cell(self) -> str:
        """Short table text: ``diagnosed``, ``caught only`` or ``MISSED``; for a null
        implementation ``scores 0`` or ``scores N/M``."""
        if self.score is not None:
            return f"scores {self.score}" + (f"/{self.max_score}" if self.score else "")
        return "diagnosed" if self.ok else ("caught only" if self.caught else "MISSED")


def targeted_mistakes(spec: Spec) -> list[Mistake]:
    """The mistakes ``spec`` must catch and name: its ``mistakes`` list, else every one that applies
    but the null implementations (``scores_zero``; :func:`null_test` holds every spec to those)."""
    if spec.mistakes is not None:
        own = {m.id: m for m in spec.own_mistakes}  # a spec's own reference file's, else the catalogue's
        listed = [own[m] if m in own else get_mistake(m) for m in spec.mistakes]
        return [m for m in listed if not m.scores_zero]
    return [m for m in spec.known_mistakes() if not m.scores_zero]


def null_test(spec: Spec, cases: list[Case] | None = None, dtype: str | None = None) -> list[MutationResult]:
    """Every null implementation of the catalogue (``Mistake.scores_zero``: ``null_implementation``,
    which computes nothing) against ``spec``'s cases in one dtype (default: its first), each form on
    every case, in process: each result's ``score`` is the most a form earned, and it is :attr:`ok`
    only at 0. Every spec is held to it, whatever its ``mistakes`` list says."""
    dtype = dtype or spec.dtypes[0]
    cases = cases if cases is not None else build_cases(spec, dtype)
    return [_null_score(spec, cases, m, dtype) for m in MISTAKES.values() if m.scores_zero and m.applies_in(dtype)]


def _null_score(spec: Spec, cases: list[Case], mistake: Mistake, dtype: str) -> MutationResult:
    """A null implementation run on every case, each of its forms: the most any form scores."""
    worst, failed, diagnoses = Fraction(0), [], []
    called = [c for c in cases if c.kind != "rule"]
    ruled = [c for c in cases if c.kind == "rule"]
    for form in range(mistake.form_count):
        runner = InProcessRunner(mistake.bind(spec.contract, spec, form=form), logsumexp=spec.logsumexp)
        try:
            results = [judge_case(spec, case, runner, dtype, diagnose_failures=False) for case in called]
        finally:
            runner.close()
        results += judge_rules(spec, ruled, list(zip(called, results, strict=True)), None, None, dtype)
        worst = max(worst, sum((r.points for r in results), Fraction(0)))
        failed += [r.id for r in results if not r.passed and r.id not in failed]
        diagnoses += [r.diagnosis["id"] for r in results if r.diagnosis]
    total = sum((c.points for c in cases), Fraction(0))
    return MutationResult(
        spec.id, mistake.id, bool(failed), False, tuple(failed), tuple(diagnoses), dtype, False, worst, total
    )


def mutation_test(
    spec: Spec, cases: list[Case] | None = None, dtype: str | None = None, *, needs_diagnosis: bool | None = None
) -> list[MutationResult]:
    """Run every targeted mistake against ``spec``'s cases in one dtype (default: its first), in process.

    Mistakes that are not wrong in ``dtype`` (:data:`NOT_WRONG_IN`) are left out. The diagnosis is
    required (``needs_diagnosis``) by default when ``dtype`` is one of the spec's own dtypes.

    Each mistake's run stops as soon as its verdict is settled: at its first failing case when no
    diagnosis is required, else at the first failing case diagnosed as the mistake itself. So
    ``failed_cases`` and ``diagnoses`` list the cases judged up to there, not every case of the spec;
    ``caught``, ``diagnosed`` and ``ok`` are what a run of every case would give.
    """
    dtype = dtype or spec.dtypes[0]
    cases = cases if cases is not None else build_cases(spec, dtype)
    if needs_diagnosis is None:
        needs_diagnosis = dtype in spec.dtypes
    out = []
    for mistake in targeted_mistakes(spec):
        if not mistake.applies_in(dtype) or dtype in NOT_WRONG_IN.get(mistake.id, ()):
            continue  # not wrong in this dtype (e.g. computed_in_float32 in a float32 run)
        runner = InProcessRunner(mistake.bind(spec.contract, spec), logsumexp=spec.logsumexp)
        failed: list[str] = []
        diagnoses: list[str] = []
        try:
            for case in cases:
                if case.kind == "rule":  # about calls, not values: no mistake is caught by one
                    continue
                result = judge_case(spec, case, runner, dtype)
                if not result.passed:
                    failed.append(result.id)
                if result.diagnosis:
                    diagnoses.append(result.diagnosis["id"])
                if failed and (mistake.id in diagnoses or not needs_diagnosis):
                    break  # settled: caught, and diagnosed where that is required
        finally:
            runner.close()
        out.append(
            MutationResult(
                spec.id,
                mistake.id,
                bool(failed),
                mistake.id in diagnoses,
                tuple(failed),
                tuple(diagnoses),
                dtype,
                needs_diagnosis,
            )
        )
    return out


def mutation_test_all(
    spec: Spec, cases: dict[str, list[Case]] | None = None, dtypes: Sequence[str] | None = None
) -> list[MutationResult]:
    """:func:`mutation_test`, then :func:`null_test`, in every dtype of ``dtypes`` (default
    :func:`verify_dtypes`), in that order.

    ``cases`` maps a dtype to its already built cases (built here for a dtype it lacks).
    """
    out: list[MutationResult] = []
    for dtype in dtypes or verify_dtypes(spec):
        built = cases[dtype] if cases and dtype in cases else build_cases(spec, dtype)
        out.extend(mutation_test(spec, built, dtype))
        out.extend(null_test(spec, built, dtype))
    return out


@dataclass(frozen=True)
class SpecVerification:
    """Everything ``attnscore verify`` found for one spec, as plain data.

    Attributes:
        spec_id: the spec's id.
        references: the reference's result in each dtype of :func:`verify_dtypes`, in that order.
        mutations: every targeted mistake in every dtype (empty when mutations were not run).
    """

    spec_id: str
    references: tuple[SubmissionResult, ...]
    mutations: tuple[MutationResult, ...]
    cross_check: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The reference passes everything, every targeted mistake is caught (and diagnosed), and a
        spec's second implementation (``function.reference_check``) agrees with its reference."""
        return all(r.all_passed for r in self.references) and all(m.ok for m in self.mutations) and not self.cross_check


CROSS_CHECKS = 25
"""Drawn inputs on which :func:`cross_check` compares a spec's reference with its second implementation."""


def cross_check(spec: Spec, count: int = CROSS_CHECKS) -> tuple[str, ...]:
    """Where a spec's own reference and its second, independent implementation
    (``function.reference_check``) disagree, one line each (empty when they agree or there is none).

    Both run in float64 on the CPU on the spec's worked examples and on ``count`` inputs drawn for
    its contract (from the spec's seed), and are compared under float64's ``close`` tolerance
    (NaN only where the other has NaN).
    """
    check = spec.reference_check
    if check is None:
        return ()
    from attnscore.maths.families.instructor import float64_output
    from attnscore.maths.strategies import derive_seed, draw_examples, random_args
    from attnscore.maths.tolerance import Tolerance, allowed_error, entries_close

    contract = spec.contract
    inputs = [(f"worked example {ex.id}", ex.inputs) for ex in spec.worked_examples]
    drawn = draw_examples(random_args(contract), count, derive_seed(spec.id, spec.version, spec.seed, "cross"))
    inputs += [(f"drawn input {n}", args) for n, args in enumerate(drawn, 1)]
    other = dataclasses.replace(contract, reference=check)
    lines: list[str] = []
    for where, args in inputs:
        try:
            want = contract.golden(args)
            got = float64_output(other, args)
        except ValueError as exc:
            lines.append(f"{spec.id}: on {where}, {exc}")
            continue
        shapes = ", ".join(f"{n} {tuple(np.shape(a))}" for n, a in args.items())
        if got.shape != want.shape:
            lines.append(
                f"{spec.id}: on {where} ({shapes}) the reference gives shape {want.shape} but reference_check "
                f"{got.shape}"
            )
            continue
        close = entries_close(got, want, allowed_error(Tolerance("close"), want, "float64", 1, np.zeros(())))
        if not close.all():
            index = tuple(int(i) for i in np.argwhere(~close)[0])
            lines.append(
                f"{spec.id}: on {where} ({shapes}) the reference gives out{list(index)} = {want[index]!r} but "
                f"reference_check {got[index]!r}: one of the two is wrong"
            )
        if len(lines) >= 3:
            break
    return tuple(lines)


def verify_one(spec: Spec, mutations: bool = True, dtypes: Sequence[str] | None = None) -> SpecVerification:
    """The reference in each of ``dtypes`` (default :func:`verify_dtypes`), then (``mutations``) the
    mutation test and the null test (:func:`null_test`) in each, in that order."""
    references: list[SubmissionResult] = []
    found: list[MutationResult] = []
    dtypes = tuple(dtypes or verify_dtypes(spec))
    crossed = cross_check(spec) if verify_dtypes(spec)[0] in dtypes else ()  # once per spec, with its first dtype
    for dtype in dtypes:
        cases = {dtype: build_cases(spec, dtype)}
        references.extend(verify_spec(spec, (dtype,), cases=cases))
        if mutations:
            found.extend(mutation_test(spec, cases[dtype], dtype))
            found.extend(null_test(spec, cases[dtype], dtype))
    return SpecVerification(spec.id, tuple(references), tuple(found), crossed)


def verify_all(specs: Sequence[Spec], mutations: bool = True, jobs: int = 1) -> list[SpecVerification]:
    """:func:`verify_one` for each of ``specs``, in their order, in up to ``jobs`` processes.

    The work is split by spec: each process verifies a spec in all its dtypes, building what the
    dtypes share once (split by spec and dtype instead, the bundled specs cost a fifth more CPU).
    With fewer than two specs per process, by spec and dtype, so that one spec's four dtypes can
    run side by side. The results come back in the order of ``specs`` and of
    :func:`verify_dtypes`, whatever order they finish in, so the tables are the same for every
    ``jobs``. With ``jobs`` 1 (or a platform without
    ``fork``) everything runs here. Child processes run torch on one thread each; the longest
    pieces of work (most generated examples times mistakes) start first.

    Raises:
        ValueError: ``jobs`` below 1.
    """
    if jobs < 1:
        raise ValueError(f"expected jobs >= 1, found {jobs}")
    units: list[tuple[int, str | None]] = [(i, None) for i in range(len(specs))]  # None: every dtype of the spec
    if len(specs) < 2 * jobs:  # too few specs to keep every process busy: their dtypes side by side
        units = [(i, dtype) for i, spec in enumerate(specs) for dtype in verify_dtypes(spec)]
    fork = "fork" in multiprocessing.get_all_start_methods()
    if jobs == 1 or len(units) < 2 or not fork or lazy_torch.loaded():
        with lazy_torch.one_thread():  # tiny tensors: torch's other threads would only spin
            return [verify_one(spec, mutations) for spec in specs]
    # Forked before this process loads torch (loading specs does not), so no child inherits an
    # OpenMP pool. Specs hold functions that do not pickle: the children inherit them and are sent
    # an index.
    context = multiprocessing.get_context("fork")
    _FORKED[:] = specs
    try:
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(units)), mp_context=context, initializer=lazy_torch.one_thread_in_this_process
        ) as pool:
            futures = {
                unit: pool.submit(_verify_forked, *unit, mutations)
                for unit in sorted(units, key=lambda u: -_work(specs[u[0]]))
            }
            done = {unit: future.result() for unit, future in futures.items()}
    finally:
        _FORKED.clear()
    return [
        done[(i, None)]
        if (i, None) in done
        else SpecVerification(
            spec.id,
            tuple(r for dtype in verify_dtypes(spec) for r in done[(i, dtype)].references),
            tuple(m for dtype in verify_dtypes(spec) for m in done[(i, dtype)].mutations),
            tuple(line for dtype in verify_dtypes(spec) for line in done[(i, dtype)].cross_check),
        )
        for i, spec in enumerate(specs)
    ]


_FORKED: list[Spec] = []
"""The specs :func:`verify_all` hands its forked children (by index)."""


def _verify_forked(index: int, dtype: str | None, mutations: bool) -> SpecVerification:
    return verify_one(_FORKED[index], mutations, None if dtype is None else (dtype,))


def _work(spec: Spec) -> int:
    """A rough measure of how long verifying ``spec`` in one dtype takes: its cases' generated
    examples times its mistakes."""
    drawn = sum(p.examples for p in spec.properties) + len(spec.worked_examples)
    return drawn * (1 + len(targeted_mistakes(spec)))
