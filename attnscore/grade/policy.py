"""What grading counts and how much work it does, shared by the grader and the student self-check
so that both give the same points and the same feedback.

- Points: a property decided from what the worker itself reports could be forged by a submission
  that rewrites the worker, so when grading untrusted code it gives feedback but no points, unless
  a forged report could only claim what the honest fix gives anyway. None is, today: mutation and
  aliasing are the grader's own findings (the shared memory it reads at each stop of a call, its
  canaries in the output read again: :mod:`attnscore.sandbox.runner`), and the worker's word about
  an input's metadata only ever costs the submission.
- Shrinking: :func:`grading_budget`, the same for every submission.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from attnscore.check.cases import Case
from attnscore.check.session import Budget

__all__ = ["WORKER_EVIDENCE", "SHRINK_SAFETY_S", "unscored_in_sandbox", "grading_budget"]

WORKER_EVIDENCE: frozenset[str] = frozenset()
"""Properties decided from the worker's own report whose points a forged report could take:
feedback only when grading. None today (see the module docstring)."""

SHRINK_SAFETY_S = 10.0
"""Safety net, seconds of work (:func:`attnscore.check.session.work_clock`), for all shrinking of
one submission together."""


def unscored_in_sandbox(cases: Sequence[Case]) -> list[Case]:
    """``cases`` with the points of worker-evidenced properties set to 0 (their feedback stays)."""
    return [
        replace(c, points=Fraction(0), title=f"{c.title} (feedback only: the sandbox cannot verify it)")
        if c.property_name in WORKER_EVIDENCE
        else c
        for c in cases
    ]


def grading_budget(shrink_steps: int) -> Budget:
    """The grader's shrinking budget: ``shrink_steps`` examples per failing property (0: off),
    :data:`SHRINK_SAFETY_S` seconds for the whole submission, and no shrinking of a property whose
    cause a failing worked example already shows, the smallest failing drawn input tried before
    hypothesis (:class:`attnscore.check.session.Budget`): a wrong submission in a class costs a few
    calls more than a right one, not a hypothesis run."""
    return Budget(shrink_steps=shrink_steps, shrink_s=SHRINK_SAFETY_S, skip_shown_causes=True, drawn_first=True)
