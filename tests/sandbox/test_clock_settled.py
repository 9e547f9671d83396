"""A finished call's own time (``OwnTime.settled``): what a time budget adds up, without the machine's load."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.sandbox import clock
from attnscore.sandbox.clock import OwnTime
from attnscore.sandbox.launch import Limits, SandboxRunner

ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}


class _Kernel:
    """Scheduler figures for OwnTime to read: run-queue wait and CPU time, seconds (None: unknown)."""

    def __init__(self, monkeypatch, delay: float | None = 0.0, cpu: float | None = 0.0):
        self.delay, self.cpu = delay, cpu
        monkeypatch.setattr(clock, "run_delay_s", lambda pid: self.delay)
        monkeypatch.setattr(clock, "cpu_s", lambda pid: self.cpu)


@pytest.mark.parametrize(
    ("delay", "cpu", "own"),
    [
        pytest.param(0.9, 0.6, 0.6, id="kept waiting 0.9 s of 1.5 s"),
        pytest.param(0.9, 1.2, 1.2, id="never below the CPU time used"),
        pytest.param(0.0, 0.0, 1.5, id="slept: counts in full"),
        pytest.param(None, 0.6, 1.5, id="no scheduler figures: wall time"),
        pytest.param(0.9, None, 1.5, id="process gone: wall time"),
    ],
)
def test_a_call_that_returned_is_counted_without_its_wait(monkeypatch, delay, cpu, own):
    """A call that returned after 1.5 s: its run-queue wait is taken off (at most down to its CPU time)."""
    kernel = _Kernel(monkeypatch)
    waited = OwnTime(1, 3.0, began=time.monotonic() - 1.5)
    kernel.delay, kernel.cpu = delay, cpu
    assert waited.spent() == pytest.approx(1.5, abs=0.05)  # nothing discounted before a deadline
    assert waited.settled() == pytest.approx(own, abs=0.05)


needs_schedstat = pytest.mark.skipif(
    clock.run_delay_s(os.getpid()) is None or not hasattr(os, "sched_setaffinity"),
    reason="the kernel gives no scheduler statistics, or no CPU affinity",
)


@contextmanager
def _busy(cpu: int, n: int = 3):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.slow
@needs_schedstat
def test_a_loaded_cpu_does_not_spend_the_budget_sooner(tmp_path):
    """0.4 s of CPU work on a CPU shared with busy processes: the wall time is longer, the calls'
    own time (the budget's clock) stays near the work done."""
    path = tmp_path / "burns.py"
    path.write_text(
        "import time\n\n\ndef scores(q, keys):\n    end = time.process_time() + 0.4\n"
        "    while time.process_time() < end:\n        pass\n    return keys @ q\n"
    )
    cpu = min(os.sched_getaffinity(0))
    with SandboxRunner(path, "scores", Limits(call_timeout_s=5.0, time_budget_s=50.0, bwrap=False)) as runner:
        first = runner.call(ARGS, "float32")  # the import and a first call, unhindered
        assert not isinstance(first, CallFailure), first
        os.sched_setaffinity(runner.worker.proc.pid, {cpu})
        before = runner.calls_spent
        with _busy(cpu):
            began = time.monotonic()
            outcome = runner.call(ARGS, "float32")
            wall = time.monotonic() - began
        own = runner.calls_spent - before
    assert not isinstance(outcome, CallFailure), outcome
    # the worker waited for its CPU (how long depends on the scheduler's groups: measured 0.6 to 1.2 s)
    assert wall > own + 0.1, (own, wall)
    assert 0.35 <= own < 0.8 * wall, (own, wall)
