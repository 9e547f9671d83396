"""The attack suite: hostile submissions must earn only what right values earn, and never hurt the grader."""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from attnscore.boundary import landlock
from attnscore.check.case_cache import cache_folder
from attnscore.report import batch_table, batch_to_json, gradescope_results, submission_text
from attnscore.report.feedback import format_array
from attnscore.sandbox.launch import Limits, bwrap_available
from tests.hostile.expectations import EXPECTATIONS, FORGED_LOAD_ERRORS, MUTATION_ATTACKS
from tests.hostile.harness import LIMITS, MUTATIONS, attack_paths, grade_attacks, grade_mutation_attacks

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


def _modes() -> list:
    """The sandbox's shapes this machine can run: the default, and where bubblewrap is installed
    also a fresh bwrap per worker (graders that are not root, GPUs) and no bwrap at all."""
    modes = [pytest.param(LIMITS, id="default")]
    if bwrap_available():
        modes.append(pytest.param(replace(LIMITS, template=False), id="fresh-bwrap"))
        modes.append(pytest.param(replace(LIMITS, bwrap=False), id="no-bwrap"))
    return modes


@pytest.fixture(scope="module", params=_modes())
def graded(request):
    """Every attack graded once (two at a time) with the mode's limits, with a listener on
    127.0.0.1:47123 for the network attack; ``(results, seconds, limits)``."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.settimeout(0.2)
    done = threading.Event()

    def accept() -> None:  # a real peer: a full backlog would turn connects into timeouts
        while not done.is_set():
            try:
                listener.accept()[0].close()
            except OSError:
                pass

    try:
        listener.bind(("127.0.0.1", 47123))
        listener.listen(8)
        threading.Thread(target=accept, daemon=True).start()
    except OSError:
        pass
    try:
        results, seconds = grade_attacks(limits=request.param)
    finally:
        done.set()
        listener.close()
    return results, seconds, request.param


def _bwrap(limits: Limits) -> bool:
    return limits.bwrap is not False and bwrap_available()


def _confined(limits: Limits) -> bool:
    """Whether the worker's filesystem view leaves out the specs (bubblewrap or Landlock)."""
    return _bwrap(limits) or landlock.abi_version() > 0


def test_every_attack_file_has_an_expectation():
    """The table and the submissions folder name the same attacks, at least 30 of them."""
    names = {p.stem for p in attack_paths()}
    assert names == set(EXPECTATIONS)
    assert len(names) >= 30


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(EXPECTATIONS)])
def test_attack_gets_its_score_and_verdicts(graded, name):
    """Each attack gets exactly its expected score and only its allowed verdicts, for every case."""
    results, _, limits = graded
    if name == "kills_parent" and os.geteuid() != 0 and not _bwrap(limits) and landlock.abi_version() < 6:
        pytest.skip("not root, no bwrap, no landlock v6: the worker runs as the grader's user and could signal it")
    if name == "reads_spec_files" and not _confined(limits):
        pytest.skip("no bwrap and no landlock: specs readable by every user are readable by the worker")
    if name == "reads_case_cache" and not _confined(limits) and os.geteuid() != 0:
        pytest.skip("not root, no bwrap, no landlock: the worker runs as the grader's user and reads its files")
    result = results[name]
    assert not isinstance(result, BaseException), f"the grader raised {result!r}"
    score, allowed, first = EXPECTATIONS[name]
    verdicts = [c.verdict.value for c in result.cases]
    assert len(result.cases) == 7
    assert result.score == score, verdicts
    assert set(verdicts) <= allowed, verdicts
    if first is not None:
        assert verdicts[0] == first
    assert all(c.message for c in result.cases if not c.passed)


def test_suite_is_fast_and_loses_nothing(graded):
    """Every attack gets a complete result that serialises as strict JSON, with its sandbox layers."""
    results = graded[0]
    for name, result in results.items():
        assert not isinstance(result, BaseException), name
        json.loads(json.dumps(batch_to_json([result]), allow_nan=False))
        assert result.environment["sandbox"]


def test_no_worker_process_survives(graded):
    """After grading, no process of the sandbox user is left below this grader (orphans, fork bombs, daemons).

    As root the grader is a child subreaper, so an escaped daemon is reparented to it; processes of
    other graders running on the same machine are not counted.
    """
    if os.geteuid() != 0:
        pytest.skip("the worker runs as another user only when the grader is root")
    uids = range(Limits().uid, Limits().uid + 64)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) in uids and _descends_from_us(p)]
    # a zombie has ended already (the worker template reaps it as its SIGCHLD arrives): not a survivor
    alive = {pid: _describe(pid) for pid in left if not _describe(pid).startswith(("Z", "X", "gone"))}
    assert alive == {}


def _describe(pid: str) -> str:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].strip()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    return f"{state}: {command[:200]}"


def _descends_from_us(pid: str) -> bool:
    me, current = os.getpid(), int(pid)
    for _ in range(64):
        try:
            with open(f"/proc/{current}/stat", "rb") as f:
                current = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if current == me:
            return True
        if current <= 1:
            return False
    return False


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def test_output_is_capped_and_clean(graded):
    """Flooded and non-UTF-8 output is truncated and cleaned: no escapes, NULs or surrogates."""
    results = graded[0]
    flood = results["flood_output"].output
    assert len(flood) < 4000 + 200
    assert "more" in flood
    noisy = results["non_utf8_output"].output
    assert "\x1b" not in noisy and "\x00" not in noisy and "\ufffd" in noisy
    noisy.encode("utf-8")


def test_environment_is_scrubbed(graded):
    """The worker sees only the scrubbed environment variables."""
    results = graded[0]
    line = next(x for x in results["reads_environment"].output.splitlines() if x.startswith("env:"))
    names = set(line.removeprefix("env: ").split(","))
    assert names <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PWD",
        "CUDA_VISIBLE_DEVICES",  # empty on the CPU: the worker sees no GPU (attnscore.sandbox.gpu)
        "CUDA_DEVICE_ORDER",
        # torch.compile's caches in the worker's own folder, and how it compiles there (processes.scrubbed_env)
        "XDG_CACHE_HOME",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_COMPILE_THREADS",
        "TORCHINDUCTOR_VEC_ISA_OK",
        "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS",
    }


def test_bwrap_blocks_network_and_spec_files(graded):
    """With bwrap the worker cannot reach 127.0.0.1 of the grader, nor see spec files."""
    results, _, limits = graded
    if not _bwrap(limits):
        pytest.skip("bwrap is not installed or cannot create namespaces here, or not used in this mode")
    assert "network: connected" not in results["network_connect"].output
    assert "network:" in results["network_connect"].output
    assert "found 0 expected values" in results["reads_spec_files"].output
    assert "bwrap" in results["network_connect"].environment["sandbox"]


def test_the_case_cache_is_out_of_reach(graded):
    """The grader's case cache (which the suite's cases were just read from or stored in) is
    neither readable nor writable by the worker, in every sandbox shape."""
    results, _, limits = graded
    if not _confined(limits) and os.geteuid() != 0:
        pytest.skip("not root, no bwrap, no landlock: the worker runs as the grader's user and reads its files")
    folder = cache_folder()
    assert any(p.suffix == ".cases" for p in folder.iterdir())  # there is something to reach for
    output = results["reads_case_cache"].output
    assert "case cache: listed 0, read 0, wrote 0, 0 expected values" in output, output
    assert not (folder / "planted.cases").exists()


def test_landlock_blocks_tcp_and_spec_files(graded):
    """Without bwrap, Landlock keeps the worker from TCP connections and from spec files readable by all."""
    results, _, limits = graded
    if _bwrap(limits) or landlock.abi_version() < 4:
        pytest.skip("bwrap is in use, or the kernel has no Landlock with TCP rules (ABI 4)")
    assert "network: EACCES" in results["network_connect"].output
    assert "found 0 expected values" in results["reads_spec_files"].output
    assert "landlock" in results["network_connect"].environment["sandbox"]


def test_grader_not_importable_in_worker(graded):
    """The worker cannot import the grader's comparison, scoring or reference code."""
    if not _confined(graded[2]):
        pytest.skip("without bwrap or landlock the installed package is readable by the worker")
    output = graded[0]["imports_grader"].output
    for name in (
        "attnscore.grade.grading",
        "attnscore.check.compare",
        "attnscore.check.judge",
        "attnscore.maths.reference",
    ):
        assert f"patched {name}" not in output, output


@functools.cache
def _hidden_texts() -> tuple[str, ...]:
    """The hidden cases' golden values and inputs in the texts a report could show them as (built
    once: plain data, the same for every mode and format)."""
    from attnscore.check.cases import build_cases
    from attnscore.spec.load import load_spec
    from tests.hostile.harness import SPEC_PATH

    texts = []
    for case in build_cases(load_spec(str(SPEC_PATH))):
        if case.visibility == "hidden":
            for call in case.calls:
                golden = format_array(call.golden)
                texts += [golden, json.dumps(call.golden.tolist())]
                texts += [format_array(a) for a in call.args.values()]
                for a in call.args.values():  # the encodings leaks_hidden_inputs uses
                    token = "_".join(f"{float(x):g}" for x in a.flatten().tolist())
                    texts += [token, token.replace("-", "m").replace(".", "p")]
    return tuple(texts)


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in ("text", "batch_text", "json", "gradescope")])
def test_hidden_values_never_reported(graded, fmt):
    """No report format shows a hidden case's golden values or inputs, for any attack."""
    results = graded[0]
    graded_results = [r for r in results.values() if not isinstance(r, BaseException)]
    texts = _hidden_texts()
    assert "[1.5, -2, -4, 6]" in texts
    for result in graded_results:
        if fmt == "text":
            console = Console(record=True, width=200, file=open(os.devnull, "w"))
            console.print(submission_text(result))
            report = console.export_text()
        elif fmt == "batch_text":
            console = Console(record=True, width=200, file=open(os.devnull, "w"))
            console.print(batch_table([result]))
            report = console.export_text()
        elif fmt == "json":
            report = json.dumps(batch_to_json([result]), allow_nan=False, ensure_ascii=False)
        else:
            report = json.dumps(gradescope_results(result), allow_nan=False, ensure_ascii=False)
        for text in texts:
            assert text not in report, (result.submission, fmt, text)


def test_kernel_objects_and_memfds_are_refused(graded):
    """System V IPC, POSIX queues, keys and memfds are refused to the worker by seccomp, in every
    shape (each attack still scores its right answers), so none can outlive it or dodge RLIMIT_AS."""
    results = graded[0]
    kinds = {"leaves_sysv_shm": "shm", "leaves_sysv_msg": "msg", "leaves_sysv_sem": "sem"}
    kinds |= {"leaves_posix_mqueue": "mqueue", "leaves_keyring_key": "keyring"}
    for name, kind in kinds.items():
        assert f"{kind}: EPERM" in results[name].output.splitlines(), (name, results[name].output)
    assert "memfd: refused (PermissionError)" in results["memfd_hog"].output.splitlines()


@pytest.fixture(scope="module", params=_modes())
def mutation_graded(request):
    """The mutation and forged-load-error attacks graded once with the mode's limits."""
    specs = {name: spec for name, (spec, _, _) in MUTATION_ATTACKS.items()} | FORGED_LOAD_ERRORS
    return grade_mutation_attacks(specs, limits=request.param)


def test_every_mutation_attack_file_has_an_expectation():
    """The tables and tests/hostile/mutation name the same attacks."""
    assert {p.stem for p in MUTATIONS.glob("*.py")} == set(MUTATION_ATTACKS) | set(FORGED_LOAD_ERRORS)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(MUTATION_ATTACKS)])
def test_mutation_is_judged_by_value_shape_and_strides(mutation_graded, name):
    """In-place changes of values or metadata, and restores after the call returns (patched replies,
    threads, finalizers), lose inputs_not_mutated, named inputs_mutated with the changed inputs, and
    every other case whose calls they change."""
    result = mutation_graded[name]
    assert not isinstance(result, BaseException), f"the grader raised {result!r}"
    _, names, score = MUTATION_ATTACKS[name]
    by_id = {c.id: c for c in result.cases}
    case = by_id["property:inputs_not_mutated"]
    assert case.verdict.value == "wrong_value", case.message
    assert f"your function changed its input(s) {names} in place" in case.message
    assert case.diagnosis is not None and case.diagnosis["id"] == "inputs_mutated"
    assert all(c.verdict.value != "grader_error" for c in result.cases)
    if score is not None:  # right values, changed in every call: a mutation costs every case it happens in
        assert result.score == score
        for other in result.cases:
            assert other.diagnosis is not None and other.diagnosis["id"] == "inputs_mutated", other.message
            if other.visibility == "visible":  # a hidden case shows no detail of its call
                assert f"changed its input(s) {names} in place" in other.message, other.message


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(FORGED_LOAD_ERRORS)])
def test_a_forged_load_error_is_never_a_grader_error(mutation_graded, name):
    """A load_error the submission writes while imported is its own crash, never the machine's:
    no grader error (no exit 3), no forged text, and nothing in the CSV a spreadsheet would run."""
    from attnscore.report.spreadsheet import grades_csv

    result = mutation_graded[name]
    assert not isinstance(result, BaseException), f"the grader raised {result!r}"
    verdicts = {c.verdict.value for c in result.cases}
    assert verdicts <= {"crashed", "timeout"}, verdicts
    assert result.score == 0
    for text in [result.error, *(c.message for c in result.cases)]:
        assert "HYPERLINK" not in text and "cmd|" not in text
    for line in grades_csv([("=evil.py", result)]).splitlines()[1:]:
        assert not any(cell.lstrip().startswith(("=", "+", "-", "@")) for cell in line.split(","))


def test_a_forged_grader_error_does_not_stop_the_batch(tmp_path):
    """`attnscore grade` on a forged load_error and a correct file: exit 1 (a failing submission), not 3."""
    from click.testing import CliRunner

    from attnscore.cli import main
    from tests.hostile.harness import ROOT

    good = tmp_path / "good.py"
    good.write_text("def scaled_score_matrix(Q, K):\n    return Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5\n")
    spec = str(ROOT / "specs" / "scaled_score_matrix.yaml")
    args = ["grade", str(MUTATIONS / "forges_load_error.py"), str(good), "--spec", spec, "--format", "json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "grader error" not in result.output
    batch = json.loads(result.stdout)
    scores = {Path(s["submission"]).name: (s["score"], s["max_score"]) for s in batch["submissions"]}
    assert scores["forges_load_error.py"][0] == 0
    assert scores["good.py"][0] == scores["good.py"][1] > 0
