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
strides, class: :func:`bound_inspector`), turn whatever came back into plain data
(:func:`attnscore.boundary.outputs.to_received`) and send it back with the inputs it saw changed and
the inputs the output aliases (the grader also reads the shared memory itself after the reply).
It never receives expected values.

The submission's own stdin is /dev/null and its stdout/stderr go to a pipe the grader drains and
caps; the request and response pipes live on private descriptors.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import TYPE_CHECKING, Any

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


def _send(fd: int, message: Message) -> None:
    from attnscore.boundary import wire

    data = wire.dumps(wire.encode_message(message))
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def bound_sender(fd: int) -> Any:
    """A ``send(message)`` of a :data:`attnscore.boundary.wire.Message` for the reply pipe ``fd``
    that holds everything it uses in its closure: the message encoder
    (:func:`attnscore.boundary.wire.encode_message`, itself bound when ``wire`` was imported), the
    C JSON encoder, ``os.write``, ``memoryview``. Built before the submission is imported, so
    that patching this module's globals, ``json``, ``os`` or ``attnscore.boundary.wire`` afterwards
    cannot change what the worker itself says (see :func:`serve`)."""
    import _json

    from attnscore.boundary import wire

    def refuse(obj: object) -> Any:
        raise TypeError(f"not JSON data: {type(obj).__name__}")

    encode = _json.make_encoder(None, refuse, _json.encode_basestring_ascii, None, ":", ", ", False, False, False)
    join, write, view_of, version, as_json = "".join, os.write, memoryview, wire.VERSION, wire.encode_message

    def send(message: Message) -> None:
        view = view_of(join(encode({"v": version, **as_json(message)}, 0)).encode("ascii") + b"\n")
        while view:
            view = view[write(fd, view) :]

    return send


def bound_inspector(shared: Any) -> Any:
    """``call(function, args, regions) -> (value, mutated indices)``, built before the submission
    is imported (every function it uses is held in its closure).

    It calls ``function(*args)`` (or the first ``positional`` of them) and, in the same C-level
    iteration (no Python bytecode of the worker runs in between, so no thread of the submission
    is switched in, no patched global is looked up and no trace or profile hook of the worker
    fires), snapshots each argument: the bytes of its ``regions`` of the shared memory
    (``(start, end)`` or None), its class, and, with every ``__torch_function__`` override and
    mode disabled, its shape, strides, data pointer, dtype and negation/conjugation bits. An
    argument whose snapshot differs from the one taken before the call was changed in place
    (values or metadata: ``K.transpose_()``, ``v.unsqueeze_()``, ``W.t_()``, ``x.set_(...)``),
    whatever the submission restores later."""
    import gc
    import itertools

    import torch

    base = torch._C.TensorBase
    chain, starmap, each, listed, kind, cut = itertools.chain, itertools.starmap, map, list, type, slice
    tensor, length, ranged, pairs, ordered = torch.Tensor, len, range, zip, sorted
    metadata = (base.size, base.stride, base.data_ptr, base.__dict__["dtype"].__get__, base.is_neg, base.is_conj)
    plain = torch._C.DisableTorchFunction()
    enter, leave = plain.__enter__, plain.__exit__
    read = shared.__getitem__ if shared is not None else None
    set_trace, set_profile, gc_off, gc_on, gc_state = sys.settrace, sys.setprofile, gc.disable, gc.enable, gc.isenabled

    def snapshot(args: list[Any], regions: list[tuple[int, int]]) -> list[Any]:
        """Lazy iterators: whether the collector runs, then the collector off (no finalizer runs),
        region bytes, classes, then (overrides off) the metadata fields, then overrides and the
        collector back on."""
        parts: list[Any] = [starmap(gc_state, [()]), starmap(gc_off, [()])]
        parts += [starmap(read, [(cut(a, b),) for a, b in regions])] if read is not None else []
        parts += [each(kind, args), starmap(enter, [()])]
        parts += [each(field, args) for field in metadata]
        return parts + [starmap(leave, [(None, None, None)]), starmap(gc_on, [()])]

    def call(
        function: Any, args: list[Any], spans: list[tuple[int, int] | None], positional: int | None = None
    ) -> tuple[Any, list[int]]:
        """``(value, indices of the arguments changed in place)``; raises what ``function`` raises.
        ``function`` gets the first ``positional`` arguments (default all) by position: the others
        are already bound to it by name (a :func:`functools.partial`), and every one is inspected."""
        n = length(args)
        given = args if positional is None else args[:positional]
        shared_at = [i for i in ranged(n) if spans[i] is not None and read is not None]
        regions = [span for span in spans if span is not None] if read is not None else []
        before = listed(chain(*snapshot(args, regions)))[2:]
        set_trace(None)
        set_profile(None)
        got: list[Any] = listed()
        try:
            got.extend(chain(starmap(function, [given]), *snapshot(args, regions)))
        except BaseException:
            if not got:
                raise  # the function's own exception
            try:
                leave(None, None, None)
            except BaseException:  # noqa: BLE001 - never entered
                pass
            if length(got) > 1 and got[1]:
                gc_on()
            return got[0], listed(ranged(n))  # its inputs could not even be inspected: changed
        if not got[1]:
            gc_off()  # the collector stays as the call left it
        after, k = got[3:], length(regions)  # after the value, the collector's state and gc_off's None
        changed = {i for i, j in pairs(shared_at, ranged(k)) if before[j] != after[j]}
        changed |= {i for i in ranged(n) if after[k + i] is not tensor}
        for f in ranged(length(metadata)):
            at = k + n + 1 + f * n
            changed |= {i for i in ranged(n) if before[at + i] != after[at + i]}
        return got[0], ordered(changed)

    def tensor_metadata(tensors: list[Any]) -> list[Any]:
        """Per tensor, its class and (overrides off, collector off) shape, strides, data pointer,
        dtype and neg/conj bits: compared before and after a backward pass, which runs outside
        :func:`call` (a saved input or ``dO`` changed in place by the submission's backward)."""
        was = gc_state()
        taken = listed(chain(*snapshot(tensors, [])))[2:]
        if not was:
            gc_off()
        n = length(tensors)
        fields = [taken[n + 1 + f * n : n + 1 + (f + 1) * n] for f in ranged(length(metadata))]
        return listed(pairs(taken[:n], *fields))

    call.metadata = tensor_metadata  # type: ignore[attr-defined]
    return call


def bound_compile_watch(send: Any) -> Any:
    """``watch(call_id)``, bound before the submission is imported: from then on, every compilation
    of ``torch.compile`` (Dynamo's, and AOTAutograd's deferred backward) says when it starts and
    ends with :class:`attnscore.boundary.wire.Compiling` for call ``call_id`` (None: the import),
    so that the grader counts that time against the submission's compile allowance instead of the
    call's own limit. Called after the import and before each call: Dynamo's callbacks are
    registered once the submission has imported ``torch._dynamo`` (``torch.compile`` does), never
    earlier (importing it costs every worker more than a second). A torch without Dynamo's
    callbacks (before 2.2) gets no allowance; the messages are otherwise harmless."""
    from attnscore.boundary import wire

    modules, compiling = sys.modules, wire.Compiling
    current: list[int | None] = [None]

    def started(*_: Any) -> None:
        send(compiling(current[0], True))

    def ended(*_: Any) -> None:
        send(compiling(current[0], False))

    def watch(call_id: int | None) -> None:
        current[0] = call_id
        dynamo = modules.get("torch._dynamo")
        if dynamo is None:
            return
        try:
            handler = dynamo.callback.callback_handler
            if started not in handler.start_callbacks:
                handler.register_start_callback(started)
                handler.register_end_callback(ended)
        except Exception:  # noqa: BLE001 - an older torch, or a submission that replaced the module
            pass

    return watch


def bound_backward(inspected: Any, backward_call: Any, traced: Any = None) -> Any:
    """``backward_pass(function, names, args, upstream, spans, request, settle) -> (value, changed,
    result)``, bound before the submission is imported: the call with the float inputs requiring
    grad, through the inspector, then ``backward(dO)`` with the upstream gradient ``upstream`` (a view
    of the shared memory, :func:`attnscore.boundary.gradients.backward_call`, with
    ``torch.autograd.backward`` as it was before the import); raises what the call raises.

    ``settle(stage)`` is called after the forward (``"forward"``) and once the backward has run
    (``"call"``): the grader reads the shared inputs and ``dO`` at each, and writes its canaries
    into the inputs at the second, before the output and the gradients are read. ``changed`` also
    holds the inputs (and ``dO``, as index ``len(args)``) whose shape, strides, storage or class the
    backward changed in place. ``traced(phase, function)`` (:meth:`attnscore.boundary.traps.Traps.during`)
    marks the backward's run as the ``"backward"`` phase of the spec's traps."""
    import torch

    size_of, ranged = len, range
    run_backward = torch.autograd.backward if traced is None else traced("backward", torch.autograd.backward)
    metadata = inspected.metadata

    def backward_pass(
        function: Any, names: list[str], args: list[Any], upstream: Any, spans: list[Any], request: Any, settle: Any
    ) -> Any:
        seen: list[Any] = []
        watched = [*args, upstream]
        before: list[Any] = []

        def call(f: Any, a: list[Any]) -> Any:
            before.extend(metadata(watched))
            value, changed = inspected(f, a, spans)
            seen.append(changed)
            return value

        value, result = backward_call(
            function,
            names,
            args,
            upstream,
            call,
            logsumexp=request.logsumexp,
            forward_done=lambda: settle("forward"),
            settled=lambda: settle("call"),
            run_backward=run_backward,
        )
        changed = set(seen[0] if seen else [])
        if before:  # the backward (or anything since the call) changed an input's or dO's metadata
            after = metadata(watched)
            changed |= {i for i in ranged(size_of(watched)) if before[i] != after[i]}
        return value, sorted(changed), result

    return backward_pass


def bound_settle(send: Any, requests: Any, copy_back: Any, copy_in: Any) -> Any:
    """``settle(call_id, stage, pairs)``, bound before the submission is imported: the device
    inputs copied back to the shared memory (a GPU worker), :class:`attnscore.boundary.wire.Returned`
    said, and the grader's :class:`~attnscore.boundary.wire.Proceed` awaited on the request pipe;
    after ``"call"`` the grader's canaries are copied onto the device inputs (a GPU worker), so that
    an output sharing an input's memory reads them there too.

    Raises:
        EOFError: the grader closed the pipe or answered something else (the worker is done).
    """
    from attnscore.boundary import wire

    returned, readline, loads = wire.Returned, requests.readline, wire.loads

    def settle(call_id: int, stage: str, pairs: list[Any]) -> None:
        copy_back(pairs)
        send(returned(call_id, stage))
        line = readline()
        answer = loads(line) if line else {}
        if answer.get("type") != "proceed" or answer.get("id") != call_id or answer.get("stage") != stage:
            raise EOFError("the grader did not say proceed")
        if stage == "call":
            copy_in(pairs)

    return settle


def keyword_call(function: Any, positional: int, by_name: list[str], options: dict[str, Any]) -> Any:
    """``function`` as the backward pass calls it, with every input positional: the inputs after the
    first ``positional`` go by the names ``by_name`` gives, and ``options`` by name too, as
    ``Contract.binding`` calls it in process. Built per call, at call time (the backward pass makes
    its own leaf copies of the inputs, so they cannot be bound beforehand)."""
    pairs = zip

    def call(*args: Any) -> Any:
        return function(*args[:positional], **dict(pairs(by_name, args[positional:])), **options)

    return call


def verdict_of_backward(failure: Any) -> Verdict:
    """A backward pass that could not run: an exception verdict when it raised, else a bad return."""
    return Verdict.EXCEPTION if failure.exception else Verdict.BAD_RETURN_TYPE


def failure_verdict(exc: BaseException) -> Verdict:
    """The verdict of an exception the submission raised (in a call or at import):
    :attr:`Verdict.MEMORY_LIMIT` when it says memory ran out (host or GPU), else :attr:`Verdict.EXCEPTION`."""
    from attnscore.boundary.calls import exception_text, type_name

    text = exception_text(exc) or ""
    if gpu_out_of_memory(type_name(exc), text):
        return Verdict.MEMORY_LIMIT
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "not enough memory" in text:
        return Verdict.MEMORY_LIMIT
    return Verdict.EXCEPTION


def gpu_out_of_memory(type_name: str, text: str) -> bool:
    """Whether an exception of class ``type_name`` with message ``text`` says the GPU ran out of
    memory (``torch.cuda.OutOfMemoryError``, or a CUDA/cuBLAS allocation failure)."""
    return (
        type_name == "OutOfMemoryError"
        or "CUDA out of memory" in text
        or "CUBLAS_STATUS_ALLOC_FAILED" in text
        or "cudaErrorMemoryAllocation" in text
    )


def _describe_failure(exc: BaseException) -> str:
    """How a call's exception reads in feedback; GPU memory exhaustion says so first."""
    from attnscore.boundary.calls import describe_exception, exception_text, type_name

    text = describe_exception(exc)
    if gpu_out_of_memory(type_name(exc), exception_text(exc) or ""):
        return f"ran out of GPU memory (it allocated more than the GPU holds): {text}"
    return text


def _compiler_clue(exc: BaseException) -> str | None:
    """A few words when ``exc`` says that ``torch.compile`` could not compile on this machine: an
    exception of Dynamo or Inductor whose chain (causes, contexts, wrapped exceptions) holds no
    working C++ compiler, a failed C++ compilation, or a permission or disk error; else None."""
    todo: list[Any] = [exc]
    seen: list[int] = []
    inside, found = False, None
    while todo and len(seen) < 16:
        current = todo.pop()
        try:
            if current is None or id(current) in seen:
                continue
            seen.append(id(current))
            kind = type(current)
            module, name = str(getattr(kind, "__module__", "")), kind.__name__
            inside = inside or module.startswith(("torch._inductor", "torch._dynamo"))
            if name == "InvalidCxxCompiler":
                found = found or "no working C++ compiler"
            elif name == "CppCompileError":
                found = found or "the C++ compiler failed on the generated code"
            elif isinstance(current, PermissionError):
                found = found or "permission denied"
            elif isinstance(current, OSError) and current.errno in (28, 27, 122):  # ENOSPC, EFBIG, EDQUOT
                found = found or "no room to write the compiled code"
            todo += [current.__cause__, current.__context__, getattr(current, "inner_exception", None)]
        except BaseException:  # noqa: BLE001 - attributes of a hostile exception
            break
    return found if inside else None


def _environment_clues(exc: BaseException) -> dict[str, str]:
    """The module a ``ModuleNotFoundError`` or the file a ``PermissionError`` in ``exc``'s chain
    was about, and whether ``torch.compile`` could not compile (:func:`_compiler_clue`), for the
    grader to decide whether the machine, not the student, is at fault."""
    clues: dict[str, str] = {}
    compiler = _compiler_clue(exc)
    if compiler:
        clues["compiler"] = compiler
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        try:
            if isinstance(current, ModuleNotFoundError) and isinstance(current.name, str):
                clues.setdefault("module", current.name[:300])
            elif isinstance(current, PermissionError) and isinstance(current.filename, str):
                clues.setdefault("file", current.filename[:1000])
            current = current.__cause__ or current.__context__
        except BaseException:  # noqa: BLE001 - attributes of a hostile exception
            break
        seen += 1
    return clues


def describe_import_error(exc: BaseException, path: str, machine: str = "this grader") -> str:
    """How an exception raised while importing the submission's file ``path`` reads in feedback:
    its class, the line of ``path`` it came from (a syntax error's own line) and its message. An
    ``import`` statement of the submission's own files that failed is named with its line
    (``line 3: `import pandas as pd` failed: pandas is not installed on this grader``, ``machine``
    saying where; :func:`attnscore.boundary.standins.failed_import_text`), never a line of a module
    the package imports."""
    from attnscore.boundary.calls import exception_text, type_name
    from attnscore.boundary.standins import failed_import_text

    if isinstance(exc, SyntaxError):
        try:
            where = f" (line {int(exc.lineno)})" if exc.lineno else ""
            return f"your file could not be imported: SyntaxError{where}: {str(exc.msg)[:300]}"
        except BaseException:  # noqa: BLE001 - a SyntaxError subclass with hostile attributes
            return "your file could not be imported: SyntaxError"
    folder = os.path.dirname(path)
    try:
        tb = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in tb if f.filename == path]
        own = [f for f in tb if isinstance(f.filename, str) and f.filename.startswith(folder + os.sep)]
    except BaseException:  # noqa: BLE001
        frames, own = [], []
    statement = _import_statement(own[-1].filename, own[-1].lineno) if own and own[-1].lineno else None
    if statement is not None:
        name = os.path.relpath(own[-1].filename, folder)
        where = f"line {own[-1].lineno}" if own[-1].filename == path else f"{name}, line {own[-1].lineno}"
        return "your file could not be imported: " + failed_import_text(where, statement, exc, machine)[0]
    where = f" (line {frames[-1].lineno})" if frames else ""
    text = exception_text(exc)
    return f"your file could not be imported: {type_name(exc)}{where}" + (f": {text}" if text else "")


def _import_statement(filename: str, line: int) -> str | None:
    """The source of the ``import`` or ``from ... import`` statement that starts at ``line`` of
    ``filename`` (a file of the submission), or None when none does."""
    import ast

    try:
        with open(filename, "rb") as f:
            source = f.read(1 << 22).decode("utf-8", errors="replace")
        tree = ast.parse(source)
    except BaseException:  # noqa: BLE001 - unreadable or unparsable: no statement to name
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno == line:
            return ast.get_source_segment(source, node) or None
    return None


def missing_entry_text(entry: str, files: list[str]) -> str:
    """The load failure of a submission that has no file ``entry`` (its top-level ``.py`` ``files``;
    at most 12 are named, then how many more)."""
    from attnscore.boundary.untrusted import cut, shown_list

    listed = shown_list(sorted(files)) or "none"
    return f"your submission has no file named {cut(entry, 200)!r} (its .py files: {listed})"


def missing_function_text(function_name: str, value: object, namespace: dict[str, Any], module_name: str) -> str:
    """The load failure of a file whose module ``module_name`` (globals ``namespace``) binds
    ``function_name`` to ``value``, which is None or not callable; it lists the functions the
    file itself defines (at most 20, then how many more: the text is bounded where it is made)."""
    from attnscore.boundary.untrusted import shown_list

    defined = sorted(
        n
        for n, v in namespace.items()
        if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module_name
    )
    found = f"; it defines: {shown_list(defined, most=20)}" if defined else "; it defines no functions"
    kind = type(value).__name__[:100]
    what = "no function" if value is None else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a function,"
    return f"your file has {what} named {function_name!r}{found}"


def _use_mirrors(mirrors: list[list[str]]) -> None:
    """Search for modules through readable copies: rewrite ``sys.path`` and loaded packages' paths."""
    if not mirrors:
        return
    pairs = [(str(a).rstrip("/"), str(b)) for a, b in mirrors]

    def through(path: str) -> str:
        for original, copy in pairs:
            if path == original or path.startswith(original + "/"):
                return copy + path[len(original) :]
        return path

    sys.path[:] = [through(p) if isinstance(p, str) else p for p in sys.path]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if isinstance(search, list):
            search[:] = [through(p) if isinstance(p, str) else p for p in search]
    sys.path_importer_cache.clear()
    _headers_through(through)
    real = os.path.realpath(sys.executable) if sys.executable else ""
    if real and through(real) != real:  # torch.compile starts the interpreter again (a CPU probe)
        sys.executable = through(real)


_HEADER_PATHS = ("include", "platinclude")


def _headers_through(through: Any) -> None:
    """Point ``sysconfig``'s C header folders at their readable copies: ``torch.compile``'s C++
    backend (Inductor, and Triton on a GPU) compiles against ``sysconfig.get_path("include")``
    in every install scheme, and the original may lie where the worker's user cannot go (root's
    0700 home). Each scheme's entry is replaced by the copy's literal path; ``INCLUDEPY`` too."""
    import sysconfig

    schemes = getattr(sysconfig, "_INSTALL_SCHEMES", None)
    if not isinstance(schemes, dict):
        return
    for scheme in sysconfig.get_scheme_names():
        for name in _HEADER_PATHS:
            try:
                original = sysconfig.get_path(name, scheme)
            except (KeyError, ValueError, TypeError):
                continue
            copy = through(original)
            if copy != original and "{" not in copy and isinstance(schemes.get(scheme), dict):
                schemes[scheme][name] = copy
    variables = sysconfig.get_config_vars()
    if isinstance(variables.get("INCLUDEPY"), str):
        variables["INCLUDEPY"] = through(variables["INCLUDEPY"])


def header_folders() -> list[str]:
    """The folders of Python's C headers as this process's ``sysconfig`` names them (through the
    readable copies once :func:`prepare` has run), existing ones only: read access for
    ``torch.compile``'s C++ backend."""
    import sysconfig

    found = []
    for name in _HEADER_PATHS:
        try:
            path = sysconfig.get_path(name)
        except (KeyError, ValueError, TypeError):
            continue
        if isinstance(path, str) and os.path.isdir(path):
            found.append(path)
    return list(dict.fromkeys(found))


def _forget_project() -> None:
    """Drop import hooks that editable installs add: they would map names to the project's source."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p.startswith("__editable__"))]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
    sys.path_importer_cache.clear()


def map_inputs(config: dict[str, Any]) -> Any:
    """The grader's shared memory of call inputs (a memfd), mapped once; None when not given."""
    fd, size = config.get("inputs_fd"), config.get("inputs_bytes")
    if not isinstance(fd, int) or not isinstance(size, int) or size <= 0:
        return None
    import mmap

    return mmap.mmap(fd, size)


def _input_dtype(name: str) -> Any:
    """The torch dtype of an input the grader names: a tested float dtype, ``bool`` (a mask) or
    ``int32`` (an integer parameter: offsets, lengths)."""
    import torch

    from attnscore.boundary.calls import TORCH_DTYPES

    return {"bool": torch.bool, "int32": torch.int32}.get(name) or TORCH_DTYPES[name]


def python_int_inputs(
    items: list[dict[str, Any]], names: list[str], positional: int
) -> tuple[frozenset[int], frozenset[str]]:
    """The positions (among the first ``positional``) and the by-name names of the inputs that reach
    the function as Python ints: 0-d int32 inputs (``max_seqlen_q``), as in process
    (:func:`attnscore.boundary.calls.argument_value`)."""
    scalar = [i for i, item in enumerate(items) if item.get("dtype") == "int32" and list(item.get("shape", [0])) == []]
    return frozenset(i for i in scalar if i < positional), frozenset(names[i] for i in scalar if i >= positional)


def _from_shared(shared: Any, item: dict[str, Any]) -> Any:
    """A tensor *backed by* the shared memory at ``item``'s offset: the grader sees in-place changes."""
    import math

    import torch

    dtype = _input_dtype(item["dtype"])
    shape = [int(n) for n in item["shape"]]
    count = math.prod(shape)
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    if "strides" in item:  # a non-contiguous view of the shared storage (attnscore.boundary.layouts)
        storage = torch.frombuffer(shared, dtype=dtype, count=int(item["count"]), offset=int(item["offset"]))
        return storage.as_strided(shape, [int(n) for n in item["strides"]], int(item["storage_offset"]))
    return torch.frombuffer(shared, dtype=dtype, count=count, offset=int(item["offset"])).view(shape)


def _device_inputs(shared: Any, items: list[dict[str, Any]], device: str) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """The call's inputs on ``device``, and ``(shared tensor, device tensor)`` pairs to copy back
    after the call, so that the grader still sees in-place changes in the shared memory. A strided
    input keeps its layout on the device (its whole storage is copied, then viewed the same way)."""
    import torch

    args, pairs = [], []
    for item in items:
        host = _from_shared(shared, item)
        if device == "cpu":
            args.append(host)
        elif "strides" in item:
            dtype = _input_dtype(item["dtype"])
            base = torch.frombuffer(shared, dtype=dtype, count=int(item["count"]), offset=int(item["offset"]))
            on_device = base.to(device)
            args.append(on_device.as_strided(host.shape, host.stride(), int(item["storage_offset"])))
            pairs.append((base, on_device))
        else:
            on_device = host.to(device)
            args.append(on_device)
            pairs.append((host, on_device))
    return args, pairs


def _same_bytes(a: Any, b: Any) -> bool:
    """Whether two plain arrays hold the same shape, dtype and bytes (NaN payloads included)."""
    return bool(a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes())


def bound_copy_in() -> Any:
    """``copy_in(pairs)``: write the shared memory into the device inputs (the grader's canaries,
    after a call), with torch's own ``copy_`` held before the submission is imported; a no-op on
    the CPU, where the inputs are the shared memory."""
    import torch

    copy = torch._C.TensorBase.copy_

    def copy_in(pairs: list[tuple[Any, Any]]) -> None:
        for host, on_device in pairs:
            try:
                copy(on_device, host)
            except Exception:  # noqa: BLE001 - a CUDA error left by the call
                return

    return copy_in


def bound_copy_back() -> Any:
    """``copy_back(pairs)``: write the device inputs back to the shared memory (skipped when the GPU
    is broken: the call failed anyway, and mutation is judged only for calls that returned). Uses
    torch's own methods, held before the submission is imported (a patched ``Tensor.copy_`` or
    ``Tensor.cpu`` cannot stop it)."""
    import torch

    copy, to_host = torch._C.TensorBase.copy_, torch._C.TensorBase.cpu

    def copy_back(pairs: list[tuple[Any, Any]]) -> None:
        for host, on_device in pairs:
            try:
                copy(host, to_host(on_device))
            except Exception:  # noqa: BLE001 - a CUDA error left by the call
                return

    return copy_back


def _span(item: dict[str, Any], arg: Any) -> tuple[int, int] | None:
    """The bytes ``(start, end)`` of the shared memory behind one CPU input (None when empty)."""
    if not arg.numel():
        return None
    start = int(item["offset"])
    return start, start + int(arg.untyped_storage().nbytes())


def cuda_problem(device: str) -> str | None:
    """Why the worker cannot use ``device`` (a cuda device), or None after initialising CUDA on it
    and pinning float32 precision: TF32 off for matmul and cuDNN, matmul precision "highest"."""
    import torch

    if device == "cpu":
        return None
    if torch.cuda._is_in_bad_fork():
        return "CUDA was initialised before the worker was forked"
    try:
        if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
            return f"CUDA is not available inside the worker (CUDA_VISIBLE_DEVICES={visible}; no device node or driver)"
        warm = torch.ones(2, 2, device=device)
        (warm @ warm).sum().item()  # CUDA context and cuBLAS start here, outside the first call's time limit
    except Exception as exc:  # noqa: BLE001 - the driver's own message says what is wrong
        return f"CUDA could not be initialised inside the worker: {type(exc).__name__}: {str(exc)[:300]}"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return None


_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "passwd", "group", "nsswitch.conf", "hosts")
_DEVICES = ("null", "zero", "full", "random", "urandom")


def _granted(path: str, deny: list[str], depth: int = 0) -> list[str]:
    """``path``, or when it holds a ``deny`` folder (the grader's own installed package inside
    site-packages, its project on ``sys.path``), each of its entries but the denied ones."""
    if path in deny:
        return []
    inside = [d for d in deny if d.startswith(path.rstrip("/") + "/")]
    if not inside:
        return [path]
    if depth > 8 or not os.path.isdir(path):
        return []
    granted = []
    for name in sorted(os.listdir(path)):
        granted += _granted(os.path.join(path, name), deny, depth + 1)
    return granted


def _list_ahead(modules: list[str], deny: list[str]) -> None:
    """Have Python list each module folder that holds a ``deny`` folder (a site-packages holding the
    grader's installed package) now, before Landlock: Python finds a module by listing each folder
    of ``sys.path`` once and keeping the names, and Landlock grants such a folder's entries but
    not the folder itself, so a worker that confines itself before importing (a fresh worker,
    which loads torch after) could import nothing from there. The listing (top-level names only)
    is what the worker template's imports keep anyway; nothing below a denied folder is listed,
    and nothing in it can be read."""
    import importlib.machinery

    for path in modules:
        top = path.rstrip("/")
        if path not in deny and os.path.isdir(path) and any(d.startswith(top + "/") for d in deny):
            try:
                importlib.machinery.PathFinder.find_spec("_attnscore_list_ahead_", [path])
            except (ImportError, OSError, ValueError):
                pass


def _confine(folder: str, deny: list[str], device_files: list[str] | None = None) -> str:
    """Apply Landlock: read the module folders, the system and ``folder``; write the working folder;
    read, write and ioctl the GPU's ``device_files`` (``/dev/nvidia*``, for a GPU worker).

    The ``deny`` folders (the grader's project and its installed packages) are never granted,
    even inside a granted module folder.
    """
    from attnscore.boundary import landlock

    modules = [p for p in sys.path if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p) and p != "/"]
    read = [g for p in dict.fromkeys(modules) for g in _granted(p, deny)] + list(_SYSTEM_READ) + [folder]
    read += [g for p in header_folders() for g in _granted(p, deny)]  # torch.compile's C++ backend
    read += ["/etc/ld.so.conf.d", "/etc/fonts"]  # fonts: a leftover matplotlib import stays quiet
    files = [(f"/etc/{name}", landlock.READ_FILE) for name in _ETC_FILES]
    if sys.executable and os.path.isfile(sys.executable):  # torch.compile starts it again to probe the CPU
        files.append((os.path.realpath(sys.executable), landlock.READ_FILE | landlock.EXECUTE))
        venv = os.path.join(sys.prefix, "pyvenv.cfg")  # which a virtual environment's interpreter reads first
        if os.path.isfile(venv):
            files.append((venv, landlock.READ_FILE))
    files += [(f"/dev/{name}", landlock.READ_FILE | landlock.WRITE_FILE) for name in _DEVICES]
    rights = landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV
    files += [(node, rights) for node in device_files or [] if isinstance(node, str) and node.startswith("/dev/nvidia")]
    _list_ahead(list(dict.fromkeys(modules)), deny)
    return landlock.confine(read, [os.getcwd()], files)


# Names an upload's graded file usually has: they break a tie with an older attempt kept beside it.
_CONVENTIONAL = ("solution.py", "submission.py", "main.py", "answer.py")


def _module_level(body: list[Any]) -> list[Any]:
    """Statements that run at module level: the body, and the blocks of top-level if/try/with."""
    import ast

    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.With, ast.For, ast.While)):
            out += _module_level(node.body) + _module_level(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            out += _module_level(node.body) + _module_level(node.orelse) + _module_level(node.finalbody)
            for handler in node.handlers:
                out += _module_level(handler.body)
    return out


def _binds(node: Any, name: str) -> int:
    """How ``node`` binds ``name`` at module level: 3 def/class, 2 assignment, 1 import, 0 not."""
    import ast

    def targets(target: Any) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for t in target.elts for n in targets(t)]
        return []

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return 3 if node.name == name else 0
    if isinstance(node, ast.Assign):
        return 2 if any(name in targets(t) for t in node.targets) else 0
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) or type(node).__name__ == "NamedExpr":
        return 2 if name in targets(getattr(node, "target", None)) else 0
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return 1 if any((a.asname or a.name).split(".")[0] == name for a in node.names) else 0
    return 0


NOTEBOOK_HEADER = b"# Definitions taken from the notebook "
"""How the grader's conversion of a notebook begins (:mod:`attnscore.submission.notebook`)."""


def is_notebook(path: str) -> bool:
    """Whether the file ``path`` is the grader's conversion of a notebook (it starts with
    :data:`NOTEBOOK_HEADER`)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(NOTEBOOK_HEADER)) == NOTEBOOK_HEADER
    except OSError:
        return False


def _shown(folder: str, name: str) -> str:
    """A file as the student knows it: ``hw3.py`` converted from a notebook is ``hw3.ipynb``."""
    try:
        with open(os.path.join(folder, name), "rb") as f:
            if f.read(len(NOTEBOOK_HEADER)) == NOTEBOOK_HEADER:
                return name[: -len(".py")] + ".ipynb"
    except OSError:
        pass
    return name


def choose_entry(folder: str, function_name: str) -> tuple[str | None, str]:
    """The one top-level ``.py`` file of ``folder`` that defines ``function_name`` (read with ``ast``,
    nothing is run), or ``(None, why not)``."""
    import ast

    files = sorted(n for n in os.listdir(folder) if n.endswith(".py") and os.path.isfile(os.path.join(folder, n)))
    if not files:
        return None, "your submission has no .py file at its top level"
    if len(files) == 1:
        return files[0], ""
    strength: dict[str, int] = {}  # 3: def or class, 2: assignment, 1: imported under that name
    for name in files:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                tree = ast.parse(f.read(), name)
        except BaseException:  # noqa: BLE001 - a file that does not parse cannot be the chosen entry
            continue
        for node in _module_level(tree.body):
            kind = _binds(node, function_name)
            if kind:
                strength[name] = max(strength.get(name, 0), kind)
    best = max(strength.values(), default=0)
    defining = sorted(n for n, k in strength.items() if k == best)
    conventional = [n for n in defining if n in (f"{function_name}.py", *_CONVENTIONAL)]
    if len(defining) > 1 and len(conventional) == 1:
        defining = conventional
    if len(defining) == 1:
        return defining[0], ""
    from attnscore.boundary.untrusted import shown_list

    listed = shown_list([_shown(folder, n) for n in files[:12]] + files[12:])  # the first 12 named
    if not defining:
        return None, f"none of your files defines a function named {function_name!r} (files: {listed})"
    return None, (
        f"more than one of your files defines {function_name!r} ({shown_list([_shown(folder, n) for n in defining])}); "
        "keep it in one file, or ask your instructor which file is graded"
    )


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
) -> None:
    """Drop to ``uid`` (when >= 0), set up ``device`` (``"cpu"`` or ``"cuda:0"``, the one GPU the
    worker sees), import the submission and answer calls until the grader closes ``requests``, with
    the inputs on ``device``. Runs in a confined process that has loaded the runtime.

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
    from attnscore.boundary.calls import bound_python_ints, bound_trailing_nones, describe_exception, type_name
    from attnscore.boundary.gradients import NoBackward, as_callable, backward_call, first_output, resolve_factory
    from attnscore.boundary.outputs import BadReturn, Received, to_received
    from attnscore.boundary.standins import run_notebook
    from attnscore.boundary.traps import Traps
    from attnscore.boundary.untrusted import cut

    send, inspected = bound_sender(resp_fd), bound_inspector(shared)
    watch_compiles = bound_compile_watch(send)
    trapped = Traps(traps)  # installed just before the import: everything above is bound first
    backward_pass = bound_backward(inspected, backward_call, trapped.during)
    device_inputs, copy_back, loads, decode_call = _device_inputs, bound_copy_back(), wire.loads, wire.decode_call
    settle = bound_settle(send, requests, copy_back, bound_copy_in())
    during, calls_seen, upstream_name = trapped.during, trapped.report, wire.UPSTREAM
    same_bytes = _same_bytes
    load_error, ready, importing = wire.LoadError, wire.Ready(), wire.Importing()
    call_failed, call_result = wire.CallFailed, wire.CallResult
    grader_error, function_missing, bad_return = Verdict.GRADER_ERROR, Verdict.FUNCTION_MISSING, Verdict.BAD_RETURN_TYPE
    verdict_of, describe_failure, clues, span = failure_verdict, _describe_failure, _environment_clues, _span
    backward_verdict, callable_of, keyword_form = verdict_of_backward, as_callable, keyword_call
    made_by, split_output = resolve_factory, first_output
    factory_failure: Any = None  # (verdict, message) once a factory could not give a Function
    resolved = False
    missing_entry, missing_function, describe_import = missing_entry_text, missing_function_text, describe_import_error
    listed, size_of, mapping, zipped = list, len, dict, zip
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
        chosen, why = choose_entry(folder, function_name)
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
    function = getattr(module, function_name, None)
    if function is None or not callable(function):
        send(load_error(function_missing, missing_function(function_name, function, vars(module), "submission")))
        return
    try:
        function = callable_of(function)  # a torch.autograd.Function subclass: its .apply
    except BaseException as exc:  # noqa: BLE001 - a class whose metaclass raises is the submission's
        send(load_error(verdict_of(exc), f"the class {function_name} could not be used: {describe_failure(exc)}"))
        return
    watch_compiles(None)
    send(ready)

    while True:
        line = requests.readline()
        if not line:
            return
        request = decode_call(loads(line))
        call_id, inputs = request.id, listed(request.inputs)
        watch_compiles(call_id)
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
        names = listed(request.names)
        count = size_of(names)
        # f(*positional, **by_name, **options), as Contract.binding calls it in process
        by_name, options = listed(request.by_name), mapping(request.options)
        positional = count - size_of(by_name)
        try:
            args, pairs = device_inputs(shared, inputs, device)
            spans = [span(item, arg) if device == "cpu" else None for item, arg in zip(inputs, args, strict=True)]
            upstream: Any = None
            if request.upstream is not None:  # dO, a view of the shared memory too
                given, given_pairs = device_inputs(shared, [request.upstream], device)
                upstream, pairs = given[0], pairs + given_pairs
        except Exception as exc:  # noqa: BLE001 - report, do not die
            send(call_failed(call_id, grader_error, cut(f"the worker could not build the inputs: {exc}", 300)))
            continue

        def settled(stage: str, call_id: int = call_id, pairs: list[Any] = pairs) -> None:
            settle(call_id, stage, pairs)

        backward: Any = None  # a backward call's WithGradients, NoBackward or BadReturn
        try:
            # 0-d int32 inputs (max_seqlen_q) reach the function as Python ints; the tensors are inspected
            called = with_ints(function, *int_inputs(inputs, names, positional))
            called = with_nones(called, request.trailing_nones)  # optional masks passed as None
            if upstream is not None:
                target = keyword_form(called, positional, by_name, options) if by_name or options else called
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
            send(call_failed(call_id, verdict_of(exc), why, type_name(exc), module_clue, file_clue, compiler_clue))
            continue
        if isinstance(backward, NoBackward):
            send(call_failed(call_id, backward_verdict(backward), backward.message, backward.exception))
            continue
        try:
            received = backward if backward is not None else to_received(value)
            if backward is None and not isinstance(received, BadReturn):
                settled("call")  # the grader reads the inputs, then writes its canaries into them
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
        send(call_result(call_id, received, {"mutated": mutated, "aliased": [], "calls": calls_seen()}, again))


if __name__ == "__main__":  # pragma: no cover - started by attnscore.sandbox.launch
    main(sys.argv[1:])
