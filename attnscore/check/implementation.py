"""Running specs against an engineer's own implementation, in process (trusted code).

``attnscore test --impl package.module:function`` and the pytest plugin
(:mod:`attnscore.pytest_plugin`) both come through here: :func:`load_impl` imports the function,
:func:`run_impl` builds the spec's cases for a dtype and runs them on a device as one
:class:`attnscore.check.session.Session` with the in-process runner, recording the device, dtype
and precision settings in the result's ``environment``.

On CUDA, TF32 is pinned off for the run (``torch.backends.cuda.matmul.allow_tf32`` and
``torch.backends.cudnn.allow_tf32``), so float32 is really float32; the previous settings are
restored afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from attnscore.boundary import lazy_torch
from attnscore.boundary.lazy_torch import torch
from attnscore.check.cases import Case, build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, Budget, Session
from attnscore.maths import lazy_hypothesis
from attnscore.report.results import SubmissionResult
from attnscore.spec.model import Spec

__all__ = ["ImplError", "load_impl", "run_impl", "check_device", "pinned_precision", "environment"]


class ImplError(ValueError):
    """``--impl`` does not name an importable function."""


def load_impl(target: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (the current directory is importable too).

    Raises:
        ImplError: the text is not ``module:function``, the module does not import, or the
            attribute is missing or not callable.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImplError(f"--impl {target!r}: expected package.module:function, e.g. examples.impl.my_attention:scores")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise ImplError(f"--impl {target!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImplError(f"--impl {target!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ImplError(f"--impl {target!r}: {attr!r} is a {type(obj).__name__}, not a function")
    return obj


def check_device(device: str) -> None:
    """Raise ImplError when ``device`` is not usable here (e.g. cuda without a GPU)."""
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ImplError(f"--device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ImplError(f"--device {device!r}: CUDA is not available on this machine; use --device cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ImplError(f"--device {device!r}: expected cpu or cuda[:N]")


@contextlib.contextmanager
def pinned_precision() -> Iterator[None]:
    """Turn TF32 off (and float32 matmul precision to "highest") for the duration."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[0], saved[1]
        torch.set_float32_matmul_precision(saved[2])


@functools.lru_cache(maxsize=1)
def _installed_torch() -> str:
    """torch's version as installed (read once per process: a grader that never imports torch reads
    its metadata, a few milliseconds, for every submission's report otherwise)."""
    return importlib.metadata.version("torch")


def environment(device: str, *, pinned: bool = True) -> dict[str, str]:
    """Versions, device and precision mode, for the report.

    ``pinned``: the run happened inside :func:`pinned_precision` (TF32 off, highest float32 matmul
    precision); otherwise the current TF32 setting is reported as it is.
    """
    if pinned:
        tf32 = "off (pinned)"
    elif not lazy_torch.loaded():  # a grader that never imported torch has torch's default (off)
        tf32 = "off"
    else:
        tf32 = "on" if torch.backends.cuda.matmul.allow_tf32 else "off"
    env = {
        "python": platform.python_version(),
        "torch": str(torch.__version__) if lazy_torch.loaded() else _installed_torch(),  # not a TorchVersion
        "numpy": np.__version__,
        "hypothesis": lazy_hypothesis.version(),
        "device": device,
        "tf32": tf32,
    }
    if pinned:
        env["float32_matmul_precision"] = "highest"
    if device.startswith("cuda"):
        env["device_name"] = torch.cuda.get_device_name(torch.device(device))
    return env


def run_impl(
    spec: Spec,
    function: Callable[..., Any],
    *,
    dtype: str,
    device: str = "cpu",
    seed: int | None = None,
    name: str = "",
    cases: list[Case] | None = None,
    shrink: bool = True,
    budget: Budget | None = None,
) -> SubmissionResult:
    """Run every case of ``spec`` in ``dtype`` against ``function`` on ``device``, in process.

    With ``shrink``, each failing property's counterexample is replaced by hypothesis's minimal
    failing input (see :mod:`attnscore.check.shrink`), within ``budget`` (default
    :class:`attnscore.check.session.Budget`\\ ()). The result's ``duration_s`` is the time spent:
    building cases, calls, diagnosis and shrinking.
    """
    check_device(device)
    start = time.perf_counter()
    built = cases if cases is not None else build_cases(spec, dtype, seed)
    session = Session(
        spec,
        tuple(built),
        dtype,
        device,
        name or str(getattr(function, "__qualname__", repr(function))),
        spec.seed if seed is None else seed,
        budget=(budget or Budget()) if shrink else NO_SHRINK,
        environment=environment(device),
    )
    with pinned_precision():
        how: dict[str, Any] = {
            "logsumexp": spec.logsumexp,
            "factory": spec.factory,
            "bind": spec.contract.binding,
            "module": spec.module,
        }
        return session.run(
            InProcessRunner(function, device, **how),
            make_runner=lambda: InProcessRunner(function, device, **how),
            started=start,
        )
