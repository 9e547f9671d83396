"""What a worker's replies mean: each message, end of file or timeout becomes the call's outcome.

The worker's word is trusted only as far as the protocol state allows (``docs/sandbox.md``):
before it says ``importing`` only the worker has run, so it alone may report the machine's faults
(a grader error); from then on the submission runs in that process and may write replies itself,
so a grader error it sends is a crash, and only the verdicts that are the submission's own
(:data:`WORKER_VERDICTS`) are taken. A clue that a failure is the machine's (a module or file the
sandbox could not provide) is checked by the grader itself (:func:`environment_fault`).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from attnscore.boundary import wire
from attnscore.boundary.outputs import CallFailure, Outcome
from attnscore.boundary.traps import PHASES
from attnscore.boundary.untrusted import clean_text
from attnscore.boundary.verdict import Verdict
from attnscore.sandbox.checks import compile_problem
from attnscore.sandbox.runtime import through_mirrors, unreadable_by
from attnscore.sandbox.worker_process import Ended, Heard, Malformed, TimedOut

if TYPE_CHECKING:
    from attnscore.sandbox.worker_host import WorkerHost
    from attnscore.sandbox.worker_process import WorkerProcess

__all__ = [
    "LOAD_VERDICTS",
    "call_timeout_text",
    "WORKER_VERDICTS",
    "call_outcome",
    "compile_timeout_text",
    "compile_unavailable_text",
    "environment_fault",
    "inspection",
    "load_failure",
    "module_files",
    "reported_failure",
]

# The only verdicts a worker may report itself; anything else it sends counts as a crash. A module
# handed in (boundary/modules.py) may also be no module (function missing) or have the wrong parameters.
WORKER_VERDICTS = frozenset(
    {
        Verdict.EXCEPTION,
        Verdict.BAD_RETURN_TYPE,
        Verdict.MEMORY_LIMIT,
        Verdict.FUNCTION_MISSING,
        Verdict.WRONG_PARAMETERS,
    }
)
# The verdicts a load_error may carry, by protocol state: before the worker says "importing" (only
# the worker has run: the machine's faults, or no file to import) and after it (the submission may
# have written the message itself: only verdicts that are the submission's own).
LOAD_VERDICTS = {
    False: frozenset({Verdict.GRADER_ERROR, Verdict.FUNCTION_MISSING}),
    True: frozenset({Verdict.EXCEPTION, Verdict.FUNCTION_MISSING, Verdict.MEMORY_LIMIT}),
}
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,20}")


def load_failure(hello: Heard, importing: bool, runner: WorkerHost, worker: WorkerProcess) -> CallFailure:
    """Why the submission could not be loaded, from the worker's last word ``hello`` (anything
    but ``Ready`` after ``Importing``); ``importing``: whether the worker said it was importing."""
    limits = runner.limits
    if isinstance(hello, TimedOut) and runner.compiling_at_timeout:
        return CallFailure(Verdict.TIMEOUT, compile_timeout_text(limits.compile_s), "submission")
    if isinstance(hello, TimedOut):
        return CallFailure(
            Verdict.TIMEOUT,
            f"importing your file took longer than {limits.load_timeout_s:g} s"
            if runner.starts == 1
            else f"importing your file again used up its setup time of {limits.load_timeout_s:g} s",
            "submission",
        )
    if isinstance(hello, Ended):
        verdict, text = worker.exit_description()
        if verdict is Verdict.MEMORY_LIMIT:
            verdict = Verdict.CRASHED
        return CallFailure(verdict, f"your file crashed while being imported: the process {text}", "submission")
    if isinstance(hello, wire.LoadError) and hello.verdict in LOAD_VERDICTS[importing]:
        return reported_failure(hello, "submission", runner)
    if importing and isinstance(hello, wire.LoadError):
        return CallFailure(
            Verdict.CRASHED,
            "the process running your file reported a failure of the grading machine while your file was being "
            "imported, which is not trusted (only the worker speaks before your code runs)",
            "submission",
        )
    return CallFailure(Verdict.CRASHED, "the worker sent an unexpected message while importing your file", "submission")


def call_outcome(
    reply: Heard, runner: WorkerHost, worker: WorkerProcess
) -> tuple[Outcome, dict[str, list[str]] | None]:
    """The outcome of the runner's current call (``runner.calls``) from the worker's ``reply``, and
    the worker's inspection report of a result (validated, else None)."""
    if type(reply) is wire.CallResult and reply.id == runner.calls:  # the usual reply first (the types are disjoint)
        return reply.value, inspection(reply.inspection, runner.last_names, runner.traps)
    limits = runner.limits
    if isinstance(reply, TimedOut) and runner.compiling_at_timeout:
        return CallFailure(Verdict.TIMEOUT, compile_timeout_text(limits.compile_s)), None
    if isinstance(reply, TimedOut):
        return CallFailure(Verdict.TIMEOUT, call_timeout_text(limits.call_timeout_s)), None
    if isinstance(reply, Ended):
        verdict, text = worker.exit_description()
        return CallFailure(verdict, f"the process running your code {text} during the call"), None
    if isinstance(reply, Malformed):
        return CallFailure(Verdict.CRASHED, f"the process running your code sent a malformed: {reply.problem}"), None
    if reply.id != runner.calls:
        return CallFailure(Verdict.CRASHED, "the process running your code answered out of turn"), None
    if isinstance(reply, wire.CallResult):
        return reply.value, inspection(reply.inspection, runner.last_names, runner.traps)
    if isinstance(reply, wire.UnreadableResult):
        return CallFailure(Verdict.BAD_RETURN_TYPE, f"the returned value could not be read back: {reply.problem}"), None
    if isinstance(reply, wire.CallFailed) and reply.verdict is Verdict.GRADER_ERROR:
        # After the submission is imported, the worker speaks for it: a "grader error" it sends
        # cannot be told from a forged one, so it is never taken as the machine's fault.
        why = "the process running your code reported a failure of the grader, which is not trusted"
        return CallFailure(Verdict.CRASHED, why), None
    if isinstance(reply, wire.CallFailed) and reply.verdict is Verdict.FUNCTION_MISSING and runner.last_function:
        # a call that names its function (an assignment's): the name resolved at its first call
        return reported_failure(reply, "submission", runner), None
    if isinstance(reply, wire.CallFailed) and reply.verdict in WORKER_VERDICTS:
        return reported_failure(reply, "call", runner), None
    return CallFailure(Verdict.CRASHED, "the process running your code sent an unexpected message"), None


def call_timeout_text(limit_s: float) -> str:
    """The timeout of a call that ran past its own limit of ``limit_s`` seconds.

    >>> call_timeout_text(3.0)
    'the call took longer than 3 s (an infinite loop, or far too slow)'
    """
    return f"the call took longer than {limit_s:g} s (an infinite loop, or far too slow)"


def compile_unavailable_text(problem: str) -> str:
    """The grader error of a call whose ``torch.compile`` could not compile on this machine
    (``problem``: :func:`attnscore.sandbox.checks.compile_problem`'s sentence)."""
    return (
        f"torch.compile is not available on this grader: {problem}. This is a limit of the grading machine, "
        "not a mistake in your code: please tell your instructor"
    )


def compile_timeout_text(allowance_s: float) -> str:
    """Why a wait timed out while ``torch.compile`` was compiling: the compile allowance ran out."""
    return (
        f"torch.compile was still compiling when your submission's compile allowance of {allowance_s:g} s "
        "(for all its compilations together, on top of each call's time limit) ran out: compile fewer "
        "functions, or fewer shapes (dynamic=True), or do without torch.compile"
    )


def reported_failure(message: wire.LoadError | wire.CallFailed, scope: str, runner: WorkerHost) -> CallFailure:
    """A failure the worker reported (its verdict one it may report), as a verdict; the machine's
    faults (:func:`environment_fault`) become grader errors."""
    text = clean_text(message.message, 2000)
    verdict = message.verdict or Verdict.CRASHED  # a verdict-less message is never taken this far
    if verdict is Verdict.EXCEPTION and message.compiler:
        problem = compile_problem(runner.limits)
        if problem is not None:
            return CallFailure(Verdict.GRADER_ERROR, compile_unavailable_text(problem), scope)
    if verdict is Verdict.EXCEPTION:
        fault = environment_fault(runner, message)
        if fault is not None:
            return CallFailure(Verdict.GRADER_ERROR, f"{text} ({fault})", scope)
        return CallFailure(verdict, text, scope, message.exception)
    return CallFailure(verdict, text, scope)


def module_files(module: str, path: tuple[str, ...]) -> list[str] | None:
    """The files and package folders that make up ``module`` on ``path`` (each package on the way,
    then the module itself), or None when it is not found there (searched as files, nothing is
    imported)."""
    from importlib.machinery import PathFinder

    locations: list[str] | None = list(path)
    files: list[str] = []
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        if locations is None:
            return None
        found = PathFinder.find_spec(".".join(parts[:depth]), locations)
        if found is None:
            return None
        search = found.submodule_search_locations
        locations = list(search) if search is not None else None
        files += [p for p in (locations or []) if isinstance(p, str)]
        if isinstance(found.origin, str) and os.path.isabs(found.origin):
            files.append(found.origin)
    return files


def environment_fault(runner: WorkerHost, message: wire.LoadError | wire.CallFailed) -> str | None:
    """Why a failure the worker reports is the grading machine's, not the student's; else None.

    The worker names the module a ``ModuleNotFoundError`` was about (``"module"``) or the file a
    ``PermissionError`` was about (``"file"``). When the worker runs as another user, a module that
    this grader's interpreter finds, or a file inside the interpreter's own folders, may be one the
    sandbox failed to provide. These clues come from the submission's process (it can raise
    ``ModuleNotFoundError(name="torch")`` itself), so they are never taken on its word: the grader
    asks the kernel itself whether the worker's user can read those files (through the readable
    mirror), and only files it cannot read make a grader error; else the student's exception.
    """
    path = runner.runtime.path
    if not path or runner.plan.bwrap:
        return None
    mirrors = runner.runtime.mirrors
    module, file = message.module, message.file
    files = module_files(module, path) if isinstance(module, str) and _MODULE_NAME.fullmatch(module) else None
    if files and unreadable_by(
        tuple(dict.fromkeys(through_mirrors(f, mirrors) for f in files)), runner.uid, runner.uid
    ):
        return (
            f"module {module!r} is installed on the grading machine but the sandbox could not load it for your code; "
            "this is a problem of the grading machine, not of your code: please tell your instructor"
        )
    roots = path + tuple(copy for _, copy in mirrors)
    if (
        isinstance(file, str)
        and any(file == r or file.startswith(r.rstrip("/") + "/") for r in roots)
        and os.path.lexists(file)
        and unreadable_by((file,), runner.uid, runner.uid)
    ):
        return (
            "a file of the grading machine's Python installation could not be read by the sandbox; "
            "this is a problem of the grading machine, not of your code: please tell your instructor"
        )
    return None


def inspection(raw: object, names: list[str], traps: tuple[str, ...] = ()) -> dict[str, list[str]] | None:
    """Validate the worker's inspection report: ``mutated`` and ``aliased``, lists of known argument
    names (or ``dO``, :data:`attnscore.boundary.wire.UPSTREAM`), and ``calls``, the trapped calls it
    saw as ``name@phase`` words (names among ``traps``; absent means none); else None."""
    if not isinstance(raw, dict):
        return None
    out = {}
    known = [*names, wire.UPSTREAM]
    for key in ("mutated", "aliased"):
        items = raw.get(key)
        if not isinstance(items, list) or not all(isinstance(i, str) and i in known for i in items):
            return None
        out[key] = list(dict.fromkeys(items)) if items else []
    calls = raw.get("calls", [])
    if not isinstance(calls, list):
        return None
    if calls:  # the usual report names none: no words to build
        words = {f"{name}@{phase}" for name in traps for phase in PHASES}
        if not all(isinstance(c, str) and c in words for c in calls):
            return None
    out["calls"] = sorted(set(calls))
    return out
