"""What ``torch.compile`` costs a submission in the sandbox, against the same code uncompiled, in one run.

Grades ``examples/submissions/flash_attention_2/correct_tiled.py`` and its twin whose backward is a
helper under ``@torch.compile`` (as CS336's handout suggests) against the bundled
``flash_attention_2`` spec, alternately, ``--rounds`` times each (default 2), one submission per
``grade_submission`` with the spec's cases built once, each in a fresh worker (``template=False``:
the worker is this process's child, so its CPU time is counted; both pay the same torch import).
Prints per submission the score, the seconds of grading, the CPU seconds of the grader and its
worker together and the load average, so both figures come from the same machine at the same
load. Needs a C++ compiler (``g++``) and Python's headers.

    .venv/bin/python benchmarks/bench_compile.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attnscore.check.cases import build_cases  # noqa: E402
from attnscore.grade.grading import grade_submission  # noqa: E402
from attnscore.sandbox.checks import compile_problem  # noqa: E402
from attnscore.sandbox.limits import Limits  # noqa: E402
from attnscore.spec.load import load_spec  # noqa: E402

COMPILED_BACKWARD = """    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        dQ, dK, dV = _backward(Q, K, V, O, L, dO, ctx.is_causal)
        return dQ, dK, dV, None


@torch.compile
def _backward(Q, K, V, O, L, dO, is_causal: bool):
    scale = Q.shape[-1] ** -0.5
    S = Q @ K.transpose(-2, -1) * scale
    if is_causal:
        future = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1)
        S = S.masked_fill(future, float("-inf"))
    P = torch.exp(S - L[..., None])
    dV = P.transpose(-2, -1) @ dO
    dP = dO @ V.transpose(-2, -1)
    D = (dO * O).sum(-1, keepdim=True)
    dS = P * (dP - D)
    return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, dV
"""


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    problem = compile_problem()
    if problem is not None:
        sys.exit(f"torch.compile cannot run in the sandbox here: {problem}")
    plain = ROOT / "examples" / "submissions" / "flash_attention_2" / "correct_tiled.py"
    source = plain.read_text()
    start = source.index("    @staticmethod\n    def backward(ctx, dO):")
    folder = Path(tempfile.mkdtemp(prefix="bench-compile-"))
    compiled = folder / "compiled_backward.py"
    compiled.write_text(source[:start] + COMPILED_BACKWARD)
    spec = load_spec(ROOT / "specs" / "flash_attention_2.yaml")
    cases = build_cases(spec)
    print("submission            score   grading s   CPU s (grader + worker)   load average")
    for _ in range(rounds):
        for path in (plain, compiled):
            began, cpu = time.perf_counter(), _cpu()
            result = grade_submission(path, spec, cases, limits=Limits(call_timeout_s=spec.timeout_s, template=False))
            took, used = time.perf_counter() - began, _cpu() - cpu
            score = f"{result.score}/{result.max_score}"
            print(f"{path.stem:<22}{score:>6}{took:>12.1f}{used:>26.1f}   {os.getloadavg()[0]:.1f}")
    compiled.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
