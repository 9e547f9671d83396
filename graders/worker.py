"""The worker: runs inside the sandboxed child process and calls the submission.

Started by :mod:`graders.sandbox` as
``python -I -c <bootstrap> LIB SUBMISSION FUNCTION REQ_FD RESP_FD UID``. It imports torch and
numpy, drops to user ``UID`` (when not -1: the grader is root), then imports the submission
(by file path, as module ``submission``), says whether the function was found, and then answers
call requests one at a time: build fresh tensors from the plain arrays received, call the
function, turn whatever came back into plain data (:func:`attnscore.outputs.to_received`) and
send it back with a note of which inputs it changed in place or aliased. It never receives
expected values.

The submission's own stdin is /dev/null and its stdout/stderr go to a pipe the grader drains and
caps; the request and response pipes live on private descriptors.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

_PRELOAD = (
    "math",
    "cmath",
    "itertools",
    "functools",
    "collections",
    "operator",
    "numbers",
    "typing",
    "random",
    "statistics",
    "json",
    "ctypes",
    "socket",
    "signal",
    "subprocess",
    "threading",
    "dataclasses",
    "decimal",
    "fractions",
    "array",
    "copy",
    "time",
    "numpy",
    "torch.nn.functional",
)


def _send(fd: int, message: dict[str, Any]) -> None:
    from graders import wire

    data = wire.dumps(message)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _failure_verdict(exc: BaseException) -> str:
    if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) or "not enough memory" in str(exc):
        return "memory_limit"
    return "exception"


def _describe_import_error(exc: BaseException, path: str) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"your file could not be imported: SyntaxError{where}: {exc.msg}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    where = f" (line {frames[-1].lineno})" if frames else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"your file could not be imported: {type(exc).__name__}{where}" + (f": {text}" if text else "")


def main(argv: list[str]) -> None:
    path, function_name, req_fd, resp_fd = argv[0], argv[1], int(argv[2]), int(argv[3])
    uid = int(argv[4]) if len(argv) > 4 else -1
    requests = os.fdopen(req_fd, "rb", buffering=1 << 16)

    import torch

    from attnscore.calls import describe_exception, inspect_call, to_torch
    from attnscore.outputs import BadReturn, to_received
    from graders import wire

    torch.set_num_threads(1)
    import importlib.util

    # Modules a submission may reasonably import, loaded before the privilege drop: without
    # bwrap the interpreter's own folder may not be readable by the unprivileged user.
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    del sys.path[0]  # the bootstrap's folder: the worker's modules stay loaded, not importable by path

    try:
        module_spec = importlib.util.spec_from_file_location("submission", path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["submission"] = module
        module_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - anything the submission raises is its verdict
        _send(
            resp_fd,
            {"type": "load_error", "verdict": _failure_verdict(exc), "message": _describe_import_error(exc, path)},
        )
        return
    function = getattr(module, function_name, None)
    if function is None or not callable(function):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == "submission"
        )
        found = f"; it defines: {', '.join(defined)}" if defined else "; it defines no functions"
        kind = type(function).__name__
        what = "no function" if function is None else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a function,"
        _send(
            resp_fd,
            {
                "type": "load_error",
                "verdict": "function_missing",
                "message": f"your file has {what} named {function_name!r}{found}",
            },
        )
        return
    _send(resp_fd, {"type": "ready"})

    while True:
        line = requests.readline()
        if not line:
            return
        request = wire.loads(line)
        call_id = request["id"]
        try:
            args = [
                to_torch(wire.decode_array(a)[1], request["dtype"], request.get("device", "cpu"))
                for a in request["args"]
            ]
        except Exception as exc:  # noqa: BLE001 - report, do not die
            _send(
                resp_fd,
                {
                    "type": "failure",
                    "id": call_id,
                    "verdict": "grader_error",
                    "message": f"the worker could not build the inputs: {exc}",
                },
            )
            continue
        copies = [t.clone() for t in args]
        try:
            value = function(*args)
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt... are verdicts too
            _send(
                resp_fd,
                {
                    "type": "failure",
                    "id": call_id,
                    "verdict": _failure_verdict(exc),
                    "message": describe_exception(exc),
                },
            )
            continue
        try:
            received = to_received(value)
        except BaseException as exc:  # noqa: BLE001 - a returned object whose methods raise
            _send(
                resp_fd,
                {
                    "type": "failure",
                    "id": call_id,
                    "verdict": "bad_return_type",
                    "message": f"the returned object could not be read as numbers: {describe_exception(exc)}",
                },
            )
            continue
        if isinstance(received, BadReturn):
            _send(
                resp_fd, {"type": "failure", "id": call_id, "verdict": "bad_return_type", "message": received.message}
            )
            continue
        try:
            names = [str(n) for n in request.get("names", [])][: len(args)]
            inspection = inspect_call(names, args, copies, value)
        except BaseException:  # noqa: BLE001 - an output whose storage cannot be inspected
            inspection = None
        _send(
            resp_fd,
            {"type": "result", "id": call_id, "value": wire.encode_received(received), "inspection": inspection},
        )


if __name__ == "__main__":  # pragma: no cover - started by graders.sandbox
    main(sys.argv[1:])
