"""The steps around one call of the submission, each built before the submission is imported
(every function it uses held in its closure, so that patching a module's globals afterwards cannot
change it): the call and its inspection, the compilation watch, the backward pass, the settling of
device inputs, the keyword form (:func:`attnscore.boundary.worker.serve` binds them).
"""

from __future__ import annotations

import sys
from typing import Any


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
    whatever the submission restores later.

    Each snapshot is one lazy iterator of C iterators (``itertools.chain`` of ``map`` and
    ``starmap`` over the arguments, :func:`snapshot`), made before the call and run by C code
    alone, on every Python version."""
    import gc
    import itertools

    import torch

    base = torch._C.TensorBase
    chain, starmap, listed, kind, cut, zipped, mapped = (
        itertools.chain,
        itertools.starmap,
        list,
        type,
        slice,
        zip,
        map,
    )
    tensor, length, ranged, ordered = torch.Tensor, len, range, sorted
    metadata = (base.size, base.stride, base.data_ptr, base.__dict__["dtype"].__get__, base.is_neg, base.is_conj)
    fields = length(metadata)
    plain = torch._C.DisableTorchFunction()
    enter, leave = plain.__enter__, plain.__exit__
    read = shared.__getitem__ if shared is not None else None
    set_trace, set_profile, gc_off, gc_on, gc_state = sys.settrace, sys.setprofile, gc.disable, gc.enable, gc.isenabled
    nothing, three_nones = [()], [(None, None, None)]  # the arguments of one call with none, or with three Nones

    def snapshot(args: list[Any], slices: list[Any]) -> Any:
        """Whether the collector runs, then the collector off (no finalizer runs), region bytes,
        classes, then (overrides off) the metadata fields, field by field, then overrides and the
        collector back on: ``2 + len(slices) + n + 1 + 6 n + 2`` results, as one lazy iterator
        that runs no Python bytecode."""
        return chain(
            starmap(gc_state, nothing),
            starmap(gc_off, nothing),
            mapped(read, slices) if read is not None else (),
            mapped(kind, args),
            starmap(enter, nothing),
            *[mapped(field, args) for field in metadata],
            starmap(leave, three_nones),
            starmap(gc_on, nothing),
        )

    def call(
        function: Any, args: list[Any], spans: list[tuple[int, int] | None], positional: int | None = None
    ) -> tuple[Any, list[int]]:
        """``(value, indices of the arguments changed in place)``; raises what ``function`` raises.
        ``function`` gets the first ``positional`` arguments (default all) by position: the others
        are already bound to it by name (a :func:`functools.partial`), and every one is inspected."""
        n = length(args)
        given = args if positional is None else args[:positional]
        shared_at = [i for i in ranged(n) if spans[i] is not None] if read is not None else []
        regions: list[Any] = spans
        slices = [cut(*regions[i]) for i in shared_at]
        k = length(slices)
        before = listed(snapshot(args, slices))[2:]
        after_call = snapshot(args, slices)
        set_trace(None)
        set_profile(None)
        got: list[Any] = listed()
        try:
            got.extend(chain(starmap(function, [given]), after_call))
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
        after = got[3:]  # after the value, the collector's state and gc_off's None
        at, end = k + n + 1, k + n + 1 + fields * n  # the metadata fields
        odd = [i for i in ranged(n) if after[k + i] is not tensor]  # classes, by identity
        if not odd and before[:k] == after[:k] and before[at:end] == after[at:end]:
            return got[0], []  # bytes, torch.Size, tuples, ints, dtypes, bools: C comparisons
        changed = {i for i, j in zipped(shared_at, ranged(k)) if before[j] != after[j]}
        changed.update(odd)
        for f in ranged(fields):
            start = at + f * n
            changed |= {i for i in ranged(n) if before[start + i] != after[start + i]}
        return got[0], ordered(changed)

    def tensor_metadata(tensors: list[Any]) -> list[Any]:
        """Per tensor, its class and (overrides off, collector off) shape, strides, data pointer,
        dtype and neg/conj bits: compared before and after a backward pass, which runs outside
        :func:`call` (a saved input or ``dO`` changed in place by the submission's backward)."""
        was = gc_state()
        taken = listed(snapshot(tensors, []))[2:]
        if not was:
            gc_off()
        n = length(tensors)
        columns = [taken[n + 1 + f * n : n + 1 + (f + 1) * n] for f in ranged(fields)]
        return listed(zipped(taken[:n], *columns))

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

    returned, readline, loads = wire.Returned, requests.readline, wire.bound_grader_lines()
    say_returned = getattr(send, "returned", None) or (lambda call_id, stage: send(returned(call_id, stage)))
    # the grader's Proceed as wire.dumps writes it, byte for byte: such a line needs no parsing
    # (any other line, a Proceed written another way included, is parsed and checked as always)
    lines = {}
    for stage in wire.CALL_STAGES:
        head, tail = wire.dumps(wire.encode_message(wire.Proceed(0, stage))).split(b'"id": 0', 1)
        lines[stage] = head.replace(b"%", b"%%") + b'"id": %d' + tail.replace(b"%", b"%%")
    whole, kind = int, type

    def settle(call_id: int, stage: str, pairs: list[Any]) -> None:
        copy_back(pairs)
        say_returned(call_id, stage)
        line = readline()
        expected = lines.get(stage)
        if expected is None or kind(call_id) is not whole or line != expected % call_id:
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
