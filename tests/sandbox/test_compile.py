"""torch.compile in the sandbox: correct compiled code gets full marks in every sandbox shape here,
compiling is bounded by its own allowance (not each call's limit, nor the time budget), nothing
compiled for one submission is visible to the next, and a machine that cannot compile is the
grader's limit."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_submission
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.sandbox import checks, processes
from attnscore.sandbox.launch import Limits, SandboxRunner
from attnscore.sandbox.outcome import compile_timeout_text
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
PROBLEM = checks.compile_problem(Limits())
pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROBLEM is not None, reason=f"cannot compile here: {PROBLEM}")]

COMPILED = """\
import torch


@torch.compile
def _scores(q, keys):
    return keys @ q


def scores(q, keys):
    return _scores(q, keys)
"""

SHAPES = {
    # a budget of one call's limit too: compilations are the compile allowance's, not the budget's
    "this machine's sandbox": Limits(call_timeout_s=2.0, time_budget_s=2.0),
    "no bwrap, forked from the template": Limits(call_timeout_s=2.0, bwrap=False),
    "no bwrap, a fresh interpreter": Limits(call_timeout_s=2.0, bwrap=False, template=False),
}
"""The sandbox shapes :data:`COMPILED` is graded in, each with 2 s per call."""
DEFAULT_SHAPE = "this machine's sandbox"


class _Graded(dict[str, SubmissionResult]):
    """``graded[shape]``: :data:`COMPILED` graded on specs/dot_product_scores.yaml with the limits of
    :data:`SHAPES` ``[shape]``, in a fresh sandbox of its own, at the first asking and kept (a result
    is frozen data): each test asserts its own facts on the one grading of its shape."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def __missing__(self, shape: str) -> SubmissionResult:
        spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
        path = self.folder / f"shape{len(self)}" / "solution.py"  # a folder of its own per submission
        path.parent.mkdir()
        path.write_text(COMPILED)
        self[shape] = grade_submission(path, spec, build_cases(spec), limits=SHAPES[shape], shrink_steps=0)
        return self[shape]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> _Graded:
    """The gradings of :data:`COMPILED`, each shape's once per module."""
    return _Graded(tmp_path_factory.mktemp("compiled"))


@pytest.mark.parametrize("shape", [pytest.param(s, id=s) for s in SHAPES])
def test_correct_compiled_code_gets_full_marks_within_a_short_call_limit(graded, shape):
    """A cold compile takes seconds; with 2 s per call the compile allowance, not the call's limit, pays for it."""
    result = graded[shape]
    assert (result.score, result.max_score) == (11, 11), [(c.id, c.message) for c in result.cases if c.message]


def test_compiling_does_not_spend_the_budget(graded):
    """A cold compile takes seconds of the worker's time; a 2 s budget (one call's limit) still leaves
    every case to run: the compilations are the compile allowance's, not the budget's (this machine's
    sandbox's grading above, which has that budget)."""
    assert (SHAPES[DEFAULT_SHAPE].time_budget_s, SHAPES[DEFAULT_SHAPE].call_timeout_s) == (2.0, 2.0)
    result = graded[DEFAULT_SHAPE]
    assert (result.score, result.max_score) == (11, 11), [(c.id, c.message) for c in result.cases if c.message]


REPORTER = """\
import os
import tempfile

import torch


def _found():
    \"\"\"Compiled artefacts this worker can see: its own cache, and any other torch.compile cache.\"\"\"
    seen = []
    own = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    for folder in {own, tempfile.gettempdir(), "/tmp", os.path.expanduser("~"), "/var/tmp"}:
        try:
            for root, dirs, files in os.walk(folder):
                seen += [os.path.join(root, f) for f in files if "torchinductor" in root or f.endswith((".so", ".cpp"))]
                if len(seen) > 1000:
                    break
        except OSError:
            pass
    return seen


BEFORE = len(_found())


@torch.compile
def _scores(q, keys):
    return keys @ q


def scores(q, keys):
    out = _scores(q, keys)
    return torch.tensor([float(BEFORE), float(len(_found()))])
"""


def test_nothing_compiled_for_one_submission_is_visible_to_the_next(tmp_path):
    """The first submission compiles into its own working folder (files there), which goes with it; the
    next one, run alike, finds no compiled file of the first anywhere it can look."""
    path = tmp_path / "solution.py"
    path.write_text(REPORTER)
    limits = Limits(call_timeout_s=5.0, bwrap=False)
    with SandboxRunner(path, "scores", limits) as first:
        before, after = first.call(ARGS, "float32").array.tolist()
        workdir = Path(first.workdir)
        uid = first.uid
    assert before == 0 and after > 0  # it compiled, into a cache it could see
    assert not workdir.exists()
    leftovers = [p for p in Path(tempfile.gettempdir()).glob("torchinductor*") if p.exists() and p.stat().st_uid == uid]
    assert leftovers == []
    with SandboxRunner(path, "scores", limits) as second:
        before, after = second.call(ARGS, "float32").array.tolist()
    assert before == 0  # nothing of the first submission's compilation reached the second


def test_the_compile_allowance_runs_out_with_its_own_message(tmp_path):
    """An allowance shorter than one compilation: the call times out saying the allowance ran out."""
    path = tmp_path / "solution.py"
    path.write_text(COMPILED)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=1.0, compile_s=0.5, bwrap=False)) as runner:
        outcome = runner.call(ARGS, "float32")
        spent = runner.compile_spent
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.TIMEOUT
    assert outcome.message == compile_timeout_text(0.5)
    assert spent == pytest.approx(0.5)


def test_compiling_is_counted_apart_from_the_call(tmp_path):
    """A correct compiled call under a 1 s limit: passes, and its compilation is counted in compile_spent."""
    path = tmp_path / "solution.py"
    path.write_text(COMPILED)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=1.0, bwrap=False)) as runner:
        first = runner.call(ARGS, "float32")
        second = runner.call(ARGS, "float32")
        spent = runner.compile_spent
    assert first.array.tolist() == second.array.tolist() == [1.0, 0.0]
    assert 0.5 < spent < Limits().compile_s


def test_a_machine_without_a_compiler_is_the_graders_limit(tmp_path, monkeypatch):
    """No g++ on the sandbox's PATH: the call is a grader error saying torch.compile is not available here."""
    empty = tmp_path / "bin"
    empty.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(empty, 0o755)
    monkeypatch.setattr(processes, "WORKER_PATH", str(empty))
    monkeypatch.setattr(checks, "WORKER_PATH", str(empty))
    path = tmp_path / "solution.py"
    path.write_text(COMPILED)
    with SandboxRunner(path, "scores", Limits(call_timeout_s=5.0, bwrap=False)) as runner:
        outcome = runner.call(ARGS, "float32")
    assert isinstance(outcome, CallFailure) and outcome.verdict == Verdict.GRADER_ERROR
    assert outcome.message == (
        f"torch.compile is not available on this grader: no C++ compiler (g++) on the sandbox's PATH ({empty}); "
        "install it on the grading machine (apt-get install g++). This is a limit of the grading machine, not a "
        "mistake in your code: please tell your instructor"
    )


def test_a_flash_attention_backward_under_torch_compile_gets_full_marks(tmp_path):
    """CS336-style FlashAttention-2 whose backward helper is torch.compiled (as the handout suggests):
    full marks on the bundled spec, in the sandbox, within its 10 s per call."""
    source = (ROOT / "examples" / "submissions" / "flash_attention_2" / "correct_tiled.py").read_text()
    start = source.index("    @staticmethod\n    def backward(ctx, dO):")
    compiled = source[:start] + (
        "    @staticmethod\n"
        "    def backward(ctx, dO):\n"
        "        Q, K, V, O, L = ctx.saved_tensors\n"
        "        dQ, dK, dV = _backward(Q, K, V, O, L, dO, ctx.is_causal)\n"
        "        return dQ, dK, dV, None\n\n\n"
        "@torch.compile\n"
        "def _backward(Q, K, V, O, L, dO, is_causal: bool):\n"
        "    scale = Q.shape[-1] ** -0.5\n"
        "    S = Q @ K.transpose(-2, -1) * scale\n"
        "    if is_causal:\n"
        "        future = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1)\n"
        '        S = S.masked_fill(future, float("-inf"))\n'
        "    P = torch.exp(S - L[..., None])\n"
        "    dV = P.transpose(-2, -1) @ dO\n"
        "    dP = dO @ V.transpose(-2, -1)\n"
        "    D = (dO * O).sum(-1, keepdim=True)\n"
        "    dS = P * (dP - D)\n"
        "    return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, dV\n"
    )
    path = tmp_path / "flash.py"
    path.write_text(compiled)
    spec = load_spec(ROOT / "specs" / "flash_attention_2.yaml")
    result = grade_submission(path, spec, build_cases(spec), shrink_steps=0)
    assert result.score == result.max_score, [(c.id, c.message) for c in result.cases if c.message]
