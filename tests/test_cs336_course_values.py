"""benchmarks/cs336_course_values.py: the course's layout is read right, bad copies get one line and
exit 2, and the comparison counts agreement as the course's assert_allclose does (on synthetic course
folders written here: the real course's files are never in the repository)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnscore.maths.contracts import CONTRACTS

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("cs336_course_values", ROOT / "benchmarks" / "cs336_course_values.py")
assert _spec is not None and _spec.loader is not None
course_values = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("cs336_course_values", course_values)  # its dataclasses look their module up by name
_spec.loader.exec_module(course_values)

needs_rope = pytest.mark.skipif("rope" not in CONTRACTS, reason="the rope contract is not in this tree")
needs_mha = pytest.mark.skipif(
    not {"multihead_self_attention", "multihead_self_attention_rope"} <= set(CONTRACTS),
    reason="the multi-head contracts are not in this tree",
)


def _x() -> torch.Tensor:
    """The 2025 course's in_embeddings: seed 4, randn (4, 12, 64)."""
    torch.manual_seed(4)
    return torch.randn(4, 12, 64)


def _rope_by_complex(x: torch.Tensor, positions: torch.Tensor, theta: float, pairs: str) -> torch.Tensor:
    """RoPE written independently of attnscore: each pair as one complex number times e^(i·m·θ_k)."""
    x = x.double()
    d = x.shape[-1]
    if pairs == "interleaved":
        z = torch.complex(x[..., 0::2], x[..., 1::2])
    else:
        z = torch.complex(x[..., : d // 2], x[..., d // 2 :])
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * freqs
    z = z * torch.polar(torch.ones_like(angle), angle)
    if pairs == "interleaved":
        return torch.stack((z.real, z.imag), dim=-1).flatten(-2)
    return torch.cat((z.real, z.imag), dim=-1)


def _mha_by_sdpa(x, w_q, w_k, w_v, w_o, heads, rotate=None):
    """Causal multi-head self-attention through torch's own SDPA, heads as contiguous column blocks."""
    x, w_q, w_k, w_v, w_o = (t.double() for t in (x, w_q, w_k, w_v, w_o))
    b, n, d = x.shape
    q, k, v = ((x @ w.T).view(b, n, heads, d // heads).transpose(1, 2) for w in (w_q, w_k, w_v))
    if rotate is not None:
        q, k = rotate(q), rotate(k)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(b, n, d) @ w_o.T


def _course_2025(root: Path, snapshots: dict[str, torch.Tensor], state: dict[str, torch.Tensor] | None) -> Path:
    (root / "tests" / "_snapshots").mkdir(parents=True)
    for name, value in snapshots.items():
        np.savez(root / "tests" / "_snapshots" / f"test_{name}.npz", array=value.float().numpy())
    if state is not None:
        (root / "tests" / "fixtures" / "ts_tests").mkdir(parents=True)
        torch.save(state, root / "tests" / "fixtures" / "ts_tests" / "model.pt")
    return root


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return {f"layers.0.attn.{p}_proj.weight": torch.randn(64, 64, generator=g) / 8 for p in ("q", "k", "v", "output")}


def _rows(out: str) -> list[tuple[str, str, str]]:
    """(course test, ours, agree) of each table row."""
    rows = []
    for line in out.splitlines()[2:]:
        test, kind, dtype, agree = line.split()[:4]
        rows.append((test, f"{kind} {dtype}", agree))
    return rows


def test_agreement_counts_entries_as_assert_allclose_does():
    """Within atol + rtol·|expected| entry by entry; worst absolute and relative errors reported."""
    a = course_values.Agreement.of(np.array([1.0, 2.0, 0.5]), np.array([1.0, 2.1, 0.0]), atol=0.0, rtol=0.01)
    assert (a.agree, a.total) == (1, 3)
    assert a.max_abs == pytest.approx(0.5)
    assert a.max_rel == pytest.approx(0.1 / 2.1)  # the 0.0 expected entry has no relative error
    assert course_values.Agreement.of(np.array([0.5]), np.array([0.0]), atol=0.5, rtol=0.0).agree == 1


def test_agreement_rejects_a_shape_mismatch():
    with pytest.raises(ValueError, match=r"expected an output of shape \(2,\), found \(3,\)"):
        course_values.Agreement.of(np.zeros(3), np.zeros(2), atol=0.0, rtol=0.0)


@pytest.mark.parametrize(
    ("layout", "tests", "expected"),
    [
        pytest.param(None, None, "expected a folder (a copy of the course's repository), found none", id="no folder"),
        pytest.param(
            {},
            None,
            "expected a copy of CS336 assignment 1 holding tests/_snapshots (spring 2025 "
            "(stanford-cs336/assignment1-basics)) or tests/fixtures/unbatched_multihead_self_attention_weights.pt "
            "(spring 2024 (stanford-cs336/spring2024-assignment1-basics)), found neither",
            id="neither edition",
        ),
        pytest.param(
            {"tests/_snapshots/": b""},
            "rope",
            "tests/_snapshots/test_rope.npz is missing (needed by test_rope)",
            id="snapshot missing",
        ),
        pytest.param(
            {"tests/_snapshots/test_rope.npz": b"not a zip"},
            "rope",
            "tests/_snapshots/test_rope.npz is not a numpy .npz file",
            id="snapshot unreadable",
        ),
        pytest.param(
            {"tests/_snapshots/test_multihead_self_attention.npz": "npz"},
            "multihead_self_attention",
            "tests/fixtures/ts_tests/model.pt is missing (needed by test_multihead_self_attention)",
            id="state dict missing",
        ),
        pytest.param(
            {
                "tests/_snapshots/test_multihead_self_attention.npz": "npz",
                "tests/fixtures/ts_tests/model.pt": b"version https://git-lfs.github.com/spec/v1\noid sha256:00\n",
            },
            "multihead_self_attention",
            "tests/fixtures/ts_tests/model.pt is a Git LFS pointer, not the file "
            "(needed by test_multihead_self_attention; run `git lfs pull` in the checkout)",
            id="state dict an LFS pointer",
        ),
        pytest.param(
            {"tests/_snapshots/test_multihead_self_attention.npz": "npz", "tests/fixtures/ts_tests/model.pt": "state"},
            "multihead_self_attention",
            "tests/fixtures/ts_tests/model.pt: expected the key 'layers.0.attn.output_proj.weight', "
            "found keys layers.0.attn.k_proj.weight, layers.0.attn.q_proj.weight, layers.0.attn.v_proj.weight",
            id="state dict without the output projection",
        ),
    ],
)
def test_a_bad_course_copy_gets_one_line_and_exit_2(tmp_path, capsys, layout, tests, expected):
    """What is missing or wrong in the copy is named, with the file, on one line; nothing is compared."""
    course = tmp_path / "course"
    if layout is not None:
        course.mkdir()
        for relative, content in layout.items():
            path = course / relative
            if relative.endswith("/"):
                path.mkdir(parents=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if content == "npz":
                np.savez(path, array=np.zeros((4, 12, 64), dtype=np.float32))
            elif content == "state":
                torch.save({k: v for k, v in _weights().items() if "output" not in k}, path)
            else:
                path.write_bytes(content)
    argv = ["--course", str(course)] + (["--tests", tests] if tests else [])
    assert course_values.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error: --course {course}: {expected}")  # an unreadable file's own reason may follow
    assert err.count("\n") == 1 and err.endswith("\n")


def test_an_unknown_test_name_is_named_with_the_known_ones(tmp_path, capsys):
    (tmp_path / "tests" / "_snapshots").mkdir(parents=True)
    assert course_values.main(["--course", str(tmp_path), "--tests", "rope,softmax"]) == 2
    assert capsys.readouterr().err == (
        "error: --tests: expected names among rope, multihead_self_attention, multihead_self_attention_with_rope "
        "(spring 2025 (stanford-cs336/assignment1-basics)), found 'rope,softmax'\n"
    )


@needs_rope
def test_rope_agrees_with_an_interleaved_snapshot_and_not_a_rotate_half_one(tmp_path, capsys):
    """The course's RoPE mapped as rope(x, positions, theta), pairing interleaved: every entry agrees
    with RoPE written with complex numbers; a rotate-half snapshot disagrees (exit 1)."""
    positions = torch.arange(12)
    good = _course_2025(tmp_path / "good", {"rope": _rope_by_complex(_x(), positions, 10000.0, "interleaved")}, None)
    assert course_values.main(["--course", str(good), "--tests", "test_rope"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows == [
        ("test_rope", "reference float32", "3072/3072"),
        ("test_rope", "reference float64", "3072/3072"),
        ("test_rope", "golden float64", "3072/3072"),
    ]
    bad = _course_2025(tmp_path / "bad", {"rope": _rope_by_complex(_x(), positions, 10000.0, "rotate_half")}, None)
    assert course_values.main(["--course", str(bad), "--tests", "rope"]) == 1
    agree = [int(r[2].split("/")[0]) for r in _rows(capsys.readouterr().out)]
    assert all(a < 3072 for a in agree)


@needs_mha
def test_multihead_tests_map_the_adapters_weights_and_positions(tmp_path, capsys):
    """Causal, x @ W.T, heads as contiguous column blocks, RoPE per head at positions arange(12):
    a course folder whose snapshots come from torch's SDPA agrees entry for entry."""
    state = {"_orig_mod." + k: v for k, v in _weights().items()}  # a compiled model's names, as the course strips
    w = [state[f"_orig_mod.layers.0.attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")]
    positions = torch.arange(12)
    snapshots = {
        "multihead_self_attention": _mha_by_sdpa(_x(), *w, 4),
        "multihead_self_attention_with_rope": _mha_by_sdpa(
            _x(), *w, 4, rotate=lambda t: _rope_by_complex(t, positions, 10000.0, "interleaved")
        ),
    }
    course = _course_2025(tmp_path / "course", snapshots, state)
    assert course_values.main(["--course", str(course), "--tests", ",".join(snapshots)]) == 0
    rows = _rows(capsys.readouterr().out)
    tests = ["test_multihead_self_attention"] * 3 + ["test_multihead_self_attention_with_rope"] * 3
    assert [r[0] for r in rows] == tests
    assert {r[2] for r in rows} == {"3072/3072"}


@needs_mha
def test_the_2024_edition_stacks_the_per_head_weights(tmp_path, capsys):
    """spring 2024: q_heads.h.weight (32, 64) stacked in head order; a swapped head order disagrees."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(8, 128, 64, generator=g)
    heads = {f"{p}_heads.{h}.weight": torch.randn(32, 64, generator=g) / 32 for p in "qkv" for h in range(2)}
    w_o = torch.randn(64, 64, generator=g) / 32  # outputs near 0.1: float32 stays far inside atol 1e-6
    stacked = [torch.cat([heads[f"{p}_heads.{h}.weight"] for h in range(2)]) for p in "qkv"]
    expected = _mha_by_sdpa(x, *stacked, w_o, 2).float()
    fixtures = tmp_path / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    torch.save(x, fixtures / "in_features.pt")
    torch.save(expected, fixtures / "unbatched_multihead_self_attention_expected_output.pt")
    torch.save({**heads, "output_proj.weight": w_o}, fixtures / "unbatched_multihead_self_attention_weights.pt")
    assert course_values.main(["--course", str(tmp_path)]) == 0
    assert {r[2] for r in _rows(capsys.readouterr().out)} == {"65536/65536"}
    swapped = {f"{p}_heads.{h}.weight": heads[f"{p}_heads.{1 - h}.weight"] for p in "qkv" for h in range(2)}
    torch.save({**swapped, "output_proj.weight": w_o}, fixtures / "unbatched_multihead_self_attention_weights.pt")
    assert course_values.main(["--course", str(tmp_path)]) == 1
