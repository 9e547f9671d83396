"""A student's cold ``attnscore check`` imports only what it uses: no hypothesis (its cases come from
the case cache: nothing is drawn or shrunk for a correct file) and no packaging (the spec lists no
packages). Each costs a cold check time it cannot afford (issue 42: at most ``import torch`` + 0.3 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnscore.selfcheck import visible_cases
from attnscore.spec.load import load_spec
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
SUBMISSION = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
UNUSED = ("hypothesis", "packaging")
"""What a cold check of a correct file against a spec without packages must not import."""

_CHECK_MODULES = """
import sys
import attnscore.cli.check
from attnscore.selfcheck import visible_cases
from attnscore.spec.assignment import load_spec_or_assignment

spec = load_spec_or_assignment(sys.argv[1])
print("missing:", spec.environment.missing())
cases, hidden = visible_cases(spec)
print("cases:", len(cases), "hidden:", hidden)
print("imported:", [name for name in sys.argv[2:] if name in sys.modules])
"""


def test_the_check_commands_modules_and_cached_cases_import_no_hypothesis(tmp_path, monkeypatch):
    """The check command's modules, its spec loading and its cases read from the case cache, in a
    fresh interpreter (without torch, which the submission imports): none of ``UNUSED`` is loaded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    built, hidden = visible_cases(load_spec(SPEC))  # the case cache, filled as a first check does
    done = subprocess.run(
        [sys.executable, "-c", _CHECK_MODULES, str(SPEC), *UNUSED],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["missing: []", f"cases: {len(built)} hidden: {hidden}", "imported: []"]


_COLD_CHECK = """
import sys
from attnscore.cli import run
unused = sys.argv[3:]
sys.argv = ["attnscore", "check", *sys.argv[1:3]]
try:
    run()
except SystemExit as exc:
    print("exit", exc.code)
print("imported:", [name for name in unused if name in sys.modules])
"""


@pytest.mark.slow
def test_a_cold_check_of_a_correct_file_imports_no_hypothesis(tmp_path):
    """``attnscore check correct_matmul.py --spec dot_product_scores.yaml``, end to end in a fresh
    process: the first run builds the cases (drawing them with hypothesis), the second reads them
    from the case cache and gives the same report without importing any of ``UNUSED``."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def check() -> str:
        argv = [sys.executable, "-c", _COLD_CHECK, str(SUBMISSION), f"--spec={SPEC}", *UNUSED]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=HANG_GUARD_S)
        assert "exit 0" in done.stdout, done.stdout + done.stderr
        return done.stdout

    first = check()
    assert "imported: ['hypothesis']" in first  # built: drawn with hypothesis
    second = check()
    assert "Score: 9/9" in second and "imported: []" in second
    assert first.split("Score:")[0] == second.split("Score:")[0]  # the same report, case by case
