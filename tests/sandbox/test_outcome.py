"""What the worker's replies mean (attnscore.sandbox.outcome): each reply, or what came instead, to one outcome."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from attnscore.boundary import wire
from attnscore.boundary.outputs import CallFailure, Received
from attnscore.boundary.verdict import Verdict
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.outcome import call_outcome, load_failure
from attnscore.sandbox.runtime import WorkerRuntime
from attnscore.sandbox.worker_process import ENDED, TIMED_OUT, Malformed

VALUE = Received("tensor", "float64", "cpu", np.array([1.0, 0.0]))
RUNNER = SimpleNamespace(
    limits=Limits(call_timeout_s=1.5, load_timeout_s=30.0),
    calls=1,
    starts=1,
    last_names=["q", "keys"],
    runtime=WorkerRuntime(sys.executable, ()),
    plan=SimpleNamespace(bwrap=False),
    compiling_at_timeout=False,
    uid=64000,
    traps=("torch.nn.functional.scaled_dot_product_attention",),
)
WORKER = SimpleNamespace(exit_description=lambda: (Verdict.MEMORY_LIMIT, "was killed by SIGKILL"))


@pytest.mark.parametrize(
    "reply, verdict, message",
    [
        pytest.param(
            TIMED_OUT,
            Verdict.TIMEOUT,
            "the call took longer than 1.5 s (an infinite loop, or far too slow)",
            id="timeout",
        ),
        pytest.param(
            ENDED, Verdict.MEMORY_LIMIT, "the process running your code was killed by SIGKILL during the call", id="end"
        ),
        pytest.param(
            Malformed("bad bytes"),
            Verdict.CRASHED,
            "the process running your code sent a malformed: bad bytes",
            id="malformed",
        ),
        pytest.param(
            wire.CallFailed(2, Verdict.EXCEPTION, "x"),
            Verdict.CRASHED,
            "the process running your code answered out of turn",
            id="another id",
        ),
        pytest.param(
            wire.Ready(),
            Verdict.CRASHED,
            "the process running your code answered out of turn",
            id="ready during a call",
        ),
        pytest.param(
            wire.LoadError(Verdict.EXCEPTION, "x", id=1),
            Verdict.CRASHED,
            "the process running your code sent an unexpected message",
            id="load error with the id",
        ),
        pytest.param(
            wire.CallFailed(1, Verdict.GRADER_ERROR, "x"),
            Verdict.CRASHED,
            "the process running your code reported a failure of the grader, which is not trusted",
            id="forged grader error",
        ),
        pytest.param(
            wire.CallFailed(1, Verdict.PASSED, "ok"),
            Verdict.CRASHED,
            "the process running your code sent an unexpected message",
            id="forged pass",
        ),
        pytest.param(
            wire.CallFailed(1, None, "ok"),
            Verdict.CRASHED,
            "the process running your code sent an unexpected message",
            id="no verdict",
        ),
        pytest.param(
            wire.Unexpected(1, "passed"),
            Verdict.CRASHED,
            "the process running your code sent an unexpected message",
            id="unknown type",
        ),
        pytest.param(
            wire.UnreadableResult(1, "expected base64 text for the data"),
            Verdict.BAD_RETURN_TYPE,
            "the returned value could not be read back: expected base64 text for the data",
            id="unreadable",
        ),
        pytest.param(
            wire.CallFailed(1, Verdict.BAD_RETURN_TYPE, "a generator"),
            Verdict.BAD_RETURN_TYPE,
            "a generator",
            id="bad return",
        ),
        pytest.param(
            wire.CallFailed(1, Verdict.MEMORY_LIMIT, "CUDA out of memory\x1b[31m"),
            Verdict.MEMORY_LIMIT,
            "CUDA out of memory",
            id="memory, text cleaned",
        ),
    ],
)
def test_each_reply_to_a_call_has_one_outcome(reply, verdict, message):
    """Timeouts, ends, malformed bytes and every typed reply map to the verdict and text they always had."""
    outcome, inspection = call_outcome(reply, RUNNER, WORKER)
    assert isinstance(outcome, CallFailure) and inspection is None
    assert (outcome.verdict, outcome.message, outcome.scope) == (verdict, message, "call")
    assert type(outcome.verdict) is Verdict  # a member, never a bare word


def test_a_result_is_its_value_and_a_checked_inspection():
    """A result for this call is the value; an inspection naming unknown inputs, or a trapped call the
    runner does not watch for, is dropped; dO may be named (a backward call's upstream gradient)."""
    outcome, inspection = call_outcome(wire.CallResult(1, VALUE, {"mutated": ["q"], "aliased": []}), RUNNER, WORKER)
    assert outcome is VALUE and inspection == {"mutated": ["q"], "aliased": [], "calls": []}
    sdpa = "torch.nn.functional.scaled_dot_product_attention@forward"
    said = {"mutated": ["dO"], "aliased": [], "calls": [sdpa, sdpa]}
    _, inspection = call_outcome(wire.CallResult(1, VALUE, said), RUNNER, WORKER)
    assert inspection == {"mutated": ["dO"], "aliased": [], "calls": [sdpa]}
    for forged in (
        {"mutated": ["secret"], "aliased": []},
        {"mutated": [], "aliased": [], "calls": ["os.system@forward"]},
        {"mutated": [], "aliased": [], "calls": [sdpa.replace("forward", "import")]},
    ):
        assert call_outcome(wire.CallResult(1, VALUE, forged), RUNNER, WORKER)[1] is None


def test_an_exception_keeps_its_type_name():
    """A reported exception is the student's, with its class name."""
    outcome, _ = call_outcome(
        wire.CallFailed(1, Verdict.EXCEPTION, "raised ValueError: x", "ValueError"), RUNNER, WORKER
    )
    assert outcome == CallFailure(Verdict.EXCEPTION, "raised ValueError: x", "call", "ValueError")


@pytest.mark.parametrize(
    "hello, importing, verdict, message",
    [
        pytest.param(TIMED_OUT, True, Verdict.TIMEOUT, "importing your file took longer than 30 s", id="timeout"),
        pytest.param(
            ENDED,
            True,
            Verdict.CRASHED,
            "your file crashed while being imported: the process was killed by SIGKILL",
            id="killed: crashed",
        ),
        pytest.param(
            wire.LoadError(Verdict.GRADER_ERROR, "no GPU"),
            False,
            Verdict.GRADER_ERROR,
            "no GPU",
            id="the worker's own grader error",
        ),
        pytest.param(
            wire.LoadError(Verdict.GRADER_ERROR, "no GPU"),
            True,
            Verdict.CRASHED,
            "the process running your file reported a failure of the grading machine while your file was being "
            "imported, which is not trusted (only the worker speaks before your code runs)",
            id="a grader error after importing",
        ),
        pytest.param(
            wire.LoadError(Verdict.FUNCTION_MISSING, "no scores"),
            True,
            Verdict.FUNCTION_MISSING,
            "no scores",
            id="missing",
        ),
        pytest.param(
            wire.LoadError(Verdict.EXCEPTION, "boom"),
            False,
            Verdict.CRASHED,
            "the worker sent an unexpected message while importing your file",
            id="exception before importing",
        ),
        pytest.param(
            wire.LoadError(None, "?"),
            False,
            Verdict.CRASHED,
            "the worker sent an unexpected message while importing your file",
            id="no verdict",
        ),
        pytest.param(
            wire.Ready(),
            False,
            Verdict.CRASHED,
            "the worker sent an unexpected message while importing your file",
            id="ready before importing",
        ),
        pytest.param(
            Malformed("x"),
            True,
            Verdict.CRASHED,
            "the worker sent an unexpected message while importing your file",
            id="malformed",
        ),
    ],
)
def test_each_last_word_while_loading_has_one_failure(hello, importing, verdict, message):
    """Before "importing" only the worker's own verdicts count; after it only the submission's."""
    failure = load_failure(hello, importing, RUNNER, WORKER)
    assert (failure.verdict, failure.message, failure.scope) == (verdict, message, "submission")
    assert type(failure.verdict) is Verdict
