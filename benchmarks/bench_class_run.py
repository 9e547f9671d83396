"""Class-run bookkeeping: what the gradebook costs per result, and what a resumed run costs.

Usage: ``.venv/bin/python benchmarks/bench_class_run.py [--students N] [--real K]``.

Part 1 (no grading): commits ``N`` results of the bundled spec's size to a fresh gradebook, one
transaction each (WAL, synchronous=FULL, plus the feedback file), then looks all of them up as a
rerun of an unchanged class does, and writes the CSV and the class report; each is compared with
the baseline of the same run, grading's own cost per submission (measured in part 2).

Part 2 (real grading): a class of ``K`` example submissions graded with ``attnscore grade --out``
three times in the same run: the full run; a run after the first half of the gradebook rows
survived (as after a kill halfway); an unchanged rerun. Prints seconds and submissions/s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attnscore.atomic import write_atomic
from attnscore.grade.class_run import feedback_name, feedback_text
from attnscore.grade.gradebook import Gradebook
from attnscore.report.class_html import class_report_html
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv

ROOT = Path(__file__).resolve().parents[1]
SCORES = ROOT / "examples" / "submissions" / "scores"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
EXAMPLES = ["correct_matmul.py", "cosine_similarity.py", "softmax_applied.py", "correct_loops.py"]


def _grade(klass: Path, out: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "attnscore"), "grade", str(klass), "--spec", str(SPEC), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    line = next((x for x in proc.stderr.splitlines() if x.startswith("class run:")), proc.stderr[-300:])
    return time.perf_counter() - start, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500, help="synthetic results to commit (part 1)")
    parser.add_argument("--real", type=int, default=8, help="submissions to really grade (part 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        klass, out = Path(tmp) / "class", Path(tmp) / "out"
        klass.mkdir()
        for i in range(args.real):
            shutil.copy(SCORES / EXAMPLES[i % len(EXAMPLES)], klass / f"s{i:03d}.py")
        full, line = _grade(klass, out)
        print(f"part 2, {args.real} submissions: full run {full:.1f} s ({args.real / full:.2f}/s)  [{line}]")
        per_submission = full / args.real
        db = sqlite3.connect(out / "gradebook.sqlite")
        sample = result_from_record(json.loads(db.execute("SELECT result FROM grades").fetchone()[0]))
        db.execute("DELETE FROM grades WHERE student >= ?", (f"s{args.real // 2:03d}.py",))
        db.commit()
        db.close()
        resumed, line = _grade(klass, out)
        print(f"  resumed after half survived: {resumed:.1f} s ({resumed / full:.2f} of the full run)  [{line}]")
        unchanged, line = _grade(klass, out)
        print(f"  unchanged rerun: {unchanged:.1f} s ({unchanged / full:.2f} of the full run)  [{line}]")

        book_dir = Path(tmp) / "book"
        rows = [(f"student{i:04d}.py", sample) for i in range(args.students)]
        with Gradebook(book_dir / "gradebook.sqlite") as book:
            run = book.start_run(sample.spec_id, "S", len(rows), len(rows))
            start = time.perf_counter()
            for name, result in rows:
                book.record(run, name, name, "S", result)
            commit = (time.perf_counter() - start) / len(rows)
            start = time.perf_counter()
            for name, result in rows:
                write_atomic(book_dir / "feedback" / feedback_name(name), feedback_text(result).encode())
            feedback = (time.perf_counter() - start) / len(rows)
            start = time.perf_counter()
            assert all(book.current(name, name, "S") is not None for name, _ in rows)
            lookup = time.perf_counter() - start
        start = time.perf_counter()
        write_atomic(book_dir / "grades.csv", grades_csv(rows).encode(CSV_ENCODING))
        csv_s = time.perf_counter() - start
        start = time.perf_counter()
        write_atomic(book_dir / "report.html", class_report_html(rows, "bench").encode())
        html_s = time.perf_counter() - start
        size = len(str(result_to_record(sample)))
        print(f"part 1, {args.students} results ({size} chars of record each):")
        print(
            f"  commit {commit * 1000:.2f} ms/result + feedback file {feedback * 1000:.2f} ms "
            f"= {100 * (commit + feedback) / per_submission:.2f}% of grading's {per_submission:.2f} s/submission"
        )
        print(f"  lookup of all {args.students} (an unchanged rerun): {lookup:.2f} s")
        print(f"  grades.csv {csv_s:.2f} s, report.html {html_s:.2f} s for {args.students} students")


if __name__ == "__main__":
    main()
