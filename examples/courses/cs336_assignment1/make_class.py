"""Build a class of submissions for the CS336 assignment-1 example: copies of submissions/*.py with
small variations that leave every grade unchanged, so that a class run can be tried and checked.

Usage (from the repository root):

    python examples/courses/cs336_assignment1/make_class.py CLASS_DIR [--size 50]
    attnscore grade CLASS_DIR --spec examples/courses/cs336_assignment1/assignment.yaml --out grading/

The class is deterministic: student ``i`` (``student_001.py``, ...) is a copy of one submission,
chosen in turn from :data:`MIX` (two correct files in five, the two correct files in turn, then
each wrong file in turn), with a
header naming the student, the source's docstring left out, and one of :data:`VARIATIONS`
(a helper that is never called, an unused import, extra blank lines): the copies differ byte for
byte (a gradebook grades each once) and compute exactly what their source computes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUBMISSIONS = HERE / "submissions"

# The order students are drawn in: a correct file twice in every five (the einops file, then the one
# with complex-number RoPE), the wrong files in turn.
WRONG = (
    "softmax_no_max_subtraction",
    "sdpa_mask_inverted",
    "heads_split_without_transpose",
    "module_misnamed_output_proj",
    "missing_multihead_function",
    "causal_mask_ignored",
    "rope_rotate_half",
    "rope_positions_ignored",
)
MIX = tuple(name for wrong in WRONG for name in ("correct_einops", wrong, "correct_complex_rope", wrong, wrong))

VARIATIONS = (
    "\n\ndef _scratch(x):  # tried while debugging; never called\n    return x.sum()\n",
    "\nimport os  # noqa: F401 (left over)\n",
    "\n\n\n# end of file\n",
)


def _body(source: str) -> str:
    """The source without its module docstring (it describes the original file)."""
    text = source.lstrip()
    if text.startswith('"""'):
        end = text.index('"""', 3)
        text = text[end + 3 :].lstrip("\n")
    return text


def build_class(out: Path, size: int = 50) -> dict[str, str]:
    """Write ``size`` submissions into ``out`` (created; files already there are kept) and return
    student file name -> the submission it copies (a file name of submissions/).

    Raises:
        ValueError: ``size`` is below 1, or a file of :data:`MIX` is missing from submissions/.
    """
    if size < 1:
        raise ValueError(f"size: expected a class of at least 1 submission, found {size}")
    sources = {}
    for name in sorted(set(MIX)):
        path = SUBMISSIONS / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"{path}: expected the example submission {name}.py, found no such file")
        sources[name] = _body(path.read_text(encoding="utf-8"))
    out.mkdir(parents=True, exist_ok=True)
    made = {}
    width = max(3, len(str(size)))
    for i in range(1, size + 1):
        source = MIX[(i - 1) % len(MIX)]
        student = f"student_{i:0{width}d}.py"
        header = f'"""CS336 assignment 1, attention questions: student {i} of {size}."""\n\n'
        text = header + sources[source] + VARIATIONS[(i - 1) % len(VARIATIONS)]
        (out / student).write_text(text, encoding="utf-8")
        made[student] = f"{source}.py"
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the class folder to write")
    parser.add_argument("--size", type=int, default=50, help="how many submissions (default 50)")
    args = parser.parse_args(argv)
    try:
        made = build_class(args.out, args.size)
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for source in made.values():
        counts[source] = counts.get(source, 0) + 1
    print(f"wrote {len(made)} submissions to {args.out}: " + ", ".join(f"{n} × {s}" for s, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
