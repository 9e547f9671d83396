"""Verdicts: the closed set of what can happen to one case."""

from __future__ import annotations

import enum

__all__ = ["Verdict"]


class Verdict(str, enum.Enum):
    """The closed set of case verdicts.

    ``BUDGET_SPENT`` is the grader's own: a case not run (or not run to its end) because the
    submission had already used its whole time budget on earlier cases (``Limits.time_budget_s``);
    no worker may report it.

    ``WRONG_PARAMETERS`` is a module handed in (a spec's ``function.module``) whose parameters are
    not the ones the spec states: missing, extra or mis-shaped, all said in one message.
    """

    PASSED = "passed"
    WRONG_VALUE = "wrong_value"
    WRONG_SHAPE = "wrong_shape"
    WRONG_DTYPE = "wrong_dtype"
    NON_FINITE = "non_finite"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    CRASHED = "crashed"
    FUNCTION_MISSING = "function_missing"
    BAD_RETURN_TYPE = "bad_return_type"
    GRADER_ERROR = "grader_error"
    BUDGET_SPENT = "budget_spent"
    # an assignment rule (a spec's rules: a forbidden call made, a required one missing), never a value
    RULE_BROKEN = "rule_broken"
    # a module handed in whose parameters are not the spec's (names and shapes), never a value
    WRONG_PARAMETERS = "wrong_parameters"

    @property
    def label(self) -> str:
        """Human label, e.g. ``"wrong value"``."""
        return self.value.replace("_", " ")
