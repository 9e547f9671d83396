"""The worker template: children forked from one template are isolated from each other, from
what an earlier child did to its process, and from the spec."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from attnscore.boundary.outputs import CallFailure
from attnscore.check.cases import build_cases
from attnscore.cli import main
from attnscore.grade.grading import grade_many, grade_submission
from attnscore.report.results import Verdict
from attnscore.sandbox import bwrap, launch, processes, uids
from attnscore.sandbox.launch import Limits, SandboxRunner, protections, use_template, warm_template
from attnscore.sandbox.template import TemplateError, WorkerTemplate
from attnscore.spec.load import load_spec
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
# No bwrap (the template inside bwrap has a test of its own); no Landlock where a test is about the uid layer.
LIMITS = Limits(call_timeout_s=10.0, bwrap=False, template=True)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="workers get uids of their own only when the grader is root")


def _template_pid() -> int:
    """The pid of this process's template for LIMITS (no bwrap, this interpreter's runtime): the one
    a grade with LIMITS uses, not another live one of the session (inside bwrap, or for another
    runtime, as tests/sandbox/test_runtime.py starts)."""
    from attnscore.sandbox.plan import resolve

    plan = resolve(LIMITS)
    template = processes.template_for(processes.runtime_for(plan), required=True, bwrap=plan.bwrap)
    assert template is not None and template.owner == os.getpid(), "no live worker template of this process"
    template.wait_ready()
    return template.pid


def _values(outcome: object) -> list[float]:
    assert not isinstance(outcome, CallFailure), outcome
    return outcome.array.tolist()


WHO_AM_I = """\
import os
import torch


def scores(q, keys):
    with open("secret.txt", "w") as f:
        f.write("my work")
    return torch.tensor([float(os.getuid()), float(os.getpid()), float(os.getppid())], dtype=torch.float64)
"""

NEIGHBOUR = """\
import ctypes
import os
import signal
import torch


def scores(q, keys):
    target = int(q[0])
    mine = {os.path.dirname(os.path.abspath(__file__)), os.getcwd()}
    try:
        os.kill(target, signal.SIGKILL)
        killed = 0.0
    except PermissionError:
        killed = 1.0
    except OSError:
        killed = 2.0
    traced = float(ctypes.CDLL(None, use_errno=True).ptrace(16, target, 0, 0))  # PTRACE_ATTACH
    try:
        open(f"/proc/{target}/environ", "rb").read()
        environ = 1.0
    except OSError:
        environ = 0.0
    read = 0.0
    for path in "".join(chr(int(c)) for c in keys.reshape(-1).tolist()).split("|"):
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                open(path, "rb").read(1)
            read += 1
        except OSError:
            pass
    return torch.tensor([float(os.getuid()), killed, traced, environ, read], dtype=torch.float64)
"""


@root_only
@pytest.mark.parametrize(
    "landlock", [pytest.param(False, id="uids and modes alone"), pytest.param(None, id="landlock")]
)
def test_two_children_of_one_template_cannot_signal_trace_or_read_each_other(tmp_path, landlock):
    """Two live workers forked from one template: distinct uids; kill, ptrace and file reads do not reach across."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "who.py").write_text(WHO_AM_I)
    (tmp_path / "b" / "neighbour.py").write_text(NEIGHBOUR)
    limits = Limits(call_timeout_s=10.0, bwrap=False, template=True, landlock=landlock)
    template = _template_pid()
    with (
        SandboxRunner(tmp_path / "a" / "who.py", "scores", limits) as victim,
        SandboxRunner(tmp_path / "b" / "neighbour.py", "scores", limits) as attacker,
    ):
        uid_a, pid_a, parent_a = _values(victim.call(ARGS, "float64"))
        # files of each slot: the submission copy root:slot-group 0750/0440, the working folder the slot's own 0700
        assert os.stat(victim.private).st_mode & 0o777 == 0o750 and os.stat(victim.private).st_gid == victim.uid
        assert os.stat(victim.workdir).st_mode & 0o777 == 0o700 and os.stat(victim.workdir).st_uid == victim.uid
        targets = "|".join([victim.private, f"{victim.private}/who.py", victim.workdir, f"{victim.workdir}/secret.txt"])
        codes = np.array([[float(ord(c)) for c in targets]])
        uid_b, killed, traced, environ, read = _values(
            attacker.call({"q": np.array([pid_a, 0.0]), "keys": codes}, "float64")
        )
        after = _values(victim.call(ARGS, "float64"))
    assert parent_a == template  # forked by the template, not started by the grader
    assert uid_a != uid_b and min(uid_a, uid_b) >= limits.uid
    assert (killed, traced, environ, read) == (1.0, -1.0, 0.0, 0.0)
    assert after[:2] == [uid_a, pid_a]  # the victim still runs, unharmed


CORRUPTS = """\
import builtins
import os
import signal
import sys
import threading
import time

import numpy
import torch


def scores(q, keys):
    how = int(q[0])
    if how == 0:  # patch torch and numpy, leave globals and a thread, then answer
        torch.matmul = lambda a, b: torch.zeros(2, dtype=torch.float64)
        torch.Tensor.__matmul__ = lambda a, b: torch.zeros(2, dtype=torch.float64)
        numpy.dot = None
        builtins.POISON = 1
        sys.modules["attnscore_poison"] = object()
        os.environ["POISON"] = "1"
        threading.Thread(target=time.sleep, args=(3600,)).start()
        return keys @ q
    if how == 1:
        os._exit(3)
    if how == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    hoard = []
    while True:
        hoard.append(torch.empty(1 << 28, dtype=torch.uint8))  # address space, not pages: fails fast
"""

CLEAN = """\
import builtins
import os
import sys
import threading

import numpy
import torch


def scores(q, keys):
    return torch.stack(
        [
            torch.matmul(keys, q)[0],
            (keys @ q)[0],
            torch.tensor(float(hasattr(builtins, "POISON"))),
            torch.tensor(float("attnscore_poison" in sys.modules or "POISON" in os.environ)),
            torch.tensor(float(numpy.dot is None)),
            torch.tensor(float(threading.active_count())),
            torch.tensor(float(len(os.listdir("/proc/self/task")))),
        ]
    ).double()
"""


@pytest.mark.parametrize(
    ("how", "verdict"),
    [
        pytest.param(0, None, id="patches torch, sets globals, leaves a thread"),
        pytest.param(1, Verdict.CRASHED, id="os._exit"),
        pytest.param(2, Verdict.MEMORY_LIMIT, id="kills itself with SIGKILL"),
        pytest.param(3, Verdict.MEMORY_LIMIT, id="exhausts its memory"),
    ],
)
def test_a_corrupted_child_never_reaches_the_next_one(tmp_path, how, verdict):
    """Whatever a submission does to its process, the next one forked from the same template starts clean."""
    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text(CORRUPTS)
    good.write_text(CLEAN)
    limits = Limits(call_timeout_s=10.0, bwrap=False, template=True)
    template = _template_pid()
    with SandboxRunner(bad, "scores", limits) as runner:
        outcome = runner.call({"q": np.array([float(how), 0.0]), "keys": np.eye(2)}, "float64")
    if verdict is None:
        assert _values(outcome) == [0.0, 0.0]  # its own patched matmul answered
    else:
        assert isinstance(outcome, CallFailure) and outcome.verdict == verdict.value, outcome
    with SandboxRunner(good, "scores", limits) as runner:
        values = _values(runner.call(ARGS, "float64"))
    assert values == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert _template_pid() == template  # the same template served both


def _anonymous_memory(pid: int) -> bytes:
    """The template's heap and anonymous mappings, where its Python objects live."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("r") or (len(fields) > 5 and fields[5] not in ("[heap]", "[stack]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, OverflowError, ValueError):
                continue
    return b"".join(chunks)


REPORTS = """\
import os
import sys


def scores(q, keys):
    print("ARGV", sys.argv, open("/proc/self/cmdline", "rb").read())
    print("ENV", dict(os.environ))
    print("MODULES", sorted(m for m in sys.modules if m.startswith(("attnscore", "yaml", "hypothesis"))))
    return keys @ q
"""


@pytest.mark.slow
@root_only
def test_the_template_holds_no_spec_or_expected_values(tmp_path):
    """Neither the template (memory, argv, environment) nor a child forked from it can name the spec."""
    token = "specfolder-7f3a9c1e5b"
    folder = tmp_path / token
    folder.mkdir()
    spec_path = folder / "dot_product_scores.yaml"
    spec_path.write_text((ROOT / "specs" / "dot_product_scores.yaml").read_text())
    spec = load_spec(spec_path)
    submission = tmp_path / "reports.py"
    submission.write_text(REPORTS)
    (result,) = grade_many([submission], spec, limits=Limits(call_timeout_s=10.0, bwrap=False), shrink_steps=0)
    assert "forked from a clean worker template" in result.environment["sandbox"]
    assert token not in result.output and "dot_product_scores.yaml" not in result.output
    modules = re.search(r"MODULES (\[.*?\])", result.output).group(1)
    assert "attnscore.spec" not in modules and "attnscore.maths.golden" not in modules and "yaml" not in modules
    assert "attnscore.boundary.worker" in modules  # the worker subset only
    pid = _template_pid()
    for name in ("cmdline", "environ"):
        assert token.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
    memory = _anonymous_memory(pid)
    assert len(memory) > 1 << 20  # the scan did read the template's heap
    assert token.encode() not in memory and b"dot_product_scores" not in memory
    # a golden value of a hidden case, as the float64 bytes the grader holds
    goldens = [call.golden for c in build_cases(spec) if c.visibility == "hidden" for call in c.calls]
    checked = 0
    for golden in goldens:
        golden = np.asarray(golden, dtype=np.float64)
        if golden.size >= 3 and len(set(golden.ravel().tolist())) == golden.size:
            assert golden.tobytes() not in memory
            checked += 1
    assert checked > 0


def test_template_and_fresh_interpreters_grade_alike(tmp_path):
    """The same submissions graded through the template and through fresh interpreters get the same verdicts."""
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    cases = build_cases(spec)
    examples = ROOT / "examples" / "submissions" / "scores"
    for name in ("correct_matmul.py", "keys_not_transposed.py", "fails_at_import.py"):
        results = [
            grade_submission(examples / name, spec, cases, limits=Limits(template=t, bwrap=False), shrink_steps=0)
            for t in (True, False)
        ]
        assert [c.verdict for c in results[0].cases] == [c.verdict for c in results[1].cases], name
        assert results[0].score == results[1].score
        assert "forked from a clean worker template" in results[0].environment["sandbox"]
        assert "python -I" in results[1].environment["sandbox"]


def test_the_template_is_the_default_and_with_bubblewrap_only_for_a_root_grader_on_the_cpu(monkeypatch):
    """Limits() forks from the template; with bubblewrap the template runs inside one bwrap when the
    grader is root and grades on the CPU, else each worker is a fresh bwrap (template=True refused)."""
    assert use_template(Limits(bwrap=False)) and not use_template(Limits(bwrap=False, template=False))
    assert "forked from a clean worker template" in protections(Limits(bwrap=False))
    monkeypatch.setattr(bwrap, "bwrap_available", lambda: True)
    monkeypatch.setattr(uids, "drops_privileges", lambda: True)
    assert use_template(Limits())
    assert protections(Limits()).startswith("bwrap around the worker template: no network")
    assert not use_template(Limits(device="cuda:0"))
    with pytest.raises(RuntimeError, match="needs a grader running as root and device cpu"):
        use_template(Limits(template=True, device="cuda:0"))
    monkeypatch.setattr(uids, "drops_privileges", lambda: False)
    assert not use_template(Limits())
    assert protections(Limits()).startswith("bwrap: no network, own PIDs")
    with pytest.raises(RuntimeError, match="needs a grader running as root"):
        use_template(Limits(template=True))


NAMESPACES = """import os
import torch


def scores(q, keys):
    seen = []
    for path in ("/proc/self/ns/net", "/proc/self/ns/uts", "/proc/self/ns/mnt"):
        seen.append(float(os.stat(path).st_ino))
    try:
        os.listdir(os.path.dirname(os.getcwd()))  # the staging folder: every slot's folders
        listed = 1.0
    except OSError:
        listed = 0.0
    writable = 0.0
    for folder in ("/tmp", "/dev/shm"):
        try:
            open(os.path.join(folder, "left-behind"), "w").close()
            writable += 1
        except OSError:
            pass
    return torch.tensor(seen + [listed, writable, float(os.getuid())], dtype=torch.float64)
"""


@root_only
@pytest.mark.skipif(not launch.bwrap_available(), reason="bubblewrap is not installed or cannot create namespaces")
@pytest.mark.parametrize(
    "landlock", [pytest.param(False, id="bwrap and uids alone"), pytest.param(None, id="landlock")]
)
def test_a_template_inside_bubblewrap_keeps_every_layer(tmp_path, landlock):
    """Root grader with bwrap: the workers are forked inside the template's bwrap (no network,
    UTS or mount namespace of the machine's), cannot list the staging folder or write /tmp or
    /dev/shm, and two of them still cannot signal, trace or read each other."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "a" / "who.py").write_text(WHO_AM_I)
    (tmp_path / "b" / "neighbour.py").write_text(NEIGHBOUR)
    (tmp_path / "c" / "spaces.py").write_text(NAMESPACES)
    limits = Limits(call_timeout_s=10.0, template=True, landlock=landlock)
    assert "bwrap around the worker template" in protections(limits)
    with (
        SandboxRunner(tmp_path / "a" / "who.py", "scores", limits) as victim,
        SandboxRunner(tmp_path / "b" / "neighbour.py", "scores", limits) as attacker,
        SandboxRunner(tmp_path / "c" / "spaces.py", "scores", limits) as looker,
    ):
        stage = victim.template.stage
        assert stage and victim.private.startswith(stage + "/") and victim.workdir.startswith(stage + "/")
        assert os.stat(stage).st_mode & 0o777 == 0o711 and os.stat(stage).st_uid == 0
        uid_a, pid_a, parent_a = _values(victim.call(ARGS, "float64"))
        assert parent_a != os.getpid() and victim.worker.bwrap is False  # forked by the template
        targets = "|".join([victim.private, f"{victim.private}/who.py", victim.workdir, f"{victim.workdir}/secret.txt"])
        codes = np.array([[float(ord(c)) for c in targets]])
        uid_b, killed, traced, environ, read = _values(
            attacker.call({"q": np.array([pid_a, 0.0]), "keys": codes}, "float64")
        )
        *inodes, listed, writable, uid_c = _values(looker.call(ARGS, "float64"))
        after = _values(victim.call(ARGS, "float64"))
    ours = [float(os.stat(p).st_ino) for p in ("/proc/self/ns/net", "/proc/self/ns/uts", "/proc/self/ns/mnt")]
    assert all(a != b for a, b in zip(inodes, ours, strict=True)), (inodes, ours)
    assert (listed, writable) == (0.0, 0.0)
    assert len({uid_a, uid_b, uid_c}) == 3 and min(uid_a, uid_b, uid_c) >= limits.uid
    assert (killed, traced, environ, read) == (1.0, -1.0, 0.0, 0.0)
    assert after[:2] == [uid_a, pid_a]  # the victim still runs, unharmed
    assert not os.path.exists(victim.private) and not os.path.exists(victim.workdir)


@pytest.mark.parametrize("no_template", [pytest.param(True, id="--no-template"), pytest.param(False, id="default")])
def test_cli_grade_says_which_path_it_took(no_template):
    """`attnscore grade` forks from the template by default (no bwrap); --no-template starts fresh interpreters."""
    submission = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    spec = str(ROOT / "specs" / "dot_product_scores.yaml")
    args = ["grade", str(submission), "--spec", spec, "--format", "json"] + (["--no-template"] if no_template else [])
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    sandbox = json.loads(result.stdout)["environment"]["sandbox"]
    templated = not no_template and use_template(Limits())
    assert ("forked from a clean worker template" in sandbox) is templated
    assert ("python -I" in sandbox) is (not templated)


def test_grader_processes_of_a_batch_share_one_template(tmp_path):
    """grade_many(jobs=2) forks its grader processes after starting the template: every worker is a child of it."""
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    paths = []
    for name in ("p.py", "q.py", "r.py"):
        paths.append(tmp_path / name)
        paths[-1].write_text("import os\nprint('PARENT', os.getppid())\n\ndef scores(q, keys):\n    return keys @ q\n")
    template = _template_pid()
    results = grade_many(paths, spec, limits=Limits(bwrap=False), shrink_steps=0, jobs=2)
    parents = {int(p) for r in results for p in re.findall(r"PARENT (\d+)", r.output)}
    assert parents == {template}
    assert all(r.score == r.max_score for r in results)
    assert _template_pid() == template


AFTER_OPENMP = """\
import sys
from pathlib import Path

import torch

from attnscore.grade.grading import grade_many
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

torch.set_num_threads(2)
matrix, vector = torch.randn(512, 512, dtype=torch.float16), torch.randn(512, dtype=torch.float16)
for _ in range(5):
    matrix @ vector  # GNU OpenMP starts its thread pool in this process
spec = load_spec(sys.argv[1])
results = grade_many(sys.argv[2:], spec, limits=Limits(bwrap=False), jobs=2)
print([str(r.score) for r in results])
"""


@pytest.mark.slow
def test_jobs_after_the_parent_used_openmp_do_not_hang(tmp_path):
    """A grader that already ran OpenMP work forks its grader processes safely (they use one torch thread)."""
    script = tmp_path / "batch.py"
    script.write_text(AFTER_OPENMP)
    examples = ROOT / "examples" / "submissions" / "scores"
    paths = [str(examples / n) for n in ("correct_matmul.py", "cosine_similarity.py", "softmax_applied.py")]
    done = subprocess.run(
        [sys.executable, str(script), str(ROOT / "specs" / "dot_product_scores.yaml"), *paths],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # cosine_similarity and softmax_applied: their layouts point needs right values (2 and 0 of 11)
    assert done.stdout.strip() == "['11', '2', '0']"


def _broken_template(*_: object) -> WorkerTemplate:
    return WorkerTemplate("/bin/false", "/nonexistent", {}, {"PATH": "/usr/bin:/bin"})


_BWRAP_TEMPLATE = os.geteuid() == 0 and launch.bwrap_available()


@pytest.mark.parametrize(
    "bwrap",
    [
        pytest.param(False, id="no bwrap"),
        pytest.param(None, id="bwrap", marks=pytest.mark.skipif(not _BWRAP_TEMPLATE, reason="needs root and bwrap")),
    ],
)
def test_a_template_that_cannot_start_falls_back_to_fresh_interpreters(tmp_path, monkeypatch, bwrap):
    """A template whose interpreter exits at once: workers start as fresh interpreters (a fresh
    bwrap each, with bwrap), the sandbox line says so; template=True says why."""
    with pytest.raises(TemplateError, match="the worker template did not start"):
        _broken_template().wait_ready()
    monkeypatch.setattr(processes, "_TEMPLATES", {})
    monkeypatch.setattr(processes, "_start_template", _broken_template)
    path = tmp_path / "good.py"
    path.write_text("def scores(q, keys):\n    return keys @ q\n")
    with SandboxRunner(path, "scores", Limits(bwrap=bwrap)) as runner:
        values = _values(runner.call(ARGS, "float64"))
        assert runner.template is None and runner.starts == 1
        assert "python -I" in runner.protections and "template" not in runner.protections
        assert runner.protections.startswith("bwrap: no network, own PIDs") is (bwrap is None)
    assert values == [1.0, 0.0]
    with pytest.raises(TemplateError, match="did not start"):
        SandboxRunner(path, "scores", Limits(bwrap=bwrap, template=True))
    assert warm_template(Limits(bwrap=bwrap)).startswith("the worker template did not start")


_SHAPE_SCRIPT = """\
import json, os, sys, tempfile
from pathlib import Path
from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_submission
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
spec = load_spec(sys.argv[2])
limits = Limits(call_timeout_s=10.0, **json.loads(sys.argv[1]))
result = grade_submission(Path(sys.argv[3]), spec, build_cases(spec), limits=limits, shrink_steps=0)
print(json.dumps({"score": str(result.score), "error": result.error, "sandbox": result.environment["sandbox"]}))
"""


def _shapes() -> list:
    """Every sandbox shape this machine can run, as Limits keywords."""
    shapes = [pytest.param({"bwrap": False}, id="no-bwrap")]
    if launch.bwrap_available():
        shapes.append(pytest.param({}, id="bwrap-default"))
        shapes.append(pytest.param({"template": False}, id="fresh-bwrap"))
    return shapes


@pytest.mark.slow
@pytest.mark.parametrize("shape", _shapes())
def test_every_shape_grades_right_code_with_a_private_tmpdir(tmp_path, shape):
    """TMPDIR in a private (0700) folder elsewhere: right code gets full marks in every shape (the
    template's bwrap made the folders above its staging folder 0700, so every worker failed), and
    nothing is left in TMPDIR; as root without bwrap, where the worker uid could not enter the
    folder at all, the grader says so instead."""
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    tmpdir = private / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    submission = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    spec = ROOT / "specs" / "dot_product_scores.yaml"
    done = subprocess.run(
        [sys.executable, "-c", _SHAPE_SCRIPT, json.dumps(shape), str(spec), str(submission)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if os.geteuid() == 0 and shape.get("bwrap") is False:
        assert found["score"] == "0"
        assert found["error"].startswith("the grading machine is misconfigured: the sandbox user cannot read ")
    else:
        assert (found["score"], found["error"]) == ("11", ""), found
        assert ("bwrap" in found["sandbox"].split(";")[0]) is (shape.get("bwrap") is not False)
    # only the interpreter's mirror stays (a cache kept on purpose, root's own and writable by nobody else)
    kept = [n for n in os.listdir(tmpdir) if n.startswith("attnscore-mirror-")]
    assert [n for n in os.listdir(tmpdir) if n not in kept] == []
    assert all(os.stat(tmpdir / n).st_uid == 0 and not os.stat(tmpdir / n).st_mode & 0o022 for n in kept)


def test_the_template_view_makes_the_folders_above_its_staging_folder_enterable():
    """bwrap makes the missing parents of a bound folder 0700: each folder above the staging
    folder and the worker modules (a private TMPDIR's) is made 0755 first, /tmp is left as it is."""
    args = bwrap.template_prefix("/home/ta/private/tmp/attnscore-stage-x", "/home/ta/private/tmp/lib-y")
    made = [args[i + 3] for i in range(len(args) - 3) if args[i : i + 3] == ["--perms", "0755", "--dir"]]
    for parent in ("/home", "/home/ta", "/home/ta/private", "/home/ta/private/tmp"):
        assert parent in made
        assert args.index(parent) < args.index("/home/ta/private/tmp/attnscore-stage-x")
    # what the template adds to the common view (which itself makes the folders above the
    # interpreter's enterable: "/tmp" too when the checkout's venv lives under /tmp)
    plain = bwrap.template_prefix("/tmp/attnscore-stage-x", "/tmp/lib-y")
    common = bwrap.view(bwrap.UNSHARE_TEMPLATE, "cpu")
    assert plain[: len(common)] == common
    added = plain[len(common) :]
    dirs = [added[i + 3] for i in range(len(added) - 3) if added[i : i + 3] == ["--perms", "0755", "--dir"]]
    assert "/tmp" not in dirs
    triples = [added[i : i + 3] for i in range(len(added) - 2)]
    assert ["--bind", "/tmp/attnscore-stage-x", "/tmp/attnscore-stage-x"] in triples


_ORDER_SCRIPT = """
import sys
from attnscore.sandbox import processes

seen = []
real = processes.warm_template


def watched(*args, **kwargs):
    seen.append("torch" in sys.modules)
    return real(*args, **kwargs)


processes.warm_template = watched
from attnscore.cli import main

try:
    main(["grade", sys.argv[1], "--spec", sys.argv[2], "--format", "json"])
except SystemExit as exc:
    print("exit", exc.code, seen[:1], file=sys.stderr)  # the first start; grading asks again later
"""


@pytest.mark.slow
def test_cli_grade_starts_the_worker_template_before_importing_torch():
    """`attnscore grade` starts the worker template (which loads torch in its own process) before
    the grader itself has imported torch, so the two loads overlap; it still grades right code fully."""
    submission = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    spec = ROOT / "specs" / "dot_product_scores.yaml"
    done = subprocess.run(
        [sys.executable, "-c", _ORDER_SCRIPT, str(submission), str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.stderr.strip().splitlines()[-1] == "exit 0 [False]", done.stderr[-2000:]
    assert json.loads(done.stdout)["score"] == 11


def test_closing_a_template_ends_it_and_the_workers_it_forked():
    """``close``: the template ends with exit code 0 (at once, ``os._exit``: no interpreter shutdown
    to wait for), and a worker it forked that still runs (here one waiting for its setup) dies with it."""
    from attnscore.sandbox.folders import worker_lib
    from attnscore.sandbox.processes import scrubbed_env

    template = WorkerTemplate(sys.executable, worker_lib(), {"mirrors": []}, scrubbed_env("/"))
    ends: list[int] = []
    try:
        template.wait_ready()
        request, response, output = os.pipe(), os.pipe(), os.pipe()
        memory = os.memfd_create("attnscore-test-inputs")
        child = template.fork((request[0], response[1], output[1], memory))
        for fd in (request[0], response[1], output[1], memory):
            os.close(fd)
        worker = os.pidfd_open(child.pid)
        ends += [request[1], response[0], output[0]]
        assert not select.select([worker], [], [], 0)[0]  # it waits for the setup line it never gets
    finally:
        template.close()
        for fd in ends:
            os.close(fd)
    assert template.proc.returncode == 0
    assert select.select([worker], [], [], HANG_GUARD_S)[0], "the forked worker outlived its template"
    os.close(worker)
