"""The compile allowance without a worker: the Compiling notice on the wire, the clock's allowance,
and how the runner accounts a wait's compilations (attnscore.sandbox.runner.SandboxRunner._receive)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attnscore.boundary import wire
from attnscore.boundary.outputs import Received
from attnscore.sandbox.clock import OwnTime
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.runner import SandboxRunner
from attnscore.sandbox.worker_process import TIMED_OUT


@pytest.mark.parametrize(
    "message, sent",
    [
        pytest.param(wire.Compiling(3, True), {"type": "compiling", "started": True, "id": 3}, id="started in call 3"),
        pytest.param(wire.Compiling(None, False), {"type": "compiling", "started": False}, id="ended while importing"),
    ],
)
def test_the_compiling_notice_on_the_wire(message, sent):
    """Encoded as a small object and decoded back to itself."""
    assert wire.encode_message(message) == sent
    assert wire.decode_reply(wire.loads(wire.dumps(sent).rstrip(b"\n"))) == message


def test_a_notice_whose_started_is_not_true_is_an_end():
    """Only the JSON true starts a compilation (a forged "yes" does not)."""
    assert wire.decode_reply({"type": "compiling", "id": 1, "started": "yes"}) == wire.Compiling(1, False)


def test_the_clocks_allowance_moves_its_deadline_and_its_last_moment():
    """allow(s) adds s to the deadline (replacing an earlier allowance), and to the stretch's end."""
    clock = OwnTime(pid=2**22 + 12345, limit_s=2.0, began=100.0, stretch=4.0)
    assert clock.deadline == 102.0
    clock.allow(5.0)
    assert clock.deadline == 107.0
    clock.allow(1.5)
    assert clock.deadline == 103.5
    clock.allow(-3.0)
    assert clock.deadline == 102.0


class _Clock:
    """A wait's own time as the test says it, and what allow() was told."""

    def __init__(self) -> None:
        self.now = 0.0
        self.allowed: list[float] = []

    def spent(self) -> float:
        return self.now

    def allow(self, seconds: float) -> None:
        self.allowed.append(seconds)


class _Worker:
    """Replies in order; each advances the clock to its time first."""

    def __init__(self, clock: _Clock, replies: list[tuple[float, object]]) -> None:
        self.clock, self.replies = clock, list(replies)

    def receive(self, clock: object) -> object:
        at, reply = self.replies.pop(0)
        self.clock.now = at
        return reply


def _runner(compile_s: float) -> SimpleNamespace:
    fake = SimpleNamespace(limits=Limits(compile_s=compile_s), compile_spent=0.0, compiling_at_timeout=False)
    fake._compile_left = lambda: SandboxRunner._compile_left(fake)  # type: ignore[arg-type]
    return fake


RESULT = wire.CallResult(1, Received("tensor", "float32", "cpu", np.zeros(2, dtype=np.float32)))


def test_a_waits_compilations_are_taken_from_the_allowance():
    """Two compilations of 3 s and 2 s in call 1: the call may run 5 s longer; 5 s are spent of 60."""
    runner, clock = _runner(60.0), _Clock()
    replies = [
        (1.0, wire.Compiling(1, True)),
        (4.0, wire.Compiling(1, False)),
        (4.5, wire.Compiling(7, True)),  # another call's notice (forged): ignored
        (5.0, wire.Compiling(1, True)),
        (7.0, wire.Compiling(1, False)),
        (7.5, RESULT),
    ]
    reply = SandboxRunner._receive(runner, _Worker(clock, replies), clock, 1)  # type: ignore[arg-type]
    assert reply is RESULT and runner.compile_spent == 5.0 and not runner.compiling_at_timeout
    assert clock.allowed == [60.0, 3.0, 3.0 + 57.0, 5.0]  # while compiling: all that is left; after: what it took


def test_a_wait_that_times_out_while_compiling_says_so_and_spends_no_more_than_is_left():
    """A compilation still running at the timeout: the allowance left is spent, and the runner knows why."""
    runner, clock = _runner(4.0), _Clock()
    runner.compile_spent = 1.0
    replies = [(0.5, wire.Compiling(2, True)), (9.0, TIMED_OUT)]
    reply = SandboxRunner._receive(runner, _Worker(clock, replies), clock, 2)  # type: ignore[arg-type]
    assert reply is TIMED_OUT and runner.compiling_at_timeout
    assert runner.compile_spent == 4.0 and clock.allowed == [3.0]
