"""benchmarks/bench_suite.py: the figure of tests/README.md reads pytest's output and JUnit XML right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_suite", ROOT / "benchmarks" / "bench_suite.py")
assert _spec is not None and _spec.loader is not None
bench_suite = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_suite", bench_suite)  # its dataclasses look their module up by name
_spec.loader.exec_module(bench_suite)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.check.test_compare" file="tests/check/test_compare.py" name="a" time="1.5"/>
<testcase classname="tests.check.test_compare.TestRows" file="tests/check/test_compare.py" name="b" time="2.0"/>
<testcase classname="tests.test_atomic" file="tests/test_atomic.py" name="c" time="4.25"/>
<testcase classname="tests.sweeps.test_hidden_sweep" name="d" time="0.5"/>
</testsuite></testsuites>
"""


def test_time_by_file_sums_every_test_of_a_file_classes_included(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    assert bench_suite._by_file(junit) == [
        ("tests/test_atomic.py", 4.25, 1),
        ("tests/check/test_compare.py", 3.5, 2),
        ("tests.sweeps.test_hidden_sweep", 0.5, 1),  # no file attribute: the class name stands in
    ]
    assert bench_suite._by_file(junit, top=1) == [("tests/test_atomic.py", 4.25, 1)]


def test_no_junit_file_gives_no_table(tmp_path):
    assert bench_suite._by_file(tmp_path / "absent.xml") == []


def test_summary_and_slowest_lines_are_read_from_pytest_output():
    output = "\n".join(
        [
            "....",
            "============ slowest 20 durations ============",
            "12.50s call     tests/a.py::test_x",
            "3.10s setup    tests/b.py::test_y",
            "(2 durations < 0.005s hidden.)",
            "==== 3 passed, 1 skipped in 20.01s ====",
        ]
    )
    summary, slowest = bench_suite._summary_and_slowest(output)
    assert summary == "3 passed, 1 skipped in 20.01s"
    assert slowest == ["12.50s call     tests/a.py::test_x", "3.10s setup    tests/b.py::test_y"]


def test_pytest_gets_the_xdist_options_of_the_checkouts_own_makefile(tmp_path):
    """The figure is `make test`'s own: the options after ``-n $(PYTEST_JOBS)`` on the Makefile's line."""
    ours = ["--maxprocesses", "4", "--dist", "loadfile", "--no-loadscope-reorder"]
    assert bench_suite.xdist_options(ROOT / "Makefile") == ours
    older = tmp_path / "Makefile"
    older.write_text("PYTEST_JOBS ?= auto\nPYTEST := $(PY) -m pytest -q -n $(PYTEST_JOBS) --dist worksteal\n")
    assert bench_suite.xdist_options(older) == ["--dist", "worksteal"]
    commands = dict(bench_suite._commands(tmp_path, "fast", "2"))
    assert commands["pytest (fast tier)"][-6:] == ["-n", "2", "--dist", "worksteal", "-m", "not slow"]
    assert "-n" not in dict(bench_suite._commands(tmp_path, "fast", "0"))["pytest (fast tier)"]


def test_a_makefile_without_the_pytest_line_is_a_clear_error(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("test:\n\tpytest\n")
    expected = r"expected a line 'PYTEST := \.\.\. -n \$\(PYTEST_JOBS\) \.\.\.' in .*Makefile, found none"
    with pytest.raises(SystemExit, match=expected):
        bench_suite.xdist_options(makefile)


def test_busy_share_is_the_used_part_of_the_cpu_time_between_two_readings():
    assert bench_suite.busy_share((100, 400), (250, 600)) == 0.75
    assert bench_suite.busy_share((100, 400), (100, 800)) == 0.0  # an idle machine
    assert bench_suite.busy_share(None, (250, 600)) is None  # no /proc/stat
    assert bench_suite.busy_share((100, 400), (100, 400)) is None  # no time passed: no share


def test_cpu_ticks_read_the_machines_first_stat_line(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal
    stat.write_text("cpu  10 2 8 70 10 0 0 0\ncpu0 5 1 4 35 5 0 0 0\n")
    assert bench_suite._cpu_ticks(str(stat)) == (20, 100)  # idle and iowait are not busy
    stat.write_text("no numbers here\n")
    assert bench_suite._cpu_ticks(str(stat)) is None
    stat.write_text("")
    assert bench_suite._cpu_ticks(str(stat)) is None
    assert bench_suite._cpu_ticks(str(tmp_path / "absent")) is None
