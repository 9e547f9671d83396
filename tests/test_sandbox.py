"""Tests for the sandbox's time budgets (attnscore.sandbox.launch): setup, restarts and output draining."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from attnscore.check.outputs import CallFailure
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner

ROOT = Path(__file__).resolve().parent.parent
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
    # 1.2 s per import: 3 imports fit in 4 s, the 4th runs out (a fresh interpreter adds about a
    # second of its own per start, so that path stops after 2 or 3)
    assert 2 <= starts <= 4, starts
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
    assert elapsed < 4.0, elapsed  # near the 1 s limit; unbounded draining took as long as the writer wrote


FORGER = """\
import sys
import torch

torch.Tensor.clone = lambda self, *a, **k: self  # copies made in the worker now alias the inputs
torch.equal = lambda a, b: True
for module in list(sys.modules.values()):  # and any inspection helper the worker loaded says "clean"
    if getattr(module, "inspect_call", None):
        module.inspect_call = lambda names, *rest: {"mutated": [], "aliased": []}


def scaled_score_matrix(Q, K):
    Q.mul_(Q.shape[-1] ** -0.5)
    return Q @ K.transpose(-2, -1)
"""


def test_mutation_is_seen_by_the_grader_not_claimed_by_the_worker(tmp_path):
    """A submission that patches clone, equality and the worker's inspection still loses inputs_not_mutated."""
    from attnscore.check.cases import build_cases
    from attnscore.grade.grading import grade_submission
    from attnscore.spec.load import load_spec

    spec = load_spec(ROOT / "specs" / "scaled_score_matrix.yaml")
    path = tmp_path / "forger.py"
    path.write_text(FORGER)
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(call_timeout_s=2.0), shrink_steps=0)
    by_id = {c.id: c for c in result.cases}
    assert by_id["property:inputs_not_mutated"].verdict is Verdict.WRONG_VALUE
    assert "your function changed its input(s) Q in place" in by_id["property:inputs_not_mutated"].message
    # right values everywhere else; an expanded (stride 0) Q cannot be written in place at all
    assert by_id["property:non_contiguous_inputs"].verdict is Verdict.EXCEPTION
    assert "more than one element of the written-to tensor" in by_id["property:non_contiguous_inputs"].message
    assert result.score == result.max_score - 2


NEIGHBOUR_HARM = """\
import os
import resource
import signal


def scores(q, keys):
    harmed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for attempt in (
            lambda pid: resource.prlimit(pid, resource.RLIMIT_AS, (1 << 20, 1 << 20)),
            lambda pid: os.setpriority(os.PRIO_PROCESS, pid, 19),
            lambda pid: os.kill(pid, signal.SIGKILL),
        ):
            try:
                attempt(int(entry))
                harmed += 1
            except OSError:
                pass
    print("harmed", harmed)
    return keys @ q
"""


def test_workers_graded_at_once_cannot_touch_each_other(tmp_path):
    """Two live workers (no bwrap): one tries prlimit, setpriority and kill on every process; the other is unharmed."""
    import os

    if os.geteuid() != 0:
        pytest.skip("workers get uids of their own only when the grader is root")
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("def scores(q, keys):\n    return keys @ q\n")
    bad.write_text(NEIGHBOUR_HARM)
    limits = Limits(call_timeout_s=5.0, bwrap=False)
    with SandboxRunner(good, "scores", limits) as neighbour, SandboxRunner(bad, "scores", limits) as attacker:
        assert neighbour.uid != attacker.uid
        first = neighbour.call(ARGS, "float32")
        attacker.call(ARGS, "float32")
        second = neighbour.call(ARGS, "float32")
        output = attacker.captured_output().decode()
    assert not isinstance(first, CallFailure) and not isinstance(second, CallFailure), second
    assert second.array.tolist() == [1.0, 0.0]
    assert output.strip() == "harmed 0"


def test_aliasing_scores_its_points_when_grading_untrusted_code(tmp_path):
    """output_not_aliased rests on the worker's report, but a forged report only earns what a copy earns: it scores."""
    from fractions import Fraction

    from attnscore.check.cases import build_cases
    from attnscore.grade.grading import grade_submission
    from attnscore.spec.load import load_spec

    spec = load_spec(ROOT / "specs" / "masked_scores.yaml")
    path = tmp_path / "alias.py"
    path.write_text(
        "def masked_scores(S, mask):\n    return S if bool(mask.all()) else S.masked_fill(~mask, float('-inf'))\n"
    )
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(call_timeout_s=2.0), shrink_steps=0)
    by_id = {c.id: c for c in result.cases}
    aliased = by_id["property:output_not_aliased"]
    assert aliased.verdict is Verdict.WRONG_VALUE and aliased.max_points == Fraction(1)
    assert "your output shares memory with the input(s) S" in aliased.message
    assert by_id["property:inputs_not_mutated"].passed
    assert result.max_score == spec.max_points and result.score == result.max_score - 1


def test_files_left_in_shared_folders_are_removed(tmp_path):
    """Without Landlock a worker can write /tmp and /dev/shm: what its uid left there is removed after it."""
    import os

    if os.geteuid() != 0:
        pytest.skip("workers get uids of their own only when the grader is root")
    path = tmp_path / "litter.py"
    path.write_text(
        "def scores(q, keys):\n"
        "    for folder in ('/tmp', '/dev/shm', '/var/tmp'):\n"
        "        try:\n"
        "            open(folder + '/attnscore-test-litter', 'w').write('x')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return keys @ q\n"
    )
    with SandboxRunner(path, "scores", Limits(bwrap=False, landlock=False)) as runner:
        runner.call(ARGS, "float32")
        uid = runner.uid
        assert any(
            os.path.exists(f"{d}/attnscore-test-litter") and os.lstat(f"{d}/attnscore-test-litter").st_uid == uid
            for d in ("/tmp", "/dev/shm", "/var/tmp")
        )
    assert not any(os.path.exists(f"{d}/attnscore-test-litter") for d in ("/tmp", "/dev/shm", "/var/tmp"))
