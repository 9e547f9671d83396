"""tests/conftest.py: the files with slow tests are handed to the xdist workers first, each file whole;
one torch thread in each xdist worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]
SLOW_FILE = "import pytest\n\npytestmark = pytest.mark.slow\n\ndef test_four():\n    pass\n"
MIXED_FILE = "import pytest\n\ndef test_quick():\n    pass\n\n@pytest.mark.slow\ndef test_slow():\n    pass\n"


def _collected(folder: Path, files: dict[str, str], *args: str) -> list[str]:
    """The ids pytest collects, in order, from ``files`` beside a copy of tests/conftest.py."""
    (folder / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    for name, text in files.items():
        (folder / name).write_text(text)
    command = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "--disable-plugin-autoload"]
    listed = subprocess.run([*command, *args], cwd=folder, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return [line for line in listed.stdout.splitlines() if "::" in line]


def test_files_with_a_slow_test_come_first_and_keep_their_own_order(tmp_path):
    files = {
        "test_a_quick.py": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
        "test_b_mixed.py": MIXED_FILE,
        "test_c_quick.py": "def test_three():\n    pass\n",
        "test_d_slow.py": SLOW_FILE,
    }
    assert _collected(tmp_path, files) == [
        "test_b_mixed.py::test_quick",
        "test_b_mixed.py::test_slow",
        "test_d_slow.py::test_four",
        "test_a_quick.py::test_one",
        "test_a_quick.py::test_two",
        "test_c_quick.py::test_three",
    ]


@pytest.mark.parametrize(
    "marker, expected",
    [
        ("not slow", ["test_a.py::test_a", "test_b_mixed.py::test_quick"]),  # no slow test left: collection order
        ("slow", ["test_b_mixed.py::test_slow", "test_d_slow.py::test_four"]),
    ],
)
def test_a_selection_by_marker_orders_only_what_it_selects(tmp_path, marker, expected):
    files = {"test_a.py": "def test_a():\n    pass\n", "test_b_mixed.py": MIXED_FILE, "test_d_slow.py": SLOW_FILE}
    assert _collected(tmp_path, files, "-m", marker) == expected


THREADS_TEST = """
import os
import torch

def test_threads():
    print("THREADS", torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("worker, threads, variable", [("gw1", "1", "1"), (None, None, "None")])
def test_an_xdist_worker_computes_with_one_torch_thread(tmp_path, worker, threads, variable):
    """In an xdist worker torch has one thread, and the processes it starts inherit OMP_NUM_THREADS=1;
    pytest run without xdist leaves both alone."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (tmp_path / "test_threads.py").write_text(THREADS_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "OMP_NUM_THREADS")}
    if worker is not None:
        env["PYTEST_XDIST_WORKER"] = worker
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--disable-plugin-autoload"]
    ran = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [line] = [line for line in ran.stdout.splitlines() if "THREADS" in line]
    _, seen_threads, seen_variable = line.split()
    assert seen_variable == variable, line
    if worker is not None:  # without xdist torch keeps its own count (one per core)
        assert seen_threads == threads, line
