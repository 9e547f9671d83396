"""Kernel objects that outlive a worker (System V IPC, POSIX queues, keyrings) carry nothing to the
next submission: graded twice in one batch, and in two grader runs one after the other, in every
sandbox shape this machine runs, with seccomp and without it (then the IPC namespace of each
worker and the sweep of its uid must hold alone).

Each of the two grader runs grades the submission twice in every shape, one shape after the
other (:func:`graded`): two grader processes in all instead of two per shape (each starts torch
and attnscore and builds the cases). A copy in one shape may so meet what a copy in any shape
before it left, not only its own shape's: the same uids, the same checks, more to find.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, replace

import pytest

from attnscore.boundary import kernel_objects
from attnscore.sandbox.launch import bwrap_available
from tests.hostile.harness import LIMITS, ROOT, SUBMISSIONS

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

# attack file -> the name it prints its finding under ("<kind>: new", "found ...", or an errno)
ATTACKS = {
    "leaves_sysv_shm": "shm",
    "leaves_sysv_msg": "msg",
    "leaves_sysv_sem": "sem",
    "leaves_posix_mqueue": "mqueue",
    "leaves_keyring_key": "keyring",
}
# Limits roomy enough that no call times out on a loaded machine (scores are asserted).
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
from tests.hostile.harness import SPEC_PATH
shapes = json.loads(sys.argv[2])  # {shape id: Limits fields}, graded one shape after the other
spec = load_spec(str(SPEC_PATH))
cases = build_cases(spec)
out = {}
for shape, fields in shapes.items():
    limits = Limits(**fields)
    out[shape] = []
    for path in sys.argv[3:]:  # one at a time: each copy gets the uid the one before it had
        result = grade_submission(path, spec, cases, limits=limits, shrink_steps=0)
        out[shape].append([path, str(result.score), result.output, result.environment["sandbox"]])
print(json.dumps(out))
"""


def _shapes() -> list:
    base = replace(LIMITS, uid=UID, call_timeout_s=30, total_timeout_s=600, load_timeout_s=120)
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


def _combined(folder) -> str:
    """One submission running every attack of ``ATTACKS`` (each in its own namespace): it prints
    each one's finding at import and gives each one every call's inputs. Right answers."""
    parts = {name: (SUBMISSIONS / f"{name}.py").read_text() for name in ATTACKS}
    path = folder / "leaves_kernel_objects.py"
    path.write_text(
        f"PARTS = {parts!r}\n"
        "LOADED = []\n"
        "for _name, _source in PARTS.items():\n"
        "    _namespace = {'__name__': _name}\n"
        "    exec(compile(_source, _name + '.py', 'exec'), _namespace)\n"
        "    LOADED.append(_namespace)\n\n\n"
        "def scores(q, keys):\n"
        "    for namespace in LOADED:\n"
        "        namespace['scores'](q, keys)\n"
        "    return keys @ q\n"
    )
    return str(path)


def _grader_run(shapes: dict, path: str) -> dict[str, list[list[str]]]:
    """One grader process grading ``path`` twice in a row in each shape (``{id: limits}``, in
    order); ``{id: [[path, score, output, sandbox], ...]}``."""
    fields = {shape: asdict(limits) for shape, limits in shapes.items()}
    done = subprocess.run(
        [sys.executable, "-c", _GRADER, str(ROOT), json.dumps(fields), path, path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900 * len(shapes),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _reap_orphans() -> None:
    """Reap this process's zombie children. In-process grading earlier in the session makes the
    test process a child subreaper (as a grader is), so what a grader subprocess leaves behind when
    it exits is reparented here; unreaped, a worker's zombie keeps its credentials, and with them its
    keyrings, alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _left_behind() -> list[str]:
    """Kernel objects of this range's uids still there (keys are collected by the kernel a moment
    after their keyrings are invalidated: waited for, without a deadline that load could beat)."""
    uids = range(UID, UID + _SLOTS)
    objects = [f"{kind} {ident} of uid {uid}" for uid in uids for kind, ident in kernel_objects.sysv_objects_of(uid)]
    for _ in range(600):
        _reap_orphans()
        keys = [f"keys of uid {uid}" for uid in uids if kernel_objects.has_keys(uid)]
        if not keys:
            break
        time.sleep(0.1)
    return objects + keys


def _skip_reason(limits) -> str | None:
    if os.geteuid() != 0:
        return "worker uids of their own (and so the uid sweep) need a root grader"
    if limits.seccomp is False and not kernel_objects.ipc_namespaces_available():
        return "no IPC namespaces here: seccomp is the layer that keeps POSIX queues apart"
    return None


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict[str, list[dict[str, list[list[str]]]]], list[str]]:
    """Two grader runs, one after the other, each grading the combined attack twice in every shape
    that is not skipped here; ``({shape id: [run 1, run 2]}, the objects and keys left behind)``."""
    shapes = {p.id: p.values[0] for p in _shapes() if _skip_reason(p.values[0]) is None}
    if not shapes:
        return {}, []
    path = _combined(tmp_path_factory.mktemp("kernel_objects"))
    runs = [_grader_run(shapes, path), _grader_run(shapes, path)]
    return {shape: [run[shape] for run in runs] for shape in shapes}, _left_behind()


@pytest.mark.parametrize("limits", _shapes())
def test_kernel_objects_carry_nothing_to_the_next_submission(limits, graded, request):
    """Every attack, graded twice in each of two grader runs, never finds what an earlier copy left;
    with seccomp every attempt is refused; afterwards no object or key of a worker uid remains."""
    if _skip_reason(limits) is not None:
        pytest.skip(_skip_reason(limits))
    by_shape, left = graded
    runs = by_shape[request.node.callspec.id]
    assert left == []
    for run in runs:
        for _, score, output, sandbox in run:
            assert score == "11", output
            for kind in ATTACKS.values():
                line = next((x for x in output.splitlines() if x.startswith(f"{kind}:")), "")
                assert "found" not in line, line
                assert line == f"{kind}: {'new' if limits.seccomp is False else 'EPERM'}", output
            assert ("SysV/POSIX IPC, keyrings" in sandbox) is (limits.seccomp is not False)
