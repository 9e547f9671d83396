"""Grading on a dask.distributed cluster: the same batch, spread over several machines.

The submissions go to the cluster in chunks (:func:`chunks`: up to :data:`MAX_CHUNK` submissions
per dask task, fewer towards the end of the batch so that no worker is left with a long last task
while the others idle); a task calls :func:`attnscore.grade.grading.grade_submission` for each of
its submissions on a worker machine, in that machine's own sandbox
(:class:`attnscore.sandbox.launch.SandboxRunner`). The cases are built (or read from the case cache,
:mod:`attnscore.check.case_cache`) once, here, and travel with each task as one pickle, with the
spec file's bytes; a worker process loads the spec and keeps the cases from its first task on. What
travels is otherwise plain data: the submissions' files as ``(path, bytes)``, the options, and back
one record per submission (:mod:`attnscore.report.record`); the gradebook stays with the client,
which commits each result as its task's results arrive (a chunk at a time: at most
:data:`MAX_CHUNK` results are held per task). dask is optional: ``pip install 'attnscore[dask]'``
on the client and on every worker (see docs/class-grading.md).

A worker that is lost mid-run (killed, out of memory, its machine gone) costs nothing graded:
dask's scheduler runs its tasks again on the other workers, and a task that is still lost (dask's
``KilledWorker`` after ``distributed.scheduler.allowed-failures`` deaths, or a cancelled future) is
submitted again, at most :data:`MAX_TRIES` times in all; after that each of its submissions gets a
grader-error result (every case ``grader_error``: the grading machine failed, not the student) and
the others are graded as usual. Every lost worker is named through ``on_notice``. Nothing is
scattered to the cluster ahead of the tasks: scattered data lives only on the workers that hold it
and cannot be recomputed when they are lost; what a task needs travels with it.

A worker process starts its worker template on its first task, and keeps it (and the grading
stack it imported) for every later one; one started with ``--preload attnscore.grade.cluster``
does all that as it starts (:func:`dask_setup`), so a fresh cluster's first class is graded as
warm as the next.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Light on purpose: a dask worker imports this module to unpickle its first task, and that task
# starts the worker template (torch, in its own process) before it imports the grading stack
# (the spec model, the report records, numpy) that the rest of this module uses inside functions.
from attnscore.sandbox.limits import Limits
from attnscore.submission.files import Submission

if TYPE_CHECKING:
    from attnscore.check.cases import Case
    from attnscore.report.results import SubmissionResult
    from attnscore.spec.model import Spec

__all__ = [
    "ClusterError",
    "grade_on_cluster",
    "check_scheduler_address",
    "chunks",
    "dask_setup",
    "PRELOAD_WAIT_S",
    "MAX_TRIES",
    "MAX_CHUNK",
]

MAX_TRIES = 3
"""Most times one task is submitted to the cluster when its worker is lost (1 + 2 retries)."""

MAX_CHUNK = 8
"""Most submissions graded by one dask task."""

_TASKS_PER_SLOT = 4  # a chunk is at most the rest of the batch spread over 4 tasks per worker thread

_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_EXPECTED = "expected [scheme://]host[:port] such as tcp://host:8786 (scheme tcp, tls, ws, wss or ucx)"


class ClusterError(RuntimeError):
    """dask.distributed is missing, the scheduler address is malformed or cannot be reached, or
    a task failed there."""


def check_scheduler_address(address: str) -> str:
    """``address`` as dask will use it, once it is well formed: ``[scheme://]host[:port]``.

    A missing scheme is ``tcp`` and a missing port dask's 8786, as for ``distributed.Client``.

    Raises:
        ClusterError: one line naming the address, what was expected and what was found (an
            unknown scheme, no host, a port that is not a number in 1..65535, spaces or control
            characters, a path or query after the port).

    Example:
        >>> check_scheduler_address("tcp://127.0.0.1:8786"), check_scheduler_address("host:8786")
        ('tcp://127.0.0.1:8786', 'tcp://host:8786')
    """
    shown = repr(address)
    if not isinstance(address, str) or not address or any(c.isspace() or not c.isprintable() for c in address):
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found an empty or unprintable text")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in _SCHEMES:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found the scheme {scheme!r}")
    try:
        parts = urllib.parse.urlsplit(f"//{rest}")
        port = parts.port
    except ValueError as exc:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found a bad port ({exc})") from None
    if not parts.hostname:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found no host")
    if parts.username is not None:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found a user name before the host")
    if parts.path or parts.query or parts.fragment:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found more after the port")
    if port == 0:
        raise ClusterError(f"dask scheduler address {shown}: {_EXPECTED}, found a bad port (0)")
    return f"{scheme}://{parts.netloc if port is not None else parts.netloc + ':8786'}"


def _client(scheduler: Any, timeout_s: float | None) -> Any:
    try:
        from distributed import Client  # optional: attnscore[dask]
    except ImportError:
        raise ClusterError(
            "--scheduler needs dask.distributed, which is not installed; install it with "
            "pip install 'attnscore[dask]' (on this machine and on every worker)"
        ) from None
    if isinstance(scheduler, str):
        scheduler = check_scheduler_address(scheduler)
    try:
        return Client(scheduler) if timeout_s is None else Client(scheduler, timeout=f"{timeout_s}s")
    except Exception as exc:  # noqa: BLE001 - whatever dask raises here, the address did not lead to a scheduler
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ClusterError(
            f"cannot reach the dask scheduler at {scheduler}: {reason} (expected a running dask scheduler "
            "there, e.g. started with `dask scheduler`)"
        ) from None


def chunks(count: int, slots: int, most: int | None = None) -> list[range]:
    """The batch's submissions ``0..count-1`` split into dask tasks, in order, for a cluster of
    ``slots`` worker threads: each chunk is at most ``most`` (default :data:`MAX_CHUNK`) submissions
    and at most a quarter of what is left per slot, so that the chunks shrink to one submission at
    the end of the batch (a worker's last task is short: no worker idles while another grades a
    long chunk).

    Raises:
        ValueError: ``slots`` or ``most`` is below 1.

    Example:
        >>> [len(c) for c in chunks(20, 1, most=4)]
        [4, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1]
    """
    most = MAX_CHUNK if most is None else most
    if slots < 1 or most < 1:
        raise ValueError(f"expected at least one worker thread and one submission per task, found {slots} and {most}")
    out, start = [], 0
    while start < count:
        size = max(1, min(most, (count - start) // (_TASKS_PER_SLOT * slots)))
        out.append(range(start, start + size))
        start += size
    return out


def grade_on_cluster(
    submissions: Sequence[Submission],
    spec: Spec,
    scheduler: Any,
    *,
    function: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    shrink_steps: int = 50,
    on_result: Callable[[SubmissionResult], None] | None = None,
    connect_timeout_s: float | None = None,
    on_notice: Callable[[str], None] | None = None,
    keep: bool = True,
    cache_cases: bool = False,
) -> list[SubmissionResult]:
    """Grade ``submissions`` on the cluster whose scheduler is ``scheduler``; results come back in
    ``submissions`` order, and ``on_result`` sees each as soon as its task's results arrive (in
    finishing order; the submissions of one task in their order). Without ``keep``, only
    ``on_result`` sees them and the list returned is empty.

    Args:
        scheduler: the scheduler's address (``tcp://host:8786``, checked by
            :func:`check_scheduler_address`) or anything ``distributed.Client`` accepts (a
            ``LocalCluster``).
        on_notice: called with one line for each worker lost during the run, e.g.
            ``dask worker tcp://10.0.0.7:40123 was lost during grading; its submissions were
            graded again on other workers``.
        cache_cases: the spec's cases are read from (and stored in) this machine's case cache
            (:mod:`attnscore.check.case_cache`), as ``attnscore grade`` does; either way they are
            built here, once, and sent with each task.
        function, dtype, seed, limits, shrink_steps: as for :func:`attnscore.grade.grading.grade_many`.

    A task whose worker was lost is submitted again (see the module docstring); one lost
    :data:`MAX_TRIES` times gives each of its submissions a grader-error result and the run goes on.

    Raises:
        ClusterError: dask.distributed is not installed, the address is malformed, the scheduler
            cannot be reached within the connect timeout, or a task raised on the cluster
            (results that arrived before were already passed to ``on_result``). The connect
            timeout defaults to dask's ``distributed.comm.timeouts.connect`` setting (30 s unless
            configured, e.g. by the environment variable
            ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``).
        SpecError: no inputs can be drawn for one of the spec's properties (raised here, before
            anything is sent to the cluster).
    """
    client = _client(scheduler, connect_timeout_s)
    try:
        import asyncio  # dask's own (it imports both): not before a worker's template starts
        import concurrent.futures

        from distributed import KilledWorker, as_completed

        from attnscore.grade.time_budget import grading_limits
        from attnscore.report.record import result_from_record

        started = time.time()
        spec_file = (Path(spec.path).name, Path(spec.path).read_bytes())
        references = _reference_files(spec)
        dtype = dtype or spec.dtypes[0]
        options = {
            "function": function,
            "dtype": dtype,
            "seed": seed,
            "limits": asdict(limits or grading_limits(spec)),
            "shrink_steps": shrink_steps,
        }
        if not submissions:
            return []
        from attnscore.check.case_cache import cached_cases  # the grading stack: only with something to grade

        cases = cached_cases(spec, dtype, seed, use_cache=cache_cases)
        built = pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL)
        data = [_submission_data(s) for s in submissions]
        parts = chunks(len(submissions), _slots(client))

        def submit(c: int) -> Any:
            chunk = [data[i] for i in parts[c]]
            return client.submit(_grade_chunk, spec_file, chunk, options, references, built, pure=False)

        futures = {submit(c): (c, 1) for c in range(len(parts))}
        pending = as_completed(list(futures))
        results: list[SubmissionResult | None] = [None] * len(submissions)
        lost: list[str] = []
        for future in pending:
            c, tries = futures.pop(future)
            try:
                records = future.result()
            except (KilledWorker, concurrent.futures.CancelledError, asyncio.CancelledError) as exc:
                worker = _worker_of(exc)
                if worker is not None and worker not in lost:
                    lost.append(worker)
                if tries < MAX_TRIES:
                    again = submit(c)
                    futures[again] = (c, tries + 1)
                    pending.add(again)
                    continue
                graded = [_lost_result(submissions[i], spec, cases, options, tries, exc) for i in parts[c]]
            except Exception as exc:  # noqa: BLE001 - any failure on a worker is reported, located
                names = ", ".join(submissions[i].name for i in parts[c])
                raise ClusterError(f"grading {names} on the cluster failed: {exc}") from None
            else:
                graded = [result_from_record(record) for record in records]
            for i, result in zip(parts[c], graded, strict=True):
                if keep:
                    results[i] = result
                if on_result is not None:
                    on_result(result)
        for worker in _lost_workers(client, started, lost):
            if on_notice is not None:
                on_notice(
                    f"dask worker {worker} was lost during grading; its submissions were graded again on other workers"
                )
        return [r for r in results if r is not None]
    finally:
        client.close()


def _slots(client: Any) -> int:
    """The cluster's worker threads (at least 1: a cluster whose workers have not joined yet)."""
    try:  # every worker's (scheduler_info lists only 5 in some dask versions)
        return max(1, sum(int(n) for n in client.nthreads().values()))
    except Exception:  # noqa: BLE001 - the count only sizes the chunks
        return 1


def _worker_of(exc: BaseException) -> str | None:
    """The worker a ``KilledWorker`` names (its last worker), if any."""
    last = getattr(exc, "last_worker", None)
    address = getattr(last, "address", last)
    return address if isinstance(address, str) else None


def _lost_workers(client: Any, since: float, seen: list[str]) -> list[str]:
    """Workers that left the cluster unexpectedly since ``since`` (the scheduler's ``remove-worker``
    events), then any other worker a lost task named, in order."""
    found: list[str] = []
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - naming lost workers is a courtesy; grading already finished
        events = ()
    for at, event in events:
        if not isinstance(event, dict) or event.get("action") != "remove-worker" or at < since:
            continue
        worker = event.get("worker")
        if isinstance(worker, str) and not event.get("expected") and worker not in found:
            found.append(worker)
    return found + [w for w in seen if w not in found]


def _lost_result(
    submission: Submission, spec: Spec, cases: Sequence[Case], options: dict[str, Any], tries: int, exc: BaseException
) -> SubmissionResult:
    """A grader-error result for a submission whose task was lost ``tries`` times."""
    worker = _worker_of(exc)
    where = f" (last on dask worker {worker})" if worker else ""
    message = (
        f"the cluster lost this submission's task {tries} times{where}: {type(exc).__name__}; the grading "
        "machine failed, not the submission: grade it again"
    )
    from attnscore.boundary.outputs import CallFailure  # the grading stack: only when grading
    from attnscore.check.runner import RefusedRunner
    from attnscore.check.session import NO_SHRINK, Session
    from attnscore.report.results import Verdict

    limits = Limits(**options["limits"])
    session = Session(
        spec,
        tuple(cases),
        options["dtype"],
        limits.device,
        submission.name,
        spec.seed if options["seed"] is None else options["seed"],
        options["function"] or spec.function,
        budget=NO_SHRINK,
    )
    lost = RefusedRunner(CallFailure(Verdict.GRADER_ERROR, message, "submission"), limits.device)
    # its error is the message (the refused runner's load failure)
    return session.run(lost)


def _submission_data(submission: Submission) -> dict[str, Any]:
    return {
        "path": str(submission.path),
        "files": [[rel, content] for rel, content in submission.files],
        "entry": submission.entry,
        "problem": submission.problem,
        "notes": list(submission.notes),
    }


_WORKER_CASES: dict[tuple[str, str, int | None, str], tuple[Spec, list[Case]]] = {}
_WORKER_KEPT = 8  # specs (with their cases) a worker process keeps, the most recently added


def _reference_files(spec: Spec) -> tuple[tuple[str, bytes], ...]:
    """A spec's own reference file(s) (``function.reference``) as ``(path relative to the spec's
    folder, content)``, shipped with the spec file to each dask worker.

    Raises:
        ClusterError: a reference file outside the spec's folder (a worker could not place it).
    """
    folder = os.path.realpath(os.path.dirname(os.path.abspath(spec.path)))
    out = []
    for path in spec.reference_files:
        relative = os.path.relpath(os.path.realpath(path), folder)
        if relative.startswith(os.pardir):
            raise ClusterError(
                f"cannot ship the reference file {path} to the cluster: it lies outside the spec's folder {folder}; "
                "copy it beside the spec and name it relative to the spec"
            )
        out.append((Path(relative).as_posix(), Path(path).read_bytes()))
    return tuple(out)


def dask_setup(worker: Any = None) -> Coroutine[Any, Any, None]:
    """Get a dask worker ready to grade as it starts: ``dask worker --preload attnscore.grade.cluster``
    (or ``distributed.worker.preload`` in dask's configuration) calls this in each worker process.

    It starts the process's worker template (torch, loading in its own process; the sandbox limits
    of :class:`~attnscore.sandbox.limits.Limits`, which ``attnscore grade`` uses unless told
    otherwise), and a thread imports the grading stack and torch here while it loads. dask awaits the
    coroutine returned before the worker joins its scheduler, without holding up the worker's
    event loop, for at most :data:`PRELOAD_WAIT_S` seconds (the thread goes on after that): a worker
    that has joined grades its first class as it grades every later one. Without the preload, its
    first task starts the template and imports all that while the class waits (1-3 s of CPU per
    worker on a 2-core machine). A template that cannot start is left for the first task to meet and
    report, as without the preload. ``worker``, dask's worker object, is not used.
    """
    from attnscore.sandbox.processes import warm_template

    # Started from this thread, the worker's own (bubblewrap's --die-with-parent ends the template
    # with the thread that started it, not with the process): the warm-up thread only waits for it.
    with contextlib.suppress(Exception):  # the first task starts it again and reports why it cannot
        warm_template(Limits(), wait=False)
    thread = threading.Thread(target=_warm_up, name="attnscore-preload", daemon=True)
    thread.start()
    return _warmed(thread)


PRELOAD_WAIT_S = 60.0
"""Most seconds a preloaded dask worker waits for its template and imports before joining its scheduler."""


async def _warmed(thread: threading.Thread) -> None:
    import asyncio

    await asyncio.get_running_loop().run_in_executor(None, thread.join, PRELOAD_WAIT_S)


def _warm_up() -> None:
    """What a dask worker's first task would do before grading, once :func:`dask_setup` has started
    the worker template: import the grading stack, the spec loader, the report records, torch (a
    wrong submission's diagnosis needs it in the worker process) and hypothesis (shrinking a failing
    property needs it), and wait until the template has loaded torch."""
    try:
        import attnscore.grade.grading  # noqa: F401 - imported now, used by the tasks
        import attnscore.report.record  # noqa: F401
        import attnscore.spec.load  # noqa: F401
        from attnscore.boundary import lazy_torch
        from attnscore.maths import lazy_hypothesis
        from attnscore.sandbox.processes import warm_template

        lazy_torch.bind()
        _ = lazy_hypothesis.st.integers  # imports hypothesis: shrinking a failing property needs it
        warm_template(Limits(), wait=True)
    except Exception:  # noqa: BLE001 - the first task does it again and reports any failure
        pass


def _grade_chunk(
    spec_file: tuple[str, bytes],
    chunk: list[dict[str, Any]],
    options: dict[str, Any],
    references: tuple[tuple[str, bytes], ...],
    cases: bytes,
) -> list[dict[str, Any]]:
    """Runs on a dask worker: grade the submissions of ``chunk`` there, in order; returns one record
    (plain data) each. ``cases`` are the client's built cases, pickled. The
    first task of a worker process starts its worker template before anything else, so that the
    template loads torch while this process imports the grading stack and loads the spec.

    Raises:
        RuntimeError: grading one of the submissions raised (a grader failure, never the
            submission's doing): named by its path.
    """
    from attnscore.sandbox.processes import warm_template  # light: the template starts before the imports below

    limits = Limits(**options["limits"])
    warm_template(limits, wait=False)  # once per process: later calls find it started
    from attnscore.grade.grading import grade_submission  # a dask worker imports the grading stack here
    from attnscore.report.record import result_to_record

    spec, built = _worker_spec(spec_file, options, references, cases)
    records = []
    for data in chunk:
        submission = Submission(
            Path(data["path"]),
            tuple((rel, content) for rel, content in data["files"]),
            data["entry"],
            data["problem"],
            tuple(data.get("notes", ())),
        )
        try:
            result = grade_submission(
                submission,
                spec,
                built,
                function=options["function"],
                dtype=options["dtype"],
                seed=options["seed"],
                limits=limits,
                shrink_steps=options["shrink_steps"],
            )
        except Exception as exc:  # noqa: BLE001 - named, then raised to the client
            raise RuntimeError(f"{submission.name}: {type(exc).__name__}: {exc}") from exc
        records.append(result_to_record(result))
    return records


def _worker_spec(
    spec_file: tuple[str, bytes],
    options: dict[str, Any],
    references: tuple[tuple[str, bytes], ...],
    cases: bytes,
) -> tuple[Spec, list[Case]]:
    """The spec a task grades against and its cases, loaded once per worker process (and per
    spec, reference files, dtype, seed and cases)."""
    name, spec_bytes = spec_file
    digest = hashlib.sha256(spec_bytes)
    for relative, content in references:  # a spec's own reference: an edited one is another spec
        digest.update(relative.encode() + b"\0" + hashlib.sha256(content).digest())
    key = (digest.hexdigest(), options["dtype"], options["seed"], hashlib.sha256(cases).hexdigest())
    if key not in _WORKER_CASES:
        from attnscore.spec.load import load_spec

        # The spec (with hidden expected values) lies on the worker's disk only while it is read, in
        # a folder of mode 0700; it and its cases are kept in this process's memory.
        with tempfile.TemporaryDirectory(prefix="attnscore-spec-") as folder:
            path = os.path.join(folder, os.path.basename(name))
            with open(path, "wb") as fh:
                fh.write(spec_bytes)
            for relative, content in references:  # beside the spec, where it names them (imported while here)
                if Path(relative).is_absolute() or os.pardir in Path(relative).parts:
                    raise ValueError(f"expected a reference file inside the spec's folder, found {relative!r}")
                target = Path(folder, relative)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            spec = load_spec(path)
            # after the spec is loaded (its reference files imported), as a case cache entry is read
            built = pickle.loads(cases)  # noqa: S301 - the client's own pickle, sent with the task
        while len(_WORKER_CASES) >= _WORKER_KEPT:
            del _WORKER_CASES[next(iter(_WORKER_CASES))]
        _WORKER_CASES[key] = (spec, built)
    return _WORKER_CASES[key]
