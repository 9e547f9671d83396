"""Grading the attack suite: every hostile submission against specs/dot_product_scores.yaml.

Shared by the tests (:mod:`tests.hostile.test_attacks`) and ``benchmarks/attack_report.py``.
Cases are built once; each submission is graded in its own sandboxed worker, the attack suite
:data:`WORKERS` at a time, the others two at a time.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from attnscore.check.case_cache import cached_cases
from attnscore.check.cases import Case, build_cases
from attnscore.grade.grading import grade_submission
from attnscore.report.results import SubmissionResult
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec
from tests.hostile.expectations import EXPECTATIONS, SPEC_ATTACKS

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "dot_product_scores.yaml"
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
# Short limits keep the suite fast: 1.5 s per call, 20 s of the submission's own time in all (the
# clocks of attnscore.sandbox.clock: a busy machine does not run them down). The right answers of
# the attacks stay far below both: orphan_daemon, the slowest (88 calls, each forking and waiting for
# a child, whose waits for a CPU do count), used 5.7 s at a load of 10 to 16 on two cores.
LIMITS = Limits(call_timeout_s=1.5, load_timeout_s=30, total_timeout_s=20)
WORKERS = 4
"""Attacks graded at a time (:func:`grade_attacks`). Most of that suite's time is waiting, not
computing: an attack that hangs, sleeps or crashes waits out its call limits or a worker's restart,
which costs no CPU, so four at a time take about 60 % of the time of two on a two-core machine.
The suites whose submissions compute throughout (mutations, spec attacks) stay at two: more at a
time would only lengthen each call's own time (its waits for a CPU count) towards its limit."""
WAITING = frozenset({"timeout", "memory_limit", "crashed"})
"""Verdicts that cost an attack its limits' wait or a worker's restart per case: such attacks are
graded first, so that a long one does not start last and hold the whole suite."""


def _waits(name: str) -> bool:
    """Whether the attack ``name`` of :data:`tests.hostile.expectations.EXPECTATIONS` (its file's
    stem) may end a case on a limit or a crash."""
    return name in EXPECTATIONS and bool(EXPECTATIONS[name][1] & WAITING)


def attack_paths() -> list[Path]:
    """Every attack file, sorted by name."""
    return sorted(SUBMISSIONS.glob("*.py"))


def grade_attacks(
    paths: list[Path] | None = None, workers: int = WORKERS, limits: Limits = LIMITS
) -> tuple[dict[str, SubmissionResult | BaseException], float]:
    """Grade ``paths`` (default: every attack), ``workers`` at a time, those that may wait on a limit
    or a crash (:func:`_waits`) first, so that the suite does not end on one of them alone; returns
    ``({name: result or the grader's exception}, seconds)``, in ``paths``'s order."""
    spec = load_spec(str(SPEC_PATH))
    cases = cached_cases(spec, spec.dtypes[0])  # as attnscore grade has them: the grader's case cache holds them
    paths = attack_paths() if paths is None else paths

    def one(path: Path) -> SubmissionResult | BaseException:
        try:
            return grade_submission(path, spec, cases, limits=limits, shrink_steps=0)
        except BaseException as exc:  # noqa: BLE001 - a grader crash is a finding, not a test abort
            return exc

    start = time.perf_counter()
    order = sorted(paths, key=lambda p: not _waits(p.stem))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = dict(zip((p.stem for p in order), pool.map(one, order), strict=True))
    return {p.stem: done[p.stem] for p in paths}, time.perf_counter() - start


MUTATIONS = Path(__file__).resolve().parent / "mutation"


@functools.cache
def _built(file: str) -> tuple[Spec, tuple[Case, ...]]:
    """``specs/<file>`` and its cases, built once per process (plain data: every sandbox shape
    grades the same cases)."""
    spec = load_spec(str(ROOT / "specs" / file))
    return spec, tuple(build_cases(spec))


def grade_mutation_attacks(
    specs: dict[str, str], workers: int = 2, limits: Limits = LIMITS
) -> dict[str, SubmissionResult | BaseException]:
    """Grade each ``tests/hostile/mutation/<name>.py`` against ``specs/<specs[name]>``;
    ``{name: result or the grader's exception}``."""
    loaded = {file: _built(file)[0] for file in set(specs.values())}
    roomy = replace(limits, total_timeout_s=120)  # these specs have 20 to 30 cases, not 7
    cases = {file: list(_built(file)[1]) for file in loaded}

    def one(name: str) -> SubmissionResult | BaseException:
        file = specs[name]
        try:
            return grade_submission(MUTATIONS / f"{name}.py", loaded[file], cases[file], limits=roomy, shrink_steps=0)
        except BaseException as exc:  # noqa: BLE001 - a grader crash is a finding, not a test abort
            return exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(specs, pool.map(one, specs), strict=True))


HOSTILE = Path(__file__).resolve().parent


def grade_spec_attacks(
    names: list[str] | None = None, workers: int = 2, limits: Limits = LIMITS
) -> tuple[dict[str, SubmissionResult | BaseException], float]:
    """Grade each ``tests/hostile/<folder>/<name>.py`` of :data:`tests.hostile.expectations.SPEC_ATTACKS`
    (default: all of them) against its own spec, two at a time, from the case cache as ``attnscore
    grade`` does; ``({name: result or the grader's exception}, seconds)``."""
    names = sorted(SPEC_ATTACKS) if names is None else names
    files = {SPEC_ATTACKS[n].spec for n in names}
    loaded = {file: load_spec(str(ROOT / file)) for file in files}
    cases = {file: cached_cases(spec, spec.dtypes[0]) for file, spec in loaded.items()}
    roomy = replace(limits, total_timeout_s=120)  # these specs have 11 to 13 cases of many calls

    def one(name: str) -> SubmissionResult | BaseException:
        file = SPEC_ATTACKS[name].spec
        try:
            return grade_submission(HOSTILE / f"{name}.py", loaded[file], cases[file], limits=roomy, shrink_steps=0)
        except BaseException as exc:  # noqa: BLE001 - a grader crash is a finding, not a test abort
            return exc

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip(names, pool.map(one, names), strict=True))
    return results, time.perf_counter() - start


CLASSMATE = "def scores(q, keys):\n    return keys @ q\n"
"""A classmate's right answer to specs/dot_product_scores.yaml."""
MEMORY_SEARCH = HOSTILE / "classmates" / "zzz_searches_own_memory.py"


def grade_classmates(
    folder: Path, classmates: int = 3, limits: Limits = LIMITS
) -> tuple[list[str], SubmissionResult, float]:
    """A class of ``classmates`` right files named ``zz_classmate_<8 random hex digits>.py`` and,
    graded after them in the same run (one grader process, one worker template), the attack that
    searches its own memory for such names (``classmates/zzz_searches_own_memory.py``); written
    into ``folder``. ``(the classmates' file names, the attack's result, seconds)``."""
    import secrets
    import shutil

    from attnscore.grade.grading import grade_many

    names = [f"zz_classmate_{secrets.token_hex(4)}.py" for _ in range(classmates)]
    for name in names:
        (folder / name).write_text(CLASSMATE)
    shutil.copy(MEMORY_SEARCH, folder / MEMORY_SEARCH.name)
    spec = load_spec(str(SPEC_PATH))
    start = time.perf_counter()
    results = grade_many(sorted(folder.glob("*.py")), spec, limits=limits, shrink_steps=0, cache_cases=True)
    return names, results[-1], time.perf_counter() - start


def classmates_found(result: SubmissionResult) -> tuple[int, int] | None:
    """``(names found, MiB scanned)`` from the memory search's output, or None when it said nothing."""
    import re

    said = re.search(r"classmates: found (\d+) \(.*\); scanned (\d+) MiB", result.output)
    return (int(said.group(1)), int(said.group(2))) if said else None
