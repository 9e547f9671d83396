"""The wire format between the grader and its worker process (version 1).

Messages are single lines of JSON (UTF-8), nothing else: JSON cannot execute code when read,
unlike pickle. Arrays travel as ``{"dtype", "shape", "data"}`` with ``data`` the base64 of the
little-endian C-order bytes, so NaN, infinities and every bit survive. The grader validates each
message (version, field types, dtype whitelist, shape against byte length, size caps) before any
value reaches a comparison: a malformed message is the worker's failure, never the grader's.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

import numpy as np

from attnscore.boundary.outputs import ALLOWED_DTYPES, MAX_ELEMENTS, Received

__all__ = [
    "VERSION",
    "MAX_MESSAGE_BYTES",
    "WireError",
    "encode_array",
    "decode_array",
    "dumps",
    "loads",
    "encode_received",
    "decode_received",
]

VERSION = 1
MAX_MESSAGE_BYTES = 48 * 1024 * 1024
MAX_DIMS = 8
MAX_CONTAINERS = 1000
"""Most JSON objects and arrays (counted as opening brackets, strings included) in one message."""
MAX_ITEMS = 100_000
"""Most ``,`` and ``:`` separators (strings included) in one message."""
KINDS = ("tensor", "ndarray", "list", "number")


class WireError(ValueError):
    """A message from the worker is malformed; the text says what was wrong."""


def _np_dtype(name: str) -> np.dtype:
    return np.dtype("float32" if name == "bfloat16" else name).newbyteorder("<")


def encode_array(array: np.ndarray, dtype: str | None = None) -> dict[str, Any]:
    """Encode ``array`` (its dtype named ``dtype``, default its own) as plain JSON data."""
    name = dtype or array.dtype.name
    arr = np.array(array, dtype=_np_dtype(name), order="C")
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
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_ELEMENTS for s in shape)
    ):
        raise WireError(f"expected a shape of at most {MAX_DIMS} non-negative sizes, found {str(shape)[:80]}")
    size = math.prod(shape)
    if size > MAX_ELEMENTS:
        raise WireError(f"expected at most {MAX_ELEMENTS} elements, found {size}")
    if not isinstance(data, str):
        raise WireError("expected base64 text for the data")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError("expected base64 text for the data, found invalid base64") from None
    dt = _np_dtype(name)
    if len(raw) != size * dt.itemsize:
        raise WireError(f"expected {size * dt.itemsize} bytes for shape {shape} {name}, found {len(raw)}")
    arr = np.frombuffer(raw, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=True)
    return name, arr


def encode_received(received: Received) -> dict[str, Any]:
    """Encode a :class:`Received` for the wire."""
    return {"kind": received.kind, "device": received.device, **encode_array(received.array, received.dtype)}


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
    return Received(kind, name, device, arr)


def dumps(message: dict[str, Any]) -> bytes:
    """One message as a line of strict JSON (no NaN tokens), with the version added."""
    return json.dumps({"v": VERSION, **message}, allow_nan=False, ensure_ascii=True).encode("ascii") + b"\n"


def _no_constants(token: str) -> Any:
    raise WireError(f"expected strict JSON, found the token {token}")


def _small_int(text: str) -> int:
    if len(text) > 20:
        raise WireError(f"expected integers of at most 20 digits, found one of {len(text)}")
    return int(text)


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
        obj = json.loads(line.decode("utf-8"), parse_constant=_no_constants, parse_int=_small_int)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure is the worker's, never the grader's
        raise WireError(f"expected a JSON message, found unparseable bytes ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise WireError(f"expected a JSON object, found {type(obj).__name__}")
    if obj.get("v") != VERSION:
        raise WireError(f"expected wire version {VERSION}, found {str(obj.get('v'))[:20]!r}")
    return obj
