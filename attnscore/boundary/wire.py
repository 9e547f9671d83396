"""The wire format between the grader and its worker process (version 1).

Messages are single lines of JSON (UTF-8), nothing else: JSON cannot execute code when read,
unlike pickle. Arrays travel as ``{"dtype", "shape", "data"}`` with ``data`` the base64 of the
little-endian C-order bytes, so NaN, infinities and every bit survive. The grader validates each
message (version, field types, dtype whitelist, shape against byte length, size caps) before any
value reaches a comparison: a malformed message is the worker's failure, never the grader's.

The messages themselves are small frozen dataclasses, each with one ``type`` word on the wire:
the grader sends :class:`CallRequest`; the worker answers :class:`Importing`, :class:`Ready` and
:class:`LoadError` while it loads the submission, then :class:`CallResult` or :class:`CallFailed`
per call, and :class:`Compiling` whenever ``torch.compile`` starts or ends a compilation (before
the call's own answer). :func:`encode_message` turns any of them into the JSON object :func:`dumps` writes;
:func:`decode_reply` turns a parsed reply back into one of them, or :class:`Unexpected` when it
is not a message of the protocol. Decoding checks only the form; what the grader believes of a
reply (which verdicts a worker may report, and when) is :mod:`attnscore.sandbox.outcome`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attnscore.boundary.gradients import LOGSUMEXP_PLACES
from attnscore.boundary.modules import ModuleConfig
from attnscore.boundary.outputs import Received
from attnscore.boundary.untrusted import cut
from attnscore.boundary.verdict import Verdict
from attnscore.boundary.wire_codec import (
    MAX_MESSAGE_BYTES,
    MAX_TEXT,
    MAX_TRAILING_NONES,
    VERSION,
    WireError,
    bound_grader_lines,
    decode_array,
    decode_received,
    dumps,
    encode_array,
    encode_received,
    loads,
)

__all__ = [
    "VERSION",
    "MAX_MESSAGE_BYTES",
    "MAX_TEXT",
    "OptionValue",
    "Binding",
    "WireError",
    "bound_grader_lines",
    "encode_array",
    "decode_array",
    "dumps",
    "loads",
    "encode_received",
    "decode_received",
    "CallRequest",
    "Importing",
    "Ready",
    "LoadError",
    "CallResult",
    "CallFailed",
    "UnreadableResult",
    "Compiling",
    "Returned",
    "Proceed",
    "UPSTREAM",
    "CALL_STAGES",
    "Unexpected",
    "Message",
    "Reply",
    "encode_message",
    "decode_call",
    "bound_call_reader",
    "decode_reply",
]

OptionValue = bool | int | float | str | None | tuple[bool | int | float, ...]
"""A fixed keyword's value on the wire: a scalar (text too: an instructor's own keyword), None, or a tuple of
numbers (``window_size=(2, 1)``)."""


@dataclass(frozen=True)
class Binding:
    """How the worker calls one function of the submission: the settings that travel with each
    call (:class:`CallRequest`), so one worker serves several functions (an assignment's
    questions) with the submission imported once.

    ``function``: the name to call, resolved in the worker at its first call (a name the submission
    does not define is that call's ``function_missing``); ``""``: the function the worker resolved
    when it imported the submission (one spec graded). ``by_name``, ``options``, ``logsumexp``,
    ``factory`` and ``module`` as :class:`CallRequest` has them.

    >>> Binding("softmax", options=(("dim", -1),)).function
    'softmax'
    """

    function: str = ""
    by_name: tuple[str, ...] = ()
    options: tuple[tuple[str, OptionValue], ...] = ()
    logsumexp: tuple[str, int | None] | None = None
    factory: bool = False
    module: dict[str, Any] | None = None


@dataclass(frozen=True)
class CallRequest:
    """The grader asks for one call: ``id`` (1, 2, ... per worker), the tested ``dtype``, the
    worker's ``device``, the argument ``names`` in order and each input's place in the shared
    memory (``inputs``: ``name``, ``dtype``, ``shape``, ``offset``, and for a strided layout
    ``strides``, ``storage_offset`` and ``count``).

    How the function is called, as a spec's contract binds it in process
    (``attnscore.maths.contract.Contract.binding``): the last ``len(by_name)`` inputs are passed
    by name, under the names ``by_name`` gives (``attn_mask=``), and ``options`` (keyword name ->
    a bool, a number, None, or a tuple of numbers: ``scale=0.5``, ``window_size=(2, 1)``) are passed
    by name too, so the worker calls ``f(*positional, **by_name, **options)``. Both are empty for a
    positional contract, and then absent from the message.

    ``upstream``, when set, is the place of the upstream gradient ``dO`` in the shared memory (an
    item like those of ``inputs``, named :data:`UPSTREAM`): the worker also runs the backward pass
    (:mod:`attnscore.boundary.gradients`) with ``dO`` viewed from there (so the grader reads back
    whether the backward changed it) and sends the gradients with the value.

    Before it turns what the call returned into data, the worker says :class:`Returned` and waits
    for the grader's :class:`Proceed` (after the forward of a backward call too): the grader reads
    the shared inputs itself at each of these points, then writes its canaries into them before
    the last ``Proceed``, so that an output sharing an input's memory shows them.

    ``logsumexp``, when set, is ``(place, index)``: where the forward keeps its logsumexp ``L``
    (:func:`attnscore.boundary.gradients.find_logsumexp`; a ``"returned"`` ``(O, L)`` tuple is taken
    as ``O`` in every call). ``factory``: the named function returns the
    ``torch.autograd.Function`` subclass to call (:func:`attnscore.boundary.gradients.resolve_factory`),
    resolved by the worker at its first call.

    ``module``: a spec's ``function.module`` as JSON data
    (:meth:`attnscore.boundary.modules.ModuleConfig.to_json`): the named object is an ``nn.Module``
    subclass, built and called for this call as :func:`attnscore.boundary.modules.module_call` says;
    None for a function.

    ``trailing_nones``: how many None arguments follow the positional inputs (optional masks the call
    passes as None, ``f(Q, K, V, None)``); one passed by name travels in ``options`` (``name=None``), and
    an argument the call leaves out is simply not among ``names``.

    ``function``: the function to call (:attr:`Binding.function`), absent from the message when
    ``""`` (the one the worker resolved at import)."""

    TYPE: ClassVar[str] = "call"
    id: int
    dtype: str
    device: str
    names: tuple[str, ...]
    inputs: tuple[dict[str, Any], ...]
    by_name: tuple[str, ...] = ()
    options: tuple[tuple[str, OptionValue], ...] = ()
    upstream: dict[str, Any] | None = None
    logsumexp: tuple[str, int | None] | None = None
    factory: bool = False
    trailing_nones: int = 0
    module: dict[str, Any] | None = None
    function: str = ""


UPSTREAM = "dO"
"""The name of the upstream gradient among a backward call's shared items and inspected tensors."""

CALL_STAGES = ("forward", "call")
"""When a worker says :class:`Returned`: ``"forward"`` after the forward of a backward call (the
backward has not run), ``"call"`` once the whole call (and its backward) has returned."""


@dataclass(frozen=True)
class Returned:
    """Call ``id``'s function returned (``stage``: :data:`CALL_STAGES`); the worker waits for
    :class:`Proceed` before it goes on, so that the grader reads the shared inputs at that moment
    (and, after ``"call"``, writes its canaries into them before the output is read)."""

    TYPE: ClassVar[str] = "returned"
    id: int | None
    stage: str | None


@dataclass(frozen=True)
class Proceed:
    """The grader's answer to :class:`Returned`: go on with call ``id`` past ``stage``."""

    TYPE: ClassVar[str] = "proceed"
    id: int
    stage: str


@dataclass(frozen=True)
class Importing:
    """The worker is about to import the submission: the last message only the worker can have
    written (from here on the submission's code runs in that process)."""

    TYPE: ClassVar[str] = "importing"
    id: int | None = None


@dataclass(frozen=True)
class Ready:
    """The submission is imported and defines the function: calls may come."""

    TYPE: ClassVar[str] = "ready"
    id: int | None = None


@dataclass(frozen=True)
class LoadError:
    """The submission cannot be called: not confined, no such file or function, or its import
    failed. ``verdict`` is None when the word sent is not a verdict; ``exception`` an exception's
    type name (an identifier of at most 100 characters, else ""); ``module`` and ``file`` the
    clues of a ``ModuleNotFoundError`` or ``PermissionError``, ``compiler`` the clue that
    ``torch.compile`` could not compile (no C++ compiler, a failed compilation: a few words);
    the grader checks every clue itself.

    The ``id`` of a message of the loading phase (:class:`Importing`, :class:`Ready`, this) is
    None as the worker sends it; one a forged message carries is kept for the grader's turn check."""

    TYPE: ClassVar[str] = "load_error"
    verdict: Verdict | None
    message: str
    exception: str = ""
    module: str | None = None
    file: str | None = None
    id: int | None = None
    compiler: str | None = None


@dataclass(frozen=True)
class CallResult:
    """Call ``id`` returned ``value`` (decoded and validated); ``inspection`` is the worker's own
    report of the inputs it saw changed (their metadata) and the ruled calls its traps saw, raw
    (the grader checks it against the call's names). ``probe``: the output read again after the
    grader wrote its canaries into the inputs, sent only when its bytes differ from ``value``'s
    (an output that shares an input's memory, :class:`Returned`); None otherwise."""

    TYPE: ClassVar[str] = "result"
    id: int | None
    value: Received
    inspection: Any = None
    probe: np.ndarray | None = None


@dataclass(frozen=True)
class CallFailed:
    """Call ``id`` produced no value: ``verdict`` (None when the word sent is not a verdict), a
    message, and as for :class:`LoadError` the exception's type name and the clues."""

    TYPE: ClassVar[str] = "failure"
    id: int | None
    verdict: Verdict | None
    message: str
    exception: str = ""
    module: str | None = None
    file: str | None = None
    compiler: str | None = None


@dataclass(frozen=True)
class UnreadableResult:
    """A ``result`` reply to call ``id`` whose value cannot be read back (:func:`decode_received`
    says why: ``problem``)."""

    id: int | None
    problem: str


@dataclass(frozen=True)
class Compiling:
    """``torch.compile`` started (``started``) or ended a compilation during call ``id`` (None while
    the submission is imported): the grader counts the time in between against the submission's
    compile allowance instead of the call's own limit (:class:`attnscore.sandbox.limits.Limits`).
    Sent by the submission's own process, so it is taken only up to that allowance."""

    TYPE: ClassVar[str] = "compiling"
    id: int | None
    started: bool


@dataclass(frozen=True)
class Unexpected:
    """A reply that is not a message of the protocol (``type`` is another word, or none);
    ``id`` as sent, for the grader's turn check."""

    id: int | None
    type: str | None


Reply = Importing | Ready | LoadError | CallResult | CallFailed | Compiling | Returned | UnreadableResult | Unexpected
"""Everything :func:`decode_reply` returns."""

_OPTIONAL = ("exception", "module", "file", "compiler")


Message = CallRequest | Proceed | Importing | Ready | LoadError | CallResult | CallFailed | Compiling | Returned
"""Every message either side sends."""


def _bound_encoder() -> Callable[[Message], dict[str, Any]]:
    """:func:`encode_message`, with every name it uses held in its closure when this module is
    imported: the worker binds it before the submission is imported, and patching this module,
    its classes' module names or the builtins afterwards cannot change what the worker says
    (:func:`attnscore.boundary.sender.bound_sender`)."""
    received, optional, array = encode_received, _OPTIONAL, encode_array
    of_type, attribute, listed, mapping, cut_to, most = isinstance, getattr, list, dict, cut, MAX_TEXT
    request, loading, result, failed, compiling = CallRequest, (Importing, Ready), CallResult, CallFailed, Compiling
    stages = (Returned, Proceed)
    truth, text = bool, str

    def encode_message(message: Any) -> dict[str, Any]:
        """``message`` as the JSON object :func:`dumps` writes: its ``type`` word and its fields
        (a verdict is a ``str`` enum: its word), a returned value as :func:`encode_received`
        writes it; ``exception``, ``module``, ``file`` (and a loading message's ``id``) only when
        set, so each message is the object it has always been on the wire."""
        # the messages of every call first (the types are disjoint: the order changes no message)
        if of_type(message, stages):
            return {"type": message.TYPE, "id": message.id, "stage": text(message.stage)}
        if of_type(message, result):
            answer = {
                "type": message.TYPE,
                "id": message.id,
                "value": received(message.value),
                "inspection": message.inspection,
            }
            if message.probe is not None:
                answer["probe"] = array(message.probe)
            return answer
        if of_type(message, request):
            call = {
                "type": message.TYPE,
                "id": message.id,
                "dtype": message.dtype,
                "device": message.device,
                "names": listed(message.names),
                "inputs": [mapping(item) for item in message.inputs],
                **({"upstream": message.upstream} if message.upstream is not None else {}),
            }
            if message.by_name:
                call["by_name"] = listed(message.by_name)
            if message.options:
                call["options"] = mapping(message.options)
            if message.logsumexp is not None:
                call["logsumexp"] = listed(message.logsumexp)
            if message.factory:
                call["factory"] = True
            if message.trailing_nones:
                call["trailing_nones"] = message.trailing_nones
            if message.module is not None:
                call["module"] = message.module
            if message.function:
                call["function"] = message.function
            return call
        if of_type(message, loading):
            return {"type": message.TYPE, **({"id": message.id} if message.id is not None else {})}
        if of_type(message, compiling):
            said = {"type": message.TYPE, "started": truth(message.started)}
            return {**said, **({"id": message.id} if message.id is not None else {})}
        head: dict[str, Any] = {"type": message.TYPE}
        if of_type(message, failed) or message.id is not None:
            head["id"] = message.id
        head["verdict"], head["message"] = message.verdict, cut_to(message.message, most)
        for name in optional:
            if attribute(message, name):
                head[name] = attribute(message, name)
        return head

    return encode_message


encode_message: Callable[[Message], dict[str, Any]] = _bound_encoder()


def decode_call(obj: dict[str, Any]) -> CallRequest:
    """A call request read by the worker (from the grader, whose messages it trusts).

    Raises:
        KeyError, TypeError, ValueError: ``obj`` is not a call request (``by_name`` names more
            inputs than the call has, ``options`` holds something other than a bool, a number, text,
            None or a list of numbers under an identifier, ``trailing_nones`` is not an integer
            from 0 to :data:`MAX_TRAILING_NONES`, ``module`` is not a module config, or ``function`` is
            not an identifier).
    """
    get, text = obj.get, str
    names = tuple(map(text, get("names", [])))
    # a positional call (the common one) has neither by_name nor options: nothing more to check
    by_name = tuple(map(text, obj["by_name"])) if "by_name" in obj else ()
    options = tuple((text(k), _option(k, v)) for k, v in dict(obj["options"]).items()) if "options" in obj else ()
    if by_name and (len(by_name) > len(names) or not all(n.isidentifier() for n in by_name)):
        raise ValueError(f"expected at most {len(names)} identifiers in by_name, found {list(by_name)}")
    nones = get("trailing_nones", 0)
    if isinstance(nones, bool) or not isinstance(nones, int) or not 0 <= nones <= MAX_TRAILING_NONES:
        raise ValueError(
            f"expected trailing_nones as an integer from 0 to {MAX_TRAILING_NONES}, found {str(nones)[:20]}"
        )
    function = get("function", "")
    if not isinstance(function, str) or (function and not function.isidentifier()):
        raise ValueError(f"expected function as an identifier, found {str(function)[:80]}")
    module, logsumexp = get("module"), get("logsumexp")
    return CallRequest(
        int(obj["id"]),
        text(obj["dtype"]),
        text(get("device", "cpu")),
        names,
        tuple(obj["inputs"]),
        by_name,
        options,
        get("upstream"),
        None if logsumexp is None else _logsumexp(logsumexp),
        get("factory") is True,
        nones,
        None if module is None else ModuleConfig.from_json(module).to_json(),
        function,
    )


def bound_call_reader(size: int = 256) -> Callable[[bytes], tuple[int, CallRequest]]:
    """``read(line) -> (id, request)``: :func:`decode_call` of :func:`bound_grader_lines`'s reading
    of a call request line, for the worker. A line that differs from one read before only in the
    digits of its ``"id"`` (the grader asks for the same inputs' places and call form again, with
    the next id) is not parsed again: its request is the one read then, its id the new digits
    (``request.id`` is that earlier line's; the worker uses the id returned). A line is
    remembered only once its decoded id was found to be those digits, and at most ``size`` lines
    are (then the memory starts again). Bound when called (the worker calls it before the
    submission is imported).

    Raises:
        WireError, KeyError, TypeError, ValueError: as :func:`bound_grader_lines` and
            :func:`decode_call` raise for a line that is not a call request.
    """
    parse, decode, find, whole, length = bound_grader_lines(), decode_call, bytes.find, int, len
    known: dict[bytes, CallRequest] = {}
    marker = b'"id": '
    skip = length(marker)

    def read(line: bytes) -> tuple[int, CallRequest]:
        at = find(line, marker)
        key, digits = None, b""
        if at >= 0:
            start = at + skip
            end = find(line, b",", start)
            digits = line[start:end]
            if 0 < length(digits) <= 18 and digits.isdigit() and (digits[:1] != b"0" or length(digits) == 1):
                key = line[:start] + line[end:]
                seen = known.get(key)
                if seen is not None:
                    return whole(digits), seen
        request = decode(parse(line))
        if key is not None and request.id == whole(digits):
            if length(known) >= size:
                known.clear()
            known[key] = request
        return request.id, request

    return read


def _logsumexp(raw: object) -> tuple[str, int | None] | None:
    """A call's ``logsumexp`` field: None, or ``[place, index]`` with a known place and an index >= 0 or null."""
    if raw is None:
        return None
    if (
        isinstance(raw, list)
        and len(raw) == 2
        and raw[0] in LOGSUMEXP_PLACES
        and (raw[1] is None or (isinstance(raw[1], int) and not isinstance(raw[1], bool) and raw[1] >= 0))
    ):
        return str(raw[0]), raw[1]
    raise ValueError(f"expected logsumexp as [place, index or null], found {str(raw)[:80]}")


def _option(key: object, value: object) -> OptionValue:
    """A fixed keyword's value as the function receives it: a JSON list (``window_size``) becomes a
    tuple, as a Python default like ``(-1, -1)`` is; ValueError for anything but an identifier
    naming a bool, a number, text, None or a list of numbers."""
    scalar = (bool, int, float)
    if isinstance(key, str) and key.isidentifier():
        if value is None or isinstance(value, (*scalar, str)):
            return value
        if isinstance(value, list) and all(isinstance(v, scalar) for v in value):
            return tuple(value)
    raise ValueError(
        f"expected options of identifiers -> bool, number, text, null or list of numbers, found {key!r}: {value!r}"
    )


def _id(raw: object) -> int | None:
    """A reply's ``id`` as the integer it equals (``1``, ``1.0`` and ``true`` all answer call 1,
    as JSON numbers compare), else None."""
    if isinstance(raw, (bool, int)):
        return int(raw)
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    return None


def _verdict(raw: object) -> Verdict | None:
    if isinstance(raw, str):
        try:
            return Verdict(raw)
        except ValueError:
            return None
    return None


def _failure_fields(obj: dict[str, Any]) -> dict[str, Any]:
    name, module, file, compiler = obj.get("exception"), obj.get("module"), obj.get("file"), obj.get("compiler")
    return {
        "verdict": _verdict(obj.get("verdict")),
        "message": cut(str(obj.get("message", "")), MAX_TEXT + 64),  # room for the worker's own note
        "exception": name if isinstance(name, str) and name.isidentifier() and len(name) <= 100 else "",
        "module": module if isinstance(module, str) else None,
        "file": file if isinstance(file, str) else None,
        "compiler": compiler if isinstance(compiler, str) and compiler else None,
    }


def decode_reply(obj: dict[str, Any]) -> Reply:
    """The worker's reply ``obj`` (parsed by :func:`loads`) as a message; never raises.

    A ``result`` whose value cannot be read back (:func:`decode_received`) is
    :class:`UnreadableResult`; a verdict word outside :class:`Verdict` decodes as None; an ``id`` that is
    no integer as None."""
    kind, call_id = obj.get("type"), _id(obj.get("id"))
    if kind == Importing.TYPE:
        return Importing(call_id)
    if kind == Ready.TYPE:
        return Ready(call_id)
    if kind == LoadError.TYPE:
        return LoadError(**_failure_fields(obj), id=call_id)
    if kind == CallFailed.TYPE:
        return CallFailed(call_id, **_failure_fields(obj))
    if kind == Compiling.TYPE:
        return Compiling(call_id, obj.get("started") is True)
    if kind == Returned.TYPE:
        stage = obj.get("stage")
        return Returned(call_id, stage if stage in CALL_STAGES else None)
    if kind == CallResult.TYPE:
        try:
            value = decode_received(obj.get("value"))
            probe = decode_array(obj["probe"])[1] if "probe" in obj else None
        except WireError as exc:
            return UnreadableResult(call_id, str(exc))
        return CallResult(call_id, value, obj.get("inspection"), probe)
    return Unexpected(call_id, kind if isinstance(kind, str) else None)
