"""A real class, graded the way an instructor grades it: a mixed class of submissions, side by side.

Usage: ``.venv/bin/python benchmarks/bench_class.py [--size 200[,2000]] [--baseline PATH/attnscore]
[--baseline-time-budget 3] [--jobs 1,2] [--time-budget 3,default] [--dask [--dask-preload]] [--skip-rerun]
[--skip-cold]``.

The class (``--size`` submissions, 200 by default) is what a course gets back: correct files
written several ways (matmul, loops, einsum, numpy, a sum of products, a helper module in a
two-file folder, a notebook), the catalogued mistakes (negated, sorted, squared, relu,
sum-normalised, key sums, softmax applied, cosine similarity, absolute value, no sum, scaled by
√d_k), and a few that hang in a call or crash their process. Every file differs (a student number
in a comment), as a real class's do.

Each ``attnscore`` given (this checkout's, and ``--baseline``, e.g. ``/work/main/.venv/bin/attnscore``)
grades the class with ``--jobs 1`` and ``--jobs 2`` into fresh ``--out`` folders, as an instructor
runs it (its table on stdout; the figures are read afterwards from the gradebook it wrote), then
once more unchanged; several ``--size`` values grade one class of each size in turn (the peak
memory of 200 beside 2,000, say). The figures are printed side by side, each with the machine's load
(``/proc/loadavg``) at its start: submissions/s, per-submission grading time p50/p95 for right and
wrong submissions, the time outside grading (wall time less the grading time of the submissions,
divided by the jobs), the mean counterexample size (entries of the failing call's arguments, over
failing visible properties), the grading time of the submissions that timed out somewhere
("hanging s": each case they hang on costs the spec's per-call limit) and the rate without it,
the unchanged rerun, and a cold single submission (``attnscore grade
correct_matmul.py`` and a student's ``attnscore check correct_matmul.py``, the median of three each,
the case cache warm as Gradescope's image has it) next to ``python -c 'import torch'``. When
otter-grader is importable, the same class runs through its Python API too.

This checkout's ``attnscore`` grades the class once per ``--time-budget`` (seconds, or ``default``
for the spec's own: ``--time-budget 3`` is one per-call limit of the spec, so each hanging file
costs about 3 s instead of a per-call limit on every case); the baseline grades it once, as it
always did (an attnscore without ``--time-budget`` gets none), or with ``--baseline-time-budget
SECONDS`` when it has the option too (a baseline of the same series, compared budget for budget).
Each run also prints the peak resident memory of its grading processes (the ``attnscore grade``
process and the grader processes ``--jobs`` forks, not the worker template or its workers), and the
CPU seconds (user and system) of every process the run used: the ``attnscore grade`` process and
all below it (grader processes, worker template, workers), and, on a dask cluster, its scheduler,
nannies, workers and theirs. On a machine shared with other work (its load well above its cores),
wall times swing with the load from one run to the next; the CPU seconds much less (four ``--jobs 2``
runs of one commit at load 9-14: 48.8-89.1 s wall, 32.5-38.2 s CPU). A dask cluster's scheduler,
workers and client also spend CPU for every second the run lasts (heartbeats, the workers'
profiler, monitors: about 30-40 ms a second each, measured at load 13-22), so a run stretched by
the load costs it more CPU, where ``--jobs`` pays nothing by the second.

With ``--dask``, each attnscore also grades the class on a local dask cluster of two worker
processes (``--scheduler``), beside a ``--jobs 2`` run of its own made just before (so that the
two share the machine's load), and prints the ratio of their rates. The cluster is started before
the timed run (its start is not counted, as an instructor's cluster is up before a class is
graded), and its worker processes start fresh: their first tasks import the grading stack and
start one worker template each (torch, in each of the two workers and each of their two
templates, where ``--jobs 2`` loads it in one grader and one template). The class is then graded
a second time on the same cluster into a fresh ``--out`` folder ("dask warm"): what every class
after the first costs on a cluster that stays up, its workers' imports, templates and built cases
kept. Both ratios are printed, and the ratio of their CPU seconds; the time outside grading is defined as for
``--jobs``. With ``--dask-preload`` as well, a third fresh cluster is started with its workers
preloading ``attnscore.grade.cluster`` (``dask worker --preload attnscore.grade.cluster``: each
worker starts its template and imports the grading stack as it starts, in a thread) and grades the
class once ("dask preloaded"), timed from the moment the cluster is up, while the preload may
still be at work.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_cold import compile_ahead, measure

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
ONE = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"

RIGHT = {
    "matmul": "def scores(q, keys):\n    return keys @ q\n",
    "loops": (
        "import torch\n\n\ndef scores(q, keys):\n    out = torch.zeros(keys.shape[0], dtype=q.dtype)\n"
        "    for j in range(keys.shape[0]):\n        for i in range(q.shape[0]):\n"
        "            out[j] += q[i] * keys[j, i]\n    return out\n"
    ),
    "einsum": "import torch\n\n\ndef scores(q, keys):\n    return torch.einsum('d,kd->k', q, keys)\n",
    "numpy": (
        "import numpy as np\nimport torch\n\n\ndef scores(q, keys):\n"
        "    return torch.from_numpy(np.asarray(keys.numpy() @ q.numpy()))\n"
    ),
    "sum_of_products": "def scores(q, keys):\n    return (keys * q).sum(dim=-1)\n",
    "mv": "import torch\n\n\ndef scores(q, keys):\n    return torch.mv(keys, q)\n",
}
WRONG = {
    "negated": "def scores(q, keys):\n    return -(keys @ q)\n",
    "sorted": "import torch\n\n\ndef scores(q, keys):\n    return torch.sort(keys @ q).values\n",
    "squared": "def scores(q, keys):\n    return (keys @ q) ** 2\n",
    "relu": "import torch\n\n\ndef scores(q, keys):\n    return torch.relu(keys @ q)\n",
    "sum_normalised": ("def scores(q, keys):\n    s = keys @ q\n    return s / (s.abs().sum() + 1e-9)\n"),
    "key_sums": "def scores(q, keys):\n    return keys.sum(dim=-1) * q.sum()\n",
    "softmax": "import torch\n\n\ndef scores(q, keys):\n    return torch.softmax(keys @ q, dim=-1)\n",
    "cosine": (
        "import torch\n\n\ndef scores(q, keys):\n"
        "    return torch.nn.functional.cosine_similarity(keys, q[None, :], dim=-1)\n"
    ),
    "absolute": "def scores(q, keys):\n    return (keys @ q).abs()\n",
    "no_sum": "def scores(q, keys):\n    return (keys * q)[:, 0]\n",
    "scaled": "def scores(q, keys):\n    return (keys @ q) / q.shape[0] ** 0.5\n",
}
BROKEN = {
    "hangs": "def scores(q, keys):\n    while True:\n        pass\n",
    "crashes": "import os\n\n\ndef scores(q, keys):\n    os._exit(3)\n",
    "import_error": "import no_such_module_anywhere\n\n\ndef scores(q, keys):\n    return keys @ q\n",
}


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def make_class(folder: Path, size: int) -> dict[str, str]:
    """Write ``size`` submissions into ``folder``; returns name -> kind (right/wrong/broken)."""
    kinds: dict[str, str] = {}
    broken = max(3, size // 50)  # a few hang or crash: 2% of the class
    plan = [("broken", k, v) for k, v in BROKEN.items()] * (broken // len(BROKEN) + 1)
    plan = plan[:broken]
    while len(plan) < size:
        plan += [("right", k, v) for k, v in RIGHT.items()] + [("wrong", k, v) for k, v in WRONG.items()]
    for n, (kind, name, source) in enumerate(plan[:size]):
        student = f"s{n:03d}_{name}"
        text = f"# student {n}\n{source}"
        if kind == "right" and n % 10 == 1:  # a two-file folder: the work in a helper module
            (folder / student).mkdir()
            (folder / student / "helper.py").write_text(text)
            (folder / student / "solution.py").write_text("from helper import scores  # noqa: F401\n")
        elif n % 10 == 3:  # a notebook
            (folder / f"{student}.ipynb").write_text(_notebook(text))
        else:
            (folder / f"{student}.py").write_text(text)
        kinds[student] = kind
    return kinds


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def _kind_of(submission: str, kinds: dict[str, str]) -> str:
    name = Path(submission).name
    for suffix in (".py", ".ipynb"):
        name = name.removesuffix(suffix)
    return kinds.get(name, "?")


def _entries(value: object) -> int:
    if isinstance(value, list):
        return sum(_entries(v) for v in value)
    if isinstance(value, dict):
        return sum(_entries(v) for v in value.values())
    return 1


def grade(
    exe: str,
    klass: Path,
    out: Path,
    jobs: int,
    kinds: dict[str, str],
    extra: tuple[str, ...] = (),
    cluster: int | None = None,
) -> dict[str, object]:
    """One class run of ``exe`` (with the options ``extra``; on the dask cluster whose first process
    is ``cluster``, when given); its figures."""
    at_load = load()
    cpu_before = _children_cpu_s() + (_tree_cpu_s(cluster) if cluster is not None else 0.0)
    start = time.perf_counter()
    command = [exe, "grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--jobs", str(jobs), *extra]
    # the instructor's own command: its table on stdout; the figures come from the gradebook it wrote
    with (
        tempfile.TemporaryFile("w+") as err,
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, text=True) as proc,
    ):
        peak = _peak_rss_mib(proc)
        proc.wait()
        err.seek(0)
        stderr = err.read()
    wall = time.perf_counter() - start
    cpu = _children_cpu_s() + (_tree_cpu_s(cluster) if cluster is not None else 0.0) - cpu_before
    subs = _stored_results(out / "gradebook.sqlite")
    if proc.returncode not in (0, 1) or not subs:
        raise SystemExit(f"{exe} failed (exit {proc.returncode}): {stderr[-2000:]}")
    times: dict[str, list[float]] = {"right": [], "wrong": [], "broken": []}
    sizes = []
    for sub in subs:
        kind = _kind_of(sub["submission"], kinds)
        times.setdefault(kind, []).append(sub["duration_s"])
        for case in sub["cases"]:
            failure = case.get("failure")
            if case["kind"] == "property" and failure and failure.get("args") and case["visibility"] != "hidden":
                sizes.append(_entries(failure["args"]))
    graded = sum(times["right"] + times["wrong"] + times["broken"])
    # grading time of the submissions that timed out somewhere: the spec's per-call limit, spent in
    # full by every case they hang on (no grader that grades each case can skip it)
    hanging = sum(s["duration_s"] for s in subs if any(c["verdict"] == "timeout" for c in s["cases"]))
    unrun = sum(c["verdict"] == "budget_spent" for s in subs for c in s["cases"])

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values or [0.0])[0]

    return {
        "load": at_load,
        "wall": wall,
        "rate": len(subs) / wall,
        "right": (pct(times["right"], 50), pct(times["right"], 95)),
        "wrong": (pct(times["wrong"], 50), pct(times["wrong"], 95)),
        "outside": wall - graded / jobs,
        "timeouts": hanging,
        "rate_net": len(subs) / max(1e-9, wall - hanging / jobs),
        "size": statistics.mean(sizes) if sizes else 0.0,
        "count": len(subs),
        "unrun": unrun,
        "peak_mib": peak,
        "cpu": cpu,
    }


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of every process this one has waited for, with theirs: a class
    run's ``attnscore grade``, its grader processes, its worker template and the workers it forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu_s(root: int) -> float:
    """CPU seconds (user and system) that ``root`` and every process below it have used, with what
    each has reaped of its children (a dask cluster: its scheduler, nannies, workers, their worker
    templates and the workers those forked), read from ``/proc``."""
    below: dict[int, list[int]] = {}
    used: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        below.setdefault(int(fields[1]), []).append(int(entry))
        used[int(entry)] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0)
        todo += below.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def _stored_results(gradebook: Path) -> list[dict[str, object]]:
    """Every result a class run stored (its JSON records, as ``--format json`` shows them), read
    from its gradebook after the run."""
    if not gradebook.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{gradebook}?mode=ro", uri=True)) as db:
        return [json.loads(row[0]) for row in db.execute("SELECT result FROM grades ORDER BY student")]


def _status_kib(pid: int, field: bytes) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _peak_rss_mib(proc: subprocess.Popen[str]) -> float:
    """The largest resident set (``VmHWM``) of the grading processes while ``proc`` runs: ``proc``
    itself and its children with its command line (``--jobs`` forks them), not the worker template
    and its workers (sampled every 0.2 s; read until the process ends)."""
    try:
        own = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    except OSError:
        own = b""
    peak = 0
    while proc.poll() is None:
        pids = [proc.pid]
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            children = []
        for child in children:
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() == own:
                    pids.append(int(child))
            except OSError:
                continue
        peak = max([peak, *(_status_kib(pid, b"VmHWM:") for pid in pids)])
        time.sleep(0.2)
    return peak / 1024


@contextlib.contextmanager
def local_cluster(exe: str, workers: int = 2, preload: bool = False) -> Iterator[tuple[str, int]]:
    """A dask ``LocalCluster`` of ``workers`` worker processes (one thread each) run by ``exe``'s
    interpreter, so its workers grade with that attnscore (with ``preload``, started as
    ``dask worker --preload attnscore.grade.cluster`` starts them); yields the scheduler's address
    and the process id of the cluster's first process (all its processes run below it)."""
    more = ", preload=['attnscore.grade.cluster']" if preload else ""
    code = (
        "import time\nfrom distributed import LocalCluster\n"
        f"cluster = LocalCluster(n_workers={workers}, threads_per_worker=1, processes=True, dashboard_address=None"
        f"{more})\n"
        "print(cluster.scheduler_address, flush=True)\nwhile True:\n    time.sleep(3600)\n"
    )
    python = str(Path(exe).parent / "python")
    # cwd "/": ``python -c`` puts its folder first on sys.path, and the cluster's processes (the
    # scheduler, which unpickles each task, and the workers spawned from it) would import the
    # attnscore of the folder the bench runs in, not ``exe``'s
    proc = subprocess.Popen(
        [python, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        cwd="/",
    )
    try:
        address = proc.stdout.readline().strip() if proc.stdout is not None else ""
        if not address:
            raise SystemExit(f"{python}: the dask LocalCluster did not start")
        yield address, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the cluster's own process group (its nannies and workers)
        proc.wait()


def _row(label: str, jobs: int, r: dict[str, Any]) -> None:
    print(
        f"{label:<22} {jobs:>4}  {r['load']:>5}  {r['wall']:>7.1f}  {r['rate']:>7.2f}  "
        f"{r['right'][0]:>6.3f}/{r['right'][1]:<6.3f}   {r['wrong'][0]:>6.3f}/{r['wrong'][1]:<6.3f}   "
        f"{r['outside']:>8.1f}  {r['size']:>8.2f}  {r['timeouts']:>9.1f}  {r['rate_net']:>19.2f}  "
        f"{r['unrun']:>13}  {r['peak_mib']:>8.0f}  {r['cpu']:>6.1f}",
        flush=True,
    )


def rerun(exe: str, klass: Path, out: Path, extra: tuple[str, ...] = ()) -> tuple[str, float]:
    at_load = load()
    start = time.perf_counter()
    subprocess.run([exe, "grade", str(klass), "--spec", str(SPEC), "--out", str(out), *extra], capture_output=True)
    return at_load, time.perf_counter() - start


def cold(exe: str) -> tuple[str, float, float, float]:
    """(load, median wall of a cold single grade, of a cold ``attnscore check``, of `import torch`),
    three of each, interleaved (:func:`bench_cold.measure`, in the default sandbox shape)."""
    at_load = load()
    times = measure({"this": exe}, {"default": dict(os.environ)}, 3, ONE, SPEC, python=str(Path(exe).parent / "python"))
    grade_s, check_s, torch_s = (
        statistics.median(w for w, _ in times[label]) for label in ("this grade default", "this check", "import torch")
    )
    return at_load, grade_s, check_s, torch_s


def otter(klass: Path) -> str:
    try:
        import otter  # noqa: F401
    except ImportError:
        return "otter-grader: not installed here (pip install otter-grader to compare side by side)"
    return "otter-grader: importable, but its run needs an autograder zip for this class: not measured"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", default="200", help="submissions in the class; several (200,2000) run one class each (default 200)"
    )
    parser.add_argument("--baseline", default=None, help="another attnscore executable to run side by side")
    parser.add_argument("--jobs", default="1,2", help="job counts to run (default 1,2)")
    parser.add_argument(
        "--time-budget",
        default="3,default",
        help="this checkout's budgets, seconds or 'default' (the spec's), one class run each (default 3,default)",
    )
    parser.add_argument(
        "--baseline-time-budget",
        default=None,
        help="the baseline's --time-budget, seconds or 'default', when it has the option (default: none given)",
    )
    parser.add_argument("--skip-cold", action="store_true", help="leave out the cold single-submission figure")
    parser.add_argument("--skip-rerun", action="store_true", help="leave out the unchanged rerun")
    parser.add_argument(
        "--dask",
        action="store_true",
        help="also grade the class on a local dask cluster of 2 workers (--scheduler), for each attnscore",
    )
    parser.add_argument(
        "--dask-preload",
        action="store_true",
        help="with --dask, also grade on a fresh cluster whose workers preload attnscore.grade.cluster",
    )
    args = parser.parse_args()
    ours = str(Path(sys.executable).parent / "attnscore")
    exes = [("this", ours)] + ([("baseline", args.baseline)] if args.baseline else [])
    runs: list[tuple[str, str, tuple[str, ...]]] = []
    for budget in args.time_budget.split(","):
        extra = () if budget == "default" else ("--time-budget", budget)
        runs.append((f"this, budget {budget}" if budget == "default" else f"this, budget {budget} s", ours, extra))
    if args.baseline:
        budget = args.baseline_time_budget
        given = () if budget in (None, "default") else ("--time-budget", budget)
        runs.append(("baseline" if budget is None else f"baseline, budget {budget}", args.baseline, given))
    jobs = [int(j) for j in args.jobs.split(",")]
    for _, exe in exes:
        compile_ahead(exe)
    print("bytecode: compiled ahead for every attnscore measured (as an installed package has it)")
    sizes = [int(n) for n in args.size.split(",")]
    for number, size in enumerate(sizes):
        _one_class(args, size, runs, exes, jobs, last=number == len(sizes) - 1)


def _one_class(
    args: argparse.Namespace,
    size: int,
    runs: list[tuple[str, str, tuple[str, ...]]],
    exes: list[tuple[str, str]],
    jobs: list[int],
    *,
    last: bool,
) -> None:
    """Every run of one class of ``size`` submissions; the unchanged rerun and the cold figures only
    after the last class."""
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        klass = Path(tmp) / "class"
        klass.mkdir()
        kinds = make_class(klass, size)
        counts = {k: list(kinds.values()).count(k) for k in ("right", "wrong", "broken")}
        print(f"class: {len(kinds)} submissions ({counts}); cpus {os.cpu_count()}")
        header = (
            "run                    jobs  load   wall s   subs/s  right p50/p95 s  wrong p50/p95 s  outside s"
            "  cex size  hanging s  subs/s less hanging  cases not run  peak MiB   CPU s"
        )
        print(header)
        for j in jobs:
            for n, (label, exe, extra) in enumerate(runs):  # interleaved: each set runs under about the same load
                out = Path(tmp) / f"out-{n}-{j}"
                _row(label, j, grade(exe, klass, out, j, kinds, extra))
        if args.dask:  # the same class on 2 dask workers, beside --jobs 2 of the same attnscore and budget
            for n, (label, exe, extra) in enumerate(runs):
                side = grade(exe, klass, Path(tmp) / f"out-dask-jobs-{n}", 2, kinds, extra)
                _row(f"{label}, jobs", 2, side)
                clusters = [(False, ("", " warm"))] + ([(True, (" preloaded",))] if args.dask_preload else [])
                for preload, kinds_of_run in clusters:
                    with local_cluster(exe, preload=preload) as (address, first):
                        for warm in kinds_of_run:  # a fresh cluster's first class, then the next on the same cluster
                            out = Path(tmp) / f"out-dask{warm.strip()}-{n}"
                            r = grade(exe, klass, out, 2, kinds, (*extra, "--scheduler", address), cluster=first)
                            _row(f"{label}, dask{warm}", 2, r)
                            print(
                                f"  dask{warm} / --jobs 2: rate {r['rate'] / side['rate']:.2f}, "
                                f"CPU {r['cpu'] / side['cpu']:.2f}",
                                flush=True,
                            )
        if not args.skip_rerun and last:
            for n, (label, exe, extra) in enumerate(runs):
                at_load, seconds = rerun(exe, klass, Path(tmp) / f"out-{n}-{jobs[0]}", extra)
                print(f"unchanged rerun, {label}: {seconds:.2f} s (load {at_load})", flush=True)
        if not args.skip_cold and last:
            for label, exe in exes:
                at_load, seconds, check_s, torch_s = cold(exe)
                print(
                    f"cold, {label}: grade {seconds:.2f} s, check {check_s:.2f} s; import torch {torch_s:.2f} s "
                    f"(load {at_load})",
                    flush=True,
                )
        if last:
            print(otter(klass))
        print(f"load at the end: {load()}")
        shutil.rmtree(klass)


if __name__ == "__main__":
    main()
