"""attnscore: spec-driven verification and grading toolkit for attention scores.

The public API is :data:`__all__`: the reference functions and the toolkit, each imported on
first use, so that ``import attnscore`` imports neither torch nor any grading module (the
command line starts the sandbox's worker template, which loads torch in its own process,
before this process has imported torch):

- load a spec: :func:`load_spec` -> :class:`Spec` (invalid: :class:`SpecError`, every problem
  located); :func:`bundled_spec_path` names a bundled one;
- grade untrusted submissions, each in a sandboxed worker: :func:`grade_many`,
  :func:`grade_submission` (with :func:`build_cases`);
- a student's self-check on the visible cases, in process: :func:`check_path`,
  :func:`check_function` -> :class:`SelfCheck`;
- test an engineer's own implementation, in process: :func:`run_impl` (:func:`load_impl` for
  ``package.module:function``);
- verify a spec: :func:`verify_spec` (the reference passes), :func:`mutation_test` (every known
  mistake is caught) -> :class:`MutationResult`;
- the results: :class:`SubmissionResult` of :class:`CaseResult`, each with a :class:`Verdict`;
- one run of cases, the protocol all of the above share: :class:`Session` with a :class:`Budget`,
  calling a :class:`Runner` (:class:`InProcessRunner` for trusted code).

>>> import attnscore
>>> spec = attnscore.load_spec(attnscore.bundled_spec_path("dot_product_scores"))
>>> result = attnscore.run_impl(spec, lambda q, keys: keys @ q, dtype="float64")
>>> result.all_passed, {case.verdict for case in result.cases} == {attnscore.Verdict.PASSED}
(True, True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attnscore.check.cases import build_cases
    from attnscore.check.implementation import load_impl, run_impl
    from attnscore.check.runner import InProcessRunner, Runner
    from attnscore.check.session import Budget, Session
    from attnscore.check.verify import MutationResult, bundled_spec_path, mutation_test, verify_spec
    from attnscore.grade.grading import grade_many, grade_submission
    from attnscore.maths.reference import (
        ScoreInputError,
        additive_scores,
        attention,
        attention_weights,
        bilinear_scores,
        causal_attention,
        causal_mask,
        masked_scores,
        scaled_score_matrix,
        score,
        score_matrix,
        scores,
    )
    from attnscore.report.results import CaseResult, SubmissionResult, Verdict
    from attnscore.selfcheck import SelfCheck, check_function, check_path
    from attnscore.spec.load import load_spec
    from attnscore.spec.located import SpecError
    from attnscore.spec.model import Spec

_LAZY = {
    "ScoreInputError": "attnscore.maths.reference",
    "additive_scores": "attnscore.maths.reference",
    "attention": "attnscore.maths.reference",
    "attention_weights": "attnscore.maths.reference",
    "bilinear_scores": "attnscore.maths.reference",
    "causal_attention": "attnscore.maths.reference",
    "causal_mask": "attnscore.maths.reference",
    "masked_scores": "attnscore.maths.reference",
    "scaled_score_matrix": "attnscore.maths.reference",
    "score": "attnscore.maths.reference",
    "score_matrix": "attnscore.maths.reference",
    "scores": "attnscore.maths.reference",
    "Budget": "attnscore.check.session",
    "CaseResult": "attnscore.report.results",
    "InProcessRunner": "attnscore.check.runner",
    "MutationResult": "attnscore.check.verify",
    "Runner": "attnscore.check.runner",
    "SelfCheck": "attnscore.selfcheck",
    "Session": "attnscore.check.session",
    "Spec": "attnscore.spec.model",
    "SpecError": "attnscore.spec.located",
    "SubmissionResult": "attnscore.report.results",
    "Verdict": "attnscore.report.results",
    "build_cases": "attnscore.check.cases",
    "bundled_spec_path": "attnscore.check.verify",
    "check_function": "attnscore.selfcheck",
    "check_path": "attnscore.selfcheck",
    "grade_many": "attnscore.grade.grading",
    "grade_submission": "attnscore.grade.grading",
    "load_impl": "attnscore.check.implementation",
    "load_spec": "attnscore.spec.load",
    "mutation_test": "attnscore.check.verify",
    "run_impl": "attnscore.check.implementation",
    "verify_spec": "attnscore.check.verify",
}
"""Public names -> the module that defines each, imported on first use (:func:`__getattr__`)."""

__all__ = [
    "Budget",
    "CaseResult",
    "InProcessRunner",
    "MutationResult",
    "Runner",
    "ScoreInputError",
    "SelfCheck",
    "Session",
    "Spec",
    "SpecError",
    "SubmissionResult",
    "Verdict",
    "additive_scores",
    "attention",
    "attention_weights",
    "bilinear_scores",
    "build_cases",
    "bundled_spec_path",
    "causal_attention",
    "causal_mask",
    "check_function",
    "check_path",
    "grade_many",
    "grade_submission",
    "load_impl",
    "load_spec",
    "masked_scores",
    "mutation_test",
    "run_impl",
    "scaled_score_matrix",
    "score",
    "score_matrix",
    "scores",
    "verify_spec",
]


def __getattr__(name: str) -> Any:
    """A toolkit name of :data:`__all__`, imported from its module the first time it is asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'attnscore' has no attribute {name!r}; its public names are attnscore.__all__")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
