"""The course's environment in an exported grader: the files that make Gradescope's ``setup.sh``
and PrairieLearn's image install what a spec's ``environment`` lists
(:class:`attnscore.spec.environment.Environment`).

- ``course-requirements.txt``: the packages submissions may import, one requirement per line as
  the spec writes them, installed after the grader's own pins and constrained by them (a course
  package never moves the grader's torch or numpy);
- ``system-packages.txt``: the system packages to install with ``apt-get``, one per line: with
  ``torch_compile: true`` a C++ compiler (``g++``), and on Gradescope's Ubuntu images Python's
  headers (``python3-dev``; PrairieLearn's ``python:X.Y-slim`` base image has its own). Empty
  otherwise.
"""

from __future__ import annotations

from attnscore.spec.environment import Environment

__all__ = ["COURSE_REQUIREMENTS", "SYSTEM_PACKAGES", "course_files", "course_requirements", "system_packages"]

COURSE_REQUIREMENTS = "course-requirements.txt"
SYSTEM_PACKAGES = "system-packages.txt"


def course_requirements(environment: Environment) -> bytes:
    """``course-requirements.txt``: a comment, then each package of ``environment`` on its line.

    Example:
        >>> course_requirements(Environment(("einops", "jaxtyping>=0.2"))).decode().splitlines()[-2:]
        ['einops', 'jaxtyping>=0.2']
    """
    head = "# The packages the spec's environment lists (submissions may import them), installed after the pins.\n"
    return (head + "".join(f"{p}\n" for p in environment.packages)).encode()


def system_packages(environment: Environment, platform: str) -> bytes:
    """``system-packages.txt`` for ``platform`` (``"gradescope"`` or ``"prairielearn"``): what
    ``apt-get`` installs for ``environment``, one name per line (empty without ``torch_compile``).

    Example:
        >>> system_packages(Environment(torch_compile=True), "gradescope")
        b'g++\\npython3-dev\\n'
    """
    if not environment.torch_compile:
        return b""
    names = ["g++", "python3-dev"] if platform == "gradescope" else ["g++"]
    return "".join(f"{n}\n" for n in names).encode()


def course_files(environment: Environment, platform: str) -> tuple[tuple[str, bytes], ...]:
    """``(file name, content)`` of both files for ``platform``: what an exporter writes beside its
    grader's own pins.

    Example:
        >>> [name for name, _ in course_files(Environment(), "prairielearn")]
        ['course-requirements.txt', 'system-packages.txt']
    """
    return (
        (COURSE_REQUIREMENTS, course_requirements(environment)),
        (SYSTEM_PACKAGES, system_packages(environment, platform)),
    )
