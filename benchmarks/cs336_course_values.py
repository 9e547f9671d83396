"""Stanford CS336 assignment 1's own reference outputs, recomputed by attnscore's references.

Usage::

    .venv/bin/python benchmarks/cs336_course_values.py --course PATH [--tests NAME[,NAME...]]

``PATH`` is a checkout (or an extracted copy) of the course's public test repository, either edition:

- spring 2025, ``stanford-cs336/assignment1-basics`` (found by ``tests/_snapshots/``): the tests
  ``rope``, ``multihead_self_attention`` and ``multihead_self_attention_with_rope``. Their expected
  outputs are the snapshots ``tests/_snapshots/test_<name>.npz`` (one float32 array, ``array``);
  the attention weights come from the course's small trained model,
  ``tests/fixtures/ts_tests/model.pt`` (``layers.0.attn.{q,k,v,output}_proj.weight``, each
  ``(64, 64)``); the input is the course's ``in_embeddings`` fixture, which is not a file: the
  course draws it as ``torch.manual_seed(4); torch.randn(4, 12, 64)`` (batch 4, 12 tokens,
  ``d_model`` 64 = 4 heads of 16), and this script draws it the same way. Token positions are
  ``arange(12)``, ``theta`` 10000. The course compares with ``numpy.testing.assert_allclose`` at
  ``atol = 1e-6`` (each test's own) and ``rtol = 1e-4`` (its snapshot fixture's default since
  version 1.0.2; ``1e-5`` before).
- spring 2024, ``stanford-cs336/spring2024-assignment1-basics`` (found by
  ``tests/fixtures/unbatched_multihead_self_attention_weights.pt``): the test
  ``multihead_self_attention`` (no RoPE in that edition): input ``tests/fixtures/in_features.pt``
  ``(8, 128, 64)``, 2 heads, per-head weights ``{q,k,v}_heads.{h}.weight`` ``(32, 64)`` and
  ``output_proj.weight``, expected output
  ``tests/fixtures/unbatched_multihead_self_attention_expected_output.pt``, compared at
  ``atol = 1e-6`` and numpy's default ``rtol = 1e-7``.

Nothing of the course is stored in attnscore: every input, weight and expected output is read from
``PATH`` (or, for the 2025 input, drawn from the course's seed) when the script runs.

How the course's adapters map onto attnscore's contracts (graded functions are called positionally):

- ``run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions)`` ->
  ``rope(x, token_positions, theta)``, pairing ``interleaved`` (the handout rotates the pairs
  ``q[2k-1], q[2k]``); ``d_k`` and ``max_seq_len`` are sizes the contract reads off ``x``.
- ``run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight,
  o_proj_weight, in_features)`` -> ``multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads)``,
  causal (the handout's "causal multi-head self-attention"). The 2024 edition's per-head weights
  are stacked along the output dim (head ``h`` is rows ``h·d_head .. (h+1)·d_head`` of ``W_q``).
- ``run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight,
  ..., in_features, token_positions)`` -> ``multihead_self_attention_rope(x, W_q, W_k, W_v, W_o,
  num_heads, theta, token_positions)``, causal, pairing ``interleaved``. The course passes the
  positions as ``(1, seq)``; the contract's legend is ``(seq,)``, shared by the batch (a spec
  states the course's shape as ``token_positions: [1, seq]``), and this script passes ``(seq,)``.

For each test it runs the contract's torch reference on the course's float32 inputs and on the same
inputs in float64, and the contract's float64 numpy twin (``golden``), and prints how many output
entries agree with the course's value within the course's own tolerance (``|ours − course| <=
atol + rtol·|course|``, as ``assert_allclose``), the largest absolute error and the largest relative
error (over the entries whose course value is not 0).

Exit status: 0 when every entry agrees in every row, 1 when some do not, 2 when ``PATH`` is not a
usable copy of the course (the one-line error names the file and what was found).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnscore.maths.contracts import get_contract

LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
SNAPSHOTS = Path("tests/_snapshots")
STATE_DICT = Path("tests/fixtures/ts_tests/model.pt")
WEIGHTS_2024 = Path("tests/fixtures/unbatched_multihead_self_attention_weights.pt")
INPUT_2024 = Path("tests/fixtures/in_features.pt")
EXPECTED_2024 = Path("tests/fixtures/unbatched_multihead_self_attention_expected_output.pt")


class CourseError(ValueError):
    """``PATH`` is not a usable copy of the course: a file is missing, a Git LFS pointer, or unreadable."""


@dataclass(frozen=True)
class CourseCase:
    """One course test mapped onto a contract.

    Attributes:
        test: the course's test name (``test_rope``).
        contract: the attnscore contract that computes it, and the options a spec would fix.
        options: keyword -> value (``{"causal": True}``), see :meth:`Contract.configured`.
        args: the contract's arguments in its parameter order: float32 tensors, int32 tensors
            (token positions) and Python ints (``num_heads``, ``theta``).
        expected: the course's reference output, float32.
        atol, rtol: the course's tolerance for this test.
    """

    test: str
    contract: str
    options: Mapping[str, Any]
    args: tuple[Any, ...]
    expected: np.ndarray
    atol: float
    rtol: float


@dataclass(frozen=True)
class Agreement:
    """How one computed output compares with the course's: entries within tolerance, worst errors."""

    agree: int
    total: int
    max_abs: float
    max_rel: float

    @classmethod
    def of(cls, actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> Agreement:
        """Compare as ``numpy.testing.assert_allclose(actual, expected, rtol, atol)`` does, entry by entry.

        Raises:
            ValueError: the shapes differ.
        """
        actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
        if actual.shape != expected.shape:
            raise ValueError(f"expected an output of shape {expected.shape}, found {actual.shape}")
        err = np.abs(actual - expected)
        ok = err <= atol + rtol * np.abs(expected)
        nonzero = expected != 0
        rel = float(np.max(err[nonzero] / np.abs(expected[nonzero]))) if nonzero.any() else 0.0
        return cls(int(ok.sum()), int(ok.size), float(err.max(initial=0.0)), rel)


def _file(course: Path, relative: Path, needed_by: str) -> Path:
    """``course / relative``, checked to be a real file (not missing, not a Git LFS pointer)."""
    path = course / relative
    if not path.is_file():
        raise CourseError(f"--course {course}: {relative} is missing (needed by {needed_by})")
    with path.open("rb") as fh:
        if fh.read(len(LFS_POINTER)) == LFS_POINTER:
            raise CourseError(
                f"--course {course}: {relative} is a Git LFS pointer, not the file (needed by {needed_by}; "
                "run `git lfs pull` in the checkout)"
            )
    return path


def _torch_load(path: Path, course: Path, needed_by: str) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which one
        raise CourseError(
            f"--course {course}: {path.relative_to(course)} could not be read by torch.load "
            f"(needed by {needed_by}): {type(exc).__name__}: {exc}"
        ) from None


def _tensor(table: Mapping[str, Any], key: str, shape: tuple[int, ...], where: str) -> torch.Tensor:
    if key not in table:
        keys = sorted(map(str, table))
        found = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise CourseError(f"{where}: expected the key {key!r}, found keys {found or 'none'}")
    value = table[key]
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
        what = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise CourseError(f"{where}: expected {key} of shape {shape}, found {what}")
    return value.detach().to(torch.float32)


def _snapshot(course: Path, test: str, shape: tuple[int, ...]) -> np.ndarray:
    relative = SNAPSHOTS / f"{test}.npz"
    path = _file(course, relative, test)
    try:
        with np.load(path) as npz:
            arrays = dict(npz)
    except Exception as exc:
        raise CourseError(f"--course {course}: {relative} is not a numpy .npz file: {exc}") from None
    if set(arrays) != {"array"} or arrays["array"].shape != shape:
        found = {k: v.shape for k, v in arrays.items()}
        raise CourseError(f"--course {course}: {relative}: expected one array 'array' of shape {shape}, found {found}")
    return arrays["array"]


# spring 2025 (tests/conftest.py): batch_size 4, n_queries 12, n_keys 16, n_heads 4, d_head 16, theta 10000
_BATCH, _SEQ, _HEADS, _D_MODEL, _THETA = 4, 12, 4, 64, 10000


def _in_embeddings() -> torch.Tensor:
    """The course's ``in_embeddings`` fixture: seed 4, standard normal ``(4, 12, 64)`` float32."""
    return torch.randn(_BATCH, _SEQ, _D_MODEL, generator=torch.Generator().manual_seed(4))


def _attention_weights(course: Path, needed_by: str) -> tuple[torch.Tensor, ...]:
    path = _file(course, STATE_DICT, needed_by)
    state = _torch_load(path, course, needed_by)
    if not isinstance(state, Mapping):
        raise CourseError(f"--course {course}: {STATE_DICT}: expected a state dict, found {type(state).__name__}")
    state = {str(k).replace("_orig_mod.", ""): v for k, v in state.items()}
    where = f"--course {course}: {STATE_DICT}"
    return tuple(
        _tensor(state, f"layers.0.attn.{p}_proj.weight", (_D_MODEL, _D_MODEL), where) for p in ("q", "k", "v", "output")
    )


def _spring2025(course: Path, test: str) -> CourseCase:
    x = _in_embeddings()
    positions = torch.arange(_SEQ, dtype=torch.int32)
    expected = _snapshot(course, f"test_{test}", (_BATCH, _SEQ, _D_MODEL))
    tol = {"atol": 1e-6, "rtol": 1e-4}
    if test == "rope":
        return CourseCase("test_rope", "rope", {"pairing": "interleaved"}, (x, positions, _THETA), expected, **tol)
    weights = _attention_weights(course, f"test_{test}")
    if test == "multihead_self_attention":
        args = (x, *weights, _HEADS)
        return CourseCase(f"test_{test}", "multihead_self_attention", {"causal": True}, args, expected, **tol)
    args = (x, *weights, _HEADS, _THETA, positions)
    options = {"causal": True, "pairing": "interleaved"}
    return CourseCase(f"test_{test}", "multihead_self_attention_rope", options, args, expected, **tol)


def _spring2024(course: Path, test: str) -> CourseCase:
    needed_by = "test_multihead_self_attention"
    heads, d_model, d_head = 2, 64, 32
    paths = [_file(course, p, needed_by) for p in (WEIGHTS_2024, INPUT_2024, EXPECTED_2024)]
    weights, x, expected = (_torch_load(p, course, needed_by) for p in paths)
    where = f"--course {course}: {WEIGHTS_2024}"
    if not isinstance(weights, Mapping):
        raise CourseError(f"{where}: expected a state dict, found {type(weights).__name__}")
    stacked = [
        torch.cat([_tensor(weights, f"{p}_heads.{h}.weight", (d_head, d_model), where) for h in range(heads)])
        for p in ("q", "k", "v")
    ]
    w_o = _tensor(weights, "output_proj.weight", (d_model, d_model), where)
    x = _tensor({"in_features": x}, "in_features", (8, 128, d_model), f"--course {course}: {INPUT_2024}")
    expected = _tensor({"out": expected}, "out", (8, 128, d_model), f"--course {course}: {EXPECTED_2024}")
    args = (x, *stacked, w_o, heads)
    return CourseCase(
        "test_multihead_self_attention",
        "multihead_self_attention",
        {"causal": True},
        args,
        expected.numpy(),
        atol=1e-6,
        rtol=1e-7,
    )


@dataclass(frozen=True)
class Edition:
    """One edition of the course's tests: how to recognise a copy of it and build its cases."""

    name: str
    marker: Path
    tests: tuple[str, ...]
    build: Callable[[Path, str], CourseCase]


EDITIONS = (
    Edition(
        "spring 2025 (stanford-cs336/assignment1-basics)",
        SNAPSHOTS,
        ("rope", "multihead_self_attention", "multihead_self_attention_with_rope"),
        _spring2025,
    ),
    Edition(
        "spring 2024 (stanford-cs336/spring2024-assignment1-basics)",
        WEIGHTS_2024,
        ("multihead_self_attention",),
        _spring2024,
    ),
)


def edition_of(course: Path) -> Edition:
    """The edition whose marker file or folder ``course`` holds.

    Raises:
        CourseError: ``course`` is not a folder, or holds neither edition's marker.
    """
    if not course.is_dir():
        raise CourseError(f"--course {course}: expected a folder (a copy of the course's repository), found none")
    for edition in EDITIONS:
        if (course / edition.marker).exists():
            return edition
    markers = " or ".join(f"{e.marker} ({e.name})" for e in EDITIONS)
    raise CourseError(f"--course {course}: expected a copy of CS336 assignment 1 holding {markers}, found neither")


def _cast(args: Sequence[Any], dtype: torch.dtype) -> list[Any]:
    return [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _golden_args(names: Sequence[str], args: Sequence[Any]) -> dict[str, np.ndarray]:
    out = {}
    for name, a in zip(names, args, strict=True):
        if isinstance(a, torch.Tensor):
            out[name] = a.numpy().astype(np.float64) if a.is_floating_point() else a.numpy()
        else:
            out[name] = np.asarray(a, dtype=np.int32)
    return out


def compare(case: CourseCase) -> list[tuple[str, Agreement]]:
    """The case's contract, configured as the course's convention, against the course's output: the
    torch reference in float32 and in float64, and the float64 numpy twin."""
    contract = get_contract(case.contract).configured(case.options)
    rows = []
    with torch.no_grad():
        for dtype in (torch.float32, torch.float64):
            out = contract.reference(*_cast(case.args, dtype))
            rows.append((f"reference {str(dtype).removeprefix('torch.')}", out.numpy()))
    rows.append(("golden float64", contract.golden_fn(_golden_args(contract.parameter_names, case.args))))
    return [(label, Agreement.of(out, case.expected, case.atol, case.rtol)) for label, out in rows]


def _selected(edition: Edition, tests: str | None) -> tuple[str, ...]:
    if tests is None:
        return edition.tests
    chosen = tuple(t.strip().removeprefix("test_") for t in tests.split(",") if t.strip())
    unknown = [t for t in chosen if t not in edition.tests]
    if unknown or not chosen:
        raise CourseError(f"--tests: expected names among {', '.join(edition.tests)} ({edition.name}), found {tests!r}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; return the exit status (0 all agree, 1 some entries do not, 2 bad ``--course``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--course", type=Path, required=True, help="a checkout or extracted copy of the course's repository"
    )
    parser.add_argument(
        "--tests", help="comma-separated course test names (default: every attention test of the edition)"
    )
    ns = parser.parse_args(argv)
    try:
        edition = edition_of(ns.course)
        cases = [edition.build(ns.course, t) for t in _selected(edition, ns.tests)]
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"CS336 assignment 1, {edition.name}, at {ns.course}")
    print(f"{'course test':<40} {'ours':<18} {'agree':>13} {'max abs err':>12} {'max rel err':>12}  course tolerance")
    everything = True
    for case in cases:
        for label, a in compare(case):
            everything &= a.agree == a.total
            print(
                f"{case.test:<40} {label:<18} {f'{a.agree}/{a.total}':>13} {a.max_abs:>12.3g} {a.max_rel:>12.3g}"
                f"  atol {case.atol:g}, rtol {case.rtol:g}"
            )
    return 0 if everything else 1


if __name__ == "__main__":
    sys.exit(main())
