"""The gradebook of a class run: one SQLite file that survives being killed at any moment.

``attnscore grade CLASS --spec SPEC --out DIR`` keeps ``DIR/gradebook.sqlite``. Every result is
committed in its own transaction the moment it comes back (WAL journal, ``synchronous=FULL``),
together with one row in ``events`` (one row per grading), so a run killed at any point and started
again grades only what has no committed result yet: each submission ends graded exactly once.

A stored result is reused while its *submission key* (SHA-256 of the submission's files, entry
file and read problem) and its *spec key* (SHA-256 of the spec file's bytes, the spec's version,
the attnscore version and the grading options that change results) are unchanged; anything else
is graded again. A result holding a grader error is never reused (the grading machine failed, not
the student). Only one run may use a gradebook at a time (an exclusive ``flock`` on
``gradebook.sqlite.lock``, released by the kernel even when the run is killed).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attnscore.report.record import RecordError, result_from_record, result_to_record
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.submission.files import Submission

__all__ = ["Gradebook", "GradebookError", "submission_key", "spec_key", "student_name", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    spec_id TEXT NOT NULL,
    spec_key TEXT NOT NULL,
    submissions INTEGER NOT NULL,
    to_grade INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS grades (
    student TEXT PRIMARY KEY,
    submission_key TEXT NOT NULL,
    spec_key TEXT NOT NULL,
    score TEXT NOT NULL,
    max_score TEXT NOT NULL,
    duration_s REAL NOT NULL,
    graded_at TEXT NOT NULL,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    student TEXT NOT NULL,
    submission_key TEXT NOT NULL,
    spec_key TEXT NOT NULL,
    score TEXT NOT NULL,
    at TEXT NOT NULL
);
"""


class GradebookError(RuntimeError):
    """The gradebook cannot be used: locked by another run, not a gradebook, or from a newer version."""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def submission_key(submission: Submission) -> str:
    """SHA-256 (hex) of what is graded: every file's relative path and bytes, the entry file and
    any read problem. Renaming, editing, adding or removing a file changes it; touching does not."""
    digest = hashlib.sha256()
    for rel, content in sorted(submission.files):
        for part in (rel.encode("utf-8", "surrogateescape"), content):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    digest.update(json.dumps([submission.entry, submission.problem]).encode("utf-8"))
    return digest.hexdigest()


def spec_key(spec_bytes: bytes, spec_version: int, attnscore_version: str, options: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the spec file's bytes, its version, the attnscore version and the grading
    ``options`` (function, dtype, seed, limits, shrink steps: anything that changes a result)."""
    digest = hashlib.sha256(spec_bytes)
    digest.update(json.dumps([spec_version, attnscore_version, dict(options)], sort_keys=True, default=str).encode())
    return digest.hexdigest()


def student_name(submission: Submission) -> str:
    """The gradebook's name for a submission: its file or folder name (``alice.py``, ``bob``), so
    the same class graded from another working folder or by another path keeps its rows. Control
    characters, non-UTF-8 bytes and backslashes are escaped (:func:`attnscore.submission.files.printable_name`),
    so every reporter gets one printable line and distinct files keep distinct names."""
    return submission.name


# SQLite's own files beside the gradebook: it makes them with the gradebook's mode.
_COMPANIONS = ("-wal", "-shm", "-journal")


def _private_folders(folder: Path) -> None:
    """Make ``folder`` and its missing parents, each made one ``0700`` (folders that exist keep
    their mode): a worker running as another uid cannot list or read what is inside."""
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            pass


def _private_file(path: Path, create: bool) -> None:
    """Create ``path`` as ``0600`` (before SQLite opens it, so its journal files get that mode too);
    an existing one readable by others (an older attnscore made it ``0644``) loses those bits."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        return
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            os.fchmod(fd, stat.S_IMODE(mode) & 0o700)
    finally:
        os.close(fd)


class Gradebook:
    """One class's gradebook file (see the module docstring).

    The gradebook holds every case's inputs and expected values, hidden ones included: it and
    SQLite's journal files are ``0600``, and folders it creates are ``0700``, so a worker running as
    another uid cannot read them even where no Landlock or bubblewrap confines it.

    Args:
        path: the SQLite file; created with its folder when missing.

    Raises:
        GradebookError: another run holds the gradebook, or ``path`` is not an attnscore
            gradebook, or it was written by a newer schema.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            _private_folders(self.path.parent)
            lock = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise GradebookError(f"{self.path}: the gradebook cannot be created there: {exc.strerror}") from None
        self._lock = os.fdopen(lock, "r+b")  # held for the gradebook's lifetime
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise GradebookError(
                f"{self.path}: another attnscore grade run is using this gradebook; wait for it to finish"
            ) from None
        try:
            _private_file(self.path, create=True)
            for suffix in _COMPANIONS:  # left by an older run: made before the gradebook was private
                _private_file(Path(f"{self.path}{suffix}"), create=False)
        except OSError as exc:
            self.close()
            found = (
                "a symbolic link (give the folder of the real file as --out)"
                if exc.errno == errno.ELOOP
                else exc.strerror
            )
            raise GradebookError(f"{self.path}: expected a gradebook file, found: {found}") from None
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)  # transactions are explicit
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise GradebookError(
                    f"{self.path}: expected gradebook schema {SCHEMA_VERSION}, found {row[0]}; "
                    "use the attnscore version that wrote it or another --out folder"
                )
        except sqlite3.DatabaseError as exc:
            self.close()
            raise GradebookError(f"{self.path}: expected an attnscore gradebook (SQLite), found: {exc}") from None
        except GradebookError:
            self.close()
            raise

    def close(self) -> None:
        """Close the database and release the lock (safe to call twice)."""
        with contextlib.suppress(AttributeError, sqlite3.Error):
            self._db.close()
        if not self._lock.closed:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()

    def discard(self) -> None:
        """Close the gradebook and remove its file, SQLite's journal files and the lock file, the lock
        still held while they go (for a gradebook this run created and recorded nothing in)."""
        with contextlib.suppress(AttributeError, sqlite3.Error):
            self._db.close()
        for suffix in ("", *_COMPANIONS, ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        self.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_run(self, spec_id: str, spec: str, submissions: int, to_grade: int) -> int:
        """Record the start of a run; returns its id."""
        cursor = self._db.execute(
            "INSERT INTO runs (started_at, spec_id, spec_key, submissions, to_grade) VALUES (?, ?, ?, ?, ?)",
            (_now(), spec_id, spec, submissions, to_grade),
        )
        return int(cursor.lastrowid or 0)

    def outputs_key(self) -> str | None:
        """The key of the results the class's CSV and report were last written from, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'outputs'").fetchone()
        return None if row is None else str(row[0])

    def set_outputs_key(self, key: str | None) -> None:
        """Record (or, with None, forget) the key of the results the CSV and report now show."""
        if key is None:
            self._db.execute("DELETE FROM meta WHERE key = 'outputs'")
        else:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('outputs', ?)", (key,))

    def forget_run(self, run_id: int) -> bool:
        """Remove run ``run_id``'s row when nothing was recorded under it (a run that stopped on an
        error before grading anything leaves the gradebook as it found it); returns whether it went."""
        recorded = self._db.execute(
            "SELECT (SELECT COUNT(*) FROM grades WHERE run_id = ?) + (SELECT COUNT(*) FROM events WHERE run_id = ?)",
            (run_id, run_id),
        ).fetchone()[0]
        if recorded:
            return False
        self._db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        return True

    def finish_run(self, run_id: int) -> None:
        """Record that run ``run_id`` finished (a killed run keeps ``finished_at`` empty)."""
        self._db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (_now(), run_id))

    def current(self, student: str, submission: str, spec: str) -> SubmissionResult | None:
        """The stored result of ``student`` when it was graded from the same submission key and
        spec key without a grader error; else ``None`` (the submission must be graded)."""
        row = self._db.execute(
            "SELECT result FROM grades WHERE student = ? AND submission_key = ? AND spec_key = ?",
            (student, submission, spec),
        ).fetchone()
        if row is None:
            return None
        try:
            result = result_from_record(json.loads(row[0]))
        except (RecordError, ValueError):
            return None  # a damaged row is graded again
        if any(c.verdict is Verdict.GRADER_ERROR for c in result.cases):
            return None
        return result

    def record(self, run_id: int, student: str, submission: str, spec: str, result: SubmissionResult) -> None:
        """Commit ``result`` as ``student``'s grade and one grading event, in one transaction."""
        text = json.dumps(result_to_record(result), ensure_ascii=False)
        now = _now()
        with self._transaction():
            self._db.execute(
                "INSERT INTO grades (student, submission_key, spec_key, score, max_score, duration_s, graded_at,"
                " run_id, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(student) DO UPDATE SET submission_key = excluded.submission_key,"
                " spec_key = excluded.spec_key, score = excluded.score, max_score = excluded.max_score,"
                " duration_s = excluded.duration_s, graded_at = excluded.graded_at, run_id = excluded.run_id,"
                " result = excluded.result",
                (student, submission, spec, str(result.score), str(result.max_score), result.duration_s, now, run_id,
                 text),
            )  # fmt: skip
            self._db.execute(
                "INSERT INTO events (run_id, student, submission_key, spec_key, score, at) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, student, submission, spec, str(result.score), now),
            )

    @contextlib.contextmanager
    def _transaction(self) -> Any:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def events(self, student: str | None = None) -> int:
        """How many gradings were committed (for ``student``, or in all)."""
        if student is None:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM events WHERE student = ?", (student,)).fetchone()[0])

    def results(self, students: Iterable[str]) -> dict[str, SubmissionResult]:
        """The stored result of each of ``students`` that has one (whatever its keys)."""
        found: dict[str, SubmissionResult] = {}
        for student in students:
            row = self._db.execute("SELECT result FROM grades WHERE student = ?", (student,)).fetchone()
            if row is not None:
                with contextlib.suppress(RecordError, ValueError):
                    found[student] = result_from_record(json.loads(row[0]))
        return found
