"""Grading a batch for ``attnscore grade``: here, as a class run, or on a dask cluster, with a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["grade_batch", "has_dask"]


def has_dask() -> bool:
    """Whether dask.distributed (``attnscore[dask]``, needed by ``--scheduler``) can be imported."""
    try:
        import distributed  # noqa: F401 - optional (attnscore[dask]); imported only for --scheduler
    except ImportError:
        return False
    return True


def grade_batch(
    paths: list[Any],
    spec: Any,
    out: str | None,
    scheduler: str | None,
    jobs: int,
    err: Any,
    options: dict[str, Any],
    warm: Callable[[], object] | None = None,
    whole: bool = True,
) -> tuple[list[Any], Any]:
    """Grade ``paths`` against ``spec`` (a spec, or an assignment: every question): here (``jobs``
    processes), as a class run into ``out``, or on
    the dask cluster at ``scheduler``; the progress bar and warnings go to the console ``err``.
    ``warm`` (starting the worker template) is called once a class run knows it has something to
    grade here; an unchanged rerun starts no template (no torch loaded, no core taken).

    Returns the submission results in the order of ``paths`` and the class run (None unless ``out``);
    a class run without ``whole`` returns each result's summary (:meth:`SubmissionResult.summary`:
    what a table of the class shows), so that its memory stays flat over a large class.
    Raises what the class run (:class:`~attnscore.grade.gradebook.GradebookError`) or the cluster
    (:class:`~attnscore.grade.cluster.ClusterError`) raise.
    """
    from attnscore.report.progress import grading_progress
    from attnscore.spec.assignment import Assignment

    run = None
    with grading_progress(err) as bar:
        task = bar.add_task(f"grading against {spec.id}", total=len(paths))
        if out is not None:
            from attnscore.grade.class_run import grade_class

            run = grade_class(
                paths,
                spec,
                out,
                jobs=jobs,
                scheduler=scheduler,
                on_plan=lambda _, todo: _planned(bar, task, todo, None if scheduler is not None else warm),
                on_result=lambda *_: bar.advance(task),
                on_notice=lambda line: err.print(f"Warning: {line}", markup=False, highlight=False),
                whole_results=whole,
                **options,
            )
            results = [result for _, result in run.rows]
        elif scheduler is not None:
            from attnscore.grade.cluster import grade_on_cluster

            results = grade_on_cluster(
                paths,
                spec,
                scheduler,
                on_result=lambda _: bar.advance(task),
                on_notice=lambda line: err.print(f"Warning: {line}", markup=False, highlight=False),
                **options,  # the cases are built (or read from the cache) here and sent with each task
            )
        elif isinstance(spec, Assignment):
            from attnscore.grade.assignment_grading import grade_assignment_many

            results = grade_assignment_many(paths, spec, jobs=jobs, on_result=lambda _: bar.advance(task), **options)
        else:
            from attnscore.grade.grading import grade_many  # a class run imports it only with something to grade

            results = grade_many(paths, spec, jobs=jobs, on_result=lambda _: bar.advance(task), **options)
    return results, run


def _planned(bar: Any, task: Any, todo: int, warm: Callable[[], object] | None) -> None:
    """A class run's plan is known: the bar counts the ``todo`` submissions, and a run that grades
    some here starts the worker template (``warm``; a no-op when it already runs)."""
    bar.update(task, total=todo)
    if todo and warm is not None:
        warm()
