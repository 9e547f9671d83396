"""The pytest plugin with a contract's keywords and a grid: --attnscore-keyword configures the
reference, --attnscore-sweep makes one item per case, dtype and grid point (whole pytest runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_pytest_plugin_paths import run_pytest

pytestmark = pytest.mark.slow

KERNELS = (Path(__file__).resolve().parent / "cli" / "window_kernels.py").read_text(encoding="utf-8")


def test_the_sweep_fails_exactly_the_items_of_its_failing_point(tmp_path):
    """window_size=3,0 for every point, causal swept: the kernel that drops the window when causal
    fails only items of causal=true; the worked examples written for (2, 1) are skipped items saying
    why; a bad sweep is a usage error (exit 4)."""
    (tmp_path / "kernels.py").write_text(KERNELS, encoding="utf-8")
    base = [
        "--attnscore-impl=kernels:window_dropped_when_causal",
        "--attnscore-spec=sliding_window",
        "--attnscore-dtype=float64",
        "--attnscore-keyword=window_size=3,0",
    ]
    proc = run_pytest(tmp_path, *base, "--attnscore-sweep=causal=false;true")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
    assert failed and all(f.endswith("[float64-causal=true]") for f in failed), failed
    assert any("property:matches_reference[float64-causal=true]" in f for f in failed)
    passed = re.findall(r"^PASSED (\S+)", proc.stdout, flags=re.M)
    # every property there, the example whose one query keeps both keys, and the fully masked one recomputed
    assert sum(p.endswith("[float64-causal=false]") for p in passed) == 8, passed
    assert "left out: its expected value assumes causal=false, window_size=(2, 1)" in proc.stdout
    assert "left out: its expected value assumes window_size=(2, 1)" in proc.stdout
    assert re.search(rf"^{len(failed)} failed, {len(passed)} passed, 10 skipped in ", proc.stdout, flags=re.M)
    bad = run_pytest(tmp_path, *base, "--attnscore-sweep=window=1,0;2,0")
    assert bad.returncode == 4
    assert (
        "--attnscore-sweep window: expected a keyword of contract flash_attn (dropout_p, softmax_scale, causal, "
        "window_size) or where, found 'window' (spec sliding_window)"
    ) in bad.stderr
