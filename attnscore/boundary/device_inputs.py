"""Call inputs in the worker: tensors backed by the grader's shared memory, on the worker's device and
copied back after a call, which arrive as Python ints; the device itself (CUDA set up, float32
precision pinned).
"""

from __future__ import annotations

import os
from typing import Any


def map_inputs(config: dict[str, Any]) -> Any:
    """The grader's shared memory of call inputs (a memfd), mapped once; None when not given."""
    fd, size = config.get("inputs_fd"), config.get("inputs_bytes")
    if not isinstance(fd, int) or not isinstance(size, int) or size <= 0:
        return None
    import mmap

    return mmap.mmap(fd, size)


def python_int_inputs(
    items: list[dict[str, Any]], names: list[str], positional: int
) -> tuple[frozenset[int], frozenset[str]]:
    """The positions (among the first ``positional``) and the by-name names of the inputs that reach
    the function as Python ints: 0-d int32 inputs (``max_seqlen_q``), as in process
    (:func:`attnscore.boundary.calls.argument_value`)."""
    scalar = [i for i, item in enumerate(items) if item.get("dtype") == "int32" and list(item.get("shape", [0])) == []]
    if not scalar:  # nearly every call: no integer parameter
        return _NO_INTS
    return frozenset(i for i in scalar if i < positional), frozenset(names[i] for i in scalar if i >= positional)


_NO_INTS: tuple[frozenset[int], frozenset[str]] = (frozenset(), frozenset())


def bound_inputs_on_device() -> Any:
    """``inputs_on_device(shared, items, device) -> (args, pairs)``, built before the submission is
    imported (torch's functions and the dtype table held in its closure: a submission that patches
    ``torch`` or replaces ``sys.modules["torch"]`` cannot change how its inputs are built, and
    nothing is looked up again per call).

    ``args``: the call's inputs on ``device``; ``pairs``: ``(shared tensor, device tensor)`` to copy
    back after the call, so that the grader still sees in-place changes in the shared memory. On
    the CPU each input is a tensor *backed by* the shared memory at its item's offset. A strided
    input keeps its layout on the device (its whole storage is copied, then viewed the same way).
    """
    import math

    import numpy as np
    import torch

    from attnscore.boundary.calls import TORCH_DTYPES

    dtypes = {**TORCH_DTYPES, "bool": torch.bool, "int32": torch.int32}
    # a dense input of a dtype numpy has too is viewed by numpy and handed to torch (one C call
    # each, about a quarter of torch.frombuffer and a view): the same memory, shape, strides and
    # storage bytes (count elements from the item's offset); bfloat16 and strided inputs by torch
    as_numpy = {name: np.dtype(name) for name in dtypes if name != "bfloat16"}
    frombuffer, empty, prod, size_of = torch.frombuffer, torch.empty, math.prod, len
    np_frombuffer, np_reshape, from_numpy = np.frombuffer, np.ndarray.reshape, torch.from_numpy
    base_type = torch._C.TensorBase
    view, as_strided, to, shape_of, strides_of = (
        base_type.view,
        base_type.as_strided,
        base_type.to,
        base_type.size,
        base_type.stride,
    )

    def from_shared(shared: Any, item: dict[str, Any]) -> Any:
        dtype = dtypes[item["dtype"]]
        shape = [int(n) for n in item["shape"]]
        count = prod(shape)
        if count == 0:
            return empty(shape, dtype=dtype)
        if "strides" in item:  # a non-contiguous view of the shared storage (attnscore.boundary.layouts)
            storage = frombuffer(shared, dtype=dtype, count=int(item["count"]), offset=int(item["offset"]))
            return as_strided(storage, shape, [int(n) for n in item["strides"]], int(item["storage_offset"]))
        dense = as_numpy.get(item["dtype"])
        if dense is not None:
            return from_numpy(np_reshape(np_frombuffer(shared, dense, count, int(item["offset"])), shape))
        flat = frombuffer(shared, dtype=dtype, count=count, offset=int(item["offset"]))
        return flat if size_of(shape) == 1 else view(flat, shape)  # a vector is already its shape

    def inputs_on_device(
        shared: Any, items: list[dict[str, Any]], device: str
    ) -> tuple[list[Any], list[tuple[Any, Any]]]:
        args, pairs = [], []
        for item in items:
            host = from_shared(shared, item)
            if device == "cpu":
                args.append(host)
            elif "strides" in item:
                dtype = dtypes[item["dtype"]]
                base = frombuffer(shared, dtype=dtype, count=int(item["count"]), offset=int(item["offset"]))
                on_device = to(base, device)
                args.append(as_strided(on_device, shape_of(host), strides_of(host), int(item["storage_offset"])))
                pairs.append((base, on_device))
            else:
                on_device = to(host, device)
                args.append(on_device)
                pairs.append((host, on_device))
        return args, pairs

    return inputs_on_device


def same_bytes(a: Any, b: Any) -> bool:
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


def input_span(item: dict[str, Any], arg: Any) -> tuple[int, int] | None:
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
