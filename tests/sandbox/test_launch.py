"""Tests for the sandbox's time budgets (attnscore.sandbox.launch): setup, restarts and output draining."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner

ROOT = Path(__file__).resolve().parents[2]
ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}


@pytest.mark.slow
def test_restarts_share_one_setup_budget(tmp_path):
    """A slow import followed by hanging calls is imported again only while the setup budget lasts."""
    path = tmp_path / "slow.py"
    path.write_text("import time\ntime.sleep(1.2)\n\ndef scores(q, keys):\n    while True:\n        pass\n")
    limits = Limits(call_timeout_s=0.5, load_timeout_s=4.0, total_timeout_s=120, bwrap=False)
    with SandboxRunner(path, "scores", limits) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(8)]
        starts, setup = runner.starts, runner.setup_spent
    assert all(isinstance(o, CallFailure) and o.verdict == Verdict.TIMEOUT.value for o in outcomes)
    # Each import sleeps 1.2 s of the submission's own time (sleep is never discounted): at most 3
    # fit in 4 s and the 4th runs out; the first always fits (it needs little more than its sleep),
    # so there is at least one restart. Without a shared budget there would be 8 starts.
    assert 2 <= starts <= 4, starts
    assert 1.2 * (starts - 1) <= setup, setup
    last = outcomes[-1].message
    assert last in ("importing your file again used up its setup time of 4 s",) or last.startswith(
        "not run: starting your code again would exceed its setup time of 4 s (importing it "
    )


@pytest.mark.slow
def test_a_writer_that_keeps_the_pipe_full_cannot_stretch_a_call(tmp_path, monkeypatch):
    """Output is drained in bounded chunks (at most 4 MiB between two looks at the clock): a call
    that floods stdout and never returns times out at its limit instead of draining for ever."""
    from attnscore.sandbox.worker_process import WorkerProcess

    path = tmp_path / "flood.py"
    path.write_text("import os\n\ndef scores(q, keys):\n    while True:\n        os.write(1, b'x' * 65536)\n")
    drained: list[int] = []
    original = WorkerProcess.drain_output

    def counted(self):
        before = len(self.runner.output) + self.runner.output_dropped
        original(self)
        drained.append(len(self.runner.output) + self.runner.output_dropped - before)

    monkeypatch.setattr(WorkerProcess, "drain_output", counted)
    limits = Limits(call_timeout_s=1.0, bwrap=False)
    with SandboxRunner(path, "scores", limits) as runner:
        runner.call(ARGS, "float32")  # the import, once
        spent = runner.spent
        outcome = runner.call(ARGS, "float32")
        spent = runner.spent - spent
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.TIMEOUT.value
    assert outcome.message == "the call took longer than 1 s (an infinite loop, or far too slow)"
    assert spent >= 1.0, spent  # ended by its limit, not by the end of its output
    assert drained and max(drained) <= 64 * 65536, max(drained)


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


@pytest.mark.slow
def test_mutation_is_seen_by_the_grader_not_claimed_by_the_worker(tmp_path):
    """A submission that patches clone, equality and the worker's inspection still loses inputs_not_mutated,
    and every other case whose calls it mutated Q in: the grader reads the shared memory itself."""
    from attnscore.check.cases import build_cases
    from attnscore.grade.grading import grade_submission
    from attnscore.spec.load import load_spec

    spec = load_spec(ROOT / "specs" / "scaled_score_matrix.yaml")
    path = tmp_path / "forger.py"
    path.write_text(FORGER)
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    by_id = {c.id: c for c in result.cases}
    assert by_id["property:inputs_not_mutated"].verdict is Verdict.WRONG_VALUE
    assert "your function changed its input(s) Q in place" in by_id["property:inputs_not_mutated"].message
    # a mutation costs every case it happens in, named with its call; only d_k = 1 (Q scaled by 1) is left
    failed = [c for c in result.cases if not c.passed]
    assert all(c.failure.diagnosis["id"] == "inputs_mutated" for c in failed), [(c.id, c.message[:200]) for c in failed]
    shown = [c for c in failed if c.id != "example:batch_of_two"]  # a hidden case shows no detail
    assert all("your function changed its input(s) Q in place" in c.message for c in shown)
    assert "changed its input(s) Q in place (call 9 of 40)" in by_id["property:non_contiguous_inputs"].message
    assert [c.id for c in result.cases if c.passed] == ["example:square_not_symmetric"]
    assert result.score == 1


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
    limits = Limits(call_timeout_s=60.0, bwrap=False)  # nothing here should time out: far from both calls
    with SandboxRunner(good, "scores", limits) as neighbour, SandboxRunner(bad, "scores", limits) as attacker:
        assert neighbour.uid != attacker.uid
        first = neighbour.call(ARGS, "float32")
        attacker.call(ARGS, "float32")
        second = neighbour.call(ARGS, "float32")
        output = attacker.captured_output().decode()
    assert not isinstance(first, CallFailure) and not isinstance(second, CallFailure), second
    assert second.array.tolist() == [1.0, 0.0]
    assert output.strip() == "harmed 0"


def test_aliasing_is_the_graders_finding_and_costs_every_case_it_happens_in(tmp_path):
    """An output that is the input itself (when nothing is masked) shows the grader's canaries when
    read again: output_not_aliased is lost, and so is every case whose drawn mask keeps every key;
    the worker's own answer about storage is never asked."""
    from fractions import Fraction

    from attnscore.check.cases import build_cases
    from attnscore.grade.grading import grade_submission
    from attnscore.spec.load import load_spec

    spec = load_spec(ROOT / "specs" / "masked_scores.yaml")
    path = tmp_path / "alias.py"
    path.write_text(
        "def masked_scores(S, mask):\n    return S if bool(mask.all()) else S.masked_fill(~mask, float('-inf'))\n"
    )
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    by_id = {c.id: c for c in result.cases}
    aliased = by_id["property:output_not_aliased"]
    assert aliased.verdict is Verdict.WRONG_VALUE and aliased.max_points == Fraction(1)
    assert "your output shares memory with the input(s) S" in aliased.message
    assert by_id["property:inputs_not_mutated"].passed
    failed = [c for c in result.cases if not c.passed]
    assert all("your output shares memory with the input(s) S" in c.message for c in failed)
    assert all(c.id.startswith("property:") for c in failed)  # every worked example masks some key
    assert result.max_score == spec.max_points
    assert result.score == result.max_score - sum((c.max_points for c in failed), Fraction(0))


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


CLOSES_OUTPUT = """\
import os
import time

os.close(1)
os.close(2)


def scores(q, keys):
    time.sleep(0.3)
    return keys @ q
"""


def _shapes() -> list:
    """The sandbox shapes this machine can run, as Limits keywords."""
    from attnscore.sandbox.launch import bwrap_available

    shapes = [
        pytest.param({"bwrap": False}, id="no-bwrap"),
        pytest.param({"bwrap": False, "template": False}, id="no-bwrap-fresh"),
    ]
    if bwrap_available():
        shapes += [pytest.param({}, id="bwrap-default"), pytest.param({"template": False}, id="fresh-bwrap")]
    return shapes


@pytest.mark.parametrize("shape", _shapes())
def test_a_worker_that_closes_its_output_does_not_spin_the_grader(tmp_path, shape):
    """A worker that closes its stdout and stderr: the grader stops polling the pipe at its end of
    file and sleeps until the answer (it polled the closed pipe in a loop: 28.8 s of CPU); counted
    as wake-ups, not timed."""
    import resource

    path = tmp_path / "closer.py"
    path.write_text(CLOSES_OUTPUT)
    before = resource.getrusage(resource.RUSAGE_SELF)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=30.0, **shape)) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(3)]
        wakeups = runner.worker.wakeups
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert all(not isinstance(o, CallFailure) and o.array.tolist() == [1.0, 0.0] for o in outcomes), outcomes
    # the import's "ready", the pipe's end of file and one answer per call (each maybe in two reads)
    assert wakeups <= 10, wakeups
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"grader CPU during 3 calls of 0.3 s: {spent:.2f} s")


DISK_FILLER = """\
import os

TARGET = {target}


def scores(q, keys):
    written, index = 0, 0
    block = b"x" * (1 << 20)
    try:
        while written < TARGET:
            with open(f"fill-{{index}}", "wb") as f:
                for _ in range(4):  # 4 MiB a file: the per-file limit
                    f.write(block)
                    f.flush()
                    written += len(block)
            index += 1
    except OSError as exc:
        print(f"stopped: {{type(exc).__name__}}")
    print(f"wrote {{written >> 20}} MiB")
    return keys @ q
"""


@pytest.mark.parametrize("shape", _shapes())
def test_a_worker_cannot_fill_the_disk(tmp_path, shape):
    """A correct submission that writes 1 GiB into its working folder is stopped at disk_bytes:
    a tmpfs of that size where a mount namespace can be had (bubblewrap, or a root grader)."""
    from attnscore.sandbox import launch
    from attnscore.sandbox.removal import tree_usage

    limits = Limits(call_timeout_s=60.0, disk_bytes=32 * 1024**2, **shape)
    if launch.resolve(limits).disk != "tmpfs":
        pytest.skip("no mount namespace for the worker here: the folder is checked after each call (tested below)")
    assert "disk: a 32 MiB tmpfs working folder" in launch.protections(limits)
    path = tmp_path / "filler.py"
    path.write_text(DISK_FILLER.format(target=1 << 30))
    with SandboxRunner(path, "scores", limits) as runner:
        outcome = runner.call(ARGS, "float32")
        on_the_machine = tree_usage(runner.workdir)
        output = runner.captured_output().decode()
    assert not isinstance(outcome, CallFailure) and outcome.array.tolist() == [1.0, 0.0], outcome
    assert "stopped: OSError" in output, output
    wrote = int(output.split("wrote ")[1].split(" MiB")[0])
    assert 16 <= wrote <= 32, output
    assert on_the_machine < 1024**2  # nothing of it reached the grader's disk


def test_without_a_mount_namespace_the_working_folder_is_checked_after_each_call(tmp_path, monkeypatch):
    """Where no tmpfs can bound it, a folder over disk_bytes after a call stops the submission with
    a memory-limit verdict that says why; its files are removed; later calls fail the same way."""
    import os

    from attnscore.sandbox import launch, machine

    monkeypatch.setattr(machine, "mounts_work_folder", lambda: False)
    limits = Limits(call_timeout_s=60.0, disk_bytes=8 * 1024**2, bwrap=False)
    assert "disk: working folder checked after each call (8 MiB; files 4 MiB each)" in launch.protections(limits)
    path = tmp_path / "filler.py"
    path.write_text(DISK_FILLER.format(target=32 << 20))
    with SandboxRunner(path, "scores", limits) as runner:
        first = runner.call(ARGS, "float32")
        left = os.listdir(runner.workdir)
        second = runner.call(ARGS, "float32")
        starts = runner.starts
    message = "your code wrote more than 8 MiB into its working folder (the limit for all its files together)"
    assert isinstance(first, CallFailure) and first.verdict == Verdict.MEMORY_LIMIT.value
    assert first.message.startswith(message), first.message
    assert second == first and starts == 1
    assert left == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [pytest.param({"bwrap": False}, id="template"), pytest.param({"bwrap": False, "template": False}, id="fresh")],
)
def test_a_deep_folder_chain_on_the_graders_disk_is_removed(tmp_path, monkeypatch, shape):
    """Where the working folder is the grader's own (no tmpfs), the 3,000-deep chain a submission
    builds there is removed with the runner (shutil.rmtree raised RecursionError on it)."""
    import os

    from attnscore.sandbox import machine

    monkeypatch.setattr(machine, "mounts_work_folder", lambda: False)
    source = ROOT / "tests" / "hostile" / "submissions" / "deep_folder_chain.py"
    with SandboxRunner(source, "scores", Limits(call_timeout_s=30.0, **shape)) as runner:
        outcome = runner.call(ARGS, "float32")
        workdir = runner.workdir
        built = os.listdir(workdir)
    assert not isinstance(outcome, CallFailure), outcome
    assert "d" in built
    assert not os.path.exists(workdir) and runner.cleanup_problem is None


def test_what_the_grader_cannot_remove_is_that_students_note(tmp_path, monkeypatch):
    """A cleanup failure is noted in the student's result (error), never raised: the score stands."""
    from attnscore.check.cases import build_cases
    from attnscore.grade.grading import grade_submission
    from attnscore.sandbox import runner as sandbox_runner
    from attnscore.spec.load import load_spec

    real = sandbox_runner.remove_tree
    calls = []

    def failing(path):
        calls.append(path)
        real(path)
        return f"could not remove 1 entries of {path}: d: Operation not permitted\x1b[31m"

    monkeypatch.setattr(sandbox_runner, "remove_tree", failing)
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    path = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(bwrap=False), shrink_steps=0)
    assert result.score == result.max_score == 11
    assert result.error.startswith("the grader could not remove what your code left in its folders: could not remove")
    assert "\x1b" not in result.error and calls


def test_a_fresh_bwrap_keeps_an_interpreter_under_tmp_visible(monkeypatch):
    """A fresh worker's /tmp is a new tmpfs, bounded like its working folder, made before the
    interpreter's folders are bound: a virtual environment under /tmp (a CI runner's, tox's) is still
    there to start the worker (a later tmpfs on /tmp hid it: every submission 'crashed')."""
    from attnscore.sandbox import bwrap

    monkeypatch.setattr(bwrap, "readonly_roots", lambda: ["/tmp/ci/venv"])
    args = bwrap.fresh_prefix("/s", "/w", "/l", "cpu", 64 << 20, False)
    on_tmp = [i for i, a in enumerate(args[:-1]) if a == "--tmpfs" and args[i + 1] == "/tmp"]
    bound = [i for i, a in enumerate(args[:-2]) if a == "--ro-bind" and args[i + 1] == "/tmp/ci/venv"]
    assert len(on_tmp) == 1 and len(bound) == 1 and on_tmp[0] < bound[0]
    assert args[on_tmp[0] - 2 : on_tmp[0]] == ["--size", str(64 << 20)]
    unbounded = bwrap.fresh_prefix("/s", "/w", "/l", "cpu", None, False)
    assert sum(a == "--tmpfs" and unbounded[i + 1] == "/tmp" for i, a in enumerate(unbounded[:-1])) == 1
    assert "--size" not in unbounded
