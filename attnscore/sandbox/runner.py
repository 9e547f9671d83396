"""The sandbox runner: one student's submission, run call by call in a sandboxed worker.

:class:`SandboxRunner` implements the :class:`attnscore.check.runner.Runner` protocol for a
student's files. It resolves its :class:`~attnscore.sandbox.plan.SandboxPlan` once, claims a uid
of its own (a root grader), lays out a private copy of the files, and starts a worker
(:class:`~attnscore.sandbox.worker_process.WorkerProcess`) on the first call and again after a
call that timed out or crashed, within the setup and total time budgets; what each reply means is
:mod:`attnscore.sandbox.outcome`'s.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.boundary import kernel_objects, wire
from attnscore.boundary.gradients import WithGradients
from attnscore.boundary.layouts import HANDOVERS, PASS_NONE, strided_form
from attnscore.boundary.modules import ModuleConfig
from attnscore.boundary.outputs import CallFailure, Outcome, Received
from attnscore.boundary.untrusted import clean_text
from attnscore.boundary.verdict import Verdict
from attnscore.check.runner import RunnerBase, budget_cut_text, budgeted_limit
from attnscore.maths.display import counted
from attnscore.sandbox import cgroup, gpu, uids
from attnscore.sandbox import clock as own_time
from attnscore.sandbox.clock import OwnTime
from attnscore.sandbox.folder_watch import FolderWatch
from attnscore.sandbox.folders import SHARED_BYTES, lay_out, shared_memory, sweep_dead_runs
from attnscore.sandbox.input_watch import InputWatch, input_bytes
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.outcome import call_outcome, call_timeout_text, load_failure
from attnscore.sandbox.plan import resolve
from attnscore.sandbox.processes import runtime_for, template_for
from attnscore.sandbox.removal import remove_tree, run_prefix, tree_usage
from attnscore.sandbox.runtime import WorkerRuntime
from attnscore.sandbox.template import TemplateError
from attnscore.sandbox.worker_process import ENDED, TIMED_OUT, Heard, WorkerProcess
from attnscore.submission.files import Submission

if TYPE_CHECKING:
    pass
else:
    pass

__all__ = ["SandboxRunner"]

_CGROUP_NUMBERS = itertools.count()
_BOOL, _INT32 = np.dtype(np.bool_), np.dtype(np.int32)


def _asked_gradients(outcome: Outcome, names: list[str], backward: bool) -> Outcome:
    """A backward call's value as the grader believes it: gradients only for the call's float inputs
    ``names``, and for a forward-only call none at all (the worker's word about anything else is not
    taken); a float input the worker sent no gradient for counts as missing."""
    if not isinstance(outcome, WithGradients):
        if backward and isinstance(outcome, Received):  # a value without gradients: none reached any input
            return WithGradients(outcome.kind, outcome.dtype, outcome.device, outcome.array, {}, {}, tuple(names))
        return outcome
    plain = Received(outcome.kind, outcome.dtype, outcome.device, outcome.array)
    if not backward:
        return plain
    grads = {n: g for n, g in outcome.gradients.items() if n in names}
    dtypes = {n: outcome.gradient_dtypes.get(n, outcome.dtype) for n in grads}
    missing = tuple(n for n in names if n not in grads)
    return WithGradients(
        plain.kind,
        plain.dtype,
        plain.device,
        plain.array,
        grads,
        dtypes,
        missing,
        outcome.logsumexp,
        outcome.logsumexp_problem,
    )


class SandboxRunner(RunnerBase):
    """Runs calls of ``function`` from the file ``submission`` in a sandboxed worker.

    Use as a context manager; on exit it kills the worker and anything it started, and removes
    its temporary directories. Its :attr:`plan` (:class:`~attnscore.sandbox.plan.SandboxPlan`) is
    resolved once, here, and :attr:`protections` is its line; both change only when the template
    fails and the runner goes on with fresh interpreters.

    Raises:
        RuntimeError: the limits ask for a layer this machine lacks (:func:`~attnscore.sandbox.plan.resolve`),
            or every worker uid is taken.
        TemplateError: ``Limits(template=True)`` and the template cannot start.
    """

    def __init__(
        self,
        submission: Submission | str | Path,
        function: str,
        limits: Limits | None = None,
        source: bytes | None = None,
        runtime: WorkerRuntime | None = None,
        by_name: tuple[str, ...] = (),
        options: Mapping[str, wire.OptionValue] | None = None,
        logsumexp: tuple[str, int | None] | None = None,
        factory: bool = False,
        traps: tuple[str, ...] = (),
        functions: tuple[str, ...] = (),
        module: ModuleConfig | None = None,
    ) -> None:
        """``submission``: a :class:`Submission` (files already read), or the path of one ``.py``
        file whose bytes are ``source`` (default: read it now). ``runtime``: the interpreter the
        worker runs (default: this one, through a readable mirror when needed). ``by_name`` and
        ``options``: how the worker calls the function, as a spec's contract binds it
        (:meth:`attnscore.maths.contract.Contract.binding`): the last ``len(by_name)`` arguments
        of each call by name under these names (``attn_mask=``), and ``options`` by name too
        (``scale=0.5``): ``f(*positional, **by_name, **options)``. ``logsumexp`` and ``factory``: a
        spec's ``function.logsumexp`` as ``(place, index)`` and ``function.factory``, sent with every
        call (:class:`attnscore.boundary.wire.CallRequest`), and ``module``, a spec's
        ``function.module`` (``function`` names an ``nn.Module`` subclass:
        :mod:`attnscore.boundary.modules`): together, the runner's own :attr:`binding`.

        Several functions in one worker (an assignment's questions, the submission imported once):
        ``function`` ``""`` and ``functions`` their names (the worker's entry file is the one that
        defines the most of them); each call then gives its own ``binding``
        (:class:`attnscore.boundary.wire.Binding`) and may give its own limit and time budget
        (:meth:`call_with`; :class:`attnscore.sandbox.bound_runner.BoundRunner` does)."""
        if not isinstance(submission, Submission):
            submission = Submission.from_file(Path(submission), source)
        self.submission = submission
        self.entry = submission.entry
        self.function = function
        self.functions = tuple(functions)
        self.by_name = tuple(by_name)
        self.options = dict(options or {})
        self.logsumexp, self.factory = logsumexp, factory
        module_json = None if module is None else module.to_json()
        self.binding = wire.Binding("", self.by_name, tuple(self.options.items()), logsumexp, factory, module_json)
        self.last_function = ""  # the function the current call names ("": the one resolved at import)
        self.traps = tuple(traps)  # calls the worker watches for (a spec's rules), by dotted name
        self.limits = limits or Limits()
        self.device = self.limits.device  # the device the calls' inputs are on, for judging
        self._worker_device = gpu.worker_device(self.device)  # the same device as the worker names it
        plan = resolve(self.limits)
        self.bwrap = plan.bwrap
        self.runtime = runtime or runtime_for(plan)
        self.template = template_for(self.runtime, plan.template_required, bwrap=plan.bwrap) if plan.template else None
        # A template that could not start means fresh workers (a fresh bwrap each, with bwrap)
        self.plan = plan.without_template() if plan.template and self.template is None else plan
        self.protections = self.plan.protections
        self.uid, self._uid_lock = self.limits.uid, -1
        # the names linked into the shared folders from now on: where the uid owned nothing there
        # when claimed, what it leaves can only be among them (none: every entry is looked at)
        self.folder_watch: FolderWatch | None = None
        if plan.drops_uid:  # first: nothing to clean up if every uid is taken
            self.uid, self._uid_lock, clean = uids.claim_clean_uid(self.limits)
            if clean:  # before anything runs as the uid
                self.folder_watch = FolderWatch(uids.SHARED_WRITABLE)
        self.cgroup = self._make_cgroup()
        stage = self.template.stage if self.template is not None else None  # inside the template's bwrap
        sweep_dead_runs(self.limits.uid)
        self.workdir = tempfile.mkdtemp(prefix=run_prefix("worker"), dir=stage)
        # The worker reads a private copy of the files: the folder they came from (maybe next to
        # specs or other students' files) stays out of reach for another uid.
        self.private = tempfile.mkdtemp(prefix=run_prefix("submission"), dir=stage)
        self.cleanup_problem: str | None = None  # what close() could not remove: the student's note
        lay_out(self.private, submission.files, self.uid if plan.drops_uid else None)
        # Call inputs live in memory shared with the worker: the grader reads them back after each
        # call, so whether the submission changed them in place is the grader's finding.
        self.shared = shared_memory()
        if plan.drops_uid:
            os.chown(self.workdir, self.uid, self.uid)
            uids.become_subreaper()
        os.chmod(self.workdir, 0o700)
        self.output = bytearray()
        self.output_dropped = 0
        self.worker: WorkerProcess | None = None
        self.load_failure: CallFailure | None = None
        # The last call's inspection: inputs changed in place (read from the shared memory by this
        # process) and inputs the output shares memory with (the worker's own report).
        self.last_inspection: dict[str, list[str]] | None = None
        self.last_names: list[str] = []
        # the ruled calls the worker's traps saw (name@phase), over every call and restart
        self.calls_seen: frozenset[str] | None = frozenset()
        self.started = time.monotonic()
        self.calls = 0
        self.starts = 0
        self.setup_spent = 0.0
        self.spent = 0.0  # the submission's own time in imports and calls (the total limit's clock)
        self.calls_spent = 0.0  # its own time in calls alone (the time budget's clock, limits.time_budget_s)
        self.last_spent = 0.0  # the last call's share of calls_spent (0 when it did not run)
        self.compile_spent = 0.0  # own time in torch.compile's compilations, taken from limits.compile_s
        self.compiling_at_timeout = False  # the last wait timed out during a compilation

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        clean = self._kill_worker()
        if self.shared >= 0:
            os.close(self.shared)
            self.shared = -1
        if self.cgroup is not None:
            cgroup.remove(self.cgroup)
            self.cgroup = None
        problems = [p for p in (remove_tree(self.workdir), remove_tree(self.private)) if p is not None]
        if problems and self.cleanup_problem is None:
            self.cleanup_problem = "; ".join(problems)
        if self._uid_lock >= 0:  # the uid is free for the next worker once nothing of it runs
            if clean and not problems:  # nothing of the uid is left: its next claim need not look
                uids.mark_clean(self._uid_lock)
            os.close(self._uid_lock)
            self._uid_lock = -1
        if self.folder_watch is not None:
            self.folder_watch.close()
            self.folder_watch = None

    def keep_output(self, chunk: bytes) -> None:
        room = self.limits.output_chars * 4 - len(self.output)
        if room > 0:
            self.output += chunk[:room]
        self.output_dropped += max(0, len(chunk) - max(room, 0))

    def captured_output(self) -> bytes:
        """The submission's own stdout/stderr (raw bytes, capped, with a note if some was dropped)."""
        data = bytes(self.output)
        if self.output_dropped:
            data += f"\n[... {counted(self.output_dropped, 'more byte')} of output not kept]".encode()
        return data

    def output_text(self) -> str:
        """:meth:`captured_output` as a report shows it: cleaned, at most ``limits.output_chars``
        characters (:func:`attnscore.boundary.untrusted.clean_text`)."""
        return clean_text(self.captured_output(), self.limits.output_chars)

    @property
    def keywords(self) -> Mapping[str, object]:
        """Keyword arguments fixed on the submission's function: the ``options`` every call passes by name."""
        return dict(self.options)

    def _make_cgroup(self) -> str | None:
        """This submission's cgroup v2 group (one CPU, memory, processes), or None where there is
        none to be had (:attr:`SandboxPlan.cgroups`)."""
        base = self.plan.cgroups
        if not isinstance(base, cgroup.Base):
            return None
        memory = self.limits.memory_bytes if self.plan.address_limit else None
        name = f"{run_prefix('cgroup')}{next(_CGROUP_NUMBERS)}"
        return cgroup.make(base, name, memory, self.limits.processes)

    def _own_uid(self) -> int | None:
        """The uid only this runner's worker uses (the grader is root), else None."""
        return self.uid if self.plan.drops_uid else None

    def _kill_worker(self) -> bool:
        """Kill the worker and everything of its uid; remove its uid's kernel objects and files
        (all but its working folder). Whether nothing of the uid is left (no process runs as it,
        every file of it in the shared folders went); with no uid of its own, False."""
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        if not self.plan.drops_uid:
            return False
        gone = uids.kill_uid(self.uid)
        kernel_objects.remove_objects_of(self.uid)  # SysV IPC, POSIX queues, keyrings: they outlive processes
        if self.template is None:  # a template's workers' orphans go to the template, which reaps them
            uids.sweep_orphans(self.uid)
        return uids.files_removal(self.uid, keep=self.workdir, watch=self.folder_watch)[1] == 0 and gone

    def _start(self) -> CallFailure | None:
        """Start a worker and import the submission, within what is left of the setup budget.

        Every start of the submission's worker (the first, and each restart after a call that
        timed out or crashed) spends one budget of ``load_timeout_s``: a slow import followed by
        hanging calls cannot cost the grader a full import per case.
        """
        budget = self.limits.load_timeout_s - self.setup_spent
        if budget <= 0:
            return CallFailure(
                Verdict.TIMEOUT,
                f"not run: starting your code again would exceed its setup time of {self.limits.load_timeout_s:g} s "
                f"(importing it {self.starts} times took {self.setup_spent:.1f} s)",
            )
        if self.template is not None:  # the template's own start (loading torch) is not the submission's time
            try:
                self.template.wait_ready()
            except TemplateError:
                pass  # the fork below finds out again (and falls back to fresh interpreters unless required)
        began = time.monotonic()
        try:
            worker = WorkerProcess(self)
        except TemplateError as exc:  # only with Limits(template=True): no fallback wanted
            self.load_failure = CallFailure(Verdict.GRADER_ERROR, f"the worker could not be started: {exc}")
            return self.load_failure
        self.worker = worker
        self.starts += 1
        clock = OwnTime(worker.proc.pid, budget, self._own_uid(), fresh=True, began=began, readings=worker.readings)
        hello = worker.receive(clock)
        # Before "importing" only the worker has run: it alone may report the machine's faults.
        # From "importing" on the submission runs in the worker and may write replies itself.
        importing = isinstance(hello, wire.Importing)
        if importing:
            hello = self._receive(worker, clock, None)
        self.setup_spent += clock.spent()
        self.spent += clock.spent()
        if importing and isinstance(hello, wire.Ready):
            return self._disk_failure()
        failure = load_failure(hello, importing, self, worker)
        self._kill_worker()
        self.load_failure = failure
        return failure

    def _receive(self, worker: WorkerProcess, clock: OwnTime, call_id: int | None) -> Heard:
        """The worker's next reply for call ``call_id`` (None: the import) other than a
        :class:`~attnscore.boundary.wire.Compiling` notice: while the worker says it compiles (with
        ``torch.compile``), ``clock`` runs on the compile allowance left (``limits.compile_s``
        less :attr:`compile_spent`), and the own time each compilation took is added to the
        call's limit and taken from the allowance. A notice for another call is ignored."""
        began: float | None = None  # own time into this wait when the compilation under way began
        granted = 0.0  # compile time of this wait's finished compilations
        self.compiling_at_timeout = False
        while True:
            reply = worker.receive(clock)
            if not isinstance(reply, wire.Compiling):
                break
            if reply.id != call_id:
                continue
            if reply.started and began is None:
                began = clock.spent()
                clock.allow(granted + self._compile_left())
            elif not reply.started and began is not None:
                used = min(clock.spent() - began, self._compile_left())
                self.compile_spent += used
                granted += used
                began = None
                clock.allow(granted)
        if began is not None:  # still compiling when the reply (or the timeout) came
            self.compile_spent += min(clock.spent() - began, self._compile_left())
            self.compiling_at_timeout = reply is TIMED_OUT
        return reply

    def _compile_left(self) -> float:
        """Own seconds left of the submission's compile allowance (``limits.compile_s``)."""
        return max(0.0, self.limits.compile_s - self.compile_spent)

    def _disk_failure(self) -> CallFailure | None:
        """The working folder holds more than ``disk_bytes``: the worker is killed, its files removed,
        and this and every later call fail with a memory-limit verdict that says so; else None.
        Measured only where no tmpfs bounds the folder (the plan's ``disk`` is ``"checked"``: there
        the worker writes the grader's own disk); a tmpfs's size is the kernel's to hold."""
        limit = self.limits.disk_bytes
        if self.plan.disk == "tmpfs":  # the kernel bounds the folder: nothing of it reaches this disk
            return None
        if tree_usage(self.workdir, stop_above=limit) <= limit:
            return None
        self._kill_worker()
        try:
            for entry in os.listdir(self.workdir):
                remove_tree(os.path.join(self.workdir, entry))
        except OSError:
            pass
        self.load_failure = CallFailure(
            Verdict.MEMORY_LIMIT,
            f"your code wrote more than {limit / 1024**2:g} MiB into its working folder (the limit for all its "
            "files together), so it was stopped",
            "submission",
        )
        return self.load_failure

    def _share_inputs(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str]
    ) -> tuple[list[dict[str, Any]], list[bytes], bytearray] | None:
        """Write each input's exact bytes (in the tested dtype) into the shared memory; the layout
        (each item as the request names it), the bytes written for each item and the whole span
        written (from offset 0: what :class:`~attnscore.sandbox.input_watch.InputWatch` expects back).

        An input with a memory layout is written as its view's storage, with the strides and
        storage offset the worker rebuilds the view with (``as_strided``). Written in one system
        call: the items back to back, each at a 64-byte boundary, the gaps between them zero."""
        layout: list[dict[str, Any]] = []
        raws: list[bytes] = []
        offset, span = 0, bytearray()
        for name, array in args.items():
            held = array.dtype  # a float input is sent in the tested dtype (its kind "f": no dtype compared)
            kind = dtype if held.kind == "f" else "bool" if held == _BOOL else "int32" if held == _INT32 else dtype
            item: dict[str, Any] = {"name": name, "dtype": kind, "shape": list(array.shape)}
            if name in layouts:
                form = strided_form(array, layouts[name])
                raw = input_bytes(form.storage, kind)
                item.update(strides=list(form.strides), storage_offset=form.offset, count=int(form.storage.size))
            else:
                raw = input_bytes(array, kind)
            offset = -(-offset // 64) * 64
            if offset + len(raw) > SHARED_BYTES:
                return None
            if offset > len(span):
                span += bytes(offset - len(span))
            span += raw
            item["offset"] = offset
            layout.append(item)
            raws.append(raw)
            offset += len(raw)
        if span:
            os.pwrite(self.shared, span, 0)
        return layout, raws, span

    def _outcome(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        return self.call_with(args, dtype, layouts, upstream)

    def call_with(
        self,
        args: Mapping[str, np.ndarray],
        dtype: str,
        layouts: Mapping[str, str],
        upstream: np.ndarray | None,
        binding: wire.Binding | None = None,
        call_timeout_s: float | None = None,
        budget: tuple[float | None, float] | None = None,
    ) -> Outcome:
        """Make one call (:meth:`call` comes here; inputs in ``layouts``, see
        :mod:`attnscore.boundary.layouts`; with ``upstream`` also its backward pass,
        :mod:`attnscore.boundary.gradients`); never raises for anything the submission does. An
        optional mask handed over as ``"omitted"`` is not sent at all (the function's default
        applies); as ``"none"``, the worker passes None in its place (after the positional inputs,
        or by name).

        What the call did to its inputs is this runner's own finding (:attr:`last_inspection`),
        read from the shared memory (:meth:`_settle`): an input (or ``dO``) whose bytes changed
        during the forward, the backward or after the call returned is ``mutated``; an input whose
        canaries, written into its memory once the call returned, show in the output's bytes is
        ``aliased``. The worker's word adds only what it alone can see (an input whose shape,
        strides, storage or class the call changed in place), and only against the submission.

        ``binding``: the function this call names and how it is called (default: :attr:`binding`);
        ``call_timeout_s``: its own time limit (default: the limits'); ``budget``: the time budget
        it draws on as ``(time_budget_s, own seconds spent of it)`` (default: the limits' budget
        and :attr:`calls_spent`). :attr:`last_spent` is then its share of the budget's clock."""
        self.calls += 1
        self.last_spent = 0.0
        binding = binding or self.binding
        self.last_function = binding.function
        call_limit = self.limits.call_timeout_s if call_timeout_s is None else call_timeout_s
        if self.load_failure is not None:
            return self.load_failure
        if self.spent > self.limits.total_timeout_s:
            return CallFailure(
                Verdict.TIMEOUT,
                f"not run: the submission used up its total time limit of {self.limits.total_timeout_s:g} s",
            )
        # the call may take what is left of its budget, at most its own limit
        budget_s, spent_s = (self.limits.time_budget_s, self.calls_spent) if budget is None else budget
        limit = budgeted_limit(call_limit, budget_s, spent_s)
        if isinstance(limit, CallFailure):
            return limit
        if self.worker is None:
            failure = self._start()
            if failure is not None:
                return failure
        worker = self.worker
        if worker is None:  # pragma: no cover - _start set it
            return CallFailure(Verdict.GRADER_ERROR, "the worker could not be started")
        self.last_inspection = None
        # optional masks handed over without a tensor (no layouts, the usual call: none)
        absent = {n: layouts[n] for n in args if layouts.get(n) in HANDOVERS} if layouts else {}
        if absent:
            args = {n: a for n, a in args.items() if n not in absent}
        self.last_names = list(args)
        shared_args = args
        if upstream is not None:  # dO in the shared memory too: the grader sees a backward change it
            shared_args = {**args, wire.UPSTREAM: np.asarray(upstream)}
        shared = self._share_inputs(shared_args, dtype, layouts)
        if shared is None:
            return CallFailure(Verdict.GRADER_ERROR, f"the inputs exceed the sandbox's {SHARED_BYTES} bytes")
        layout, raws, span = shared
        by_name = tuple(n for n in binding.by_name if n in args) if binding.by_name else ()
        options = binding.options
        if absent:
            none_by_name = {n: None for n, how in absent.items() if how == PASS_NONE and n in binding.by_name}
            options = tuple({**dict(options), **none_by_name}.items())
        inputs, dO = (layout[:-1], layout[-1]) if upstream is not None else (layout, None)
        request = wire.CallRequest(
            self.calls,
            dtype,
            self._worker_device,
            tuple(args),
            tuple(inputs),
            by_name,
            options,
            None if dO is None else {k: v for k, v in dO.items() if k != "name"},
            binding.logsumexp,
            binding.factory,
            sum(1 for n, how in absent.items() if how == PASS_NONE and n not in binding.by_name),
            binding.module,
            binding.function,
        )
        reply: Heard = ENDED
        watch = InputWatch(layout, raws, span)
        if worker.send(wire.encode_message(request)):
            # the wall-time bound stays 4 call limits even when the budget left is shorter
            stretch = None if limit >= call_limit else own_time.STRETCH * call_limit / limit
            clock = OwnTime(worker.proc.pid, limit, self._own_uid(), readings=worker.readings, stretch=stretch)
            compiled = self.compile_spent
            reply = self._receive(worker, clock, self.calls)
            while isinstance(reply, wire.Returned) and reply.id == self.calls and watch.settle(self.shared, reply):
                if not worker.send(wire.encode_message(wire.Proceed(self.calls, str(reply.stage)))):
                    reply = ENDED
                    break
                reply = self._receive(worker, clock, self.calls)
            own = clock.spent() if reply is TIMED_OUT else clock.settled()
            self.spent += own
            # torch.compile's compilations come out of their own allowance (limits.compile_s), not the budget
            self.last_spent = max(0.0, own - (self.compile_spent - compiled))
            self.calls_spent += self.last_spent
        outcome, reported = call_outcome(reply, self, worker)
        if reply is TIMED_OUT and limit < call_limit and not self.compiling_at_timeout:
            outcome = CallFailure(Verdict.TIMEOUT, budget_cut_text(budget_s or limit, call_limit))
        elif reply is TIMED_OUT and call_limit != self.limits.call_timeout_s and not self.compiling_at_timeout:
            outcome = CallFailure(Verdict.TIMEOUT, call_timeout_text(call_limit))
        answered = isinstance(reply, wire.CallResult) and reply.id == self.calls
        if answered and not watch.canaried:
            # a result the worker's own code never sends before the grader has read the inputs and
            # written its canaries: the submission wrote it (what it says of its output is not read)
            outcome, reported = CallFailure(Verdict.CRASHED, EARLY_RESULT), None
        if upstream is not None or isinstance(outcome, WithGradients):  # else nothing to take or leave
            floats = [item["name"] for item in inputs if item["dtype"] not in ("bool", "int32")]
            outcome = _asked_gradients(outcome, floats, upstream is not None)
        if answered:
            self.last_inspection = reported
        disk = None if self.plan.disk == "tmpfs" else self._disk_failure()  # a tmpfs: the kernel's to bound
        if disk is not None:
            return disk
        if not isinstance(outcome, CallFailure):
            # mutation and aliasing: the grader's own readings of the shared memory and of the
            # returned bytes; the worker's report adds only metadata changes (a claim of mutation only
            # costs the submission itself, a claim of none is never taken on the worker's word)
            claimed = self.last_inspection or {"mutated": [], "aliased": [], "calls": []}
            watch.finish(self.shared, reply.probe if isinstance(reply, wire.CallResult) else None)
            changed: list[str] = []
            stages = watch.stages
            if claimed["mutated"] or stages:  # else nothing changed (the usual call)
                known = [*self.last_names, *([wire.UPSTREAM] if upstream is not None else [])]
                stages = {n: "" for n in claimed["mutated"]} | stages  # "": seen by the worker alone
                changed = [n for n in known if n in stages]
            self.last_inspection = {
                "mutated": changed,
                "mutated_when": [stages[n] for n in changed],
                "aliased": [n for n in self.last_names if n in watch.aliased] if watch.aliased else [],
                "calls": list(claimed.get("calls", [])),
            }
            seen_now = claimed.get("calls")
            if seen_now or self.calls_seen is None:
                self.calls_seen = (self.calls_seen or frozenset()) | frozenset(seen_now or [])
        if (
            isinstance(outcome, CallFailure)
            and outcome.verdict in (Verdict.TIMEOUT, Verdict.CRASHED, Verdict.MEMORY_LIMIT, Verdict.GRADER_ERROR)
            or (isinstance(outcome, CallFailure) and gpu.restart_after(self.device, outcome.verdict, outcome.message))
        ):
            self._kill_worker()  # the next call starts a fresh worker (and a clean CUDA context)
        return outcome


EARLY_RESULT = (
    "the process running your code sent a result before the grader had read the call's inputs (a reply "
    "the worker itself never sends at that point: written by your code)"
)
"""A call's outcome when its result came before the grader's reading of the inputs and canaries."""
