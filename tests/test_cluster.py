"""Tests for grading on a dask.distributed cluster (attnscore.grade.cluster), with a LocalCluster."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from attnscore.check.cases import build_cases
from attnscore.grade.cluster import ClusterError, grade_on_cluster
from attnscore.grade.grading import grade_many
from attnscore.grade.submission import find_submissions
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (attnscore[dask])")

ROOT = Path(__file__).resolve().parent.parent
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
        assert there.spec_path == str(SPEC) and there.error == here.error
    assert [str(r.score) for r in remote] == ["11", "4", "0", "11"]
    assert len(build_cases(spec, spec.dtypes[0], None)) == len(remote[0].cases)


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
        "cosine_similarity.py": "4",
    }
    db.close()
    rerun = subprocess.run(
        [*args, "--scheduler", cluster.scheduler_address], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert "class run: 0 graded, 2 unchanged" in rerun.stderr


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
