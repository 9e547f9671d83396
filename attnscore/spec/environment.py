"""The course's environment, as a spec states it: the packages a submission may import, and
whether it may use ``torch.compile``.

``environment: {packages: [einops, "jaxtyping>=0.2"], torch_compile: true}`` in a spec says what
the course's own grading environment has beyond attnscore's (torch, numpy and the standard
library are always there). The exported graders install it (Gradescope's ``setup.sh``,
PrairieLearn's image: :mod:`attnscore.export`); ``attnscore grade`` refuses to start where a
listed package is missing or where the sandbox cannot compile (:mod:`attnscore.grade.environment`);
``attnscore check`` says once what to ``pip install``. Each package is a requirement as pip reads
it (a name, optional extras, an optional version and environment marker), from the package index.
``packaging`` reads them, imported where a requirement is read: a spec that lists no packages never
loads it (a student's cold ``attnscore check``).
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
from dataclasses import dataclass
from typing import Any

from attnscore.spec.located import Positioned, SpecProblem

__all__ = ["Environment", "read_environment", "RESERVED"]

RESERVED = ("attnscore", "torch")
"""Packages a spec may not list: the grader's own (an exported grader pins its torch)."""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Environment:
    """What a course's submissions may use beyond attnscore's own environment.

    Attributes:
        packages: requirements as written in the spec (``einops``, ``jaxtyping>=0.2``), each
            valid for pip, from the package index, listed once.
        torch_compile: submissions may use ``torch.compile``: exported graders install a C++
            compiler and Python's headers, and grading checks that the sandbox can compile.

    Example:
        >>> Environment(("einops",)).install_command(["einops", "jaxtyping>=0.2"])
        "pip install einops 'jaxtyping>=0.2'"
    """

    packages: tuple[str, ...] = ()
    torch_compile: bool = False

    def missing(self) -> list[str]:
        """The listed packages this interpreter lacks, each as ``requirement (why)``: not
        installed, or installed in a version outside the requirement's (``jaxtyping>=0.2 (0.1.5
        installed)``). A requirement whose environment marker does not hold here is not needed."""
        if not self.packages:
            return []
        from packaging.requirements import Requirement

        lacking = []
        for text in self.packages:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            try:
                version = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                lacking.append(f"{text} (not installed)")
                continue
            if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
                lacking.append(f"{text} ({version} installed)")
        return lacking

    @staticmethod
    def install_command(requirements: list[str]) -> str:
        """``pip install ...`` for ``requirements`` (as written; each quoted for a shell when needed)."""
        return "pip install " + " ".join(shlex.quote(r.split(" (")[0]) for r in requirements)


def _requirement_problem(text: str) -> str | None:
    """Why ``text`` is not a package a spec may list (see the module docstring), or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    example = "(einops, jaxtyping>=0.2)"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "not a requirement"
        return f"expected a package as pip names it, with an optional version {example}, found {text!r} ({reason})"
    if requirement.url:
        return (
            f"expected a package from the package index with an optional version {example}, found a direct "
            f"reference {text!r}: graders install from the index"
        )
    if _canonical(requirement.name) in RESERVED:
        return (
            f"expected a package the course adds, found {text!r}: the grader brings its own {requirement.name} "
            "(exported graders pin it); leave it out"
        )
    return None


def read_environment(doc: Positioned, raw: Any, problems: list[SpecProblem]) -> Environment:
    """The spec's ``environment`` (already of the schema's form: an object with ``packages``, a
    list of strings, and ``torch_compile``, a boolean), with a located problem for each package
    that is not a requirement pip reads from the index, names attnscore or torch, or repeats one."""
    if raw is None:
        return Environment()
    from packaging.requirements import Requirement

    packages = []
    seen: dict[str, int] = {}
    for i, text in enumerate(raw.get("packages", [])):
        problem = _requirement_problem(text)
        if problem is not None:
            problems.append(doc.problem(("environment", "packages", i), problem))
            continue
        name = _canonical(Requirement(text).name)
        if name in seen:
            first = raw["packages"][seen[name]]
            problems.append(
                doc.problem(
                    ("environment", "packages", i),
                    f"expected each package once, found {text!r} after {first!r} "
                    f"(environment.packages[{seen[name]}]); give one requirement per package",
                )
            )
            continue
        seen[name] = i
        packages.append(text)
    return Environment(tuple(packages), bool(raw.get("torch_compile", False)))
