"""check(...) in a Jupyter kernel shows its report once, through IPython's own display machinery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

ip = start_ipython()
if KERNEL:  # the shell class a Jupyter kernel runs (ipykernel's), which rich detects as a notebook
    ip.__class__ = type("ZMQInteractiveShell", (type(ip),), {})
ip.run_cell("from attnscore.selfcheck import check\\ndef scores(q, keys):\\n    return keys @ q\\n")
with capture_output() as cap:
    ip.run_cell("check('scores', spec='dot_product_scores')")
ip.run_cell("import rich.console\\nSEEN = rich.console.Console().is_jupyter")
print(json.dumps({"stdout": cap.stdout, "displays": [o.data for o in cap.outputs], "jupyter": ip.user_ns["SEEN"]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [True, False], ids=["jupyter kernel shell", "terminal IPython"])
def test_check_in_a_notebook_shows_its_report_once(tmp_path, kernel):
    """The cell's value is the report, shown once: no second copy displayed by rich while the report
    was rendered (rich displays what a console prints when it sees a kernel's shell)."""
    pytest.importorskip("IPython")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("KERNEL", str(kernel))],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["jupyter"] is kernel  # rich took the shell for a notebook kernel exactly when it is one
    assert seen["displays"] == [], seen["displays"]
    report = seen["stdout"]
    assert report.count("Score: 9/9") == 1 and report.count("example:aligned_perpendicular_partial") == 1
    assert report.startswith("Out[") and "1 hidden case not run here" in report
