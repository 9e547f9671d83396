"""Runners: how a case's calls reach an implementation.

A runner takes the arguments of one call (plain numpy arrays already cast to the tested dtype,
and optionally the memory layout to hand each one over in, see :mod:`attnscore.boundary.layouts`) and
returns an :data:`attnscore.boundary.outputs.Outcome`: the result as plain data, or a failure with its
verdict. :class:`Runner` declares everything a session (:mod:`attnscore.check.session`), judging,
diagnosis and shrinking read of a runner; nothing else is read, and nothing is set on a runner
from outside. :class:`InProcessRunner` calls trusted code (the reference, an engineer's function)
directly; :class:`RefusedRunner` stands for an implementation that could not be taken in; the
sandboxed runner for untrusted submissions is :class:`attnscore.sandbox.launch.SandboxRunner`.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from attnscore.boundary.calls import (
    OMITTED,
    argument_value,
    describe_exception,
    inspect_call,
    tensor_layout,
    to_torch,
    type_name,
)
from attnscore.boundary.gradients import NoBackward, as_callable, backward_call, first_output, resolve_factory
from attnscore.boundary.layouts import HANDOVERS, OMIT
from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.modules import ModuleConfig, ModuleFailure, module_call
from attnscore.boundary.outputs import BadReturn, CallFailure, Outcome, to_received
from attnscore.boundary.wire import UPSTREAM
from attnscore.report.results import Verdict

__all__ = [
    "Inspection",
    "Runner",
    "InProcessRunner",
    "RefusedRunner",
    "budget_cut_text",
    "budget_spent_failure",
    "budget_spent_text",
    "budgeted_limit",
]

Inspection = dict[str, list[str]]
"""What a runner saw of one call: ``{"mutated": [input names], "aliased": [input names]}``, the
inputs the implementation changed in place and the ones its output shares memory with."""


@runtime_checkable
class Runner(Protocol):
    """Anything that can make the calls of a run: the whole protocol a session relies on.

    Attributes (read-only for everyone but the runner itself):
        device: the device the calls' inputs are on (``"cpu"``, ``"cuda:0"``), for judging.
        keywords: keyword arguments fixed on the implementation (``attnscore test --keyword``),
            shown in feedback's reproduction line; empty when none.
        last_inspection: the last call's :data:`Inspection`, or None when the last call failed or
            the runner cannot inspect calls (the properties ``inputs_not_mutated`` and
            ``output_not_aliased`` read it).
        load_failure: the failure every call gets because the implementation could not be
            loaded (an import error, a missing function), or None; a session reports its message
            as the run's ``error`` and shrinks nothing while it is set.
        spent: seconds of the implementation's own time outside this thread (a sandboxed
            worker's), 0.0 in process; the shrinking budget's clock adds it.
        cleanup_problem: after :meth:`close`, what could not be removed (the student's note), or None.
        calls_seen: the calls a spec's rules name that the implementation was seen making, as
            ``name@phase`` words (:mod:`attnscore.boundary.traps`), over every call so far; None when
            the runner does not watch for them (in process).
    """

    @property
    def device(self) -> str: ...

    @property
    def keywords(self) -> Mapping[str, object]: ...

    @property
    def last_inspection(self) -> Inspection | None: ...

    @property
    def load_failure(self) -> CallFailure | None: ...

    @property
    def spent(self) -> float: ...

    @property
    def cleanup_problem(self) -> str | None: ...

    @property
    def calls_seen(self) -> frozenset[str] | None: ...

    def call(
        self,
        args: Mapping[str, np.ndarray],
        dtype: str,
        layouts: Mapping[str, str] | None = None,
        upstream: np.ndarray | None = None,
    ) -> Outcome:
        """One call with ``args`` (name -> array, in the parameters' order) cast to ``dtype``.

        ``layouts`` says how an argument is handed over (:mod:`attnscore.boundary.layouts`): as a
        view, or for an optional mask not as a tensor at all (``"omitted"``: left out of the call,
        ``"none"``: passed as None; its array then only says what that means).

        With ``upstream`` (``dO``, the output's shape) the call also runs the backward pass
        (:func:`attnscore.boundary.gradients.backward_call`) and a value comes back as
        :class:`attnscore.boundary.gradients.WithGradients`; callers pass it only when set, and a
        runner that cannot run backward passes answers with a failure that says so.
        """
        ...

    def output_text(self) -> str:
        """The implementation's own stdout/stderr as a report may show it (cleaned, truncated), or ""."""
        ...

    def close(self) -> None:
        """Release what the runner holds (a worker, its folders); the session calls it once, at the end."""
        ...


class RunnerBase(abc.ABC):
    """:meth:`Runner.call` for the package's runners (in process, refused, sandboxed, bound to one
    question): the optional ``layouts`` defaulted to none, the call itself :meth:`_outcome`."""

    def call(
        self,
        args: Mapping[str, np.ndarray],
        dtype: str,
        layouts: Mapping[str, str] | None = None,
        upstream: np.ndarray | None = None,
    ) -> Outcome:
        """One call (:meth:`Runner.call`)."""
        return self._outcome(args, dtype, layouts or {}, upstream)

    @abc.abstractmethod
    def _outcome(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        """The runner's own call (:meth:`Runner.call`, ``layouts`` given)."""


def budget_spent_text(budget_s: float) -> str:
    """The sentence of a case not run because its submission's time budget was spent.

    >>> budget_spent_text(3.0)
    'not run: this submission used its whole time budget of 3 s on earlier cases'
    """
    return f"not run: this submission used its whole time budget of {budget_s:g} s on earlier cases"


def budget_spent_failure(budget_s: float) -> CallFailure:
    """What a runner answers, without running anything, to every call once its submission has used
    its whole time budget of ``budget_s`` seconds (:attr:`attnscore.sandbox.limits.Limits.time_budget_s`):
    the verdict :attr:`Verdict.BUDGET_SPENT` and :func:`budget_spent_text` (judging adds no
    reproduction: nothing was called)."""
    return CallFailure(Verdict.BUDGET_SPENT, budget_spent_text(budget_s))


def budgeted_limit(limit_s: float, budget_s: float | None, spent_s: float) -> float | CallFailure:
    """How long the next call may take: its own limit ``limit_s``, at most what is left of the
    submission's time budget ``budget_s`` after the ``spent_s`` seconds its calls took so far
    (no budget: ``limit_s``); once nothing is left, :func:`budget_spent_failure` instead.

    >>> budgeted_limit(3.0, 10.0, 8.5)
    1.5
    >>> budgeted_limit(3.0, None, 8.5)
    3.0
    """
    if budget_s is None:
        return limit_s
    if spent_s >= budget_s:
        return budget_spent_failure(budget_s)
    return min(limit_s, budget_s - spent_s)


def budget_cut_text(budget_s: float, call_limit_s: float) -> str:
    """Why a call timed out before its own limit of ``call_limit_s`` seconds: the submission's time
    budget of ``budget_s`` seconds ran out during it (the call's verdict stays a timeout).

    >>> budget_cut_text(10.0, 3.0)
    "the call was stopped when this submission's time budget of 10 s ran out (its time limit per call is 3 s)"
    """
    return (
        f"the call was stopped when this submission's time budget of {budget_s:g} s ran out "
        f"(its time limit per call is {call_limit_s:g} s)"
    )


class InProcessRunner(RunnerBase):
    """Calls a trusted function in this process, with torch tensors on ``device`` (a
    ``torch.autograd.Function`` subclass is called through its ``.apply``).

    After each call ``last_inspection`` says which inputs the function changed in place
    (``"mutated"``) and which ones the output shares memory with (``"aliased"``); the properties
    ``inputs_not_mutated`` and ``output_not_aliased`` read it. Its output is not captured (it goes
    where this process's goes), it has nothing to load and nothing to close.

    ``logsumexp`` (a spec's ``function.logsumexp``, as ``(place, index)``): a backward call also
    reads the logsumexp ``L`` the forward kept (:func:`attnscore.boundary.gradients.find_logsumexp`),
    and with ``place == "returned"`` every call's ``(O, L)`` tuple is taken as ``O``. ``factory``:
    ``function`` returns the ``torch.autograd.Function`` subclass to grade when called with no
    arguments (:func:`attnscore.boundary.gradients.resolve_factory`); when it cannot, every call
    fails with that reason (:attr:`load_failure`). ``bind`` (a contract's
    :meth:`~attnscore.maths.contract.Contract.binding`) wraps the function once it is resolved.
    ``module`` (a spec's ``function.module``): ``function`` is an ``nn.Module`` subclass, built and
    called per call (:func:`attnscore.boundary.modules.module_call`); what it does wrong before its
    ``forward`` runs is that call's verdict (:class:`attnscore.boundary.modules.ModuleFailure`).

    >>> import numpy as np
    >>> runner = InProcessRunner(lambda q, k: k @ q)
    >>> runner.call({"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.7, 0.7]])}, "float64").array
    array([1. , 0.7])
    >>> runner.last_inspection
    {'mutated': [], 'aliased': []}
    """

    load_failure: CallFailure | None = None
    spent: float = 0.0  # the function's time is this thread's own
    cleanup_problem: str | None = None
    calls_seen: frozenset[str] | None = None  # trusted code in process: no traps

    def __init__(
        self,
        function: Callable[..., object],
        device: str = "cpu",
        *,
        logsumexp: tuple[str, int | None] | None = None,
        factory: bool = False,
        bind: Callable[[Callable[..., object]], Callable[..., object]] | None = None,
        module: ModuleConfig | None = None,
    ) -> None:
        self.logsumexp = logsumexp
        self.module, self._module_class, self._bind = module, function, bind
        if factory:
            try:
                function = resolve_factory(function)
            except Exception as exc:  # the factory's own failure is the run's verdict
                verdict = Verdict.BAD_RETURN_TYPE if isinstance(exc, TypeError) else Verdict.EXCEPTION
                self.load_failure = CallFailure(
                    verdict, f"the factory {getattr(function, '__name__', 'function')}(): {describe_exception(exc)}"
                )
        self.function: Callable[..., object] = as_callable(function)
        if bind is not None:  # the spec's binding (keywords by name) around the class's .apply
            self.function = bind(self.function)
        self.device = device
        self.last_inspection: Inspection | None = None

    @property
    def keywords(self) -> Mapping[str, object]:
        """The keywords of a :func:`functools.partial` (``attnscore test --keyword``), else empty."""
        return dict(self.function.keywords) if isinstance(self.function, functools.partial) else {}

    def _outcome(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        return self._limited(lambda: self._call(args, dtype, layouts, upstream))

    def _limited(self, call: Callable[[], Outcome]) -> Outcome:
        """Make one whole call (``call``); a runner that limits its calls (a time limit, a time
        budget: the self-check's runner, :mod:`attnscore.selfcheck`) wraps it here."""
        return call()

    def _call(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        names = [n for n in args if layouts.get(n) not in HANDOVERS]  # the inputs handed over as tensors
        tensors = [to_torch(args[n], dtype, self.device, layouts.get(n)) for n in names]
        copies = [t.clone() for t in tensors]
        before = [tensor_layout(t) for t in tensors]  # shape and strides: metadata changes are mutation too
        self.last_inspection = None
        if self.load_failure is not None:
            return self.load_failure
        function = _handing_over(self._callee(names), list(args), layouts)
        if upstream is not None:
            return self._backward(function, names, tensors, copies, before, to_torch(upstream, dtype, self.device))
        try:
            value = function(*[argument_value(t) for t in tensors])  # a 0-d int32 input as an int
        except Exception as exc:  # the implementation's own error is a verdict, not a crash
            return _raised(exc)
        value, _ = first_output(value, self.logsumexp[0] if self.logsumexp else None)
        self.last_inspection = inspect_call(names, tensors, copies, value, before)
        received = to_received(value)
        if isinstance(received, BadReturn):
            return CallFailure(Verdict.BAD_RETURN_TYPE, received.message)
        return received

    def _backward(
        self,
        function: Callable[..., object],
        names: list[str],
        tensors: list[torch.Tensor],
        copies: list[torch.Tensor],
        before: list[tuple[object, ...]],
        upstream: torch.Tensor,
    ) -> Outcome:
        """The call of ``function`` (what :func:`_handing_over` made of :attr:`function`) with its
        backward pass (:func:`attnscore.boundary.gradients.backward_call`), inspected as a forward
        call is, after the forward and again after the backward (``dO`` too): :attr:`last_inspection`
        names when each input was first seen changed."""
        watched, kept = [*names, UPSTREAM], [*copies, upstream.clone()]
        laid = [*before, tensor_layout(upstream)]
        stages: dict[str, str] = {}
        returned: list[object] = []

        def look(stage: str) -> None:
            seen = inspect_call(watched, [*tensors, upstream], kept, None, laid)["mutated"]
            stages.update({n: stage for n in seen if n not in stages})

        def call(f: Callable[..., object], a: list[object]) -> object:
            returned.append(f(*a))
            return returned[-1]

        try:
            _, got = backward_call(
                function,
                names,
                list(tensors),
                upstream,
                call,
                logsumexp=self.logsumexp,
                forward_done=lambda: look("forward"),
                settled=lambda: look("backward"),
            )
        except Exception as exc:  # the implementation's own error is a verdict, not a crash
            return _raised(exc)
        if isinstance(got, BadReturn):
            return CallFailure(Verdict.BAD_RETURN_TYPE, got.message)
        if isinstance(got, NoBackward):
            verdict = Verdict.EXCEPTION if got.exception else Verdict.BAD_RETURN_TYPE
            return CallFailure(verdict, got.message, exception=got.exception)
        value, _ = first_output(returned[0], self.logsumexp[0] if self.logsumexp else None)
        changed = [n for n in watched if n in stages]
        self.last_inspection = {
            "mutated": changed,
            "mutated_when": [stages[n] for n in changed],
            "aliased": inspect_call(names, tensors, copies, value)["aliased"],
        }
        return got

    def _callee(self, names: list[str]) -> Callable[..., object]:
        """What a call with the inputs ``names`` calls: :attr:`function`, or for a module handed in
        the class made a function for this call (then bound as the spec binds it)."""
        if self.module is None:
            return self.function
        name = str(getattr(self._module_class, "__name__", "module"))
        made = module_call(self._module_class, self.module, names, name)
        return self._bind(made) if self._bind is not None else made

    def output_text(self) -> str:
        return ""

    def close(self) -> None:
        return None


def _raised(exc: Exception) -> CallFailure:
    """The failure of a call that raised ``exc``: an exception verdict, or a module's own failure's
    verdict and message (:class:`attnscore.boundary.modules.ModuleFailure`)."""
    if isinstance(exc, ModuleFailure):
        return CallFailure(exc.verdict, exc.message, exception=exc.exception)
    return CallFailure(Verdict.EXCEPTION, describe_exception(exc), exception=type_name(exc))


def _handing_over(
    function: Callable[..., object], names: list[str], layouts: Mapping[str, str]
) -> Callable[..., object]:
    """``function`` called with the tensors of the arguments handed over as tensors, and in place of
    each optional one handed over without a value (``layouts``: ``"omitted"`` or ``"none"``)
    :data:`attnscore.boundary.calls.OMITTED` (the contract's binding leaves it out: a runner for a
    spec with optional parameters takes ``bind=spec.contract.binding``) or None;
    ``function`` itself when every argument is a tensor."""
    absent = {n: layouts[n] for n in names if layouts.get(n) in HANDOVERS}
    if not absent:
        return function

    def call(*tensors: object) -> object:
        given = iter(tensors)
        values = [(OMITTED if absent[n] == OMIT else None) if n in absent else next(given) for n in names]
        return function(*values)

    return call


class RefusedRunner(RunnerBase):
    """A runner for an implementation that could not be taken in (a submission without its file,
    an import error found before the run, a task the cluster lost): every call fails with
    ``failure``, which is also its :attr:`load_failure`, so a session reports it as the run's
    error and shrinks nothing.

    >>> refused = RefusedRunner(CallFailure("function_missing", "no file named 'solution.py'", "submission"))
    >>> refused.call({}, "float32").message
    "no file named 'solution.py'"
    """

    last_inspection: Inspection | None = None
    spent: float = 0.0
    cleanup_problem: str | None = None
    calls_seen: frozenset[str] | None = frozenset()  # nothing ran

    def __init__(self, failure: CallFailure, device: str = "cpu") -> None:
        self.failure = failure
        self.device = device

    @property
    def keywords(self) -> Mapping[str, object]:
        return {}

    @property
    def load_failure(self) -> CallFailure:
        return self.failure

    def _outcome(
        self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str], upstream: np.ndarray | None
    ) -> Outcome:
        return self.failure

    def output_text(self) -> str:
        return ""

    def close(self) -> None:
        return None
