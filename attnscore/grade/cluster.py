"""Grading on a dask.distributed cluster: the same batch, spread over several machines.

Each submission becomes one dask task that calls :func:`attnscore.grade.grading.grade_submission`
on a worker machine, in that machine's own sandbox (:class:`attnscore.sandbox.launch.SandboxRunner`),
with cases built there from the spec file's bytes sent along with each task (built once per
worker process). What travels is plain data: the spec's bytes, the submission's files as
``(path, bytes)``, the options, and back a record (:mod:`attnscore.report.record`); the gradebook
stays with the client, which commits each result as it arrives. dask is optional:
``pip install 'attnscore[dask]'`` on the client and on every worker (see docs/class-grading.md).

A worker that is lost mid-run (killed, out of memory, its machine gone) costs nothing graded:
dask's scheduler runs its tasks again on the other workers, and a submission whose task is still
lost (dask's ``KilledWorker`` after ``distributed.scheduler.allowed-failures`` deaths, or a
cancelled future) is submitted again, at most :data:`MAX_TRIES` times in all; after that it gets
a grader-error result (every case ``grader_error``: the grading machine failed, not the student)
and the others are graded as usual. Every lost worker is named through ``on_notice``. Nothing is
scattered to the cluster ahead of the tasks: scattered data lives only on the workers that hold
it and cannot be recomputed when they are lost.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnscore.grade.time_budget import grading_limits
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec
from attnscore.submission.files import Submission

if TYPE_CHECKING:
    from attnscore.check.cases import Case

__all__ = ["ClusterError", "grade_on_cluster", "check_scheduler_address", "MAX_TRIES"]

MAX_TRIES = 3
"""Most times one submission is submitted to the cluster when its worker is lost (1 + 2 retries)."""

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
) -> list[SubmissionResult]:
    """Grade ``submissions`` on the cluster whose scheduler is ``scheduler``; results come back in
    ``submissions`` order, and ``on_result`` sees each as soon as it arrives (in finishing order).
    Without ``keep``, only ``on_result`` sees them and the list returned is empty.

    Args:
        scheduler: the scheduler's address (``tcp://host:8786``, checked by
            :func:`check_scheduler_address`) or anything ``distributed.Client`` accepts (a
            ``LocalCluster``).
        on_notice: called with one line for each worker lost during the run, e.g.
            ``dask worker tcp://10.0.0.7:40123 was lost during grading; its submissions were
            graded again on other workers``.
        function, dtype, seed, limits, shrink_steps: as for :func:`attnscore.grade.grading.grade_many`.

    A submission whose worker was lost is graded again (see the module docstring); one lost
    :data:`MAX_TRIES` times gets a grader-error result and the run goes on.

    Raises:
        ClusterError: dask.distributed is not installed, the address is malformed, the scheduler
            cannot be reached within the connect timeout, or a task raised on the cluster
            (results that arrived before were already passed to ``on_result``). The connect
            timeout defaults to dask's ``distributed.comm.timeouts.connect`` setting (30 s unless
            configured, e.g. by the environment variable
            ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``).
    """
    client = _client(scheduler, connect_timeout_s)
    try:
        from distributed import KilledWorker, as_completed

        started = time.time()
        spec_file = (Path(spec.path).name, Path(spec.path).read_bytes())
        references = _reference_files(spec)
        options = {
            "function": function,
            "dtype": dtype or spec.dtypes[0],
            "seed": seed,
            "limits": asdict(limits or grading_limits(spec)),
            "shrink_steps": shrink_steps,
        }
        data = [_submission_data(s) for s in submissions]

        def submit(i: int) -> Any:
            return client.submit(_grade_task, spec_file, data[i], options, references, pure=False)

        futures = {submit(i): (i, 1) for i in range(len(submissions))}
        pending = as_completed(list(futures))
        results: list[SubmissionResult | None] = [None] * len(submissions)
        lost: list[str] = []
        for future in pending:
            i, tries = futures.pop(future)
            try:
                record = future.result()
            except (KilledWorker, concurrent.futures.CancelledError, asyncio.CancelledError) as exc:
                worker = _worker_of(exc)
                if worker is not None and worker not in lost:
                    lost.append(worker)
                if tries < MAX_TRIES:
                    again = submit(i)
                    futures[again] = (i, tries + 1)
                    pending.add(again)
                    continue
                result = _lost_result(submissions[i], spec, options, tries, exc)
            except Exception as exc:  # noqa: BLE001 - any failure on a worker is reported, located
                raise ClusterError(f"grading {submissions[i].name} on the cluster failed: {exc}") from None
            else:
                result = result_from_record(record)
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
    submission: Submission, spec: Spec, options: dict[str, Any], tries: int, exc: BaseException
) -> SubmissionResult:
    """A grader-error result for a submission whose task was lost ``tries`` times."""
    worker = _worker_of(exc)
    where = f" (last on dask worker {worker})" if worker else ""
    message = (
        f"the cluster lost this submission's task {tries} times{where}: {type(exc).__name__}; the grading "
        "machine failed, not the submission: grade it again"
    )
    from attnscore.boundary.outputs import CallFailure  # the grading stack: only when grading
    from attnscore.check.cases import build_cases
    from attnscore.check.runner import RefusedRunner
    from attnscore.check.session import NO_SHRINK, Session

    cases = build_cases(spec, options["dtype"], options["seed"])
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


_WORKER_CASES: dict[tuple[str, str, int | None], tuple[Spec, list[Case]]] = {}


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


def _grade_task(
    spec_file: tuple[str, bytes],
    data: dict[str, Any],
    options: dict[str, Any],
    references: tuple[tuple[str, bytes], ...] = (),
) -> dict[str, Any]:
    """Runs on a dask worker: grade one submission there; returns a record (plain data). The first
    task of a worker process starts its worker template before anything else, so that the
    template loads torch while this process imports the grading stack and builds the cases."""
    from attnscore.sandbox.launch import warm_template

    limits = Limits(**options["limits"])
    warm_template(limits, wait=False)  # once per process: later calls find it started
    from attnscore.check.cases import build_cases  # a dask worker imports the grading stack here
    from attnscore.grade.grading import grade_submission

    name, spec_bytes = spec_file
    digest = hashlib.sha256(spec_bytes)
    for relative, content in references:  # a spec's own reference: an edited one is another spec
        digest.update(relative.encode() + b"\0" + hashlib.sha256(content).digest())
    key = (digest.hexdigest(), options["dtype"], options["seed"])
    if key not in _WORKER_CASES:
        # The spec (with hidden expected values) lies on the worker's disk only while it is read, in
        # a folder of mode 0700; the cases are kept in this process's memory.
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
            _WORKER_CASES[key] = (spec, build_cases(spec, options["dtype"], options["seed"]))
    spec, cases = _WORKER_CASES[key]
    submission = Submission(
        Path(data["path"]),
        tuple((rel, content) for rel, content in data["files"]),
        data["entry"],
        data["problem"],
        tuple(data.get("notes", ())),
    )
    result = grade_submission(
        submission,
        spec,
        cases,
        function=options["function"],
        dtype=options["dtype"],
        seed=options["seed"],
        limits=limits,
        shrink_steps=options["shrink_steps"],
    )
    return result_to_record(result)
