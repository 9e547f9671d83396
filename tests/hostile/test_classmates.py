"""Nothing of one submission in another's worker: a student's file that searches its own memory for
the names of students graded before it finds none, in every sandbox shape.

A worker forked from the template inherits the template's memory; the template once received each
fork request (the submission's entry file among them) and freed it without clearing it, so a later
worker could read earlier students' file names there (14 of 19 class runs of three files). Now the
template receives only the word ``fork`` and the worker reads its own request from its pipe
(:func:`attnscore.boundary.worker.read_setup`), and a fresh worker's command line names no file.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnscore.sandbox.launch import bwrap_available
from tests.hostile.harness import LIMITS, MEMORY_SEARCH, classmates_found, grade_classmates

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

SHAPES = {
    "template": replace(LIMITS, bwrap=False, template=None),
    "fresh": replace(LIMITS, bwrap=False, template=False),
    "bwrap-template": replace(LIMITS, bwrap=True, template=None),
    "bwrap-fresh": replace(LIMITS, bwrap=True, template=False),
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("run", [1, 2])
def test_a_later_student_finds_no_earlier_students_name_in_its_memory(shape, run, tmp_path):
    """A class of three right files with random names, then the memory search, graded in one run: it
    reads its whole memory (hundreds of MiB) and finds none of the names; every file gets full marks."""
    if shape.startswith("bwrap") and not bwrap_available():
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")
    names, result, _ = grade_classmates(tmp_path, limits=SHAPES[shape])
    found = classmates_found(result)
    assert found is not None, result.output
    assert found == (0, found[1]) and found[1] >= 64, result.output  # it did read its memory, and found nothing
    for name in names:
        assert name not in result.output
    assert result.score == result.max_score
    if shape.endswith("template"):
        assert "forked from a clean worker template" in result.environment["sandbox"]


def test_the_search_finds_a_name_where_one_is_in_memory():
    """The search itself works: run in a process that holds a classmate's name, it finds and names it."""
    import subprocess
    import sys

    held = "zz_classmate_0123abcd.py"
    code = f"held = {held!r}.encode() * 3\n" + MEMORY_SEARCH.read_text()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert f"classmates: found 1 ({held})" in done.stdout, done.stdout + done.stderr
