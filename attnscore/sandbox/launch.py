"""The sandbox: run an untrusted submission in a separate, limited worker process.

:class:`SandboxRunner` implements the :class:`attnscore.check.runner.Runner` protocol for a student's
file. The grading process never imports the submission. This module is the sandbox's public face:
the names below, from the small modules that do the work (``docs/sandbox.md``, "The plan and its
modules"): :mod:`~attnscore.sandbox.limits` (the options), :mod:`~attnscore.sandbox.plan` (every
layer decided once, from the options and the machine), :mod:`~attnscore.sandbox.bwrap`,
:mod:`~attnscore.sandbox.uids`, :mod:`~attnscore.sandbox.processes`,
:mod:`~attnscore.sandbox.worker_process`, :mod:`~attnscore.sandbox.outcome` and
:mod:`~attnscore.sandbox.runner`. The layers, outermost first (see the README's "Grading untrusted
code" section for the threat model and what each one stops):

- **bubblewrap** (when ``bwrap`` is installed and can create namespaces): new PID, network, IPC,
  UTS and cgroup namespaces (no network at all; killing the sandbox kills every process in it),
  and a read-only view of only what Python and torch need (interpreter prefix, site-packages,
  ``/usr``, ``/lib*``, a minimal ``/etc``), the submission file read-only and an empty writable
  working directory. Specs, golden values and the grader's own code are not in that view.
- **another user**: when the grader runs as root, the worker drops to a uid of its own (one of
  ``Limits.uid`` to ``Limits.uid + 63``, 64000 on, held by a lock while it runs) after importing
  torch and before importing the submission, so it cannot signal the grader or another worker,
  write the grader's files, or fork past ``RLIMIT_NPROC``; when it ends, every process of that
  uid is killed. Without bubblewrap, module
  folders that user cannot read (Python under root's 0700 home) are searched through a readable
  mirror made of hard links (:mod:`attnscore.sandbox.runtime`), so whatever the grading environment can
  import, the worker can import too.
- **a clean process**: by default a fork of the **worker template**
  (:mod:`attnscore.sandbox.template`; ``docs/sandbox-template.md``), a ``python -I`` process
  started once per batch that has imported torch and numpy, holds no spec, case or expected value
  and never runs submitted code, so each submission starts from a fresh copy of it and nothing
  one submission does to its process reaches the next; the child applies every layer below
  before the submission is read. With bubblewrap, or ``Limits(template=False)``, a fresh
  ``python -I`` per worker instead. Either way: no user site, no ``PYTHON*`` variables, a
  scrubbed environment, an empty temporary working directory, stdin from /dev/null; its own
  session, so a timeout kills its whole process group; on top, orphans that escaped the group
  are swept.
- **resource limits**: address space, CPU seconds, processes, file size, open files, core dumps;
  wall time per call, for the import and for the whole submission.
- **plain data**: the worker gets only inputs, never expected values, and answers with strict,
  size-capped JSON (:mod:`attnscore.boundary.wire`) that the grader validates before comparing.

Each call has a wall-time limit; a hang, crash or memory blow-up becomes that call's verdict, the
worker is killed, and the next call starts a fresh one. A submission that fails to import fails
every call with the same verdict, without retrying.
"""

from __future__ import annotations

from attnscore.sandbox.bwrap import bwrap_available
from attnscore.sandbox.checks import preflight, spec_exposure
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.plan import SandboxPlan, protections, resolve, use_template
from attnscore.sandbox.processes import warm_template
from attnscore.sandbox.runner import SandboxRunner

__all__ = [
    "Limits",
    "SandboxPlan",
    "SandboxRunner",
    "bwrap_available",
    "preflight",
    "protections",
    "resolve",
    "spec_exposure",
    "use_template",
    "warm_template",
]
