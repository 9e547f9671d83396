"""A grading run's time: the per-call limit and the time budget of each submission.

The spec says both (``timeout_s``, ``time_budget_s``; a spec without a budget gets
:func:`attnscore.spec.model.default_time_budget` of its per-call limit), and ``attnscore grade``
or ``attnscore check`` may override them (``--timeout``, ``--time-budget``). Every grading path
(one submission, a class, a dask cluster, the Gradescope and PrairieLearn graders) builds its
sandbox :class:`~attnscore.sandbox.limits.Limits` here, so they all give a submission the same
time. This module imports only the limits and the spec model: a class run that grades nothing
does not load the grading stack for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnscore.sandbox.limits import Limits
from attnscore.spec.model import Spec, default_time_budget

if TYPE_CHECKING:
    from attnscore.spec.assignment import Assignment

__all__ = ["assignment_limits", "budget_problem", "call_and_budget", "grading_limits"]


def call_and_budget(spec: Spec, timeout: float | None = None, time_budget: float | None = None) -> tuple[float, float]:
    """``(per-call limit, time budget)`` in seconds for grading ``spec``: ``timeout`` or the spec's
    ``timeout_s``, and ``time_budget`` or the spec's ``time_budget_s`` or, where the spec sets none,
    the default for the per-call limit in use (:func:`attnscore.spec.model.default_time_budget`:
    ``--timeout 10`` on a spec without a budget gives 100 s)."""
    call = timeout if timeout is not None else spec.timeout_s
    if time_budget is not None:
        return call, time_budget
    return call, spec.time_budget_s if spec.time_budget_s is not None else default_time_budget(call)


def budget_problem(
    call_s: float, budget_s: float, where: str = "--time-budget", limit_from: str = "the spec's timeout_s"
) -> str | None:
    """Why a time budget of ``budget_s`` cannot go with a per-call limit of ``call_s`` (a budget
    shorter than one call's limit would stop a correct call before its own limit), or None;
    ``where`` names the budget's source, ``limit_from`` the limit's.

    >>> budget_problem(3.0, 2.0)
    "--time-budget: expected at least the per-call limit of 3 s (the spec's timeout_s), found 2"
    >>> budget_problem(3.0, 3.0) is None
    True
    """
    if budget_s >= call_s:
        return None
    return f"{where}: expected at least the per-call limit of {call_s:g} s ({limit_from}), found {budget_s:g}"


def grading_limits(
    spec: Spec, *, timeout: float | None = None, time_budget: float | None = None, **limits: Any
) -> Limits:
    """The sandbox's :class:`Limits` for grading ``spec``: the per-call limit and the time budget of
    :func:`call_and_budget` (``timeout`` and ``time_budget``: the command line's ``--timeout`` and
    ``--time-budget``, None for the spec's), and any other :class:`Limits` field in ``limits``.

    Raises:
        ValueError: the budget is shorter than the per-call limit (:func:`budget_problem`'s line).

    >>> from attnscore.spec.load import load_spec
    >>> from attnscore.check.verify import bundled_spec_paths
    >>> spec = load_spec(next(p for p in bundled_spec_paths() if p.name == "dot_product_scores.yaml"))
    >>> limits = grading_limits(spec)
    >>> limits.call_timeout_s, limits.time_budget_s
    (3.0, 30.0)
    """
    call, budget = call_and_budget(spec, timeout, time_budget)
    where = "--time-budget" if time_budget is not None else f"{spec.path}: time_budget_s"
    problem = budget_problem(call, budget, where, "--timeout" if timeout is not None else "the spec's timeout_s")
    if problem is not None:
        raise ValueError(problem)
    return Limits(call_timeout_s=call, time_budget_s=budget, **limits)


def assignment_limits(
    assignment: Assignment, *, timeout: float | None = None, time_budget: float | None = None, **limits: Any
) -> Limits:
    """The sandbox's :class:`Limits` for the one worker that serves every question of ``assignment``:
    each question keeps its own per-call limit and time budget (:func:`call_and_budget` of its spec,
    ``timeout`` and ``time_budget`` overriding them for every question), which its calls carry
    (:class:`attnscore.sandbox.bound_runner.BoundRunner`); the worker's ``call_timeout_s`` is the
    longest of them, it has no budget of its own, and its total own time
    (``total_timeout_s``) is at least the questions' budgets together. Any other :class:`Limits`
    field in ``limits``.

    Raises:
        ValueError: a budget shorter than a question's per-call limit (:func:`budget_problem`'s line,
            naming the question's spec).
    """
    calls = []
    budgets = []
    for question in assignment.questions:
        call, budget = call_and_budget(question.spec, timeout, time_budget)
        where = "--time-budget" if time_budget is not None else f"{question.spec.path}: time_budget_s"
        problem = budget_problem(call, budget, where, "--timeout" if timeout is not None else "the spec's timeout_s")
        if problem is not None:
            raise ValueError(problem)
        calls.append(call)
        budgets.append(budget)
    limits.setdefault("total_timeout_s", max(Limits().total_timeout_s, sum(budgets)))
    return Limits(call_timeout_s=max(calls), time_budget_s=None, **limits)
