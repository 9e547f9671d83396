"""The tile-edge mistakes of a FlashAttention-2 Function: a dropped last partial tile and a kernel
that needs n to be a multiple of its tile (attnscore.catalogue.mistakes.flash_attention), their
diagnosis (unwritten rows, raised calls: attnscore.check.diagnosis) and their counterexamples."""

# ruff: noqa: E741  (O and L: the paper's names)
from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.catalogue.mistakes import get_mistake
from attnscore.catalogue.mistakes.flash_attention import flash_function
from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.small_inputs import small_case
from attnscore.check.verify import mutation_test
from attnscore.grade.grading import grade_many
from attnscore.maths.flash_reference import FlashReference
from attnscore.report.feedback import failure_text
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = (ROOT / "specs" / "flash_attention_2.yaml", ROOT / "specs" / "flash_attention_2_causal.yaml")
SUBMISSIONS = ROOT / "examples" / "submissions" / "flash_attention_2"
DROPPED, MULTIPLE = "last_partial_tile_dropped", "tile_multiple_required"


def _load(name: str):
    path = SUBMISSIONS / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"edge_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.FlashAttention2


def _inputs(n_q: int, n_k: int, d: int = 3, batch: int = 2):
    g = torch.Generator().manual_seed(7)
    return [torch.randn(batch, n, d, generator=g, dtype=torch.float64) for n in (n_q, n_k, n_k)]


def _named(spec, function) -> tuple[dict[str, str | None], object]:
    """The failing cases with calls, each with the mistake it is named with (the spec's rule cases make
    no call: they are judged from the others and carry no diagnosis), and the result."""
    result = run_impl(spec, function, dtype="float32", shrink=False)
    named = {c.id: (c.diagnosis or {}).get("id") for c in result.cases if not c.passed and c.kind != "rule"}
    return named, result


def _tiled(tile: int, *, rows_floor: bool, keys_floor: bool, fill: float = 0.0, collect: bool = False):
    """A FlashAttention-2 Function whose query and/or key loops run over n // tile tiles; rows it never
    writes hold ``fill`` (what torch.empty happened to hold), or with ``collect`` O is concatenated."""

    class Tiled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, K, V, is_causal=False):
            n_q, n_k, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
            T_q = n_q // tile if rows_floor else math.ceil(n_q / tile)
            T_k = n_k // tile if keys_floor else math.ceil(n_k / tile)
            O = torch.full_like(Q, fill)
            pieces = []
            for i in range(T_q):
                Qi = Q[:, i * tile : (i + 1) * tile]
                acc = torch.zeros_like(Qi)
                l = torch.zeros(Qi.shape[:-1], dtype=Q.dtype)
                m = torch.full(Qi.shape[:-1], float("-inf"), dtype=Q.dtype)
                for j in range(T_k):
                    S = Qi @ K[:, j * tile : (j + 1) * tile].transpose(1, 2) / math.sqrt(d)
                    if is_causal:
                        r = torch.arange(i * tile, i * tile + Qi.shape[1])[:, None]
                        c = torch.arange(j * tile, j * tile + S.shape[-1])[None, :]
                        S = S.masked_fill(c > r, float("-inf"))
                    m_new = torch.maximum(m, S.amax(-1))
                    P = torch.exp(S - m_new[..., None])
                    alpha = torch.exp(m - m_new)
                    l = alpha * l + P.sum(-1)
                    acc = alpha[..., None] * acc + P @ V[:, j * tile : (j + 1) * tile]
                    m = m_new
                O[:, i * tile : (i + 1) * tile] = acc / l[..., None]
                pieces.append(acc / l[..., None])
            if collect:
                O = torch.cat(pieces, dim=1)
            ctx.save_for_backward(Q, K, V, O, O.sum(-1))
            return O

        @staticmethod
        def backward(ctx, dO):
            Q, K, V, _, _ = ctx.saved_tensors
            return torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V), None

    return Tiled


# ---------------------------------------------------------------------------------------------
# the mistakes' own code


def test_dropped_tile_model_leaves_the_last_rows_and_keys_out():
    """n = 17 with tiles of 16: rows 0..15 attend to keys 0..15 only, row 16 is never written (0 here)."""
    Q, K, V = _inputs(17, 17)
    O = flash_function(tile=16, drop_last=1).apply(Q, K, V, False)
    first = FlashReference.apply(Q[:, :16], K[:, :16], V[:, :16], False)
    assert torch.allclose(O[:, :16], first) and not torch.allclose(O[:, :16], FlashReference.apply(Q, K, V)[:, :16])
    assert torch.equal(O[:, 16], torch.zeros_like(O[:, 16]))
    keys_only = flash_function(tile=16, drop_last=2).apply(*_inputs(3, 5), False)
    assert torch.isnan(keys_only).all()  # no full key tile: 0/0 in every row
    short = flash_function(tile=16, drop_last=1, collect=True).apply(Q, K, V, False)
    assert short.shape == (2, 16, 3)
    with pytest.raises(RuntimeError, match="non-empty list"):
        flash_function(tile=16, drop_last=1, collect=True).apply(*_inputs(3, 5), False)


def test_tile_multiple_model_raises_or_pads():
    """Form 0 raises unless n is a multiple of the tile and is right when it is; form 1 pads without masking."""
    c = load_spec(SPECS[0]).contract
    wrong = get_mistake(MULTIPLE)
    at16 = _inputs(16, 32)
    assert torch.allclose(wrong.bind(c)(*at16), FlashReference.apply(*at16))
    with pytest.raises(RuntimeError, match="is invalid for input of size"):
        wrong.bind(c)(*_inputs(17, 17))
    padded = wrong.bind(c, form=1)(*_inputs(5, 17))
    assert padded.shape == (2, 5, 3) and not torch.allclose(padded, FlashReference.apply(*_inputs(5, 17)))


def test_messages_name_the_tile_and_the_edge():
    """tile_multiple_required's feedback says the tile size and n = tile + 1; the dropped tile's says n // tile."""
    assert "multiples of its tile size (32)" in get_mistake(MULTIPLE).describe({"tile": 32.0, "edge": 33.0})
    assert "so n = 33 raises or gives wrong rows" in get_mistake(MULTIPLE).describe({"tile": 32.0, "edge": 33.0})
    assert "your loops run over n // tile tiles" in get_mistake(DROPPED).describe()


# ---------------------------------------------------------------------------------------------
# named on realistic code


def test_the_tile_edge_case_names_the_student_file():
    """The tile-edge property of the student file that drops its last tile is named so (one case judged)."""
    spec = load_spec(SPECS[0])
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:tile_edges_match_reference")
    runner = InProcessRunner(_load(DROPPED), logsumexp=spec.logsumexp, bind=spec.contract.binding)
    result = judge_case(spec, case, runner, "float32")
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.diagnosis["id"] == DROPPED
    assert "your loops run over n // tile tiles" in failure_text(result.failure)


def test_an_exception_names_the_tile_requirement():
    """A worked example the reshape-into-tiles file raises on is named, with tile 16 and n = 17 (one case judged)."""
    spec = load_spec(SPECS[0])
    case = next(c for c in build_cases(spec, "float32") if c.id == "example:one_key")
    runner = InProcessRunner(_load(MULTIPLE), logsumexp=spec.logsumexp, bind=spec.contract.binding)
    result = judge_case(spec, case, runner, "float32")
    assert result.verdict is Verdict.EXCEPTION
    assert result.failure.diagnosis["id"] == MULTIPLE
    assert "tile size (16)" in result.failure.diagnosis["message"] and "n = 17" in result.failure.diagnosis["message"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(dict(tile=16, rows_floor=True, keys_floor=True), id="rows and keys floored, zeroed rows"),
        pytest.param(dict(tile=16, rows_floor=True, keys_floor=True, fill=float("nan")), id="unwritten rows NaN"),
        pytest.param(dict(tile=16, rows_floor=True, keys_floor=True, fill=3.0e30), id="unwritten rows garbage"),
        pytest.param(dict(tile=16, rows_floor=False, keys_floor=True), id="keys floored only"),
        pytest.param(dict(tile=16, rows_floor=True, keys_floor=False, fill=-7.0), id="rows floored only"),
        pytest.param(dict(tile=32, rows_floor=True, keys_floor=True), id="tiles of 32"),
        pytest.param(dict(tile=16, rows_floor=True, keys_floor=True, collect=True), id="O concatenated, short"),
    ],
)
def test_dropped_last_tile_is_named_whatever_memory_held(kind):
    """Every way real code drops the last partial tile is named, and nothing else is named."""
    named, result = _named(load_spec(SPECS[0]), _tiled(**kind))
    assert result.score < result.max_score
    assert set(named.values()) - {None} == {DROPPED}, named
    assert named["property:tile_edges_match_reference"] == DROPPED


@pytest.mark.slow
def test_dropped_last_tile_in_the_causal_spec():
    """The causal spec names the student file too (its rows past the last full tile are the evidence)."""
    named, _ = _named(load_spec(SPECS[1]), _load(DROPPED))
    assert set(named.values()) - {None} == {DROPPED}, named
    assert named["property:tile_edges_match_reference"] == DROPPED


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda Q, K, V, is_causal=False: torch.full_like(Q, float("nan")), id="always NaN"),
        pytest.param(lambda Q, K, V, is_causal=False: _last_row_zeroed(FlashReference.apply(Q, K, V, is_causal)),
                     id="only the last row wrong"),
    ],
)  # fmt: skip
def test_other_bugs_are_not_called_a_dropped_tile(make):
    """Output wrong everywhere, or only in its last row, is not a dropped tile: the probes refute it."""
    named, result = _named(load_spec(SPECS[0]), make)
    assert result.score < result.max_score
    assert DROPPED not in named.values() and MULTIPLE not in named.values(), named


def _last_row_zeroed(O):
    O = O.clone()
    O[..., -1, :] = 0.0
    return O


@pytest.mark.slow
def test_a_kernel_that_needs_multiples_of_16_is_named_on_its_exceptions():
    """The student file raises on every input: each exception is named, with tile 16 and n = 17."""
    named, result = _named(load_spec(SPECS[0]), _load(MULTIPLE))
    assert result.score == 0
    assert set(named.values()) == {MULTIPLE}, named
    case = next(c for c in result.cases if c.id == "example:two_equal_keys")
    assert "raised RuntimeError: shape '[1, 0, 16, 1]' is invalid for input of size 1" in case.message
    assert "Known mistake (tile_multiple_required)" in failure_text(case.failure)
    assert "multiples of its tile size (16)" in case.diagnosis["message"] and "n = 17" in case.diagnosis["message"]


@pytest.mark.slow
def test_a_kernel_that_needs_multiples_of_32_is_named_with_32():
    """The witnesses find the tile: runs at n = 32, raises at n = 33 (and at 8 and 16)."""

    def needs_32(Q, K, V, is_causal=False):
        for t in (Q, K):
            t.reshape(t.shape[0], t.shape[1] // 32, 32, t.shape[2])
        return FlashReference.apply(Q, K, V, is_causal)

    named, result = _named(load_spec(SPECS[0]), needs_32)
    assert set(named.values()) == {MULTIPLE}, named
    messages = {c.diagnosis["message"] for c in result.cases if c.diagnosis}
    assert all("tile size (32)" in m and "n = 33" in m for m in messages), messages


@pytest.mark.slow
def test_an_exception_everywhere_is_not_a_tile_requirement():
    """A kernel that raises on every input, multiples of the tile too, gets no name."""

    def broken(Q, K, V, is_causal=False):
        raise ValueError("not written yet")

    named, result = _named(load_spec(SPECS[0]), broken)
    assert result.score == 0 and set(named.values()) == {None}, named


@pytest.mark.slow
def test_padding_without_masking_is_named():
    """The padded form: right when n_k is a multiple of 16, wrong rows otherwise, and named."""

    def padded(Q, K, V, is_causal=False):
        pad = [torch.nn.functional.pad(t, (0, 0, 0, (-t.shape[-2]) % 16)) for t in (Q, K, V)]
        return FlashReference.apply(*pad, is_causal)[:, : Q.shape[1]]

    named, _ = _named(load_spec(SPECS[0]), padded)
    assert set(named.values()) - {None} == {MULTIPLE}, named


# ---------------------------------------------------------------------------------------------
# a small counterexample, n just past a tile


def test_small_inputs_of_the_tile_edges_reach_seventeen():
    """The tile-edge property's small inputs (shrinking in grading) have n_q = n_k = 17, one batch item, d <= 2."""
    spec = load_spec(SPECS[0])
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:tile_edges_match_reference")
    small = small_case(spec, case, "float32")
    assert small is not None
    shapes = {(call.args["Q"].shape, call.args["K"].shape) for call in small.calls}
    assert {(q[0], q[1], k[1]) for q, k in shapes} == {(1, 17, 17)}
    assert max(q[2] for q, _ in shapes) <= 2
    drawn = {(call.args["Q"].shape[1], call.args["K"].shape[1]) for call in case.calls}
    assert drawn <= {(a, b) for a in (17, 33, 65) for b in (17, 33, 65)} and len(drawn) > 1


@pytest.mark.slow
def test_shrunk_counterexample_is_just_past_a_tile():
    """attnscore test's shrinking ends the tile-edge counterexample at n_q = n_k = 17, named."""
    spec = load_spec(SPECS[0])
    result = run_impl(spec, _load(DROPPED), dtype="float32", shrink=True)
    case = next(c for c in result.cases if c.id == "property:tile_edges_match_reference")
    q, k = np.asarray(case.failure.args["Q"]), np.asarray(case.failure.args["K"])
    assert (q.shape[1], k.shape[1]) == (17, 17), (q.shape, k.shape)
    assert case.diagnosis["id"] == DROPPED


# ---------------------------------------------------------------------------------------------
# verify and the sandbox


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=("flash_attention_2", "flash_attention_2_causal"))
def test_verify_catches_and_names_both(path):
    """attnscore verify's mutation test: both mistakes fail a case and are diagnosed as themselves."""
    spec = dataclasses.replace(load_spec(path), mistakes=(DROPPED, MULTIPLE))
    results = {r.mistake_id: r for r in mutation_test(spec, dtype="float32")}
    assert {m: r.cell for m, r in results.items()} == {DROPPED: "diagnosed", MULTIPLE: "diagnosed"}
    # verify stops each mistake at the case that settles it; the tile-edge property alone catches it too
    alone = dataclasses.replace(
        spec, worked_examples=(), properties=tuple(p for p in spec.properties if p.name == "tile_edges_match_reference")
    )
    [dropped] = mutation_test(dataclasses.replace(alone, mistakes=(DROPPED,)), dtype="float32")
    assert dropped.failed_cases == ("property:tile_edges_match_reference",)


@pytest.mark.slow
def test_student_files_are_named_in_the_sandbox():
    """attnscore grade: the two student files are named in the worker; the correct file keeps full marks."""
    spec = load_spec(SPECS[0])
    paths = [SUBMISSIONS / "correct_tiled.py", SUBMISSIONS / f"{DROPPED}.py", SUBMISSIONS / f"{MULTIPLE}.py"]
    correct, dropped, multiple = grade_many(paths, spec, limits=Limits(call_timeout_s=30.0), shrink_steps=0)
    assert correct.score == correct.max_score
    assert {c.diagnosis["id"] for c in dropped.cases if c.diagnosis} == {DROPPED}
    # nothing: its values are wrong on every case's inputs, and points come only for computing (the
    # properties that do not compare values, and the rules, earn theirs only beside right values)
    assert dropped.score == 0
    assert {c.diagnosis["id"] for c in multiple.cases if c.diagnosis} == {MULTIPLE}
    assert multiple.score == 0
