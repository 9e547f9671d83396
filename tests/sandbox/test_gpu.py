"""Grading on a GPU (attnscore.sandbox.gpu, the worker's CUDA paths, `attnscore grade --device`).

Everything that does not need a GPU runs here; the real CUDA path is in the tests marked `cuda`
(run by benchmarks/gpu_check.sh on a GPU machine), which skip without one.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from attnscore.boundary import landlock, wire, worker
from attnscore.boundary.outputs import Received
from attnscore.check.cases import build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, judge_cases
from attnscore.cli import main
from attnscore.grade.grading import grade_submission
from attnscore.maths.reference import scaled_score_matrix
from attnscore.report.results import Verdict
from attnscore.sandbox import gpu
from attnscore.sandbox.bwrap import fresh_prefix
from attnscore.sandbox.launch import Limits, SandboxRunner, preflight, protections, resolve
from attnscore.sandbox.processes import rlimits
from attnscore.spec.load import load_spec
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "scaled_score_matrix.yaml"
CORRECT = "import math\n\ndef scaled_score_matrix(Q, K):\n    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])\n"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param("cpu", ("cpu", None), id="cpu"),
        pytest.param("cuda", ("cuda", None), id="plain cuda"),
        pytest.param("cuda:3", ("cuda", 3), id="cuda:3"),
        pytest.param(" cuda:0 ", ("cuda", 0), id="spaces around"),
    ],
)
def test_parse_device(text, parsed):
    """cpu, cuda and cuda:N parse to a kind and an index."""
    assert gpu.parse_device(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("gpu", id="unknown kind"),
        pytest.param("cpu:1", id="cpu with an index"),
        pytest.param("cuda:-1", id="negative index"),
        pytest.param("cuda:x", id="index not a number"),
        pytest.param("mps", id="another backend"),
        pytest.param("", id="empty"),
    ],
)
def test_parse_device_rejects(text):
    """Anything else is a ValueError naming the value and the accepted forms."""
    with pytest.raises(ValueError, match=r"expected cpu, cuda or cuda:N"):
        gpu.parse_device(text)


@pytest.mark.parametrize(
    ("text", "available", "count", "problem"),
    [
        pytest.param("cpu", False, 0, None, id="cpu always works"),
        pytest.param("cuda", True, 1, None, id="one GPU"),
        pytest.param("cuda:1", True, 2, None, id="second of two"),
        pytest.param("cuda", False, 0, "CUDA is not available on this machine", id="no CUDA"),
        pytest.param("cuda:0", True, 0, "CUDA is not available on this machine", id="CUDA but no GPU"),
        pytest.param(
            "cuda:2", True, 2, "this machine has 2 GPU(s), so N must be below 2 (cuda:0 to cuda:1)", id="N too large"
        ),
        pytest.param("cuda:1", True, 1, "so N must be below 1 (cuda:0)", id="only one GPU"),
        pytest.param("tpu", True, 1, "expected cpu, cuda or cuda:N", id="not a device"),
    ],
)
def test_device_problem(text, available, count, problem):
    """The grader refuses a device it cannot give, with the reason and the fix."""
    found = gpu.device_problem(text, available, count)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and found.startswith(f"--device {text!r}")


@pytest.mark.parametrize(
    ("device", "inside", "env"),
    [
        pytest.param("cpu", "cpu", {"CUDA_VISIBLE_DEVICES": ""}, id="cpu sees no GPU"),
        pytest.param("cuda", "cuda:0", {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, id="cuda"),
        pytest.param("cuda:2", "cuda:0", {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, id="cuda:2"),
    ],
)
def test_worker_sees_only_its_gpu(device, inside, env):
    """The worker's environment names one GPU (none for cpu); inside, it is cuda:0."""
    assert gpu.worker_env(device) == env
    assert gpu.worker_device(device) == inside


def test_device_nodes_are_the_gpus_own_and_the_shared_ones():
    """cuda:1 needs nvidiactl, nvidia1 and the uvm/modeset nodes that exist; never another GPU's."""
    present = {"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia-uvm", "/dev/nvidia-modeset"}
    assert gpu.device_nodes("cuda:1", present.__contains__) == [
        "/dev/nvidiactl",
        "/dev/nvidia1",
        "/dev/nvidia-uvm",
        "/dev/nvidia-modeset",
    ]
    assert gpu.device_nodes("cuda", present.__contains__)[:2] == ["/dev/nvidiactl", "/dev/nvidia0"]
    assert gpu.device_nodes("cpu", present.__contains__) == []
    assert gpu.device_nodes("cuda:5", present.__contains__) == [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-modeset",
    ]


def test_bwrap_device_args():
    """Each node is --dev-bind'ed, and /sys comes in read-only; nothing at all for the CPU."""
    args = gpu.bwrap_device_args(["/dev/nvidiactl", "/dev/nvidia0"], exists=lambda p: True)
    assert args == [
        "--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl",
        "--dev-bind", "/dev/nvidia0", "/dev/nvidia0",
        "--ro-bind", "/sys", "/sys",
    ]  # fmt: skip
    assert gpu.bwrap_device_args([]) == []


def test_bwrap_prefix_binds_device_nodes_after_the_new_dev(monkeypatch):
    """In the bwrap command line the nodes come after --dev /dev (which would hide them)."""
    monkeypatch.setattr(gpu, "device_nodes", lambda device: ["/dev/nvidiactl"] if device != "cpu" else [])
    args = fresh_prefix("/s", "/w", "/l", "cuda:0")
    assert args.index("--dev-bind") > args.index("--dev")
    at = args.index("--dev-bind")
    assert args[at : at + 3] == ["--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl"]
    assert "--dev-bind" not in fresh_prefix("/s", "/w", "/l", "cpu")


def test_landlock_device_files_allow_ioctl():
    """The GPU's nodes may be read, written and ioctl'ed under Landlock."""
    rights = landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV
    assert gpu.landlock_device_files(["/dev/nvidiactl", "/dev/nvidia0"]) == [
        ("/dev/nvidiactl", rights),
        ("/dev/nvidia0", rights),
    ]


def test_gpu_worker_has_no_address_space_limit():
    """RLIMIT_AS is dropped for a GPU worker only; its other limits stay the same."""
    cpu_limits = {which: (soft, hard) for which, soft, hard in rlimits(resolve(Limits(memory_bytes=2 * 1024**3)))}
    gpu_limits = {
        which: (soft, hard) for which, soft, hard in rlimits(resolve(Limits(memory_bytes=2 * 1024**3, device="cuda:1")))
    }
    assert cpu_limits[resource.RLIMIT_AS] == (2 * 1024**3, 2 * 1024**3)
    assert resource.RLIMIT_AS not in gpu_limits
    assert {k: v for k, v in cpu_limits.items() if k != resource.RLIMIT_AS} == gpu_limits
    assert gpu.keeps_address_limit("cpu") and not gpu.keeps_address_limit("cuda")


def test_protections_line_says_so_for_a_gpu_worker():
    """The protections line names the GPU and the missing address-space limit."""
    line = protections(Limits(device="cuda:1", bwrap=False))
    assert "GPU 1 only (CUDA_VISIBLE_DEVICES; TF32 off)" in line
    assert "no address-space limit on a GPU worker" in line
    assert "rlimits (cpu, memory (address space; memfds refused), processes, files)" in protections(Limits(bwrap=False))


@pytest.mark.parametrize(
    ("device", "verdict", "message", "restart"),
    [
        pytest.param(
            "cuda:0",
            "exception",
            "raised RuntimeError: CUDA error: an illegal memory access was encountered",
            True,
            id="illegal access",
        ),
        pytest.param("cuda:0", "memory_limit", "ran out of GPU memory", True, id="GPU out of memory"),
        pytest.param("cuda:0", "exception", "raised RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED", True, id="cublas"),
        pytest.param("cuda:0", "exception", "raised ValueError: bad shape", False, id="plain exception"),
        pytest.param("cpu", "exception", "raised RuntimeError: CUDA error: whatever", False, id="cpu never"),
    ],
)
def test_restart_after_sticky_cuda_errors(device, verdict, message, restart):
    """A CUDA error leaves the context broken: the next call gets a fresh worker."""
    assert gpu.restart_after(device, verdict, message) is restart


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError (the worker goes by the class name)."""


@pytest.mark.parametrize(
    ("exc", "verdict", "start"),
    [
        pytest.param(
            OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB"),
            "memory_limit",
            "ran out of GPU memory",
            id="torch OOM",
        ),
        pytest.param(
            RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"),
            "memory_limit",
            "ran out of GPU memory",
            id="older OOM",
        ),
        pytest.param(
            RuntimeError("CUDA error: an illegal memory access was encountered"),
            "exception",
            "raised RuntimeError: CUDA error",
            id="illegal access",
        ),
        pytest.param(MemoryError(), "memory_limit", "raised MemoryError", id="host memory"),
        pytest.param(ValueError("no"), "exception", "raised ValueError: no", id="plain"),
    ],
)
def test_worker_maps_cuda_errors_to_verdicts(exc, verdict, start):
    """GPU memory exhaustion is a memory_limit verdict that says so; other CUDA errors are exceptions."""
    assert worker.failure_verdict(exc) == verdict
    assert worker._describe_failure(exc).startswith(start)


def test_device_inputs_keep_their_layout_and_copy_back():
    """Inputs moved to a device keep a strided layout; in-place changes there reach the shared memory."""
    shared = bytearray(256)
    torch.frombuffer(shared, dtype=torch.float32, count=6)[:] = torch.arange(6.0)
    strided = {"dtype": "float32", "shape": [2, 3], "strides": [1, 2], "storage_offset": 0, "count": 6, "offset": 0}
    plain = {"dtype": "float32", "shape": [3], "offset": 64}
    inputs_on_device = worker.bound_inputs_on_device()
    args, pairs = inputs_on_device(shared, [strided, plain], "meta")  # "meta": a device with no data
    assert args[0].device.type == "meta" and args[0].stride() == (1, 2) and tuple(args[0].shape) == (2, 3)
    assert len(pairs) == 2
    args, pairs = inputs_on_device(shared, [strided, plain], "cpu")
    assert pairs == [] and args[0].tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
    host = torch.frombuffer(shared, dtype=torch.float32, count=3, offset=64)
    changed = host.clone().fill_(7.0)  # the device copy the submission changed in place
    worker.bound_copy_back()([(host, changed)])
    assert torch.frombuffer(shared, dtype=torch.float32, count=3, offset=64).tolist() == [7.0, 7.0, 7.0]


def test_worker_cuda_problem_without_a_gpu():
    """Inside a worker that has no CUDA, the problem is named (a grader error), never a student's."""
    assert worker.cuda_problem("cpu") is None
    if not torch.cuda.is_available():
        assert "CUDA is not available inside the worker" in (worker.cuda_problem("cuda:0") or "")


@pytest.mark.slow
def test_importing_torch_does_not_initialise_cuda():
    """The worker template imports what it preloads without starting CUDA (children set the GPU later)."""
    code = "import numpy, torch, torch.nn.functional; print(torch.cuda.is_initialized())"
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.stdout.strip() == "False"


def test_wire_carries_the_workers_device():
    """The device the worker reports comes through the wire unchanged."""
    received = Received("tensor", "float32", "cuda:0", torch.ones(2, 3).numpy())
    back = wire.decode_received(wire.loads(wire.dumps(wire.encode_received(received)).rstrip(b"\n")))
    assert back.device == "cuda:0" and back.kind == "tensor"


class _DeviceReporting(InProcessRunner):
    """Computes on the CPU but reports the output's device as ``reported`` (a GPU run's view)."""

    def __init__(self, reported: str) -> None:
        super().__init__(scaled_score_matrix, "cuda:1")  # the inputs' device as the grader sees it
        self.inner = InProcessRunner(scaled_score_matrix)
        self.reported = reported

    def call(self, args, dtype, layouts=None):
        outcome = self.inner.call(args, dtype, layouts) if layouts else self.inner.call(args, dtype)
        return replace(outcome, device=self.reported) if isinstance(outcome, Received) else outcome


@pytest.mark.parametrize(
    ("reported", "verdict"),
    [
        pytest.param("cuda:0", Verdict.PASSED, id="stays on the GPU"),
        pytest.param("cpu", Verdict.WRONG_VALUE, id="moved to the CPU"),
    ],
)
def test_device_contract_is_judged_as_its_own_case(reported, verdict):
    """A result moved to the CPU from cuda inputs fails dtype_device_follow_inputs, and only that case."""
    spec = load_spec(SPEC)
    cases = [c for c in build_cases(spec) if c.property_name in ("dtype_device_follow_inputs", "matches_reference")]
    result = judge_cases(
        spec,
        cases,
        _DeviceReporting(reported),
        dtype="float32",
        device="cuda:1",
        submission="s",
        seed=0,
        budget=NO_SHRINK,
    )
    by_name = {c.id.split(":", 1)[1]: c for c in result.cases}
    device_case = by_name["dtype_device_follow_inputs"]
    assert device_case.verdict is verdict
    if verdict is not Verdict.PASSED:
        assert "the output is on cpu, but the inputs are on cuda:1: keep the inputs' device" in device_case.message
    assert all(c.verdict is Verdict.PASSED for n, c in by_name.items() if n != "dtype_device_follow_inputs")
    assert result.device == "cuda:1"


def test_cpu_worker_sees_no_gpu(tmp_path):
    """A CPU worker's CUDA_VISIBLE_DEVICES is empty: it cannot reach a GPU of the grading machine."""
    path = tmp_path / "peek.py"
    path.write_text("import os\n\ndef f(x):\n    raise ValueError(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))\n")
    with SandboxRunner(path, "f", Limits(call_timeout_s=20)) as runner:
        outcome = runner.call({"x": torch.ones(2).numpy()}, "float32")
    assert outcome.verdict == Verdict.EXCEPTION.value and outcome.message == "raised ValueError: ''"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_no_cuda_in_the_worker_is_a_grader_error(tmp_path):
    """A GPU worker that finds no CUDA fails before the submission is read, as the machine's fault."""
    path = tmp_path / "solution.py"
    path.write_text(CORRECT)
    with SandboxRunner(path, "scaled_score_matrix", Limits(call_timeout_s=20, device="cuda:0")) as runner:
        outcome = runner.call({"Q": torch.ones(2, 3).numpy(), "K": torch.ones(4, 3).numpy()}, "float32")
    assert outcome.verdict == Verdict.GRADER_ERROR.value
    assert outcome.message.startswith("the grading machine could not give the worker its GPU: CUDA is not available")
    assert "CUDA_VISIBLE_DEVICES=0" in outcome.message


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has NVIDIA device nodes")
def test_preflight_refuses_a_gpu_without_device_nodes():
    """Without /dev/nvidiactl and /dev/nvidiaN nothing can be graded on the GPU: one line says why."""
    assert preflight(Limits(device="cuda:0")) == (
        "--device cuda:0: no NVIDIA device node (/dev/nvidiactl, /dev/nvidiaN) to give the worker"
    )


@pytest.mark.parametrize(
    ("device", "message"),
    [
        pytest.param("gpu", "Error: --device 'gpu': expected cpu, cuda or cuda:N", id="not a device"),
        pytest.param("cuda:7", "Error: --device 'cuda:7': ", id="cuda here or out of range"),
    ],
)
def test_grade_device_usage_errors(device, message):
    """--device that cannot be used exits 2 with one error line, before anything is graded."""
    if device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    result = CliRunner().invoke(
        main,
        ["grade", str(ROOT / "examples/submissions/scores/correct_matmul.py"), "--spec", str(SPEC), "--device", device],
    )
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(message)


# ------------------------------------------------------------------ on a real GPU (gpu_check.sh)


def _grade_source(tmp_path: Path, name: str, source: str, device: str = "cuda"):
    path = tmp_path / name
    path.write_text(source)
    spec = load_spec(SPEC)
    return grade_submission(
        path, spec, build_cases(spec), limits=Limits(call_timeout_s=30, device=device), shrink_steps=0
    )


@pytest.mark.cuda
@needs_cuda
def test_cuda_grades_a_correct_and_a_wrong_submission(tmp_path):
    """On the GPU a correct submission gets full marks and one that forgets the scale does not."""
    right = _grade_source(tmp_path, "right.py", CORRECT)
    assert right.all_passed, [(c.id, c.verdict, c.message) for c in right.cases if c.verdict is not Verdict.PASSED]
    assert right.device == "cuda" and right.environment["tf32"] == "off (pinned in the worker)"
    wrong = _grade_source(tmp_path, "wrong.py", "def scaled_score_matrix(Q, K):\n    return Q @ K.transpose(-2, -1)\n")
    assert not wrong.all_passed
    assert any(c.verdict is Verdict.WRONG_VALUE for c in wrong.cases)


@pytest.mark.cuda
@needs_cuda
def test_cuda_out_of_memory_is_a_memory_limit_and_the_next_call_is_clean(tmp_path):
    """A submission that allocates until the GPU is full gets memory_limit; the next call runs in a
    fresh worker, and the next submission is graded cleanly."""
    source = (
        "import math, os, torch\n\n"
        "def scaled_score_matrix(Q, K):\n"
        "    if not os.path.exists('hoarded'):  # the working folder outlives a worker restart\n"
        "        open('hoarded', 'w').close()\n"
        "        hoard = []\n"
        "        while True:\n"
        "            hoard.append(torch.empty(1 << 30, dtype=torch.uint8, device=Q.device))\n"
        "    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])\n"
    )
    path = tmp_path / "hoard.py"
    path.write_text(source)
    q, k = torch.ones(2, 3).numpy(), torch.ones(4, 3).numpy()
    with SandboxRunner(path, "scaled_score_matrix", Limits(call_timeout_s=120, device="cuda")) as runner:
        first = runner.call({"Q": q, "K": k}, "float32")
        second = runner.call({"Q": q, "K": k}, "float32")
        starts = runner.starts
    assert first.verdict == Verdict.MEMORY_LIMIT.value and "ran out of GPU memory" in first.message
    assert isinstance(second, Received) and second.device == "cuda:0" and second.array.shape == (2, 4)
    assert starts == 2
    assert _grade_source(tmp_path, "next.py", CORRECT).all_passed


@pytest.mark.cuda
@needs_cuda
def test_cuda_result_moved_to_cpu_fails_the_device_contract(tmp_path):
    """Returning .cpu() from cuda inputs fails dtype_device_follow_inputs with a clear message."""
    source = CORRECT.replace("return Q @ K.transpose(-2, -1)", "return (Q @ K.transpose(-2, -1)").replace(
        "sqrt(Q.shape[-1])\n", "sqrt(Q.shape[-1])).cpu()\n"
    )
    assert source.count(".cpu()") == 1
    result = _grade_source(tmp_path, "moved.py", source)
    case = next(c for c in result.cases if c.id == "property:dtype_device_follow_inputs")
    assert case.verdict is Verdict.WRONG_VALUE
    assert "the output is on cpu, but the inputs are on cuda" in case.message
