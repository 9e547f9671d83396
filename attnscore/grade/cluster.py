"""Grading on a dask.distributed cluster: the same batch, spread over several machines.

Each submission becomes one dask task that calls :func:`attnscore.grade.grading.grade_submission`
on a worker machine, in that machine's own sandbox (:class:`attnscore.sandbox.launch.SandboxRunner`),
with cases built there from the spec file's bytes sent along (once per worker process). What
travels is plain data: the submission's files as ``(path, bytes)``, the options, and back a
record (:mod:`attnscore.report.record`); the gradebook stays with the client, which commits each
result as it arrives. dask is optional: ``pip install 'attnscore[dask]'`` on the client and on
every worker (see docs/class-grading.md).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from attnscore.check.cases import Case, build_cases
from attnscore.grade.grading import grade_submission
from attnscore.grade.submission import Submission
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.results import SubmissionResult
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec

__all__ = ["ClusterError", "grade_on_cluster"]


class ClusterError(RuntimeError):
    """dask.distributed is missing, the scheduler cannot be reached, or a task failed there."""


def _client(scheduler: Any, timeout_s: float | None) -> Any:
    try:
        from distributed import Client  # optional: attnscore[dask]
    except ImportError:
        raise ClusterError(
            "--scheduler needs dask.distributed, which is not installed; install it with "
            "pip install 'attnscore[dask]' (on this machine and on every worker)"
        ) from None
    try:
        return Client(scheduler) if timeout_s is None else Client(scheduler, timeout=f"{timeout_s}s")
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot reach the dask scheduler at {scheduler}: {exc}") from None


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
) -> list[SubmissionResult]:
    """Grade ``submissions`` on the cluster whose scheduler is ``scheduler``; results come back in
    ``submissions`` order, and ``on_result`` sees each as soon as it arrives (in finishing order).

    Args:
        scheduler: the scheduler's address (``tcp://host:8786``) or anything
            ``distributed.Client`` accepts (a ``LocalCluster``).
        function, dtype, seed, limits, shrink_steps: as for :func:`attnscore.grade.grading.grade_many`.

    Raises:
        ClusterError: dask.distributed is not installed, the scheduler cannot be reached within
            the connect timeout, or a task failed on the cluster (results that arrived
            before were already passed to ``on_result``). The connect timeout defaults to dask's
            ``distributed.comm.timeouts.connect`` setting (30 s unless configured, e.g. by the
            environment variable ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``).
    """
    client = _client(scheduler, connect_timeout_s)
    try:
        from distributed import as_completed

        spec_bytes = Path(spec.path).read_bytes()
        options = {
            "function": function,
            "dtype": dtype or spec.dtypes[0],
            "seed": seed,
            "limits": asdict(limits or Limits(call_timeout_s=spec.timeout_s)),
            "shrink_steps": shrink_steps,
        }
        spec_file = client.scatter((Path(spec.path).name, spec_bytes), broadcast=True)
        futures = {
            client.submit(_grade_task, spec_file, _submission_data(s), options, pure=False): i
            for i, s in enumerate(submissions)
        }
        results: list[SubmissionResult | None] = [None] * len(submissions)
        for future in as_completed(futures):
            i = futures[future]
            try:
                record = future.result()
            except Exception as exc:  # noqa: BLE001 - any failure on a worker is reported, located
                raise ClusterError(f"grading {submissions[i].name} on the cluster failed: {exc}") from None
            result = replace(result_from_record(record), spec_path=spec.path)
            results[i] = result
            if on_result is not None:
                on_result(result)
        return [r for r in results if r is not None]
    finally:
        client.close()


def _submission_data(submission: Submission) -> dict[str, Any]:
    return {
        "path": str(submission.path),
        "files": [[rel, content] for rel, content in submission.files],
        "entry": submission.entry,
        "problem": submission.problem,
    }


_WORKER_CASES: dict[tuple[str, str, int | None], tuple[Spec, list[Case]]] = {}


def _grade_task(spec_file: tuple[str, bytes], data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Runs on a dask worker: grade one submission there; returns a record (plain data)."""
    name, spec_bytes = spec_file
    key = (hashlib.sha256(spec_bytes).hexdigest(), options["dtype"], options["seed"])
    if key not in _WORKER_CASES:
        # The spec (with hidden expected values) lies on the worker's disk only while it is read, in
        # a folder of mode 0700; the cases are kept in this process's memory.
        with tempfile.TemporaryDirectory(prefix="attnscore-spec-") as folder:
            path = os.path.join(folder, os.path.basename(name))
            with open(path, "wb") as fh:
                fh.write(spec_bytes)
            spec = load_spec(path)
            _WORKER_CASES[key] = (spec, build_cases(spec, options["dtype"], options["seed"]))
    spec, cases = _WORKER_CASES[key]
    submission = Submission(
        Path(data["path"]), tuple((rel, content) for rel, content in data["files"]), data["entry"], data["problem"]
    )
    result = grade_submission(
        submission,
        spec,
        cases,
        function=options["function"],
        dtype=options["dtype"],
        seed=options["seed"],
        limits=Limits(**options["limits"]),
        shrink_steps=options["shrink_steps"],
    )
    return result_to_record(result)
