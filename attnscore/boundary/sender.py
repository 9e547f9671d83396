"""The worker's sender: the lines it writes on its reply pipe, with everything it uses held in its
closure before the submission is imported (:func:`bound_sender`, used by
:func:`attnscore.boundary.worker.serve`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attnscore.boundary.wire import Message

__all__ = ["bound_sender"]


def bound_sender(fd: int) -> Any:
    """A ``send(message)`` of a :data:`attnscore.boundary.wire.Message` for the reply pipe ``fd``
    that holds everything it uses in its closure: the message encoder
    (:func:`attnscore.boundary.wire.encode_message`, itself bound when ``wire`` was imported), the
    C JSON encoder, ``os.write``, ``memoryview``. Built before the submission is imported, so
    that patching this module's globals, ``json``, ``os`` or ``attnscore.boundary.wire`` afterwards
    cannot change what the worker itself says (see :func:`serve`). ``send.returned(call_id, stage)``
    writes :class:`~attnscore.boundary.wire.Returned` without building and encoding the message,
    ``send.result(call_id, received, inspection, probe)`` a plain value's
    :class:`~attnscore.boundary.wire.CallResult` the same way."""
    import _json

    from attnscore.boundary import wire

    def refuse(obj: object) -> Any:
        raise TypeError(f"not JSON data: {type(obj).__name__}")

    encode = _json.make_encoder(None, refuse, _json.encode_basestring_ascii, None, ":", ", ", False, False, False)
    join, write, view_of, version, as_json, size_of, type_of = (
        "".join,
        os.write,
        memoryview,
        wire.VERSION,
        wire.encode_message,
        len,
        type,
    )
    stages = wire.CALL_STAGES

    def write_line(data: bytes) -> None:
        written = write(fd, data)  # the whole line, but for a long one into a full pipe
        if written < size_of(data):
            view = view_of(data)[written:]
            while view:
                view = view[write(fd, view) :]

    def send(message: Message) -> None:
        write_line(join(encode({"v": version, **as_json(message)}, 0)).encode("ascii") + b"\n")

    # Returned, said twice per backward call and once per other call: its very line, formatted
    lines = {stage: f'{{"v":{version}, "type":"returned", "id":%d, "stage":"{stage}"}}\n' for stage in stages}
    whole, returned = int, wire.Returned

    def say_returned(call_id: int, stage: str) -> None:
        """``send(Returned(call_id, stage))``, the same bytes (a stage outside
        :data:`~attnscore.boundary.wire.CALL_STAGES` or an id that is no int goes through ``send``)."""
        line = lines.get(stage)
        if line is None or type_of(call_id) is not whole:
            send(returned(call_id, stage))
            return
        write_line((line % call_id).encode("ascii"))

    import base64

    import numpy as np

    from attnscore.boundary.outputs import Received
    from attnscore.boundary.wire_codec import wire_dtype

    plain, result, as_array, to_bytes, base64_of, listed = (
        Received,
        wire.CallResult,
        np.asarray,
        np.ndarray.tobytes,
        base64.b64encode,
        list,
    )

    def say_result(call_id: int, received: Any, inspection: Any, probe: Any = None) -> None:
        """``send(CallResult(call_id, received, inspection, probe))``, the same bytes, built without
        the message (a value with gradients, a probe or an id that is no int goes through ``send``)."""
        if type_of(received) is not plain or probe is not None or type_of(call_id) is not whole:
            send(result(call_id, received, inspection, probe))
            return
        name = received.dtype
        array = as_array(received.array, dtype=wire_dtype(name))
        data = base64_of(to_bytes(array)).decode("ascii")
        value = {"kind": received.kind, "device": received.device, "dtype": name, "shape": listed(array.shape)}
        value["data"] = data
        message = {"v": version, "type": "result", "id": call_id, "value": value, "inspection": inspection}
        write_line(join(encode(message, 0)).encode("ascii") + b"\n")

    send.returned = say_returned  # type: ignore[attr-defined]
    send.result = say_result  # type: ignore[attr-defined]
    return send
