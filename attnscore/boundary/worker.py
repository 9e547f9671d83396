"""The worker: runs inside the sandboxed child process and calls the submission.

Started by :mod:`attnscore.sandbox.worker_process` as
``python -I -c <bootstrap> LIB REQ_FD RESP_FD UID CONFIG`` (or forked from the worker template);
the first line on its request pipe is its setup (:func:`read_setup`: the submission's ``FOLDER``,
``ENTRY`` and ``FUNCTION``, never on a command line another process could read). ``CONFIG`` is
JSON: ``mirrors`` (``[original, readable copy]`` pairs, see :mod:`attnscore.sandbox.runtime`), ``deny``
(folders never granted, such as the grader's project) and ``landlock`` (confine itself). It first
searches for modules through the mirrors, confines itself with Landlock where the kernel has it
(:mod:`attnscore.boundary.landlock`: read only its module folders, the system's libraries and the
submission, write only its working folder, no TCP, no signals out), imports torch and numpy,
drops to user ``UID`` (when not -1: the grader is root), checks that it can still read every
folder it searches for modules (else the grading machine is at fault: a grader error), puts the
submission's ``FOLDER`` first on ``sys.path`` so its helper modules import, says ``importing``
(after this message the submission's code runs here, so the grader takes no grader-side verdict
from this process), imports the entry file (``ENTRY``, or when empty the one top-level ``.py``
file that defines ``FUNCTION``) as module ``submission``, says whether the function was found,
and then answers call requests one at a time: view the inputs as tensors backed by the grader's
shared memory, call the function, inspect every argument the moment it returns (values, shape,
strides, class: :func:`attnscore.boundary.call_steps.bound_inspector`), turn whatever came back into plain data
(:func:`attnscore.boundary.outputs.to_received`) and send it back with the inputs it saw changed and
the inputs the output aliases (the grader also reads the shared memory itself after the reply).
It never receives expected values.

The submission's own stdin is /dev/null and its stdout/stderr go to a pipe the grader drains and
caps; the request and response pipes live on private descriptors.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from attnscore.boundary.call_steps import (
    bound_backward,
    bound_compile_watch,
    bound_inspector,
    bound_settle,
    keyword_call,
)
from attnscore.boundary.confinement import confine as _confine
from attnscore.boundary.confinement import forget_project as _forget_project
from attnscore.boundary.confinement import header_folders, keep_header_folders
from attnscore.boundary.confinement import use_mirrors as _use_mirrors
from attnscore.boundary.device_inputs import (
    bound_copy_back,
    bound_copy_in,
    bound_inputs_on_device,
    cuda_problem,
    map_inputs,
    python_int_inputs,
)
from attnscore.boundary.device_inputs import input_span as _span
from attnscore.boundary.device_inputs import same_bytes as _same_bytes
from attnscore.boundary.entry_file import choose_entry, is_notebook
from attnscore.boundary.failure_texts import describe_failure as _describe_failure
from attnscore.boundary.failure_texts import (
    describe_import_error,
    failure_verdict,
    gpu_out_of_memory,
    missing_entry_text,
    missing_function_text,
    raised_name,
    verdict_of_backward,
)
from attnscore.boundary.failure_texts import environment_clues as _environment_clues
from attnscore.boundary.sender import bound_sender
from attnscore.boundary.verdict import Verdict

if TYPE_CHECKING:
    from attnscore.boundary.wire import Message

__all__ = [
    "bound_compile_watch",
    "bound_copy_back",
    "bound_inspector",
    "bound_sender",
    "choose_entry",
    "confine_self",
    "cuda_problem",
    "describe_import_error",
    "failure_verdict",
    "gpu_out_of_memory",
    "header_folders",
    "is_notebook",
    "load_runtime",
    "main",
    "map_inputs",
    "missing_entry_text",
    "missing_function_text",
    "prepare",
    "read_setup",
    "serve",
]

# Loaded before the privilege drop only to save each submission the time; correctness does not
# depend on this list (everything else imports through the readable mirror after the drop).
_PRELOAD = ("numpy", "torch.nn.functional")
_WARM_RUNS = 16
"""How often :func:`_first_use` runs in the template: Python 3.11 quickens a function's bytecode
after 8 runs and specializes it as it goes, writing into the code object; done before the fork,
those writes are not each worker's own copy of the pages (its copy-on-write faults)."""


def _send(fd: int, message: Message) -> None:
    from attnscore.boundary import wire

    data = wire.dumps(wire.encode_message(message))
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def prepare(config: dict[str, Any]) -> None:
    """Before torch is imported: search for modules through the readable mirrors and forget the
    project's editable-install hooks (both paths: a fresh worker and the worker template)."""
    _use_mirrors(config.get("mirrors", []))
    _forget_project()


def load_runtime() -> None:
    """Import torch, numpy and every worker module the calls need; one torch thread."""
    import _json  # noqa: F401 - the worker's own sender (bound_sender)
    import ast  # noqa: F401 - used after the privilege drop by choose_entry
    import importlib.util  # noqa: F401
    import math  # noqa: F401
    import mmap  # noqa: F401
    import sysconfig

    import torch

    from attnscore.boundary import calls, landlock, lazy_torch, outputs, seccomp, standins, traps, untrusted, wire  # noqa: F401

    lazy_torch.bind()  # the modules' torch is this one, whatever a submission later puts in sys.modules
    # `from attnscore.selfcheck import check`, as the docs tell students: a stand-in that runs nothing
    selfcheck = standins.selfcheck_module()
    sys.modules[selfcheck.__name__] = selfcheck
    package = sys.modules.get("attnscore")
    if package is not None:
        package.selfcheck = selfcheck  # type: ignore[attr-defined]
    torch.set_num_threads(1)
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # sysconfig's variables, read by every worker's Landlock rules (confinement.header_folders):
    # computed here once (4 ms), so that a worker forked from the template inherits them
    sysconfig.get_config_vars()
    keep_header_folders()
    for _ in range(_WARM_RUNS):
        _first_use()


def _first_use() -> None:
    """Run the worker's own per-call steps once on a scratch buffer (no submission, no matrix
    product: no BLAS or OpenMP thread starts): inputs built from memory, inspected, read back as
    data and encoded, a request line parsed. What torch, numpy and the JSON modules set up at
    their first use is then set up in the template, once, instead of in every worker's first call
    (about 0.5 ms of its CPU)."""
    from attnscore.boundary import wire
    from attnscore.boundary.call_steps import bound_inspector
    from attnscore.boundary.device_inputs import bound_inputs_on_device, input_span
    from attnscore.boundary.outputs import Received, bound_to_received

    items = (
        {"name": "a", "dtype": "float64", "shape": [2, 2], "offset": 0},
        {"name": "b", "dtype": "float64", "shape": [2], "offset": 64},
    )
    line = wire.dumps(wire.encode_message(wire.CallRequest(1, "float64", "cpu", ("a", "b"), items)))
    scratch = bytearray(128)  # as the shared memory: tensors are built over it
    read_call = wire.bound_call_reader()
    _, request = read_call(line)
    _, request = read_call(line.replace(b'"id": 1,', b'"id": 2,'))  # the same line again: remembered
    args, _ = bound_inputs_on_device()(scratch, list(request.inputs), "cpu")
    spans = [input_span(item, arg) for item, arg in zip(items, args, strict=True)]
    value, _ = bound_inspector(scratch)(lambda a, b: a[0] + b, args, spans)
    received = bound_to_received()(value)
    if not isinstance(received, Received):  # pragma: no cover - a vector of two float64 values
        raise RuntimeError(f"the worker could not read back a tensor: {received}")
    wire.dumps(wire.encode_message(wire.CallResult(1, received, {"mutated": [], "aliased": [], "calls": []})))
    _first_products()


def _first_products() -> None:
    """One tiny matrix-vector and matrix-matrix product per float dtype, as nearly every submission
    makes: torch's first product reads the CPU's features (oneDNN's CPUID probe, a trip to the
    hypervisor per query in a virtual machine) and MKL picks its kernels, once per process; done
    in the template, no worker does it again. One thread (``torch.set_num_threads(1)``): no BLAS
    or OpenMP thread starts (the template checks that it still runs one thread)."""
    import torch

    for dtype in (torch.float64, torch.float32):
        a, v = torch.ones(3, 3, dtype=dtype), torch.ones(3, dtype=dtype)
        (a @ v, a @ a, torch.bmm(a[None], a[None]))


def confine_self(folder: str, config: dict[str, Any], resp_fd: int) -> bool:
    """Apply Landlock and seccomp as ``config`` says (working folder: the current one); on
    failure tell the grader (a grader error) and return False."""
    try:
        if config.get("landlock"):
            _confine(folder, config.get("deny", []), list(config.get("device_files", [])))
        if config.get("seccomp"):
            from attnscore.boundary.seccomp import deny_network

            deny_network()
    except OSError as exc:
        from attnscore.boundary.wire import LoadError

        message = f"the grading machine could not confine the worker (Landlock, seccomp): {exc}"
        _send(resp_fd, LoadError(Verdict.GRADER_ERROR, message))
        return False
    return True


def read_setup(requests: Any) -> dict[str, Any]:
    """The worker's setup, the first line the grader writes on its request pipe: ``folder`` (the
    submission's private copy), ``entry``, ``function`` and ``traps`` (and, for a worker forked from
    the template, its uid, working folder, limits, environment and config). The worker reads it
    itself, so that no student's file name is on its command line (readable by every process of
    the machine) or passes through the template's memory (inherited by every later child).

    Raises:
        ValueError: the line is not a setup message (the grader closed the pipe, or wrote another).
    """
    import json

    line = requests.readline()
    setup = json.loads(line) if line else None
    if not isinstance(setup, dict) or setup.get("type") != "setup":
        raise ValueError(f"expected the worker's setup line first, found {line[:80]!r}")
    return setup


def main(argv: list[str]) -> None:
    """The fresh-process worker: ``REQ_FD RESP_FD UID CONFIG``; the submission's folder and file
    come first on the request pipe (:func:`read_setup`)."""
    req_fd, resp_fd, uid = int(argv[0]), int(argv[1]), int(argv[2])
    import json

    config = json.loads(argv[3]) if len(argv) > 3 else {}
    prepare(config)
    shared = map_inputs(config)
    requests = os.fdopen(req_fd, "rb", buffering=1 << 16)
    setup = read_setup(requests)
    folder = str(setup["folder"])
    if not confine_self(folder, config, resp_fd):
        return
    load_runtime()
    del sys.path[0]  # the bootstrap's folder: the worker's modules stay loaded, not importable by path
    serve(
        folder,
        str(setup["entry"]),
        str(setup["function"]),
        requests,
        resp_fd,
        uid,
        shared,
        str(config.get("device", "cpu")),
        traps=tuple(str(t) for t in setup.get("traps", ())),
        functions=tuple(str(f) for f in setup.get("functions", ())),
    )


def serve(
    folder: str,
    entry: str,
    function_name: str,
    requests: Any,
    resp_fd: int,
    uid: int,
    shared: Any,
    device: str = "cpu",
    traps: tuple[str, ...] = (),
    functions: tuple[str, ...] = (),
) -> None:
    """Drop to ``uid`` (when >= 0), set up ``device`` (``"cpu"`` or ``"cuda:0"``, the one GPU the
    worker sees), import the submission and answer calls until the grader closes ``requests``, with
    the inputs on ``device``. Runs in a confined process that has loaded the runtime.

    One spec: ``function_name`` is resolved right after the import (a missing one is the load
    error). Several functions (an assignment, ``function_name`` ``""``): the entry file is the one
    that defines the most of ``functions``, nothing is resolved at import, and each call names
    its function (:attr:`attnscore.boundary.wire.CallRequest.function`), resolved at its first
    call and kept: a name the submission does not define is that call's ``function_missing``,
    naming what the submission does define, and costs only the calls that name it.

    Protocol state: every message sent before ``{"type": "importing"}`` comes from the worker
    alone (only these may say ``grader_error``: the machine could not confine, provide modules or
    a GPU); from ``importing`` on, the submission's code runs in this process and may write to the
    reply pipe itself, so the grader trusts no grader-side verdict after it. Everything the worker
    uses once the submission is imported (the sender, the call inspector, the input builders) is
    bound here, before the import: patching this module's globals cannot change them.
    """
    import functools
    import importlib.util

    from attnscore.boundary import wire
    from attnscore.boundary.calls import bound_python_ints, bound_trailing_nones, describe_exception
    from attnscore.boundary.gradients import NoBackward, as_callable, backward_call, first_output, resolve_factory
    from attnscore.boundary.modules import ModuleConfig, module_call
    from attnscore.boundary.outputs import BadReturn, Received, bound_to_received
    from attnscore.boundary.standins import run_notebook
    from attnscore.boundary.traps import Traps
    from attnscore.boundary.untrusted import cut

    send, inspected, to_received = bound_sender(resp_fd), bound_inspector(shared), bound_to_received()
    say_result = send.result
    watch_compiles = bound_compile_watch(send)
    trapped = Traps(traps)  # installed just before the import: everything above is bound first
    backward_pass = bound_backward(inspected, backward_call, trapped.during)
    device_inputs, copy_back, read_call = bound_inputs_on_device(), bound_copy_back(), wire.bound_call_reader()
    settle = bound_settle(send, requests, copy_back, bound_copy_in())
    during, calls_seen, upstream_name = trapped.during, trapped.report, wire.UPSTREAM
    forget_calls = trapped.clear
    same_bytes = _same_bytes
    load_error, ready, importing = wire.LoadError, wire.Ready(), wire.Importing()
    call_failed = wire.CallFailed
    grader_error, function_missing, bad_return = Verdict.GRADER_ERROR, Verdict.FUNCTION_MISSING, Verdict.BAD_RETURN_TYPE
    verdict_of, describe_failure, clues, span = failure_verdict, _describe_failure, _environment_clues, _span
    backward_verdict, callable_of, keyword_form = verdict_of_backward, as_callable, keyword_call
    made_by, split_output = resolve_factory, first_output
    as_module, module_config, raised = module_call, ModuleConfig.from_json, raised_name
    factory_failure: Any = None  # (verdict, message) once a factory could not give a Function
    resolved = False
    attribute_of, namespace_of, is_callable = getattr, vars, callable
    looked_up: dict[tuple[str, bool], Any] = {}  # (name, factory) -> (function, None) or (None, (verdict, message))
    missing_entry, missing_function, describe_import = missing_entry_text, missing_function_text, describe_import_error
    listed, size_of, mapping, zipped, mapped = list, len, dict, zip, map
    bind = functools.partial
    with_ints, int_inputs, with_nones = bound_python_ints(), python_int_inputs, bound_trailing_nones()

    searched = [p for p in sys.path if isinstance(p, str) and os.path.isdir(p)]
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    blocked = [p for p in searched if not os.access(p, os.R_OK | os.X_OK)]
    if blocked:
        send(
            load_error(grader_error, f"the grading machine is misconfigured: the sandbox user cannot read {blocked[0]}")
        )
        return
    problem = cuda_problem(device)
    if problem is not None:  # before the submission is read: the machine's fault, never the student's
        message = f"the grading machine could not give the worker its GPU: {problem}"
        send(load_error(grader_error, message))
        return
    if not entry:
        chosen, why = choose_entry(folder, function_name or functions)
        if chosen is None:
            send(load_error(function_missing, why))
            return
        entry = chosen
    path = os.path.join(folder, entry)
    if not os.path.isfile(path):
        files = [n for n in os.listdir(folder) if n.endswith(".py")]
        send(load_error(function_missing, missing_entry(entry, files)))
        return
    sys.path.insert(0, folder)  # the submission's own helper modules import: beside the entry first
    if os.path.dirname(path) != folder:
        sys.path.insert(0, os.path.dirname(path))

    try:
        module_spec = importlib.util.spec_from_file_location("submission", path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["submission"] = module
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem.isidentifier() and stem not in sys.modules:  # `from solution import X` in a helper: the same module
            sys.modules[stem] = module
        trapped.install()  # a spec's ruled calls, noted from here on (never a security boundary)
        send(importing)  # the last message the worker alone can have written
        if is_notebook(path):  # cell by cell: a failed import costs only what needs it
            with open(path, encoding="utf-8") as f:
                run_notebook(module, f.read(), path)
        else:
            module_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - anything the submission raises is its verdict
        about = clues(exc)
        why = describe_import(exc, path)
        module_clue, file_clue, compiler_clue = about.get("module"), about.get("file"), about.get("compiler")
        send(load_error(verdict_of(exc), why, "", module_clue, file_clue, compiler=compiler_clue))
        return
    function: Any = None
    if function_name:  # one spec: its function, resolved now (a missing one is the load error)
        function = getattr(module, function_name, None)
        if function is None or not callable(function):
            send(load_error(function_missing, missing_function(function_name, function, vars(module), "submission")))
            return
        try:
            function = callable_of(function)  # a torch.autograd.Function subclass: its .apply
        except BaseException as exc:  # noqa: BLE001 - a class whose metaclass raises is the submission's
            send(load_error(verdict_of(exc), f"the class {function_name} could not be used: {describe_failure(exc)}"))
            return

    def resolve_named(name: str, factory: bool) -> Any:
        """The function ``name`` of the imported submission, ready to call (a Function class's
        .apply, a factory's Function), or why not as ``(verdict, message)``."""
        try:
            value = attribute_of(module, name, None)
            if value is None or not is_callable(value):
                return None, (function_missing, missing_function(name, value, namespace_of(module), "submission"))
        except BaseException as exc:  # noqa: BLE001 - a module __getattr__ of the submission's
            return None, (verdict_of(exc), f"looking up {name} failed: {describe_failure(exc)}")
        try:
            value = callable_of(value)
        except BaseException as exc:  # noqa: BLE001 - a class whose metaclass raises is the submission's
            return None, (verdict_of(exc), f"the class {name} could not be used: {describe_failure(exc)}")
        if factory:
            try:
                value = callable_of(made_by(value))
            except BaseException as exc:  # noqa: BLE001 - the factory's own failure is its verdict
                kind = bad_return if isinstance(exc, TypeError) else verdict_of(exc)
                return None, (kind, f"the factory {name}(): {describe_failure(exc)}")
        return value, None

    watch_compiles(None)
    send(ready)

    while True:
        line = requests.readline()
        if not line:
            return
        call_id, request = read_call(line)  # request.id may be an earlier call's: call_id is this one's
        inputs = listed(request.inputs)
        watch_compiles(call_id)
        if request.function:  # an assignment's call: its function, resolved at its first call and kept
            forget_calls()  # the ruled calls reported with its result are this call's own
            key = (request.function, request.factory)
            if key not in looked_up:
                looked_up[key] = resolve_named(request.function, request.factory)
            target, failed = looked_up[key]
            if failed is not None:
                send(call_failed(call_id, failed[0], failed[1]))
                continue
        else:
            if request.factory and not resolved:  # the handout's factory, called once with no arguments
                resolved = True
                try:
                    function = callable_of(made_by(function))
                except BaseException as exc:  # noqa: BLE001 - the factory's own failure is its verdict
                    kind = bad_return if isinstance(exc, TypeError) else verdict_of(exc)
                    factory_failure = (kind, f"the factory {function_name}(): {describe_failure(exc)}")
            if factory_failure is not None:
                send(call_failed(call_id, factory_failure[0], factory_failure[1]))
                continue
            target = function
        names = listed(request.names)
        count = size_of(names)
        # f(*positional, **by_name, **options), as Contract.binding calls it in process
        by_name, options = listed(request.by_name), mapping(request.options)
        positional = count - size_of(by_name)
        callee = target  # a module handed in: built, checked and called per call (boundary/modules.py)
        if request.module is not None:
            callee = as_module(target, module_config(request.module), names, request.function or function_name)
        try:
            args, pairs = device_inputs(shared, inputs, device)
            spans = listed(mapped(span, inputs, args)) if device == "cpu" else [None] * size_of(args)
            upstream: Any = None
            if request.upstream is not None:  # dO, a view of the shared memory too
                given, given_pairs = device_inputs(shared, [request.upstream], device)
                upstream, pairs = given[0], pairs + given_pairs
        except Exception as exc:  # noqa: BLE001 - report, do not die
            send(call_failed(call_id, grader_error, cut(f"the worker could not build the inputs: {exc}", 300)))
            continue

        backward: Any = None  # a backward call's WithGradients, NoBackward or BadReturn
        try:
            # 0-d int32 inputs (max_seqlen_q) reach the function as Python ints; the tensors are inspected
            called = with_ints(callee, *int_inputs(inputs, names, positional))
            called = with_nones(called, request.trailing_nones)  # optional masks passed as None
            if upstream is not None:
                target = keyword_form(called, positional, by_name, options) if by_name or options else called
                settled = bind(settle, call_id, pairs=pairs)  # settled(stage)
                value, changed, backward = backward_pass(
                    during("forward", target), names, args, upstream, spans, request, settled
                )
            elif by_name or options:
                named = mapping(zipped(by_name, args[positional:]))
                value, changed = inspected(during("forward", bind(called, **named, **options)), args, spans, positional)
            else:
                value, changed = inspected(during("forward", called), args, spans)
            if backward is None and request.logsumexp is not None:
                value, _ = split_output(value, request.logsumexp[0])  # (O, L) returned: O is graded here
            if device != "cpu":  # an asynchronous CUDA error is this call's
                import torch

                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt... are verdicts too
            copy_back(pairs)
            about = clues(exc)
            why = describe_failure(exc)
            module_clue, file_clue, compiler_clue = about.get("module"), about.get("file"), about.get("compiler")
            send(call_failed(call_id, verdict_of(exc), why, raised(exc), module_clue, file_clue, compiler_clue))
            continue
        if isinstance(backward, NoBackward):
            send(call_failed(call_id, backward_verdict(backward), backward.message, backward.exception))
            continue
        try:
            received = backward if backward is not None else to_received(value)
            if backward is None and not isinstance(received, BadReturn):
                settle(call_id, "call", pairs)  # the grader reads the inputs, then writes its canaries into them
            # the output read again, after the canaries: one that shares an input's memory shows them
            probe = to_received(value) if not isinstance(received, BadReturn) else received
        except BaseException as exc:  # noqa: BLE001 - a returned object whose methods raise
            why = f"the returned object could not be read as numbers: {describe_exception(exc)}"
            send(call_failed(call_id, bad_return, why))
            continue
        if isinstance(received, BadReturn):
            send(call_failed(call_id, bad_return, received.message))
            continue
        # what the inspector saw of the inputs' (and dO's) metadata and class; the grader reads their
        # values itself from the shared memory, and judges aliasing from the output read again (sent
        # only when it differs from the value: the grader's canaries show where it read an input)
        mutated = [names[i] if i < count else upstream_name for i in changed if i <= count]
        again = probe.array if isinstance(probe, Received) and not same_bytes(probe.array, received.array) else None
        say_result(call_id, received, {"mutated": mutated, "aliased": [], "calls": calls_seen()}, again)


if __name__ == "__main__":  # pragma: no cover - started by attnscore.sandbox.launch
    main(sys.argv[1:])
