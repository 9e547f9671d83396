"""JUnit ids of the pytest plugin (attnscore.pytest_plugin) are the same with and without
pytest-xdist: a spec outside the rootdir (a bundled spec by id) is class ``<file>.<spec id>``,
never a leading dot and the install path, in serial and parallel runs alike.

The serial run happens inside this process, the parallel one in a subprocess that loads the plugin
through its entry point (tests/plugin_runs.py). Skipped without pytest-xdist (not one of
attnscore's dependencies).
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.plugin_runs import ROOT, run_in_process, run_subprocess

pytestmark = pytest.mark.slow

pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install pytest-xdist)")


def junit_ids(folder: Path, *more: str) -> list[tuple[str, str]]:
    """Run the plugin from ``folder`` (its own rootdir, outside the repository) on a bundled spec by
    id and a spec file inside ``folder``, in this process, or with ``more`` arguments (``-n 2``) in
    a subprocess; the JUnit file's (classname, name) pairs, sorted."""
    junit = folder / f"junit{len(more)}.xml"
    args = ["-q", "-p", "no:cacheprovider", f"--rootdir={folder}"]
    args += ["--attnscore-impl=examples.impl.my_attention:scaled_score_matrix"]
    args += ["--attnscore-spec=scaled_score_matrix", "--attnscore-spec=specs/local.yaml"]
    args += ["--attnscore-dtype=float64", f"--junitxml={junit}", *more]
    if more:  # pytest-xdist's processes: the plugin through its entry point, and no module
        # rewritten for its test statements (a run that writes bytecode reads them back; none here)
        done = run_subprocess(folder, "--assert=plain", *args)
    else:
        done = run_in_process(folder, *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    return sorted((c.attrib["classname"], c.attrib["name"]) for c in cases)


def test_junit_ids_are_the_same_with_and_without_xdist(tmp_path):
    """Serial and ``-n 2`` runs write the same JUnit (class, name) pairs; no class
    starts with a dot or holds a folder of the machine."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    (tmp_path / "specs").mkdir()
    shutil.copy(ROOT / "specs" / "scaled_score_matrix.yaml", tmp_path / "specs" / "local.yaml")
    serial = junit_ids(tmp_path)
    parallel = junit_ids(tmp_path, "-n", "2")
    assert serial == parallel
    assert len(serial) == 50  # 25 cases of each spec, float64
    assert {c for c, _ in serial} == {
        "scaled_score_matrix.yaml.scaled_score_matrix",  # the bundled spec, outside the rootdir
        "specs.local.yaml.scaled_score_matrix",  # the spec file inside it, as pytest names any file
    }
    assert ("scaled_score_matrix.yaml.scaled_score_matrix", "example:two_heads[float64]") in serial
