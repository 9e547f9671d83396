"""Kernel objects that outlive a worker (System V IPC, POSIX queues, keyrings) carry nothing to the
next submission: graded twice in one batch, and in two grader runs one after the other, in every
sandbox shape this machine runs, with seccomp and without it (then the IPC namespace of each
worker and the sweep of its uid must hold alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, replace

import pytest

from attnscore.sandbox import kernel_objects
from attnscore.sandbox.launch import bwrap_available
from hostile.harness import LIMITS, ROOT, SUBMISSIONS

pytestmark = pytest.mark.filterwarnings("ignore")

# attack file -> the name it prints its finding under ("<kind>: new", "found ...", or an errno)
ATTACKS = {
    "leaves_sysv_shm": "shm",
    "leaves_sysv_msg": "msg",
    "leaves_sysv_sem": "sem",
    "leaves_posix_mqueue": "mqueue",
    "leaves_keyring_key": "keyring",
}
# A range of worker uids of these tests' own, so that the second copy gets the first one's uid
# even while other graders on the machine hold uids of the default range.
UID = 64400
_SLOTS = 64

_GRADER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_submission
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from hostile.harness import SPEC_PATH
limits = Limits(**json.loads(sys.argv[2]))
spec = load_spec(str(SPEC_PATH))
cases = build_cases(spec)
out = []
for path in sys.argv[3:]:  # one at a time: each copy gets the uid the one before it had
    result = grade_submission(path, spec, cases, limits=limits, shrink_steps=0)
    out.append([path, str(result.score), result.output, result.environment["sandbox"]])
print(json.dumps(out))
"""


def _shapes() -> list:
    base = replace(LIMITS, uid=UID)
    bare = {"seccomp": False, "landlock": False}  # what is left below seccomp (Landlock refuses mq_open's open)
    shapes = [
        pytest.param(base, id="default"),
        pytest.param(replace(base, template=False), id="fresh"),
        pytest.param(replace(base, **bare), id="default-no-seccomp"),
        pytest.param(replace(base, template=False, **bare), id="fresh-no-seccomp"),
    ]
    if bwrap_available():  # the default and fresh shapes above use bwrap: also the shapes without it
        shapes += [
            pytest.param(replace(base, bwrap=False), id="no-bwrap"),
            pytest.param(replace(base, bwrap=False, **bare), id="no-bwrap-no-seccomp"),
            pytest.param(replace(base, bwrap=False, template=False, **bare), id="no-bwrap-fresh-no-seccomp"),
        ]
    return shapes


def _grader_run(limits) -> list[list[str]]:
    """One grader process grading every attack twice in a row; ``[path, score, output, sandbox]`` each."""
    paths = [str(SUBMISSIONS / f"{name}.py") for name in ATTACKS for _ in range(2)]
    done = subprocess.run(
        [sys.executable, "-c", _GRADER, str(ROOT / "tests"), json.dumps(asdict(limits)), *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _left_behind() -> list[str]:
    """Kernel objects of this range's uids still there (keys are collected by the kernel a moment
    after their keyrings are invalidated: waited for, without a deadline that load could beat)."""
    uids = range(UID, UID + _SLOTS)
    objects = [f"{kind} {ident} of uid {uid}" for uid in uids for kind, ident in kernel_objects.sysv_objects_of(uid)]
    for _ in range(600):
        keys = [f"keys of uid {uid}" for uid in uids if kernel_objects.has_keys(uid)]
        if not keys:
            break
        time.sleep(0.1)
    return objects + keys


@pytest.mark.parametrize("limits", _shapes())
def test_kernel_objects_carry_nothing_to_the_next_submission(limits):
    """Each attack, graded twice in each of two grader runs, never finds what an earlier copy left;
    with seccomp every attempt is refused; afterwards no object or key of a worker uid remains."""
    if os.geteuid() != 0:
        pytest.skip("worker uids of their own (and so the uid sweep) need a root grader")
    runs = [_grader_run(limits), _grader_run(limits)]
    assert _left_behind() == []
    for run in runs:
        for path, score, output, sandbox in run:
            name = os.path.basename(path).removesuffix(".py")
            line = next((x for x in output.splitlines() if x.startswith(f"{ATTACKS[name]}:")), "")
            assert score == "11", (name, output)
            assert "found" not in line, (name, line)
            if limits.seccomp is False:
                assert line == f"{ATTACKS[name]}: new", (name, output)
            else:
                assert line == f"{ATTACKS[name]}: EPERM", (name, output)
                assert "SysV/POSIX IPC, keyrings" in sandbox
