"""The course's environment on this grading machine: what a spec's ``environment`` asks for that
the machine lacks, said once before anything is graded (``attnscore grade``, the PrairieLearn
grader) instead of as a failure in every submission that needs it."""

from __future__ import annotations

from attnscore.sandbox.checks import compile_problem
from attnscore.sandbox.limits import Limits
from attnscore.spec.environment import Environment
from attnscore.spec.model import Spec

__all__ = ["environment_problem", "missing_packages_text"]


def missing_packages_text(lacking: list[str]) -> str:
    """One sentence naming the spec's packages this machine lacks (``lacking``, as
    :meth:`Environment.missing` gives them) and the ``pip install`` that adds them."""
    return (
        f"the spec's environment lists packages this machine lacks: {', '.join(lacking)}; "
        f"install them with: {Environment.install_command(lacking)}"
    )


def environment_problem(spec: Spec, limits: Limits | None = None) -> str | None:
    """Why submissions of ``spec`` cannot be graded here in the environment it states, or None:
    a listed package is missing or of another version (:meth:`Environment.missing`), or the spec
    allows ``torch.compile`` and the sandbox cannot compile
    (:func:`attnscore.sandbox.checks.compile_problem`). One sentence, saying what to install."""
    lacking = spec.environment.missing()
    if lacking:
        return missing_packages_text(lacking)
    if spec.environment.torch_compile:
        problem = compile_problem(limits)
        if problem is not None:
            return f"the spec's environment allows torch.compile, but the sandbox cannot compile here: {problem}"
    return None
