"""The sandbox plan (attnscore.sandbox.plan): every layer decided once, from the options and the machine."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
import threading

import numpy as np
import pytest

from attnscore.boundary import kernel_objects, landlock
from attnscore.boundary.outputs import CallFailure
from attnscore.sandbox import bwrap, gpu, machine, plan, processes, uids
from attnscore.sandbox.limits import Limits
from attnscore.sandbox.plan import SandboxPlan, protections, resolve, use_template
from attnscore.sandbox.runner import SandboxRunner

NO_CGROUP = "no cgroup v2 hierarchy mounted (cgroup v1 only)"


def _machine(monkeypatch, *, bwrap_ok=True, root=True, abi=6, mounts=True, sizes=False):
    """A machine with these answers to the plan's questions."""
    monkeypatch.setattr(bwrap, "bwrap_available", lambda: bwrap_ok)
    monkeypatch.setattr(bwrap, "sizes_tmpfs", lambda: sizes)
    monkeypatch.setattr(uids, "drops_privileges", lambda: root)
    monkeypatch.setattr(landlock, "abi_version", lambda: abi)
    monkeypatch.setattr(machine, "mounts_work_folder", lambda: mounts)
    monkeypatch.setattr(machine, "cgroup_base", lambda: NO_CGROUP)


FIELDS = ("bwrap", "template", "template_required", "landlock_abi", "seccomp", "drops_uid", "address_limit", "disk")


@pytest.mark.parametrize(
    "options, machine_says, decided",
    [
        pytest.param(
            {}, {}, (True, True, False, 6, True, True, True, "tmpfs"), id="root with bwrap: template in bwrap"
        ),
        pytest.param(
            {},
            {"root": False},
            (True, False, False, 6, True, False, True, "checked"),
            id="not root: a fresh bwrap each",
        ),
        pytest.param(
            {},
            {"root": False, "sizes": True},
            (True, False, False, 6, True, False, True, "tmpfs"),
            id="bwrap sizes tmpfs",
        ),
        pytest.param(
            {"device": "cuda:1"}, {}, (True, False, False, 6, True, True, False, "checked"), id="a GPU: fresh bwrap"
        ),
        pytest.param(
            {"bwrap": False},
            {"mounts": False},
            (False, True, False, 6, True, True, True, "checked"),
            id="no bwrap asked",
        ),
        pytest.param({}, {"bwrap_ok": False}, (False, True, False, 6, True, True, True, "tmpfs"), id="no bwrap here"),
        pytest.param(
            {"template": False, "bwrap": False},
            {},
            (False, False, False, 6, True, True, True, "tmpfs"),
            id="template off",
        ),
        pytest.param(
            {"template": True, "bwrap": False},
            {},
            (False, True, True, 6, True, True, True, "tmpfs"),
            id="template required",
        ),
        pytest.param(
            {"landlock": False, "seccomp": False},
            {},
            (True, True, False, 0, False, True, True, "tmpfs"),
            id="landlock and seccomp off",
        ),
        pytest.param(
            {"landlock": True}, {"abi": 0}, (True, True, False, 0, True, True, True, "tmpfs"), id="no landlock"
        ),
    ],
)
def test_resolve_decides_every_layer_from_the_options_and_the_machine(monkeypatch, options, machine_says, decided):
    """Each tri-state option meets the machine's answer once, in the plan's fields."""
    _machine(monkeypatch, **machine_says)
    got = resolve(Limits(**options))
    assert tuple(getattr(got, name) for name in FIELDS) == decided
    assert got.landlock is (decided[3] > 0) and got.device == Limits(**options).device
    assert got.cgroups == NO_CGROUP and got.protections == protections(Limits(**options))
    assert use_template(Limits(**options)) is got.template


@pytest.mark.parametrize(
    "options, machine_says, message",
    [
        pytest.param(
            {"bwrap": True}, {"bwrap_ok": False}, "Limits\\(bwrap=True\\) but bwrap is not installed", id="bwrap"
        ),
        pytest.param(
            {"template": True}, {"root": False}, "needs a grader running as root and device cpu", id="template not root"
        ),
        pytest.param({"template": True, "device": "cuda"}, {}, "pass bwrap=False too", id="template on a GPU"),
    ],
)
def test_options_the_machine_cannot_meet_are_one_clear_error(monkeypatch, options, machine_says, message):
    """A required layer the machine lacks is a RuntimeError that says which option and the fix."""
    _machine(monkeypatch, **machine_says)
    with pytest.raises(RuntimeError, match=message):
        resolve(Limits(**options))


def test_without_the_template_the_plan_and_its_line_say_fresh_workers(monkeypatch):
    """A template that could not start: fresh interpreters, a fresh bwrap's own disk bound, and the
    protections line that says so; everything else as it was."""
    _machine(monkeypatch, sizes=False, mounts=True)
    templated = resolve(Limits())
    fresh = templated.without_template()
    assert (templated.template, templated.disk) == (True, "tmpfs")
    assert (fresh.template, fresh.disk, fresh.bwrap, fresh.limits) == (False, "checked", True, templated.limits)
    assert templated.protections.startswith("bwrap around the worker template")
    assert fresh.protections.startswith("bwrap: no network, own PIDs") and "; python -I;" in fresh.protections
    assert "disk: working folder checked after each call (64 MiB; files 4 MiB each)" in fresh.protections


def test_the_plan_is_frozen(monkeypatch):
    """Nothing changes a plan once it is resolved."""
    _machine(monkeypatch)
    resolved = resolve()
    assert isinstance(resolved, SandboxPlan) and resolved.limits == Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.bwrap = False  # type: ignore[misc]


def test_a_runner_asks_the_options_and_the_machine_once(tmp_path, monkeypatch):
    """After the runner resolved its plan, no decision is made again: with every question to the
    machine and the plan raising, calls, restarts and the close still work."""
    path = tmp_path / "good.py"
    path.write_text("def scores(q, keys):\n    return keys @ q\n")
    args = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
    with SandboxRunner(path, "scores", Limits(bwrap=False, call_timeout_s=60.0)) as runner:
        first = runner.plan

        def asked(*_: object) -> None:
            raise AssertionError("a decision was made again")

        for owner, name in [
            (bwrap, "bwrap_available"),
            (bwrap, "sizes_tmpfs"),
            (uids, "drops_privileges"),
            (landlock, "abi_version"),
            (machine, "mounts_work_folder"),
            (machine, "cgroup_base"),
            (gpu, "keeps_address_limit"),
            (plan, "resolve"),
            (plan, "use_template"),
        ]:
            monkeypatch.setattr(owner, name, asked)
        values = [runner.call(args, "float64") for _ in range(2)]
        runner._kill_worker()  # the next call starts a fresh worker, from the same plan
        values.append(runner.call(args, "float64"))
        assert runner.plan is first and runner.starts == 2
    assert all(not isinstance(v, CallFailure) and v.array.tolist() == [1.0, 0.0] for v in values), values


def _held_probe(answer: bool, started: threading.Barrier, release: threading.Event, asked: list[str]):
    """A slow probe: it notes the thread it runs in, waits until the other probe runs too
    (``started``), then until ``release``; kept per process like the real ones."""

    @functools.cache
    def probe() -> bool:
        asked.append(threading.current_thread().name)
        started.wait()
        assert release.wait(10), "never released"
        return answer

    return probe


def test_the_slow_probes_run_side_by_side_in_the_background_and_resolve_waits_for_them(monkeypatch):
    """ask_ahead starts the tmpfs and IPC probes at once, each in a thread of its own; resolve waits
    until both have answered and takes their answers, asking neither again."""
    _machine(monkeypatch)
    started, release, asked = threading.Barrier(3, timeout=10), threading.Event(), []
    monkeypatch.setattr(machine, "mounts_work_folder", _held_probe(False, started, release, asked))
    monkeypatch.setattr(kernel_objects, "ipc_namespaces_available", _held_probe(True, started, release, asked))
    plan.ask_ahead()
    started.wait()  # passes only once both probes are under way together, outside this thread
    resolved: list[SandboxPlan] = []
    resolving = threading.Thread(target=lambda: resolved.append(resolve(Limits())))
    resolving.start()
    resolving.join(0.3)
    assert resolving.is_alive() and not resolved  # resolve waits for the probes asked ahead
    release.set()
    resolving.join(10)
    assert asked == ["attnscore-probe", "attnscore-probe"]
    assert resolved[0].disk == "checked"  # the tmpfs probe's answer
    assert "an IPC namespace per worker" in resolved[0].protections  # the IPC probe's answer
    assert not plan._ASKED


def test_a_grader_that_is_not_root_asks_nothing_ahead(monkeypatch):
    """Without root both slow probes answer at once: no thread is started for them."""
    _machine(monkeypatch, root=False)
    plan.ask_ahead()
    assert not plan._ASKED
    assert resolve(Limits()).drops_uid is False


def test_a_command_starts_its_template_without_waiting_for_the_slow_probes(monkeypatch):
    """warm_template(wait=False), a command's first step, starts the template from the calling
    thread (bubblewrap ends a template with the thread that started it) after bubblewrap's probe
    alone, while the slow probes still run."""
    _machine(monkeypatch)
    started, release, asked = threading.Barrier(3, timeout=10), threading.Event(), []
    monkeypatch.setattr(machine, "mounts_work_folder", _held_probe(True, started, release, asked))
    monkeypatch.setattr(kernel_objects, "ipc_namespaces_available", _held_probe(True, started, release, asked))
    starts: list[tuple[str, bool]] = []
    here = threading.current_thread().name

    def template_for(runtime: object, required: bool, bwrap: bool) -> None:
        starts.append((threading.current_thread().name, bwrap))

    monkeypatch.setattr(processes, "template_for", template_for)
    try:
        assert processes.warm_template(Limits(), wait=False) is None
        assert starts == [(here, True)]
        started.wait()  # the probes were still under way when the template started
    finally:
        release.set()
        plan._wait_for_asked()
    assert sorted(asked) == ["attnscore-probe", "attnscore-probe"]


def test_a_probe_answered_before_is_not_asked_ahead_again(monkeypatch):
    """A later command step (a dask task per chunk) asks ahead again: only what has no answer yet
    gets a thread."""
    _machine(monkeypatch)
    asked: list[str] = []

    def probe(name: str):
        return functools.cache(lambda: asked.append(name) or True)

    monkeypatch.setattr(machine, "mounts_work_folder", probe("tmpfs"))
    monkeypatch.setattr(kernel_objects, "ipc_namespaces_available", probe("ipc"))
    plan.ask_ahead()
    plan._wait_for_asked()
    plan.ask_ahead()
    assert not plan._ASKED
    assert sorted(asked) == ["ipc", "tmpfs"]


def test_a_command_that_ends_at_once_still_lets_its_probes_finish(tmp_path):
    """A command that fails right after asking ahead (a bad argument) ends only once its probes
    have finished: they remove their scratch folders, so nothing is left behind in /tmp."""
    done = tmp_path / "probe-finished"
    code = "\n".join(
        [
            "import functools, pathlib, time",
            "from attnscore.boundary import kernel_objects",
            "from attnscore.sandbox import machine, plan, uids",
            "uids.drops_privileges = lambda: True",
            "@functools.cache",
            "def slow():",
            "    time.sleep(0.5)",
            f"    pathlib.Path({str(done)!r}).write_text('done')",
            "    return True",
            "machine.mounts_work_folder = slow",
            "kernel_objects.ipc_namespaces_available = functools.cache(lambda: True)",
            "plan.ask_ahead()",
            "raise SystemExit(2)",
        ]
    )
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ended.returncode == 2, ended.stderr
    assert done.read_text() == "done"
