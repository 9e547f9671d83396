"""Tests for grading on a dask.distributed cluster (attnscore.grade.cluster), with a LocalCluster."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnscore.check.cases import build_cases
from attnscore.grade.cluster import ClusterError, chunks, grade_on_cluster
from attnscore.grade.grading import grade_many
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions
from tests.guards import HANG_GUARD_S

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (attnscore[dask])")

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "examples" / "submissions" / "scores"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
ATTNSCORE = Path(sys.executable).parent / "attnscore"
NAMES = ["correct_matmul.py", "cosine_similarity.py", "syntax_error.py", "correct_with_helper"]


@pytest.fixture(scope="module")
def cluster():
    """A small in-process cluster: one worker, two threads, reachable over TCP."""
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, protocol="tcp", dashboard_address=None, scheduler_port=0
    ) as local:
        yield local


@pytest.mark.slow
def test_cluster_grades_like_grade_many(cluster):
    """Each submission is graded on a worker; results equal local grading, case for case."""
    spec = load_spec(SPEC)
    submissions = find_submissions([str(SCORES / n) for n in NAMES], one=True)
    seen = []
    remote = grade_on_cluster(
        submissions, spec, cluster, limits=Limits(call_timeout_s=30), shrink_steps=0, on_result=seen.append
    )
    local = grade_many(submissions, spec, limits=Limits(call_timeout_s=30), shrink_steps=0)
    assert [r.submission for r in remote] == [s.name for s in submissions]
    assert sorted(r.submission for r in seen) == sorted(s.name for s in submissions)
    for there, here in zip(remote, local, strict=True):
        assert [(c.id, c.verdict, c.points) for c in there.cases] == [(c.id, c.verdict, c.points) for c in here.cases]
        assert there.spec_path == here.spec_path == "dot_product_scores.yaml" and there.error == here.error
        assert [c.location for c in there.cases] == [c.location for c in here.cases]  # the worker's copy is not named
        assert all(f"({c.location})" in c.message for c in there.cases if c.failure and c.failure.scope == "call")
    assert [str(r.score) for r in remote] == ["11", "2", "0", "11"]
    assert len(build_cases(spec, spec.dtypes[0], None)) == len(remote[0].cases)


@pytest.mark.slow
def test_class_run_on_a_scheduler_keeps_the_gradebook_on_the_client(cluster, tmp_path):
    """`attnscore grade --out --scheduler ADDRESS`: graded on the cluster, committed here."""
    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("correct_matmul.py", "cosine_similarity.py"):
        (klass / name).write_bytes((SCORES / name).read_bytes())
    out = tmp_path / "out"
    args = [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0"]
    proc = subprocess.run(
        [*args, "--scheduler", cluster.scheduler_address], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert proc.returncode == 1, proc.stderr
    assert "class run: 2 graded, 0 unchanged" in proc.stderr
    db = sqlite3.connect(out / "gradebook.sqlite")
    assert dict(db.execute("SELECT student, score FROM grades")) == {
        "correct_matmul.py": "11",
        "cosine_similarity.py": "2",
    }
    db.close()
    rerun = subprocess.run(
        [*args, "--scheduler", cluster.scheduler_address], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert "class run: 0 graded, 2 unchanged" in rerun.stderr


@pytest.mark.slow
def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    """A scheduler nobody runs: one line naming the address, exit 2."""
    proc = subprocess.run(
        [str(ATTNSCORE), "grade", str(SCORES / "correct_matmul.py"), "--spec", str(SPEC), "--scheduler",
         "tcp://127.0.0.1:9", "--out", str(tmp_path / "out")],
        env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"},  # dask's own setting
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1].startswith("Error: cannot reach the dask scheduler at tcp://127.0.0.1:9")
    )


def test_missing_dask_is_a_clear_error():
    """Without dask.distributed, --scheduler says what to install, exit 2, nothing graded."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['distributed'] = None; from attnscore.cli import main; main()",
         "grade", str(SCORES / "correct_matmul.py"), "--spec", str(SPEC), "--scheduler", "tcp://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--scheduler needs dask.distributed, which is not installed" in proc.stderr
    assert "pip install 'attnscore[dask]'" in proc.stderr


def test_grade_on_cluster_without_dask_raises_cluster_error(monkeypatch):
    """The library call fails the same way, with ClusterError."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ClusterError, match=r"pip install 'attnscore\[dask\]'"):
        grade_on_cluster([], load_spec(SPEC), "tcp://127.0.0.1:9")


@pytest.mark.parametrize(
    ("address", "found"),
    [
        ("tcp://", "found no host"),
        ("tcp://:8786", "found no host"),
        ("tcp://127.0.0.1:99999", "found a bad port"),
        ("tcp://127.0.0.1:port", "found a bad port"),
        ("tcp://127.0.0.1:0", "found a bad port (0)"),
        ("http://127.0.0.1:8786", "found the scheme 'http'"),
        ("tcp://127.0.0.1:8786/status", "found more after the port"),
        ("tcp://user@127.0.0.1:8786", "found a user name before the host"),
        ("tcp://127.0.0.1 :8786", "found an empty or unprintable text"),
        ("", "found an empty or unprintable text"),
    ],
)
def test_a_malformed_scheduler_address_is_a_usage_error(address, found):
    """A malformed --scheduler: one line naming the address, what was expected and found; exit 2."""
    from click.testing import CliRunner

    from attnscore.cli import main

    result = CliRunner().invoke(
        main, ["grade", str(SCORES / "correct_matmul.py"), "--spec", str(SPEC), "--scheduler", address]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: --scheduler: dask scheduler address {address!r}: expected [scheme://]host[:port]")
    assert line.endswith(found) or found in line
    with pytest.raises(ClusterError, match="expected"):
        grade_on_cluster([], load_spec(SPEC), address)


def test_scheduler_addresses_are_normalised_like_dask():
    """A missing scheme is tcp and a missing port 8786; IPv6 hosts keep their brackets."""
    from attnscore.grade.cluster import check_scheduler_address

    assert check_scheduler_address("10.0.0.7") == "tcp://10.0.0.7:8786"
    assert check_scheduler_address("host:9000") == "tcp://host:9000"
    assert check_scheduler_address("tls://[::1]:8786") == "tls://[::1]:8786"


@pytest.mark.slow
@pytest.mark.parametrize("address", ["tls://127.0.0.1:9", "ucx://127.0.0.1:9", "ws://127.0.0.1:9"])
def test_a_scheduler_that_cannot_be_reached_by_any_protocol_is_a_usage_error(address, monkeypatch):
    """Whatever dask raises while connecting (no TLS context, no UCX, nobody listening) is one line
    naming the address, not an internal error."""
    with pytest.raises(ClusterError, match=rf"^cannot reach the dask scheduler at {address}: .*expected a running"):
        grade_on_cluster([], load_spec(SPEC), address, connect_timeout_s=1)


def _wait_for(condition, what: str, safety_s: float = 240.0):
    """Wait for ``condition()`` to hold (polling); the timeout is only a safety net."""
    import time

    deadline = time.monotonic() + safety_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("max_tries", [3, 1])
def test_a_worker_lost_mid_run_costs_nothing_graded(max_tries, monkeypatch, tmp_path):
    """A dask worker killed while it grades: its submissions are graded again on the restarted
    worker (every result kept, the worker named); with no retries left, only the lost ones get a
    grader-error result and the others are graded.

    The last submission is right but takes 4 s to import, so the worker still holds it when the
    first results arrive, however fast the others are graded (they may all arrive at once)."""
    import signal

    import dask

    import attnscore.grade.cluster as cluster_module

    monkeypatch.setattr(cluster_module, "MAX_TRIES", max_tries)
    spec = load_spec(SPEC)
    slow = tmp_path / "slow_import.py"
    slow.write_text("import time\n\ntime.sleep(4)\n\n\ndef scores(q, keys):\n    return keys @ q\n")
    submissions = find_submissions([*(str(SCORES / n) for n in NAMES), str(slow)], one=True)
    assert submissions[-1].name == slow.name  # submitted last, so graded last (dask keeps submission order)
    with (
        # A death is KilledWorker at once for every task the worker holds, and the worker is given
        # every task up front (no queuing on the scheduler), so it holds several when it is killed.
        dask.config.set(
            {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": float("inf")}
        ),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_port=0
        ) as local,
        distributed.Client(local) as watcher,
    ):
        (address, pid), *_ = watcher.run(os.getpid).items()
        seen, notices, killed = [], [], []

        def on_result(result):
            seen.append(result)
            if not killed:  # after the first result, kill the worker while it holds a task
                _wait_for(lambda: len(watcher.processing().get(address, ())) >= 1, "a task held by the worker")
                os.kill(pid, signal.SIGKILL)
                killed.append(address)

        results = grade_on_cluster(
            submissions,
            spec,
            local,
            limits=Limits(call_timeout_s=3),
            shrink_steps=0,
            on_result=on_result,
            on_notice=notices.append,
        )
    assert killed == [address]
    assert [r.submission for r in results] == [s.name for s in submissions]
    assert len(seen) == len(submissions)
    assert notices == [
        f"dask worker {address} was lost during grading; its submissions were graded again on other workers"
    ]
    lost = [r for r in results if r.error.startswith("the cluster lost this submission's task")]
    scores = {Path(r.submission).name: str(r.score) for r in results if r not in lost}
    expected = {
        "correct_matmul.py": "11",
        "cosine_similarity.py": "2",
        "syntax_error.py": "0",
        "correct_with_helper": "11",
        "slow_import.py": "11",
    }
    assert scores == {name: expected[name] for name in scores}
    if max_tries == 3:
        assert lost == []
    else:
        assert lost  # the task(s) the worker held when it died
        for r in lost:
            assert {c.verdict.value for c in r.cases} == {"grader_error"}
            assert f"(last on dask worker {address})" in r.error


@given(count=st.integers(0, 3000), slots=st.integers(1, 64), most=st.integers(1, 32))
def test_chunks_cover_the_batch_in_order_and_shrink_to_single_submissions(count, slots, most):
    """Every submission is in exactly one chunk, in order; no chunk is empty or over ``most``; the
    chunks never grow, and the last ones (at most a quarter of what is left per slot) are single."""
    parts = chunks(count, slots, most)
    assert [i for part in parts for i in part] == list(range(count))
    sizes = [len(part) for part in parts]
    assert all(1 <= size <= most for size in sizes)
    assert sizes == sorted(sizes, reverse=True)
    for part in parts:  # at most a quarter of what is left per slot, at least one
        assert len(part) == max(1, min(most, (count - part.start) // (4 * slots)))
    if count:
        assert sizes[-1] == 1


def test_a_class_of_200_on_two_workers_is_a_few_dozen_tasks():
    """The bench's class: 200 submissions on two worker threads are 44 tasks, not 200."""
    sizes = [len(part) for part in chunks(200, 2)]
    assert sizes[:18] == [8] * 18 and sizes[-15:] == [1] * 15
    assert len(sizes) == 44 and sum(sizes) == 200


@pytest.mark.parametrize(("slots", "most"), [(0, 8), (2, 0)])
def test_chunks_refuse_no_workers_or_empty_chunks(slots, most):
    with pytest.raises(ValueError, match="expected at least one worker thread and one submission per task"):
        chunks(10, slots, most)


@pytest.mark.slow
def test_a_chunked_class_run_commits_each_result_once_and_resumes(cluster, tmp_path, monkeypatch):
    """Submissions graded several to a dask task: each result is committed (and its feedback
    written) once, as its task's results arrive; a run stopped mid-class keeps what was committed
    and the next run grades only the rest, each student graded exactly once over both runs."""
    import attnscore.grade.cluster as cluster_module
    from attnscore.grade.class_run import grade_class

    monkeypatch.setattr(cluster_module, "MAX_CHUNK", 4)
    monkeypatch.setattr(cluster_module, "_TASKS_PER_SLOT", 1)
    assert [len(p) for p in chunks(12, 2)] == [4, 4, 2, 1, 1]  # two chunks of 4 first: a stop mid-chunk
    klass = tmp_path / "class"
    klass.mkdir()
    for n in range(12):
        example = "correct_matmul.py" if n % 3 else "cosine_similarity.py"
        (klass / f"s{n:02d}.py").write_text(f"# student {n}\n" + (SCORES / example).read_text())
    spec, out = load_spec(SPEC), tmp_path / "out"
    seen: list[str] = []

    class Stop(Exception):
        pass

    def stop_after_five(student, result):
        seen.append(student)
        if len(seen) == 5:  # the first result of the second chunk: the rest of that chunk is not committed
            raise Stop

    options = {"limits": Limits(call_timeout_s=30), "shrink_steps": 0, "scheduler": cluster}
    with pytest.raises(Stop):
        grade_class(find_submissions([str(klass)]), spec, out, on_result=stop_after_five, **options)
    db = sqlite3.connect(out / "gradebook.sqlite")
    first = dict(db.execute("SELECT student, COUNT(*) FROM events GROUP BY student").fetchall())
    db.close()
    assert sorted(first) == sorted(seen) and set(first.values()) == {1} and len(first) == 5
    assert sorted(p.name for p in (out / "feedback").iterdir()) == sorted(f"{s}.txt" for s in seen)

    again: list[str] = []
    run = grade_class(find_submissions([str(klass)]), spec, out, on_result=lambda s, _: again.append(s), **options)
    students = [f"s{n:02d}.py" for n in range(12)]
    assert sorted(run.graded) == sorted(again) == sorted(set(students) - set(seen))
    assert sorted(run.reused) == sorted(seen)
    db = sqlite3.connect(out / "gradebook.sqlite")
    events = dict(db.execute("SELECT student, COUNT(*) FROM events GROUP BY student").fetchall())
    scores = dict(db.execute("SELECT student, score FROM grades").fetchall())
    db.close()
    assert events == dict.fromkeys(students, 1)
    assert scores == {s: ("2" if n % 3 == 0 else "11") for n, s in enumerate(students)}


def test_a_dask_worker_unpickling_its_first_task_imports_little_before_the_template_starts():
    """Unpickling a task names ``_grade_chunk``, which imports this module on the worker; the task
    starts the worker template (torch, in its own process) before the grading stack is imported, so
    the module itself imports none of it (no spec model, no numpy, no report records, no torch)."""
    heavy = ["numpy", "torch", "attnscore.spec.model", "attnscore.report.record", "attnscore.grade.grading"]
    code = (
        "import sys\nfrom attnscore.grade.cluster import _grade_chunk\n"
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=HANG_GUARD_S, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


_PRELOAD = """
import asyncio
import sys
from attnscore.grade import cluster
from attnscore.grade.time_budget import grading_limits
from attnscore.sandbox import processes
from attnscore.spec.load import load_spec

assert "torch" not in sys.modules
asyncio.run(cluster.dask_setup(object()))  # dask awaits it before the worker joins its scheduler
started = {k: v for k, v in processes._TEMPLATES.items()}
wanted = ("torch", "hypothesis", "attnscore.grade.grading", "attnscore.report.record")
print("imported", all(m in sys.modules for m in wanted))
print("loaded", [getattr(t, "_ready", False) for t in started.values()])  # torch loaded in the template already
# a task grading with the limits attnscore grade uses finds the template the preload started
print("ready", processes.warm_template(grading_limits(load_spec(sys.argv[1])), wait=False))
print("same", len(started) == 1 and processes._TEMPLATES == started)
"""


@pytest.mark.slow
def test_a_preloaded_dask_worker_starts_the_template_a_task_grades_with_and_imports_the_grading_stack():
    done = subprocess.run(
        [sys.executable, "-c", _PRELOAD, str(SPEC)],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")[:4]
    assert lines == ["imported True", "loaded [True]", "ready None", "same True"], done.stdout + done.stderr


@pytest.mark.slow
def test_a_cluster_whose_workers_preload_attnscore_grades_as_any_other():
    spec = load_spec(SPEC)
    submissions = find_submissions([str(SCORES / n) for n in NAMES[:2]], one=True)
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        dashboard_address=None,
        scheduler_port=0,
        preload=["attnscore.grade.cluster"],
    ) as preloaded:
        results = grade_on_cluster(submissions, spec, preloaded, limits=Limits(call_timeout_s=30), shrink_steps=0)
    assert [str(r.score) for r in results] == ["11", "2"]
