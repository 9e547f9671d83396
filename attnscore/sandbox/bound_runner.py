"""One function of a submission served by a worker shared with its other functions.

An assignment grades several functions of one submission, imported once: one
:class:`~attnscore.sandbox.runner.SandboxRunner` (one worker) serves them all, and each question
judges through its own :class:`BoundRunner`, a :class:`attnscore.check.runner.Runner` whose calls
name the question's function and call settings (:class:`attnscore.boundary.wire.Binding`) and
draw on the question's own time limit per call and time budget.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from attnscore.boundary import wire
from attnscore.boundary.outputs import CallFailure, Outcome
from attnscore.boundary.verdict import Verdict
from attnscore.check.runner import Inspection, RunnerBase
from attnscore.sandbox.runner import SandboxRunner

__all__ = ["BoundRunner"]


class BoundRunner(RunnerBase):
    """The calls of one ``binding`` (function and call settings) through the ``shared`` runner,
    each with the per-call limit ``call_timeout_s`` and drawing on the time budget
    ``time_budget_s`` (own seconds; None: no budget) of this binding alone.

    :attr:`load_failure` is the shared worker's (an import that failed costs every question) or,
    once a call answered that the submission does not define the function, that failure (it then
    costs this question only; later calls are answered with it without reaching the worker).
    :attr:`calls_seen` holds the ruled calls seen during this binding's calls only. :meth:`close`
    leaves the shared runner open: its owner closes it once every question is judged.
    """

    def __init__(
        self,
        shared: SandboxRunner,
        binding: wire.Binding,
        call_timeout_s: float | None = None,
        time_budget_s: float | None = None,
    ) -> None:
        self.shared = shared
        self.binding = binding
        self.call_timeout_s = shared.limits.call_timeout_s if call_timeout_s is None else call_timeout_s
        self.time_budget_s = time_budget_s
        self.calls_spent = 0.0  # own seconds this binding's calls drew on its time budget
        self.missing: CallFailure | None = None  # the function is not in the submission
        self._calls_seen: frozenset[str] = frozenset()

    @property
    def device(self) -> str:
        return self.shared.device

    @property
    def keywords(self) -> Mapping[str, object]:
        """The keywords every call of this binding passes by name (its ``options``)."""
        return dict(self.binding.options)

    @property
    def last_inspection(self) -> Inspection | None:
        return self.shared.last_inspection

    @property
    def load_failure(self) -> CallFailure | None:
        return self.shared.load_failure or self.missing

    @property
    def spent(self) -> float:
        return self.shared.spent

    @property
    def cleanup_problem(self) -> str | None:
        return self.shared.cleanup_problem

    @property
    def calls_seen(self) -> frozenset[str] | None:
        return self._calls_seen

    def _outcome(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        """One call of this binding's function (see :meth:`SandboxRunner.call_with`)."""
        if self.missing is not None:
            return self.missing
        budget = (self.time_budget_s, self.calls_spent)
        outcome = self.shared.call_with(args, dtype, layouts, upstream, self.binding, self.call_timeout_s, budget)
        self.calls_spent += self.shared.last_spent
        if (
            isinstance(outcome, CallFailure)
            and outcome.verdict is Verdict.FUNCTION_MISSING
            and self.shared.load_failure is None
        ):
            self.missing = outcome
        inspection = self.shared.last_inspection
        if not isinstance(outcome, CallFailure) and inspection is not None:
            self._calls_seen |= frozenset(inspection.get("calls", []))
        return outcome

    def output_text(self) -> str:
        return self.shared.output_text()

    def close(self) -> None:
        """Nothing to release: the shared runner's owner closes it."""
        return None
