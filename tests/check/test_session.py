"""check/session.py and check/runner.py: one declared runner protocol, one session that orders,
judges, shrinks, closes and stamps a run."""

from __future__ import annotations

import ast
import functools
import time
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.check.cases import Case, build_cases
from attnscore.check.runner import InProcessRunner, RefusedRunner, Runner
from attnscore.check.session import CLEANUP_NOTE, NO_SHRINK, Budget, Session
from attnscore.check.verify import bundled_spec_path
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec

PACKAGE = Path(__file__).resolve().parents[2] / "attnscore"
SPEC = load_spec(bundled_spec_path("dot_product_scores"))


@functools.cache
def _cases() -> tuple[Case, ...]:
    """The spec's cases in float64, built at the first test that needs them (not at
    collection, which every xdist worker does) and shared by the module's tests."""
    return tuple(build_cases(SPEC, "float64"))


def _hidden() -> list[str]:
    """The ids of the hidden cases, in spec order."""
    return [c.id for c in _cases() if c.visibility == "hidden"]


MEMBERS = {
    "device",
    "keywords",
    "last_inspection",
    "load_failure",
    "spent",
    "cleanup_problem",
    "call",
    "output_text",
    "close",
    "calls_seen",  # the ruled calls the worker's traps saw made (rule cases)
}


def _right(q, keys):
    return keys @ q


def _softmaxed(q, keys):
    return (keys @ q).softmax(-1)


def _session(**fields) -> Session:
    return Session(SPEC, _cases(), "float64", "cpu", "s", SPEC.seed, **fields)


class _Recording(InProcessRunner):
    """The in-process runner that counts calls, says how many in its output and records closing."""

    def __init__(self, function, load_failure: CallFailure | None = None, cleanup: str | None = None) -> None:
        super().__init__(function)
        self.calls, self.closed, self.load_failure, self.cleanup = 0, 0, load_failure, cleanup

    def call(self, args, dtype, layouts=None):
        self.calls += 1
        return super().call(args, dtype, layouts)

    def output_text(self) -> str:
        return f"{self.calls} calls"

    def close(self) -> None:
        self.closed += 1
        self.cleanup_problem = self.cleanup


def test_the_protocol_names_every_member_a_session_reads():
    """Runner declares exactly the members judging, diagnosis, shrinking and the session use."""
    declared = {n for n in vars(Runner) if not n.startswith("_")}
    assert declared == MEMBERS


@pytest.mark.parametrize(
    "runner",
    [
        pytest.param(InProcessRunner(_right), id="in process"),
        pytest.param(RefusedRunner(CallFailure("function_missing", "no file", "submission")), id="refused"),
    ],
)
def test_the_packages_runners_are_runners(runner):
    """Each runner the package makes has every declared member, with the declared defaults."""
    assert isinstance(runner, Runner)
    assert runner.spent == 0.0 and runner.cleanup_problem is None and runner.output_text() == ""
    assert runner.keywords == {} and runner.device == "cpu"


def test_sandbox_runner_is_a_runner(tmp_path):
    """The sandboxed runner has the whole protocol too (keywords: none; output cleaned and capped)."""
    from attnscore.sandbox.launch import Limits, SandboxRunner

    path = tmp_path / "solution.py"
    path.write_text("def scores(q, keys):\n    print('hi\\x1b[31m')\n    return keys @ q\n")
    with SandboxRunner(path, "scores", Limits(output_chars=50)) as runner:
        assert isinstance(runner, Runner)
        outcome = runner.call({"q": np.array([1.0, 0.0]), "keys": np.eye(2)}, "float64")
        assert outcome.array.tolist() == [1.0, 0.0]
        assert runner.keywords == {} and runner.output_text() == "hi\n" and runner.load_failure is None


def test_partial_keywords_are_the_in_process_runners_keywords():
    """A functools.partial's keywords (attnscore test --keyword) are what feedback reproduces."""
    import functools

    def fn(q, keys, *, scale=1.0):
        return scale * (keys @ q)

    assert InProcessRunner(functools.partial(fn, scale=2.0)).keywords == {"scale": 2.0}
    assert InProcessRunner(fn).keywords == {}


def _runner_expressions(tree: ast.AST) -> list[tuple[int, str]]:
    """``getattr(<...runner...>, ...)`` calls and assignments to ``<...runner...>.attr``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
            if node.args and "runner" in ast.unparse(node.args[0]).lower():
                found.append((node.lineno, ast.unparse(node)))
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AugAssign | ast.AnnAssign)
            else []
        )
        for target in targets:
            if isinstance(target, ast.Attribute) and "runner" in ast.unparse(target.value).lower():
                found.append((node.lineno, ast.unparse(target)))
    return found


@pytest.mark.parametrize(
    "path",
    [
        *sorted((PACKAGE / "check").glob("*.py")),
        *sorted((PACKAGE / "grade").glob("*.py")),
        PACKAGE / "selfcheck.py",
        PACKAGE / "pytest_plugin.py",
    ],
    ids=lambda p: p.relative_to(PACKAGE).as_posix(),
)
def test_nothing_reads_undeclared_runner_attributes_or_sets_any(path):
    """No getattr on a runner and no attribute set on one from outside: the protocol is the whole story."""
    assert _runner_expressions(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_scan_finds_what_it_forbids():
    """The scan above would catch the two patterns it exists for."""
    tree = ast.parse("x = getattr(runner, 'spent', 0)\nself.runner.disclosed_failure = f\n")
    assert sorted(line for line, _ in _runner_expressions(tree)) == [1, 2]


def test_results_keep_the_cases_order_and_hidden_cases_run_last():
    """With hidden_last the hidden cases are judged after every visible one; results stay in order."""
    seen: list[str] = []
    result = _session(budget=NO_SHRINK, hidden_last=True).run(
        InProcessRunner(_right), on_case=lambda c: seen.append(c.id)
    )
    assert _hidden() and [c.id for c in result.cases] == [c.id for c in _cases()]
    assert seen == [c.id for c in _cases() if c.visibility != "hidden"] + _hidden()
    assert result.all_passed


def test_output_is_what_was_said_before_any_hidden_input():
    """The run's output is read between the visible and the hidden cases."""
    runner = _Recording(_right)
    result = _session(budget=NO_SHRINK, hidden_last=True).run(runner)
    visible_calls = sum(len(c.calls) for c in _cases() if c.visibility != "hidden")
    assert result.output == f"{visible_calls} calls" and runner.calls > visible_calls


@pytest.mark.parametrize(
    ("hidden_last", "disclosed"),
    [pytest.param(True, True, id="hidden last: disclosed"), pytest.param(False, False, id="in order: not disclosed")],
)
def test_a_load_failure_reported_before_the_hidden_cases_is_disclosed_there(hidden_last, disclosed):
    """A hidden case failing with the load failure already reported may show it; a run in order discloses nothing."""
    failure = CallFailure(Verdict.FUNCTION_MISSING.value, "your file has no function named 'scores'", "submission")
    result = _session(hidden_last=hidden_last).run(RefusedRunner(failure))
    assert result.error == "your file has no function named 'scores'"
    assert {c.failure.disclosed for c in result.cases if c.id in _hidden()} == {disclosed}
    assert {c.failure.disclosed for c in result.cases if c.id not in _hidden()} == {False}


def test_the_runner_is_closed_once_and_its_cleanup_problem_is_the_students_note():
    """The session closes the runner and appends what it could not remove to the error."""
    failure = CallFailure(Verdict.EXCEPTION.value, "import failed", "submission")
    runner = _Recording(_right, load_failure=failure, cleanup="left a file: /tmp/x")
    result = _session(budget=NO_SHRINK).run(runner)
    assert runner.closed == 1
    assert result.error == "import failed\n" + CLEANUP_NOTE.format(problem="left a file: /tmp/x")


def test_the_runner_is_closed_when_judging_raises():
    """A runner that breaks mid-run is still closed."""

    class Broken(_Recording):
        def call(self, args, dtype, layouts=None):
            raise RuntimeError("the grading machine broke")

    runner = Broken(_right)
    with pytest.raises(RuntimeError, match="the grading machine broke"):
        _session().run(runner)
    assert runner.closed == 1


def test_nothing_is_shrunk_while_the_runner_reports_a_load_failure():
    """Shrinking (more calls, on smaller inputs) is skipped for a runner whose implementation did not load."""
    properties = tuple(c for c in _cases() if c.kind == "property" and c.visibility != "hidden")[:1]
    session = Session(SPEC, properties, "float64", "cpu", "s", SPEC.seed, budget=Budget(shrink_steps=5, shrink_s=None))
    loaded, unloaded = _Recording(_softmaxed), _Recording(_softmaxed, CallFailure("exception", "x", "submission"))
    assert not session.run(loaded).cases[0].passed and not session.run(unloaded).cases[0].passed
    assert loaded.calls > unloaded.calls


def test_the_result_is_stamped():
    """Seed, dtype, device, environment and a duration from the caller's start are the session's."""
    started = time.perf_counter() - 100.0
    session = Session(SPEC, _cases()[:1], "float64", "cpu", "mine", 7, budget=NO_SHRINK, environment={"python": "3"})
    result = session.run(InProcessRunner(_right), started=started)
    assert (result.submission, result.seed, result.dtype, result.device) == ("mine", 7, "float64", "cpu")
    assert result.environment == {"python": "3"} and result.duration_s >= 100.0
    assert (result.error, result.output, result.function) == ("", "", SPEC.function)
