"""The wire's lines and the values in them: one JSON object per line (:func:`dumps`, :func:`loads`, with
its version and size caps checked before any value is read), arrays as ``{"dtype", "shape", "data"}``
(base64 of the little-endian C-order bytes, so NaN, infinities and every bit survive) and returned
values (:func:`encode_received`, :func:`decode_received`). The messages are :mod:`attnscore.boundary.wire`'s.
"""

from __future__ import annotations

import base64
import binascii
import json
import json.scanner
from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.gradients import WithGradients
from attnscore.boundary.outputs import ALLOWED_DTYPES, MAX_ELEMENTS, RETURN_KINDS, Received, ReturnKind
from attnscore.boundary.untrusted import cut

__all__ = [
    "MAX_CONTAINERS",
    "MAX_DIMS",
    "MAX_ITEMS",
    "MAX_MESSAGE_BYTES",
    "MAX_TEXT",
    "MAX_TRAILING_NONES",
    "VERSION",
    "WireError",
    "bound_grader_lines",
    "decode_array",
    "decode_received",
    "dumps",
    "encode_array",
    "encode_received",
    "loads",
    "wire_dtype",
]

VERSION = 1
MAX_MESSAGE_BYTES = 48 * 1024 * 1024
MAX_DIMS = 8
MAX_TRAILING_NONES = 8
"""Most None arguments one call passes after its positional inputs (:attr:`CallRequest.trailing_nones`)."""
MAX_CONTAINERS = 1000
"""Most JSON objects and arrays (counted as opening brackets, strings included) in one message."""
MAX_ITEMS = 100_000
"""Most ``,`` and ``:`` separators (strings included) in one message."""
MAX_TEXT = 2000
"""Most characters of a text the worker writes (a failure's message, why ``L`` was not found): the
worker cuts each where it makes the message (:func:`attnscore.boundary.wire.encode_message`,
:func:`encode_received`), so that no description makes a reply the grader refuses, and the grader
cuts what it reads to the same length and the note (a hand-written reply's text is never a reason to
refuse it either)."""
KINDS = RETURN_KINDS


class WireError(ValueError):
    """A message from the worker is malformed; the text says what was wrong."""


_NP_DTYPES: dict[str, np.dtype] = {}  # name -> its little-endian numpy dtype, made once per name
_NATIVE: dict[str, np.dtype] = {}  # name -> the same dtype in this machine's byte order (decoded arrays)
_KINDS_BY_WORD = {kind.value: kind for kind in ReturnKind}  # a kind's word -> its member, looked up once


def wire_dtype(name: str) -> np.dtype:
    """The little-endian numpy dtype an array of dtype ``name`` travels as (bfloat16: float32).

    Raises:
        TypeError: ``name`` is no dtype numpy knows.
    """
    dt = _NP_DTYPES.get(name)
    if dt is None:
        dt = _NP_DTYPES[name] = np.dtype("float32" if name == "bfloat16" else name).newbyteorder("<")
        _NATIVE[name] = dt.newbyteorder("=")
    return dt


def _size_or_none(shape: object) -> int | None:
    """The element count of ``shape`` when it is a list of at most :data:`MAX_DIMS` integers
    (not bools), each from 0 to ``MAX_ELEMENTS``; else None."""
    if type(shape) is not list or len(shape) > MAX_DIMS:
        return None
    size = 1
    for s in shape:
        if type(s) is not int or not 0 <= s <= MAX_ELEMENTS:  # an int subclass (bool) is refused too
            return None
        size *= s
    return size


def encode_array(array: np.ndarray, dtype: str | None = None) -> dict[str, Any]:
    """Encode ``array`` (its dtype named ``dtype``, default its own) as plain JSON data."""
    name = dtype or array.dtype.name
    arr = np.asarray(array, dtype=wire_dtype(name))  # no copy when it already is: tobytes() writes C order
    return {"dtype": name, "shape": list(arr.shape), "data": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode_array(obj: Any) -> tuple[str, np.ndarray]:
    """Validate and decode an encoded array; returns ``(dtype name, array)``.

    Raises:
        WireError: not a mapping, unknown dtype, bad shape, too large, or bytes that do not
            match the shape.
    """
    if not isinstance(obj, dict):
        raise WireError(f"expected an array object, found {type(obj).__name__}")
    name, shape, data = obj.get("dtype"), obj.get("shape"), obj.get("data")
    if name not in ALLOWED_DTYPES:
        raise WireError(f"expected a dtype in {', '.join(ALLOWED_DTYPES)}, found {str(name)[:40]!r}")
    size = _size_or_none(shape)
    if size is None:
        raise WireError(f"expected a shape of at most {MAX_DIMS} non-negative sizes, found {str(shape)[:80]}")
    if size > MAX_ELEMENTS:
        raise WireError(f"expected at most {MAX_ELEMENTS} elements, found {size}")
    if not isinstance(data, str):
        raise WireError("expected base64 text for the data")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError("expected base64 text for the data, found invalid base64") from None
    dt = wire_dtype(name)
    if len(raw) != size * dt.itemsize:
        raise WireError(f"expected {size * dt.itemsize} bytes for shape {shape} {name}, found {len(raw)}")
    arr = np.frombuffer(raw, dtype=dt).reshape(shape).astype(_NATIVE[name], copy=True)
    return name, arr


def encode_received(received: Received) -> dict[str, Any]:
    """Encode a :class:`Received` for the wire (with a backward call's gradients and missing inputs)."""
    head = {"kind": received.kind, "device": received.device, **encode_array(received.array, received.dtype)}
    if isinstance(received, WithGradients):
        head["gradients"] = [
            {"name": n, **encode_array(g, received.gradient_dtypes.get(n))} for n, g in received.gradients.items()
        ]
        head["missing"] = list(received.missing)
        if received.logsumexp is not None:
            head["logsumexp"] = encode_array(received.logsumexp, "float64")
        if received.logsumexp_problem:
            head["logsumexp_problem"] = cut(received.logsumexp_problem, MAX_TEXT)
    return head


def _gradients(obj: dict[str, Any], value: Received) -> WithGradients:
    """A result's ``gradients`` and ``missing`` fields decoded and validated (names: short text, once each)."""
    raw, missing = obj.get("gradients"), obj.get("missing", [])
    if not isinstance(raw, list) or len(raw) > 64 or not isinstance(missing, list) or len(missing) > 64:
        raise WireError("expected a list of at most 64 gradients and of missing inputs")
    grads: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for item in raw:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not 0 < len(name) <= 100 or name in grads:
            raise WireError("expected each gradient to name its input once (at most 100 characters)")
        dtypes[name], grads[name] = decode_array(item)
    if not all(isinstance(n, str) and 0 < len(n) <= 100 and n not in grads for n in missing):
        raise WireError("expected the missing inputs as names without a gradient")
    lse = None
    if "logsumexp" in obj:
        lse_dtype, lse = decode_array(obj["logsumexp"])
        if lse_dtype != "float64":
            raise WireError(f"expected the logsumexp as float64, found {lse_dtype[:20]}")
    problem = obj.get("logsumexp_problem", "")
    if not isinstance(problem, str):
        raise WireError("expected the logsumexp problem as text")
    problem = cut(problem, MAX_TEXT + 64)  # room for the worker's own note of what it cut
    return WithGradients(
        value.kind, value.dtype, value.device, value.array, grads, dtypes, tuple(missing), lse, problem
    )


def decode_received(obj: Any) -> Received:
    """Validate and decode a returned value sent by the worker."""
    if not isinstance(obj, dict):
        raise WireError(f"expected a value object, found {type(obj).__name__}")
    kind, device = obj.get("kind"), obj.get("device")
    if kind not in KINDS:
        raise WireError(f"expected a kind in {', '.join(KINDS)}, found {str(kind)[:40]!r}")
    if not isinstance(device, str) or len(device) > 32:
        raise WireError("expected a short device name")
    name, arr = decode_array(obj)
    value = Received(_KINDS_BY_WORD[kind], name, device, arr)
    return _gradients(obj, value) if "gradients" in obj else value


_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=True)
"""The one encoder of :func:`dumps` (``json.dumps`` with these options built a new one per message)."""


def dumps(message: dict[str, Any]) -> bytes:
    """One message as a line of strict JSON (no NaN tokens), with the version added."""
    return _ENCODER.encode({"v": VERSION, **message}).encode("ascii") + b"\n"


def _no_constants(token: str) -> Any:
    raise WireError(f"expected strict JSON, found the token {token}")


def _small_int(text: str) -> int:
    if len(text) > 20:
        raise WireError(f"expected integers of at most 20 digits, found one of {len(text)}")
    return int(text)


_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_int=_small_int)
"""The one decoder of :func:`loads` (``json.loads`` with these options built a new one per message)."""
# typeshed types make_scanner as a class taking itself; it is the C scanner taking the decoder
_SCAN: Any = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
"""Its scanner, called by :func:`loads` itself: ``JSONDecoder.decode`` without its two whitespace
regular expressions and two Python frames (the same C scanner, hooks and errors)."""
_JSON_SPACE = " \t\n\r"  # JSON's whitespace, as the decoder skips it around the value
_UNPARSEABLE = "expected a JSON message, found unparseable bytes ({})"


def loads(line: bytes) -> dict[str, Any]:
    """Parse one message line; check it is a JSON object of this version.

    The structure is bounded before any object is built (at most ``MAX_CONTAINERS`` objects and
    arrays, ``MAX_ITEMS`` separators, integers of 20 digits), so a hostile reply costs the grader
    no more memory or time than its byte length allows.

    Raises:
        WireError: too long, too many containers or items, not UTF-8 JSON, not an object, or
            another version. Nothing else: every parser failure is a WireError.
    """
    if len(line) > MAX_MESSAGE_BYTES:
        raise WireError(f"expected a message of at most {MAX_MESSAGE_BYTES} bytes, found {len(line)}")
    containers = line.count(b"{") + line.count(b"[")
    if containers > MAX_CONTAINERS:
        raise WireError(f"expected at most {MAX_CONTAINERS} objects and arrays, found {containers} brackets")
    items = line.count(b",") + line.count(b":")
    if items > MAX_ITEMS:
        raise WireError(f"expected at most {MAX_ITEMS} items, found {items} separators")
    try:
        text = line.decode("utf-8").strip(_JSON_SPACE)
        obj, end = _SCAN(text, 0)
    except WireError:
        raise
    except StopIteration:  # no value where one starts: the decoder's JSONDecodeError("Expecting value")
        raise WireError(_UNPARSEABLE.format("JSONDecodeError")) from None
    except Exception as exc:  # noqa: BLE001 - any parser failure is the worker's, never the grader's
        raise WireError(_UNPARSEABLE.format(type(exc).__name__)) from None
    if end != len(text):  # more after the value: the decoder's JSONDecodeError("Extra data")
        raise WireError(_UNPARSEABLE.format("JSONDecodeError"))
    if not isinstance(obj, dict):
        raise WireError(f"expected a JSON object, found {type(obj).__name__}")
    if obj.get("v") != VERSION:
        raise WireError(f"expected wire version {VERSION}, found {str(obj.get('v'))[:20]!r}")
    return obj


def bound_grader_lines() -> Callable[[bytes], dict[str, Any]]:
    """``read(line) -> dict``: :func:`loads` for the worker's side, which reads only the grader's own
    lines (its call requests and :class:`~attnscore.boundary.wire.Proceed` answers, whose size it
    controls): one JSON object of this version, strict JSON (no NaN tokens), parsed by the C
    scanner alone (no per-number hook, no counting of brackets first), about 4 times faster. Bound
    when called (the worker calls it before the submission is imported).

    Raises:
        WireError: not UTF-8, not one JSON object (with nothing after it but whitespace), or
            another version.
    """
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    # typeshed types make_scanner as a class taking itself; it is the C scanner taking the decoder
    scan: Any = json.scanner.make_scanner(decoder)  # type: ignore[arg-type]
    utf8, version, mapping, wire_error = "utf-8", VERSION, dict, WireError
    of_type, length, text, kind = isinstance, len, str, type

    def read(line: bytes) -> dict[str, Any]:
        try:
            data = line.decode(utf8).strip()
            obj, end = scan(data, 0)
        except wire_error:
            raise
        except Exception as exc:  # noqa: BLE001 - StopIteration for no value, JSONDecodeError, UnicodeDecodeError
            raise wire_error(f"expected a JSON message, found unparseable bytes ({kind(exc).__name__})") from None
        if end != length(data):
            raise wire_error("expected one JSON message on the line, found more after it")
        if not of_type(obj, mapping):
            raise wire_error(f"expected a JSON object, found {kind(obj).__name__}")
        if obj.get("v") != version:
            raise wire_error(f"expected wire version {version}, found {text(obj.get('v'))[:20]!r}")
        return obj

    return read
