"""The console script's collector: frozen at start, and again around a heavy module's import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for torch: a module whose import makes many long-lived objects (each a small cycle,
# so that the collector tracks it). Run in a fresh interpreter: the hook and the freeze are
# process-wide.
_HEAVY = """
class Node:
    def __init__(self):
        self.me = self
KEPT = [Node() for _ in range(20000)]
"""

_BROKEN = "raise RuntimeError('the module failed')\n"

_PROBE = """
import gc, importlib.util, json, sys
from attnscore.cli.collector import FreezeAfterImport, freeze_after_imports
heavy = sys.argv[1]
first = sys.argv[2] if len(sys.argv) > 2 else ""
freeze_after_imports((heavy,))
at_start = gc.get_freeze_count()
facts = {"hooked": [f.name for f in sys.meta_path if isinstance(f, FreezeAfterImport)]}
if first == "find_spec":
    importlib.util.find_spec(heavy)  # asked without an import: the hook must stay for the import
facts["hooked_before_import"] = [f.name for f in sys.meta_path if isinstance(f, FreezeAfterImport)]
try:
    module = importlib.import_module(heavy)
    facts["loader"] = type(module.__loader__).__name__
    facts["spec_loader"] = type(module.__spec__.loader).__name__
    facts["objects_frozen_by_import"] = gc.get_freeze_count() - at_start
except Exception as exc:
    facts["error"] = f"{type(exc).__name__}: {exc}"
facts["hooked_after"] = [f.name for f in sys.meta_path if isinstance(f, FreezeAfterImport)]
freeze_after_imports((heavy,))  # a second call adds no second hook
facts["hooked_twice"] = [f.name for f in sys.meta_path if isinstance(f, FreezeAfterImport)]
print(json.dumps(facts))
"""


def _probe(tmp_path: Path, name: str, *argv: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, name, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    facts: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return facts


@pytest.mark.parametrize("first", ["import", "find_spec"])
def test_the_heavy_modules_objects_are_frozen_once_it_is_imported(tmp_path, first):
    (tmp_path / "heavy_stand_in.py").write_text(_HEAVY)
    facts = _probe(tmp_path, "heavy_stand_in", first)
    assert facts["hooked"] == ["heavy_stand_in"]
    assert facts["hooked_before_import"] == ["heavy_stand_in"]  # a find_spec alone does not use it up
    assert isinstance(facts["objects_frozen_by_import"], int)
    assert facts["objects_frozen_by_import"] >= 20000  # the module's own objects, no longer scanned
    assert facts["loader"] == facts["spec_loader"] == "SourceFileLoader"  # the module keeps its own loader
    assert facts["hooked_after"] == facts["hooked_twice"] == []  # one import, one freeze: the hook is gone


def test_a_module_that_is_not_installed_fails_to_import_as_it_would_without_the_hook(tmp_path):
    facts = _probe(tmp_path, "no_such_module_anywhere")
    assert facts["error"] == "ModuleNotFoundError: No module named 'no_such_module_anywhere'"
    assert facts["hooked_after"] == ["no_such_module_anywhere"]
    assert facts["hooked_twice"] == ["no_such_module_anywhere"]  # still one hook, not two


def test_a_module_whose_code_fails_raises_its_own_error_and_keeps_the_hook_for_the_next_try(tmp_path):
    (tmp_path / "broken_stand_in.py").write_text(_BROKEN)
    facts = _probe(tmp_path, "broken_stand_in")
    assert facts["error"] == "RuntimeError: the module failed"
    assert facts["hooked_after"] == ["broken_stand_in"]


def test_a_module_imported_before_the_call_gets_no_hook(tmp_path):
    facts = _probe(tmp_path, "json")  # imported by the probe itself, before freeze_after_imports
    assert facts["hooked"] == []
    assert facts["objects_frozen_by_import"] == 0


_COLD = """
import gc, sys
from attnscore.cli import run
sys.argv = ["attnscore", "check", *sys.argv[1:3]]
try:
    run()
except SystemExit as exc:
    print("exit", exc.code)
import torch
print("frozen", gc.get_freeze_count(), "loader", type(torch.__loader__).__name__)
"""


@pytest.mark.slow
def test_the_console_script_freezes_torchs_objects_after_a_check_imports_it():
    submission = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    spec = ROOT / "specs" / "dot_product_scores.yaml"
    done = subprocess.run(
        [sys.executable, "-c", _COLD, str(submission), f"--spec={spec}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert "Score: 9/9" in done.stdout and "exit 0" in done.stdout, done.stdout + done.stderr
    words = done.stdout.split()
    frozen = int(words[words.index("frozen") + 1])
    assert frozen > 100_000  # torch's import alone makes more than a hundred thousand tracked objects
    assert words[words.index("loader") + 1] == "SourceFileLoader"


def test_main_called_in_process_leaves_the_collector_as_it_is():
    """Tests and notebooks call ``main``: only the console script (``run``) freezes."""
    code = (
        "import gc; from click.testing import CliRunner; from attnscore.cli import main; "
        "before = gc.get_freeze_count(); CliRunner().invoke(main, ['specs']); "
        "from attnscore.cli.collector import FreezeAfterImport; import sys; "
        "print(gc.get_freeze_count() - before, any(isinstance(f, FreezeAfterImport) for f in sys.meta_path))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD_S, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False"]


_ENDS = """
import gc, sys
from attnscore.cli import run
sys.argv = ["attnscore", *sys.argv[1:]]
try:
    run()
except SystemExit as exc:
    print("exit", exc.code)
print("unfrozen", len(gc.get_objects()))
"""


def _unfrozen_after(*argv: str) -> tuple[str, int]:
    """Run ``attnscore ARGV`` through the console script in a fresh interpreter; ``(its exit code,
    the objects the collector still tracks afterwards, unfrozen)``."""
    done = subprocess.run(
        [sys.executable, "-c", _ENDS, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
        check=False,
    )
    words = done.stdout.split()
    assert "exit" in words and "unfrozen" in words, done.stdout + done.stderr
    return words[words.index("exit") + 1], int(words[words.index("unfrozen") + 1])


def test_the_console_script_leaves_nothing_for_the_shutdown_collections_to_scan():
    """As a command ends, what it built after torch's import is frozen too, so the interpreter's
    collections while it shuts down scan nothing (``attnscore specs`` left 36,806 objects to them)."""
    code, unfrozen = _unfrozen_after("specs")
    assert code == "0"
    assert unfrozen < 100


def test_a_command_that_fails_also_ends_frozen():
    """A command that stops on a user's mistake (exit 2) freezes the collector all the same."""
    code, unfrozen = _unfrozen_after("check", "no_such_file.py", "--spec", "dot_product_scores")
    assert code == "2"
    assert unfrozen < 100
