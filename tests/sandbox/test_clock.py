"""Tests for the worker's own time (attnscore.sandbox.clock): a busy machine cannot flip a verdict.

The integration tests make a loaded machine of their own: busy processes pinned to the CPU the
worker is pinned to, so the worker gets a known fraction of it whatever else runs. Their verdicts
depend on CPU time and on that fraction, not on how fast or busy the machine is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.report.results import Verdict
from attnscore.sandbox import clock
from attnscore.sandbox.clock import OwnTime
from attnscore.sandbox.launch import Limits, SandboxRunner

ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
HOGS = 5  # with the worker on one CPU: it gets at most 1/6 of it

needs_schedstat = pytest.mark.skipif(
    clock.run_delay_s(os.getpid()) is None or not hasattr(os, "sched_setaffinity"),
    reason="the kernel gives no scheduler statistics, or no CPU affinity",
)


@contextmanager
def busy_cpu(n: int = HOGS):
    """``n`` busy processes pinned to one CPU; yields that CPU's number."""
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        yield cpu
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _burns(cpu_seconds: float, children: int = 0) -> str:
    """A submission whose calls use ``cpu_seconds`` of CPU time (from the second call on, after
    forking ``children`` busy processes of its own), then answer right."""
    return (
        "import os, time\n\n"
        "calls = 0\n\n"
        "def scores(q, keys):\n"
        "    global calls\n"
        "    calls += 1\n"
        f"    for _ in range({children} if calls > 1 else 0):\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                pass\n"
        f"    end = time.process_time() + {cpu_seconds}\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "    return keys @ q\n"
    )


def _pinned_call(runner: SandboxRunner, cpu: int) -> tuple[object, float, float]:
    """The second call of ``runner`` with its worker pinned to ``cpu``: ``(outcome, wall
    seconds, seconds counted against the submission)``."""
    first = runner.call(ARGS, "float32")  # the import, and a first call, unhindered
    assert not isinstance(first, CallFailure), first
    os.sched_setaffinity(runner.worker.proc.pid, {cpu})
    began, spent = time.monotonic(), runner.spent
    outcome = runner.call(ARGS, "float32")
    return outcome, time.monotonic() - began, runner.spent - spent


@pytest.mark.slow
@needs_schedstat
def test_a_call_kept_waiting_by_other_work_is_judged_by_its_own_time(tmp_path, monkeypatch):
    """0.6 s of CPU work on a CPU shared with 5 busy processes takes over 1 s of wall time, and passes a 1 s limit.

    The worker runs in a session of its own, so with the kernel's autogroup it gets half of the CPU
    against the busy processes' session, not a sixth: 0.6 s of work still needs more than 1 s."""
    monkeypatch.setattr(clock, "STRETCH", 1000.0)  # here the verdict rests on the discount alone
    path = tmp_path / "burns.py"
    path.write_text(_burns(0.6))
    with busy_cpu() as cpu, SandboxRunner(path, "scores", Limits(call_timeout_s=1.0, bwrap=False)) as runner:
        outcome, elapsed, spent = _pinned_call(runner, cpu)
    assert not isinstance(outcome, CallFailure), outcome
    assert outcome.array.tolist() == [1.0, 0.0]
    assert elapsed > 1.0, elapsed  # the wall clock alone would have timed it out
    assert 0.6 <= spent < 1.0, spent  # its CPU time counts; its waiting for a CPU does not


@pytest.mark.slow
@needs_schedstat
def test_a_call_that_starves_itself_is_not_excused(tmp_path, monkeypatch):
    """The same work behind 5 busy processes of the submission's own times out: its own load is not discounted."""
    monkeypatch.setattr(clock, "STRETCH", 1000.0)
    path = tmp_path / "starves.py"
    path.write_text(_burns(0.3, children=HOGS))
    with SandboxRunner(path, "scores", Limits(call_timeout_s=1.0, bwrap=False)) as runner:
        outcome, _, spent = _pinned_call(runner, min(os.sched_getaffinity(0)))
    assert spent >= 1.0, spent
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.TIMEOUT.value, outcome
    assert outcome.message == "the call took longer than 1 s (an infinite loop, or far too slow)"


@pytest.mark.slow
def test_the_total_limit_counts_the_submissions_time_not_the_graders(tmp_path):
    """Work of the grader between calls (here 1.5 s of sleep) does not use up a total limit of 1 s."""
    path = tmp_path / "right.py"
    path.write_text("def scores(q, keys):\n    return keys @ q\n")
    with SandboxRunner(path, "scores", Limits(call_timeout_s=30, total_timeout_s=1.0, bwrap=False)) as runner:
        outcomes = []
        for _ in range(3):
            outcomes.append(runner.call(ARGS, "float32"))
            time.sleep(0.75)  # the grader comparing, diagnosing, shrinking
    assert [o.array.tolist() for o in outcomes] == [[1.0, 0.0]] * 3


@pytest.mark.slow
def test_the_total_limit_still_stops_a_submission_that_uses_it(tmp_path):
    """Calls that sleep 0.4 s each exhaust a total of 1 s: the fourth call is not run."""
    path = tmp_path / "slow.py"
    path.write_text("import time\n\ndef scores(q, keys):\n    time.sleep(0.4)\n    return keys @ q\n")
    with SandboxRunner(path, "scores", Limits(call_timeout_s=30, total_timeout_s=1.0, bwrap=False)) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(4)]
    assert [isinstance(o, CallFailure) for o in outcomes] == [False, False, False, True]
    assert outcomes[3].message == "not run: the submission used up its total time limit of 1 s"


@pytest.mark.slow
def test_the_templates_own_start_is_not_the_submissions_setup_time(tmp_path, monkeypatch):
    """A worker template still loading torch (here 2 s more) does not time out a submission with a 1 s setup limit."""
    from attnscore.sandbox.template import WorkerTemplate

    original, delayed = WorkerTemplate.wait_ready, []

    def slow_ready(self):
        if not delayed:
            delayed.append(True)
            time.sleep(2.0)
        original(self)

    monkeypatch.setattr(WorkerTemplate, "wait_ready", slow_ready)
    path = tmp_path / "right.py"
    path.write_text("def scores(q, keys):\n    return keys @ q\n")
    limits = Limits(call_timeout_s=30, load_timeout_s=1.0, bwrap=False, template=True)
    with SandboxRunner(path, "scores", limits) as runner:
        outcome = runner.call(ARGS, "float32")
    assert delayed and not isinstance(outcome, CallFailure), outcome
    assert runner.setup_spent < 1.0


# OwnTime's arithmetic, with the kernel's figures given


class _Kernel:
    """Scheduler figures for OwnTime to read: run-queue wait and CPU time, seconds."""

    def __init__(self, monkeypatch, delay: float = 0.0, cpu: float = 0.0, competitors: int = 0):
        self.delay, self.cpu, self.competitors = delay, cpu, competitors
        monkeypatch.setattr(clock, "run_delay_s", lambda pid: self.delay)
        monkeypatch.setattr(clock, "cpu_s", lambda pid: self.cpu)
        monkeypatch.setattr(clock, "own_competitors", lambda pid, uid=None: self.competitors)


def test_own_time_discounts_the_run_queue_wait_up_to_the_stretch(monkeypatch):
    """1 s limit, 1.5 s of wall time of which 0.9 s waiting for a CPU: 0.6 s own, the deadline moves 0.9 s on."""
    kernel = _Kernel(monkeypatch)
    now = time.monotonic()
    waited = OwnTime(1, 1.0, began=now - 1.5)
    kernel.delay = 0.9
    assert waited.extend() == pytest.approx(now - 1.5 + 1.9)
    assert waited.spent() == pytest.approx(0.6, abs=0.05)
    longer = OwnTime(1, 1.0, began=now - 3.5)
    kernel.delay = 100.0  # never beyond 4 limits of wall time
    assert longer.extend() == pytest.approx(now - 3.5 + 4.0)


def test_own_time_is_never_less_than_the_cpu_time_used(monkeypatch):
    """A worker that used 1.2 s of CPU in 1.5 s has had 1.2 s, whatever the run-queue figure says."""
    kernel = _Kernel(monkeypatch)
    now = time.monotonic()
    waited = OwnTime(1, 1.0, began=now - 1.5)
    kernel.delay, kernel.cpu = 0.9, 1.2
    assert waited.extend() == pytest.approx(now - 1.5 + 1.0 + 0.3, abs=0.05)  # discount 0.3 s only
    assert waited.spent() == pytest.approx(1.2, abs=0.05)


@pytest.mark.parametrize(
    ("delay", "competitors", "began_ago"),
    [
        pytest.param(0.0, 0, 1.5, id="never waited for a CPU (slept)"),
        pytest.param(0.9, 3, 1.5, id="waited behind its own busy tasks"),
        pytest.param(0.9, 0, 4.5, id="past four limits of wall time"),
        pytest.param(None, 0, 1.5, id="kernel without schedstat"),
    ],
)
def test_own_time_is_wall_time_when_nothing_excuses_the_wait(monkeypatch, delay, competitors, began_ago):
    """No run-queue wait, a self-inflicted one, the stretch spent or no figures: the deadline stays where it is."""
    kernel = _Kernel(monkeypatch, competitors=competitors)
    now = time.monotonic()
    waited = OwnTime(1, 1.0, began=now - began_ago)
    kernel.delay = delay
    assert waited.extend() == pytest.approx(now - began_ago + 1.0)
    assert waited.spent() == pytest.approx(began_ago, abs=0.05)


def test_kernel_figures_of_this_process():
    """The readers give this process's figures, and None for a process that does not exist."""
    delay, cpu = clock.run_delay_s(os.getpid()), clock.cpu_s(os.getpid())
    assert cpu is not None and cpu > 0
    assert delay is None or delay >= 0
    assert clock.run_delay_s(2**22 + 1) is None and clock.cpu_s(2**22 + 1) is None


def test_readings_kept_open_follow_their_process_and_end_with_it():
    """A process's /proc files opened once give fresh figures on each reading, as the path-based
    readers do, and nothing once the process is gone (an open /proc file never reads another process)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nsys.stdin.readline()\n"
            "end = time.process_time() + 0.3\nwhile time.process_time() < end: pass\nsys.stdin.readline()",
        ],
        stdin=subprocess.PIPE,
    )
    readings = clock.ProcessReadings(child.pid)
    try:
        before = readings.cpu_s()
        assert before is not None
        assert (readings.run_delay_s() is None) == (clock.run_delay_s(child.pid) is None)
        child.stdin.write(b"\n")
        child.stdin.flush()
        deadline = time.monotonic() + 30
        while (readings.cpu_s() or 0) < before + 0.25 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert readings.cpu_s() == pytest.approx(clock.cpu_s(child.pid), abs=0.02)
        assert readings.cpu_s() >= before + 0.25
        child.stdin.write(b"\n")
        child.stdin.close()
        child.wait(timeout=30)
        assert readings.cpu_s() is None and readings.run_delay_s() is None
    finally:
        child.kill()
        child.wait()
        readings.close()
    assert readings.cpu_s() is None  # closed: reads nothing, raises nothing
