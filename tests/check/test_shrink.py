"""Shrinking and the one judge-and-shrink entry point with its budget."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, Budget, judge_cases
from attnscore.check.shrink import add_shrunk, example_calls, shrink_case, smallest_drawn_failure
from attnscore.check.small_inputs import SMALL_COUNT, small_case
from attnscore.report.failure import size_of
from attnscore.spec.load import load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec("specs/dot_product_scores.yaml")


@pytest.fixture(scope="module")
def cases(spec):
    return build_cases(spec, "float32")


def _softmaxed(q, keys):
    """Softmax applied, with three keys or more: inputs with fewer keys pass, so a failure is
    larger than the smallest input and has something to shrink."""
    scores = keys @ q
    return torch.softmax(scores, dim=-1) if keys.shape[0] >= 3 else scores


class _Counting:
    """An implementation that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def test_shrunk_counterexample_is_no_larger_and_keeps_its_name(spec, cases):
    """Shrinking replaces a counterexample only by a smaller or equal one, records where it came
    from, and keeps the diagnosis (which holds on the shrunk input)."""
    case = next(c for c in cases if c.id == "property:equals_qk_entries")
    original = judge_case(spec, case, InProcessRunner(_softmaxed), "float32")
    shrunk = add_shrunk(spec, case, original, lambda: InProcessRunner(_softmaxed), "float32", max_steps=200)
    assert shrunk.failure.shrunk_from is not None
    assert shrunk.failure.shrunk_from.size == original.failure.size
    assert (shrunk.failure.shrunk_from.example, shrunk.failure.shrunk_from.examples) == (
        original.failure.example,
        original.failure.examples,
    )
    assert shrunk.failure.size <= original.failure.size and shrunk.failure.args != original.failure.args
    assert shrunk.diagnosis == original.diagnosis and shrunk.diagnosis["id"] == "softmax_applied"
    assert "Counterexample: shrunk by hypothesis from generated input " in shrunk.message


def test_worked_examples_and_passes_are_not_shrunk(spec, cases):
    """Only failing visible properties are shrunk; a worked example keeps its inputs."""
    example = cases[0]
    result = judge_case(spec, example, InProcessRunner(_softmaxed), "float32")
    assert add_shrunk(spec, example, result, lambda: InProcessRunner(_softmaxed), "float32") is result
    passing = judge_case(spec, cases[-1], InProcessRunner(lambda q, k: k @ q), "float32")
    assert add_shrunk(spec, cases[-1], passing, lambda: InProcessRunner(_softmaxed), "float32") is passing


@pytest.mark.slow
def test_budget_steps_bound_the_calls(spec, cases):
    """No shrinking makes no extra calls; a small step budget makes fewer calls than a larger one."""
    counts = {}
    properties = [c for c in cases if c.kind == "property"]  # no worked example shows the cause first
    for steps in (0, 3, 40):
        fn = _Counting(_softmaxed)
        result = judge_cases(
            spec,
            properties,
            InProcessRunner(fn),
            dtype="float32",
            device="cpu",
            submission="t",
            seed=0,
            budget=Budget(shrink_steps=steps, shrink_s=None),
            make_runner=lambda fn=fn: InProcessRunner(fn),
        )
        counts[steps] = fn.calls
        shrunk = [c for c in result.cases if c.failure is not None and c.failure.shrunk_from is not None]
        assert bool(shrunk) == (steps > 0) or steps == 3  # 3 steps may not reach a failing input again
        for c in shrunk:
            assert c.failure.size <= c.failure.shrunk_from.size
    assert counts[0] < counts[3] < counts[40]


@pytest.mark.slow
def test_a_cause_a_worked_example_shows_is_not_shrunk_again(spec, cases):
    """With skip_shown_causes (grading): when a failing worked example already shows the diagnosed
    mistake, the properties failing the same way are judged, not shrunk (feedback explains a cause
    once). Without it (attnscore test, pytest) they are shrunk."""
    calls = {}
    for steps in (0, 40):
        fn = _Counting(_softmaxed)
        result = judge_cases(
            spec,
            cases,
            InProcessRunner(fn),
            dtype="float32",
            device="cpu",
            submission="t",
            seed=0,
            budget=Budget(shrink_steps=steps, shrink_s=None, skip_shown_causes=True),
            make_runner=lambda fn=fn: InProcessRunner(fn),
        )
        calls[steps] = fn.calls
        failing = [c for c in result.cases if not c.passed]
        assert any(c.kind == "example" for c in failing) and any(c.kind == "property" for c in failing)
        assert {c.diagnosis["id"] for c in failing if c.diagnosis} == {"softmax_applied"}
        assert all(c.failure.shrunk_from is None for c in failing)
    assert calls[0] == calls[40]
    result = judge_cases(
        spec,
        cases,
        InProcessRunner(_softmaxed),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=Budget(shrink_steps=40, shrink_s=None),
    )
    assert any(c.kind == "property" and c.failure is not None and c.failure.shrunk_from for c in result.cases)


def test_budget_time_of_zero_shrinks_nothing(spec, cases):
    """A spent time budget stops shrinking; the cases are still all judged."""
    result = judge_cases(
        spec,
        cases,
        InProcessRunner(_softmaxed),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=Budget(shrink_steps=50, shrink_s=0.0),
    )
    assert len(result.cases) == len(cases)
    assert all(c.failure is None or c.failure.shrunk_from is None for c in result.cases)


def test_no_shrink_is_judging_only(spec, cases):
    """NO_SHRINK judges every case and shrinks none."""
    result = judge_cases(
        spec,
        cases,
        InProcessRunner(_softmaxed),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    assert not result.all_passed
    assert all(c.failure is None or c.failure.shrunk_from is None for c in result.cases)


@pytest.mark.parametrize(
    "fields, text",
    [
        pytest.param({"shrink_steps": -1}, "Budget.shrink_steps must be >= 0, found -1", id="negative steps"),
        pytest.param(
            {"shrink_s": -2.0}, "Budget.shrink_s must be >= 0 seconds or None, found -2.0", id="negative time"
        ),
        pytest.param(
            {"shrink_s": float("nan")}, "Budget.shrink_s must be >= 0 seconds or None, found nan", id="nan time"
        ),
    ],
)
def test_budget_rejects_bad_values(fields, text):
    """A budget that cannot be respected is refused with the argument, its value and the rule."""
    with pytest.raises(ValueError, match="^" + text.replace("(", r"\(").replace(")", r"\)") + "$"):
        Budget(**fields)


@pytest.mark.slow
def test_a_slow_machine_does_not_cut_shrinking_short(spec, cases):
    """The shrinking safety net counts work (CPU and the submission's own time), not wall time:
    calls kept waiting (as on a busy machine) shrink to the same counterexamples under a net
    twice the CPU time shrinking needs as without a net, although their wall time is longer."""
    import time

    from attnscore.check.session import work_clock

    wait = [0.0]

    def waited(q, keys):
        time.sleep(wait[0])  # this thread is not running: what a busy machine does to the grader
        return _softmaxed(q, keys)

    properties = [c for c in cases if c.kind == "property"]

    def judged(net):
        fn = _Counting(waited)
        began, cpu = time.monotonic(), time.thread_time()
        result = judge_cases(
            spec,
            properties,
            InProcessRunner(fn),
            dtype="float32",
            device="cpu",
            submission="t",
            seed=0,
            budget=Budget(shrink_steps=40, shrink_s=net),
            make_runner=lambda: InProcessRunner(fn),
        )
        return result, fn.calls, time.thread_time() - cpu, time.monotonic() - began

    free, calls, cpu, _ = judged(None)
    net = 2 * cpu + 0.05
    wait[0] = 2 * net / calls
    waiting, _, _, wall = judged(net)
    assert wall > net  # wall time alone would have stopped it
    assert [c.message for c in waiting.cases] == [c.message for c in free.cases]
    assert any("shrunk by hypothesis" in c.message for c in free.cases)

    class Sandboxed:
        spent = 2.5  # the submission's own time in its worker so far

    clock = work_clock(Sandboxed())
    assert clock() - time.thread_time() == pytest.approx(2.5, abs=0.01)
    before = clock()
    time.sleep(0.05)  # waiting is not work
    assert clock() - before < 0.05


def test_a_failure_on_the_smallest_drawn_input_is_not_shrunk(spec, cases):
    """A wrong submission that fails only on the property's smallest input is not shrunk: no
    smaller input exists, and no shrink call is made."""
    case = next(c for c in cases if c.id == "property:equals_qk_entries")
    floor = min(size_of(call.args) for call in case.calls)
    offset = _Counting(lambda q, keys: keys @ q + (1 if q.numel() + keys.numel() == floor else 0))
    original = judge_case(spec, case, InProcessRunner(offset), "float32")
    assert not original.passed and original.failure.size == floor == 2
    offset.calls = 0
    shrunk = add_shrunk(spec, case, original, lambda: InProcessRunner(offset), "float32", max_steps=50)
    assert shrunk is original and offset.calls == 0


def test_shrinking_stops_at_an_input_as_small_as_asked(spec, cases):
    """With small_enough at least the first failure's size, shrinking stops at that failure."""
    case = next(c for c in cases if c.id == "property:scores_not_normalised")
    full, early = _Counting(_softmaxed), _Counting(_softmaxed)
    shrink_case(spec, case, lambda: InProcessRunner(full), "float32", max_steps=200, verdict=None)
    stopped = shrink_case(spec, case, lambda: InProcessRunner(early), "float32", max_steps=200, small_enough=10**6)
    assert stopped is not None and not stopped.passed
    assert 0 < early.calls < full.calls


_CASES_DIGEST = """
import hashlib, sys
import numpy as np
from attnscore.check.cases import build_cases
from attnscore.spec.load import load_spec

digest = hashlib.sha256()
for path in sys.argv[1:]:
    for case in build_cases(load_spec(path)):
        for call in case.calls:
            for name, value in sorted(call.args.items()):
                digest.update(f"{case.id}:{name}:{value.shape}:{value.dtype}".encode())
                digest.update(np.ascontiguousarray(value).tobytes())
print(digest.hexdigest())
"""


@pytest.mark.slow
def test_drawing_is_the_same_in_every_process():
    """The generated inputs are the same in two fresh processes with
    different hash seeds: drawing depends on the spec's seed only, so a rerun, a grader child and
    `attnscore verify` all see the same cases."""
    root = Path(__file__).resolve().parents[2]
    specs = [str(root / "specs" / f"{name}.yaml") for name in ("dot_product_scores", "attention", "masked_scores")]
    digests = [
        subprocess.run(
            [sys.executable, "-c", _CASES_DIGEST, *specs],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
        ).stdout.strip()
        for hash_seed in (1, 2)
    ]
    assert len(digests[0]) == 64 and digests[0] == digests[1]


def _doubled_with_two_keys(q, keys):
    """Scores doubled once there are two keys or more (one key: right)."""
    return keys @ q * (2.0 if keys.shape[0] >= 2 else 1.0)


def _failing_inputs(case, source: str) -> list[tuple[int, int, str]]:
    """(size, position, source) of each of ``case``'s examples that ``_doubled_with_two_keys`` gets wrong."""
    failing = []
    for n, group in enumerate(example_calls(case)):
        args = case.calls[group[-1]].args
        q, keys = torch.as_tensor(args["q"]), torch.as_tensor(args["keys"])
        if keys.shape[0] >= 2 and bool((keys @ q != 0).any()):
            failing.append((size_of(args), n + 1, source))
    return failing


def test_the_smallest_failing_drawn_input_is_tried_before_hypothesis(spec, cases):
    """In grading (``drawn_first``), after the first failure the property's other drawn inputs are
    tried smallest first: the smallest one that fails the same way is the counterexample, with its
    own position, and hypothesis is not run at all (no call beyond the drawn inputs)."""
    case = next(c for c in cases if c.id == "property:equals_qk_entries")
    fn = _Counting(_doubled_with_two_keys)
    original = judge_case(spec, case, InProcessRunner(fn), "float32")
    smallest = min(_failing_inputs(case, "drawn"))
    assert smallest[0] < original.failure.size  # the test means something: a smaller one exists
    kept = add_shrunk(spec, case, original, lambda: InProcessRunner(fn), "float32", max_steps=50)
    assert kept.failure.shrunk_from.how == "hypothesis"  # attnscore test and pytest: hypothesis's minimal input
    before = fn.calls
    found = smallest_drawn_failure(spec, case, lambda: InProcessRunner(fn), "float32", original.failure)
    assert found is not None and fn.calls - before <= len(example_calls(case))  # drawn inputs only
    result, position = found
    assert (result.failure.size, position) == smallest[:2]


def test_small_inputs_give_a_counterexample_as_small_as_hypothesis_finds(spec, cases):
    """With the property's small inputs (``small_case``) among the candidates, the counterexample is
    the smallest failing input of both sets: here a small one, 3 entries (one query of width 1,
    two keys: the fewest this mistake fails on), the same on every run, found within the drawn and
    small inputs' calls; the feedback says where it came from and where the first failure was."""
    case = next(c for c in cases if c.id == "property:equals_qk_entries")
    small = small_case(spec, case, "float32")
    assert small is not None and len(example_calls(small)) == SMALL_COUNT
    assert max(size_of(call.args) for call in small.calls) <= 2 + 2 * 2  # every size at most 2
    assert small_case(spec, case, "float32") is small  # built once per process
    fn = _Counting(_doubled_with_two_keys)
    original = judge_case(spec, case, InProcessRunner(fn), "float32")
    expected = min(_failing_inputs(case, "drawn") + _failing_inputs(small, "small"))
    assert expected[0] == 3 and expected[2] == "small"
    before = fn.calls
    shrunk = add_shrunk(spec, case, original, lambda: InProcessRunner(fn), "float32", max_steps=50, drawn_first=True)
    assert fn.calls - before <= len(example_calls(case)) + SMALL_COUNT  # no hypothesis run
    assert shrunk.failure.shrunk_from.how == "small" and shrunk.failure.size == 3
    assert shrunk.failure.example == original.failure.example  # a small input has no number of its own
    assert shrunk.failure.shrunk_from.example == original.failure.example
    assert (
        f"Counterexample: a small input drawn to show this failure (3 entries), the smallest that fails this way; "
        f"the first to fail was generated input {original.failure.example} of {original.failure.examples} "
        f"({original.failure.size} entries)"
    ) in shrunk.message
    again = add_shrunk(spec, case, original, lambda: InProcessRunner(fn), "float32", max_steps=50, drawn_first=True)
    assert again.failure.args == shrunk.failure.args


def test_small_inputs_never_change_the_graded_cases(spec):
    """Drawing the small inputs leaves every graded case's inputs as they were (their own seed stream,
    and the size cap only inside ``small_sizes``)."""
    before = build_cases(spec, "float32")
    for case in before:
        small_case(spec, case, "float32", seed=spec.seed + 1)
    after = build_cases(spec, "float32")
    for a, b in zip(before, after, strict=True):
        assert [sorted(c.args) for c in a.calls] == [sorted(c.args) for c in b.calls]
        for x, y in zip(a.calls, b.calls, strict=True):
            assert all((x.args[k] == y.args[k]).all() for k in x.args), a.id


def test_drawn_inputs_are_grouped_by_example(spec, cases):
    """A relational property's calls come back as one group per example, in drawing order."""
    for case in cases:
        groups = example_calls(case)
        flat = [i for g in groups for i in g]
        assert flat == list(range(len(case.calls))), case.id
        for g in groups:
            assert case.calls[g[-1]].group in ((), g)
