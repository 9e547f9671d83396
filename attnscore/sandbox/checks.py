"""Checks before the first submission runs: why none could be graded here (:func:`preflight`),
whether submissions could read a spec's hidden cases (:func:`spec_exposure`), and why
``torch.compile`` could not compile in the sandbox (:func:`compile_problem`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

from attnscore.sandbox import gpu
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.plan import resolve
from attnscore.sandbox.processes import WORKER_PATH
from attnscore.sandbox.runtime import through_mirrors, unreadable_by_workers, worker_runtime

__all__ = ["COMPILER", "compile_problem", "preflight", "spec_exposure"]

COMPILER = "g++"
"""The C++ compiler ``torch.compile``'s CPU backend (Inductor) runs on Linux (its ``cpp.cxx``
default; the worker's environment sets no ``CXX``)."""


def preflight(limits: Limits | None = None) -> str | None:
    """One line saying why no submission can be graded on this machine, or None when all is well.

    Checks, before the first submission runs, that a GPU worker's device nodes exist and that the
    unprivileged worker user can read every folder the worker searches for modules (through the
    readable mirror where needed).
    """
    plan = resolve(limits)
    limits = plan.limits
    if not plan.address_limit and not gpu.device_nodes(limits.device):
        return f"--device {limits.device}: no NVIDIA device node (/dev/nvidiactl, /dev/nvidiaN) to give the worker"
    if not plan.drops_uid or plan.bwrap:
        return None
    try:
        runtime = worker_runtime(uid=limits.uid)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the worker's interpreter {sys.executable} could not be started: {exc}"
    except RuntimeError as exc:  # no worker uid free to check it as
        return f"the worker's interpreter {sys.executable} could not be checked: {exc}"
    if runtime.problems:
        return runtime.problems[0]
    mapped = tuple(through_mirrors(p, runtime.mirrors) for p in runtime.path)
    try:
        blocked = unreadable_by_workers(mapped, limits.uid)
    except RuntimeError as exc:
        return f"the worker's interpreter {sys.executable} could not be checked: {exc}"
    if blocked:
        return (
            f"the sandbox user (uid {limits.uid}) cannot read {blocked[0]}, part of the Python installation; "
            "make it readable by all users, install bubblewrap, or run attnscore as a user other than root"
        )
    return None


def spec_exposure(spec_path: str, limits: Limits | None = None, references: tuple[str, ...] = ()) -> str | None:
    """A warning when a submission could read the spec file (and so its hidden expected values) or
    the spec's own reference file(s) ``references`` (``function.reference``): neither bubblewrap nor
    Landlock confines the worker, and the worker's user may read the files."""
    plan = resolve(limits)
    limits = plan.limits
    if plan.bwrap or plan.landlock:
        return None
    try:
        files = (os.path.abspath(spec_path), *(os.path.abspath(f) for f in references))
        if plan.drops_uid and len(unreadable_by_workers(files, limits.uid)) == len(files):
            return None
    except RuntimeError:  # no worker uid free to ask as: warn, as for a readable spec
        pass
    who = f"uid {limits.uid}" if plan.drops_uid else "the grader's own user"
    return (
        f"submissions can read {spec_path}{' and its reference file' if references else ''} (no bubblewrap, no "
        f"Landlock, and {who} may read it), "
        "so hidden cases are exposed: keep specs in a folder only the grader can read (chmod 700), "
        "or install bubblewrap"
    )


def compile_problem(limits: Limits | None = None) -> str | None:
    """Why ``torch.compile`` cannot compile in a sandboxed worker on this machine, or None: its CPU
    backend (Inductor) needs a C++ compiler (``g++``) on the worker's ``PATH`` and Python's C
    headers (``Python.h``), which the worker's user must be able to read (through the readable
    mirror of the interpreter where it drops to another uid outside bubblewrap). The sentence
    names what is missing and how to install it. Asked before grading a spec whose environment
    allows ``torch.compile``, and when a worker says a compilation failed (never taken on its
    word: this check is the grader's own)."""
    plan = resolve(limits)
    limits = plan.limits
    if shutil.which(COMPILER, path=WORKER_PATH) is None:
        return (
            f"no C++ compiler ({COMPILER}) on the sandbox's PATH ({WORKER_PATH}); "
            f"install it on the grading machine (apt-get install {COMPILER})"
        )
    include = sysconfig.get_path("include")
    header = os.path.join(include, "Python.h")
    if not os.path.isfile(header):
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return (
            f"Python's C headers are not installed ({header} is missing); install them on the grading "
            f"machine (apt-get install python{version}-dev)"
        )
    if plan.drops_uid and not plan.bwrap:
        try:
            runtime = worker_runtime(uid=limits.uid)
            seen = through_mirrors(header, runtime.mirrors)
            blocked = unreadable_by_workers((seen,), limits.uid)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the worker's interpreter {sys.executable} could not be started: {exc}"
        except RuntimeError as exc:  # no worker uid free to check it as
            return f"Python's C headers could not be checked: {exc}"
        if blocked:
            return f"the sandbox user (uid {limits.uid}) cannot read Python's C headers ({seen})"
    return None
