"""`attnscore verify`'s work (attnscore.check.verify): mistakes stop at the case that settles them, and
specs and dtypes verified in parallel give what one process gives."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from attnscore.check import verify as verify_module
from attnscore.check.cases import build_cases
from attnscore.check.verify import bundled_spec_path, mutation_test, verify_all
from attnscore.cli import main
from attnscore.spec.load import load_spec
from tests.guards import HANG_GUARD_S


def _spec(spec_id: str):
    return load_spec(bundled_spec_path(spec_id))


def test_a_mistake_stops_at_its_first_case_diagnosed_as_itself(monkeypatch):
    """keys_not_transposed fails and is named on score_matrix's first worked example: nothing after it runs."""
    spec = dataclasses.replace(_spec("score_matrix"), mistakes=("keys_not_transposed",))
    cases = build_cases(spec, "float32")
    judged: list[str] = []
    real = verify_module.judge_case

    def counted(spec, case, *args, **kwargs):
        judged.append(case.id)
        return real(spec, case, *args, **kwargs)

    monkeypatch.setattr(verify_module, "judge_case", counted)
    (result,) = mutation_test(spec, cases, "float32")
    assert result.ok and result.caught and result.diagnosed
    assert judged == [cases[0].id] == list(result.failed_cases)
    assert result.diagnoses == ("keys_not_transposed",)


def _first_failing(spec, cases, dtype: str, mistake_id: str) -> str:
    """The first case that the mistake fails, judging every case in order (no early stop)."""
    from attnscore.check.runner import InProcessRunner

    runner = InProcessRunner(verify_module.get_mistake(mistake_id).bind(spec.contract, spec))
    return next(c.id for c in cases if not verify_module.judge_case(spec, c, runner, dtype).passed)


def test_without_a_diagnosis_required_the_first_failing_case_settles_it():
    """In a dtype the spec does not grade in, being caught is enough: the run stops at the first failure."""
    spec = dataclasses.replace(_spec("dot_product_scores"), mistakes=("elementwise_not_summed",))
    cases = build_cases(spec, "float16")
    (result,) = mutation_test(spec, cases, "float16", needs_diagnosis=False)
    assert result.ok and not result.needs_diagnosis
    assert result.failed_cases == (_first_failing(spec, cases, "float16", "elementwise_not_summed"),)


def test_a_mistake_that_is_never_caught_runs_every_case(monkeypatch):
    """A "mistake" that is the reference itself passes every case: every case is judged and it is MISSED."""
    spec = dataclasses.replace(_spec("dot_product_scores"), mistakes=("softmax_applied",))
    cases = build_cases(spec, "float64")
    honest = dataclasses.replace(verify_module.get_mistake("softmax_applied"), fn=lambda c, spec, q, keys: keys @ q)
    monkeypatch.setattr(verify_module, "get_mistake", lambda _id: honest)
    judged: list[str] = []
    real = verify_module.judge_case
    monkeypatch.setattr(
        verify_module, "judge_case", lambda spec, case, *a, **k: judged.append(case.id) or real(spec, case, *a, **k)
    )
    (result,) = mutation_test(spec, cases, "float64")
    assert not result.caught and not result.ok and result.failed_cases == ()
    assert judged == [c.id for c in cases]


_SIDE_BY_SIDE = """
import dataclasses, json, os, sys
from attnscore.check import verify as verify_module
from attnscore.check.verify import bundled_spec_path, verify_all, verify_one
from attnscore.spec.load import load_spec

ids, jobs, fake = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3] == "fake"
specs = [load_spec(bundled_spec_path(i)) for i in ids]
real, parent, seen = verify_module.verify_one, os.getpid(), sys.argv[4]


def recorded(spec, mutations=True, dtypes=None):  # in the forked children: where each unit ran
    with open(seen, "a") as f:
        f.write(json.dumps([spec.id, dtypes and list(dtypes), os.getpid() != parent]) + "\\n")
    if fake:
        return verify_module.SpecVerification(spec.id, (), (), ())
    return real(spec, mutations, dtypes)


verify_module.verify_one = recorded
torch_before = "torch" in sys.modules
found = verify_all(specs, jobs=jobs)


def facts(v):
    return [v.spec_id, [[r.dtype, str(r.score), str(r.max_score)] for r in v.references],
            [list(map(str, dataclasses.astuple(m))) for m in v.mutations]]


print(json.dumps({
    "torch_before": torch_before,
    "side_by_side": [facts(v) for v in found],
    "alone": [] if fake else [facts(real(s)) for s in specs],
}))
"""


def _side_by_side(tmp_path, ids: list[str], jobs: int, fake: bool) -> tuple[dict, list[list]]:
    """``verify_all`` of the bundled ``ids`` with ``jobs`` in a fresh interpreter (this one has torch
    loaded, and ``verify_all`` then verifies in process): what it found, and each unit's spec,
    dtypes and whether it ran in a forked child."""
    seen = tmp_path / "units.jsonl"
    argv = [sys.executable, "-c", _SIDE_BY_SIDE, ",".join(ids), str(jobs), "fake" if fake else "real", str(seen)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 0, done.stderr
    units = [json.loads(line) for line in seen.read_text().splitlines()]
    return json.loads(done.stdout.splitlines()[-1]), units


def test_many_specs_are_verified_one_spec_per_unit_in_forked_processes(tmp_path):
    """Four specs, two processes: each spec whole (its dtypes share what they build), forked, in
    spec order; loading them imported no torch (else everything would run in one process)."""
    ids = ["masked_scores", "dot_product_scores", "score_matrix", "scaled_score_matrix"]
    out, units = _side_by_side(tmp_path, ids, 2, fake=True)
    assert out["torch_before"] is False
    assert [v[0] for v in out["side_by_side"]] == ids
    assert sorted(units) == sorted([i, None, True] for i in ids)


def test_few_specs_are_verified_one_dtype_per_unit(tmp_path):
    """One spec, two processes: its four dtypes side by side, each in a forked process."""
    out, units = _side_by_side(tmp_path, ["masked_scores"], 2, fake=True)
    assert [v[0] for v in out["side_by_side"]] == ["masked_scores"]
    assert sorted(units) == sorted(["masked_scores", [d], True] for d in ("float32", "float64", "float16", "bfloat16"))


@pytest.mark.slow
def test_parallel_verification_equals_one_process(tmp_path):
    """Two specs verified in two forked processes, one unit per spec and dtype (the results put
    together again per spec): the same reference scores and mutation verdicts as one process, in
    spec order. (A unit of a whole spec is ``verify_one`` itself: ``attnscore verify`` of every
    bundled spec, in ``make test``, runs that way.)"""
    ids = ["masked_scores", "dot_product_scores"]
    out, units = _side_by_side(tmp_path, ids, 2, fake=False)
    assert len(units) == 8 and all(forked for _, _, forked in units)
    assert out["side_by_side"] == out["alone"]
    assert [v[0] for v in out["side_by_side"]] == ids
    assert [r[0] for r in out["side_by_side"][0][1]] == ["float32", "float64", "float16", "bfloat16"]


def test_verify_all_refuses_no_jobs():
    with pytest.raises(ValueError, match="expected jobs >= 1, found 0"):
        verify_all([_spec("masked_scores")], jobs=0)


@pytest.mark.slow
def test_cli_verify_jobs_option():
    """--jobs 2 verifies as one process does; --jobs 0 is a usage error."""
    one = CliRunner().invoke(main, ["verify", "masked_scores", "dot_product_scores", "--jobs", "1"])
    two = CliRunner().invoke(main, ["verify", "masked_scores", "dot_product_scores", "--jobs", "2"])
    assert one.exit_code == two.exit_code == 0, two.output
    assert one.output == two.output and "all specs verified" in two.output
    bad = CliRunner().invoke(main, ["verify", "masked_scores", "--jobs", "0"])
    assert bad.exit_code == 2 and "Invalid value for '--jobs'" in bad.output


def test_verifying_in_this_process_computes_with_one_torch_thread(monkeypatch):
    """``verify --jobs 1`` (and a caller that already loaded torch) verifies here: torch's other
    threads would only spin beside the tiny reference tensors (lazy_torch.one_thread)."""
    import torch

    seen: list[int] = []
    monkeypatch.setattr(verify_module, "verify_one", lambda spec, mutations=True: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        spec = load_spec(bundled_spec_path("dot_product_scores"))
        verify_all([spec, spec], jobs=1)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 1] and after == 2
