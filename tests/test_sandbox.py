"""Tests for the sandbox's time budgets (graders.sandbox): setup, restarts and output draining."""

from __future__ import annotations

import time

import numpy as np

from attnscore.outputs import CallFailure
from attnscore.results import Verdict
from graders.sandbox import Limits, SandboxRunner

ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}


def test_restarts_share_one_setup_budget(tmp_path):
    """A slow import followed by hanging calls is imported again only while the setup budget lasts."""
    path = tmp_path / "slow.py"
    path.write_text("import time\ntime.sleep(1.2)\n\ndef scores(q, keys):\n    while True:\n        pass\n")
    limits = Limits(call_timeout_s=0.5, load_timeout_s=4.0, total_timeout_s=120, bwrap=False)
    began = time.monotonic()
    with SandboxRunner(path, "scores", limits) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(8)]
        starts = runner.starts
    elapsed = time.monotonic() - began
    assert all(isinstance(o, CallFailure) and o.verdict == Verdict.TIMEOUT.value for o in outcomes)
    assert 2 <= starts <= 3, starts
    last = outcomes[-1].message
    assert last in ("importing your file again used up its setup time of 4 s",) or last.startswith(
        "not run: starting your code again would exceed its setup time of 4 s (importing it "
    )
    assert elapsed < 4.0 + 8 * 0.5 + 3.0, elapsed


def test_a_writer_that_keeps_the_pipe_full_cannot_stretch_a_call(tmp_path):
    """Output is drained in bounded chunks: a call that floods stdout and hangs ends near its limit."""
    path = tmp_path / "flood.py"
    path.write_text("import os\n\ndef scores(q, keys):\n    while True:\n        os.write(1, b'x' * 65536)\n")
    limits = Limits(call_timeout_s=1.0, bwrap=False)
    with SandboxRunner(path, "scores", limits) as runner:
        runner.call(ARGS, "float32")  # the import, once
        began = time.monotonic()
        outcome = runner.call(ARGS, "float32")
        elapsed = time.monotonic() - began
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.TIMEOUT.value
    assert elapsed < 2.5, elapsed
