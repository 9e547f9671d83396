"""The GPU a sandboxed worker is given: device choice, environment, device nodes, limits, errors.

Grading with ``--device cuda:N`` gives each worker exactly one GPU: ``CUDA_VISIBLE_DEVICES=N`` in
its environment (set before anything in the worker initialises CUDA: the worker template never
does, and each forked child gets the variable before the submission is read), so that inside the
worker the device is ``cuda:0``. With bubblewrap the NVIDIA device nodes that exist are bound into
the sandbox (``--dev-bind``); with Landlock the worker may read, write and ``ioctl`` those nodes
(``/proc`` and ``/sys``, which the driver reads, are readable anyway). CUDA reserves huge virtual
address ranges, so a GPU worker runs without the address-space limit (``RLIMIT_AS``); its other
limits stay.

Every function here is pure (what exists on the machine is passed in), so all of it is tested on
a machine without a GPU. Errors raised by the student's code on the GPU are the student's verdict
(:func:`restart_after` says when the worker must be replaced because CUDA errors are sticky);
CUDA missing inside the worker is the grading machine's fault (a grader error, reported by the
worker before the submission is imported).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

from attnscore.boundary import landlock
from attnscore.boundary.verdict import Verdict

__all__ = [
    "parse_device",
    "device_problem",
    "worker_device",
    "worker_env",
    "device_nodes",
    "bwrap_device_args",
    "landlock_device_files",
    "keeps_address_limit",
    "restart_after",
]

_DEVICE = re.compile(r"(cpu|cuda)(?::(\d{1,3}))?")
# Nodes every CUDA process opens, whichever GPU it uses (those missing on a machine are skipped).
_SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
# Messages of CUDA runtime errors: after one, the CUDA context of the process is unusable.
_STICKY = ("CUDA error", "CUDA out of memory", "CUBLAS_STATUS", "CUDNN_STATUS", "cudaError", "illegal memory access")


def parse_device(text: str) -> tuple[str, int | None]:
    """``("cpu", None)``, ``("cuda", None)`` or ``("cuda", N)`` for ``text``.

    Raises:
        ValueError: not ``cpu``, ``cuda`` or ``cuda:N`` (the message names the value and the fix).
    """
    found = _DEVICE.fullmatch(text.strip())
    if found is None or (found.group(1) == "cpu" and found.group(2) is not None):
        raise ValueError(f"--device {text!r}: expected cpu, cuda or cuda:N (N a GPU index, e.g. cuda:0)")
    index = found.group(2)
    return found.group(1), None if index is None else int(index)


def device_problem(text: str, cuda_available: bool, cuda_count: int) -> str | None:
    """Why grading cannot use device ``text`` on a grader where CUDA is ``cuda_available`` with
    ``cuda_count`` GPUs (one line with the fix), or None when it can."""
    try:
        kind, index = parse_device(text)
    except ValueError as exc:
        return str(exc)
    if kind == "cpu":
        return None
    if not cuda_available or cuda_count < 1:
        return f"--device {text!r}: CUDA is not available on this machine (no GPU or no driver); use --device cpu"
    if index is not None and index >= cuda_count:
        last = "cuda:0" if cuda_count == 1 else f"cuda:0 to cuda:{cuda_count - 1}"
        return f"--device {text!r}: this machine has {cuda_count} GPU(s), so N must be below {cuda_count} ({last})"
    return None


def _index(device: str) -> int | None:
    """The GPU index of a cuda device (0 for plain ``cuda``), None for the CPU."""
    kind, index = parse_device(device)
    return None if kind == "cpu" else (index or 0)


@functools.lru_cache(maxsize=64)
def worker_device(device: str) -> str:
    """The device name inside the worker: ``"cpu"``, or ``"cuda:0"`` (the one GPU it sees)."""
    return "cpu" if _index(device) is None else "cuda:0"


def worker_env(device: str) -> dict[str, str]:
    """Variables added to the worker's environment for ``device``: the one GPU it may see (none
    for the CPU), numbered in PCI bus order like the ``/dev/nvidiaN`` nodes."""
    index = _index(device)
    if index is None:
        return {"CUDA_VISIBLE_DEVICES": ""}
    return {"CUDA_VISIBLE_DEVICES": str(index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def device_nodes(device: str, exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    """The NVIDIA device nodes a worker on ``device`` needs that exist here (none for the CPU)."""
    index = _index(device)
    if index is None:
        return []
    wanted = ["/dev/nvidiactl", f"/dev/nvidia{index}", *_SHARED_NODES[1:]]
    return [node for node in wanted if exists(node)]


def bwrap_device_args(nodes: list[str], exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    """bubblewrap arguments that give the worker the device ``nodes`` and what the driver reads
    (``/sys`` read-only; ``/proc/driver/nvidia`` comes with the sandbox's own ``/proc``)."""
    args: list[str] = []
    for node in nodes:
        args += ["--dev-bind", node, node]
    if nodes and exists("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]
    return args


def landlock_device_files(nodes: list[str]) -> list[tuple[str, int]]:
    """Landlock ``(file, rights)`` rules for the device ``nodes``: read, write and ioctl."""
    return [(node, landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV) for node in nodes]


def keeps_address_limit(device: str) -> bool:
    """Whether a worker on ``device`` gets the address-space limit (``RLIMIT_AS``): not on a GPU,
    where the CUDA driver reserves far more virtual memory than any limit would allow."""
    return _index(device) is None


def restart_after(device: str, verdict: Verdict | str, message: str) -> bool:
    """Whether the worker must be replaced after a call on ``device`` that failed with ``verdict``
    and ``message``: after a CUDA error (illegal memory access, out of memory, a failed kernel),
    the process's CUDA context stays broken, so the next call needs a fresh worker."""
    if _index(device) is None:
        return False
    return verdict == Verdict.MEMORY_LIMIT or any(marker in message for marker in _STICKY)
