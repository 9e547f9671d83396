"""tests/conftest.py: tests that share a module-or-wider fixture run in one xdist group per parameter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """
import pytest


@pytest.fixture(scope="module", params=["a", "b"])
def shape(request):
    return request.param


@pytest.fixture(scope="module")
def built():
    return 1


@pytest.fixture
def each():
    return 2


def test_first(shape):
    pass


def test_second(shape, each):
    pass


def test_built(built):
    pass


def test_alone(each, tmp_path_factory):
    pass
"""

CONFTEST = """
import json

from tests.conftest import _shared_setup_group


def pytest_collection_finish(session):
    groups = {item.nodeid.split("::", 1)[1]: _shared_setup_group(item) for item in session.items}
    print("GROUPS " + json.dumps(groups))
"""


@pytest.mark.slow
def test_tests_sharing_a_module_fixture_are_grouped_by_its_parameter(tmp_path):
    """The fixture's parameters split the groups; an unparametrized shared fixture makes one group;
    function fixtures and pytest's own session fixtures group nothing. The sample lives outside this
    suite, so it is judged by a copy of the rule pointed at the sample's folder."""
    folder = tmp_path / "sample"
    folder.mkdir()
    (folder / "test_sample.py").write_text(SAMPLE)
    (folder / "conftest.py").write_text(
        CONFTEST.replace(
            "from tests.conftest import _shared_setup_group",
            "import tests.conftest as rule\nfrom pathlib import Path\nrule._SUITE = Path(__file__).resolve().parent\n"
            "_shared_setup_group = rule._shared_setup_group",
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("GROUPS ")), None)
    assert line is not None, done.stdout + done.stderr
    groups = json.loads(line.removeprefix("GROUPS "))
    prefix = groups["test_built"].split("::", 1)[0]
    assert prefix.endswith("test_sample.py")
    assert groups == {
        "test_first[a]": f"{prefix}::shape=0",
        "test_first[b]": f"{prefix}::shape=1",
        "test_second[a]": f"{prefix}::shape=0",
        "test_second[b]": f"{prefix}::shape=1",
        "test_built": f"{prefix}::shared",
        "test_alone": None,
    }


def test_the_suite_runs_with_load_group_scheduling():
    """The groups take effect only under ``--dist loadgroup``: the Makefile and the figure use it."""
    assert "--dist loadgroup" in (ROOT / "Makefile").read_text()
    assert '"--dist", "loadgroup"' in (ROOT / "benchmarks" / "bench_suite.py").read_text()
