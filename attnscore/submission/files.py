"""Submissions: finding the files to grade and reading them, before anything runs.

A submission is one ``.py`` file, one Jupyter notebook (``.ipynb``, converted to the Python source
of its definitions by :mod:`attnscore.submission.notebook` here, before anything runs), or one folder
of files (a student's upload as Gradescope and PrairieLearn hand it over: an entry file and the
helper modules it imports). Every file is read into memory here, before any submission of the
batch runs, so one submission cannot rewrite another on disk before it is graded. Files are never
imported or executed in the grading process.

How paths on the command line become submissions (see the README's "Batches" section):

- ``alice.py`` or ``alice.ipynb``: one single-file submission (a notebook is graded as the file
  ``alice.py`` holding its definitions).
- ``alice.zip``: one folder submission made of the zip's files (read in memory, never unpacked).
- a folder that holds the entry file named by ``--entry``: one folder submission.
- any other folder: a class. Each ``*.py``, ``*.ipynb`` or ``*.zip`` file directly in it is one
  student's submission and each subfolder is one student's folder submission (entry: ``--entry``, else chosen in the
  sandbox as the one top-level ``.py`` file that defines the graded function).
- with ``one=True`` (``--format gradescope``, which grades exactly one student), a folder is
  always one folder submission.

An upload (a folder submission or a zip) whose top level holds nothing to grade is read one level
down, as students upload: from a lone ``.zip`` file at its top, then from its one top folder
(``hw3/solution.py``); ``__MACOSX``, hidden files and ``__pycache__`` are never read. Where that
cannot tell what is meant (code only two folders down, several folders or zips holding code) the
upload is refused with one message (:func:`_one_level_down`).

In a folder submission, each top-level notebook ``name.ipynb`` is graded as ``name.py`` (unless the
folder also holds a ``name.py``, which then wins). A notebook that cannot be converted (invalid
JSON, not nbformat 4, a cell with a syntax error) is not a usage error: the submission is graded
with every case failing with a message naming the cell (:attr:`Submission.problem`).
"""

from __future__ import annotations

import io
import os
import re
import stat
import unicodedata
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = [
    "SubmissionError",
    "Submission",
    "MAX_SUBMISSION_BYTES",
    "MAX_FOLDER_FILES",
    "MAX_FOLDER_BYTES",
    "find_submissions",
    "printable_name",
]

MAX_SUBMISSION_BYTES = 1024 * 1024
"""Largest ``.py`` file accepted, in bytes."""
MAX_FOLDER_FILES = 200
"""Most files read from one folder submission (hidden files and ``__pycache__`` are not read)."""
MAX_FOLDER_BYTES = 16 * 1024 * 1024
"""Most bytes read from one folder submission, all files together."""
_MAX_DEPTH = 8


_PLAIN_ASCII = re.compile(r"[ -\[\]-~]*")  # printable ASCII but the backslash
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, format, surrogates, line breaks


def _escape(char: str) -> str:
    code = ord(char)
    if char == "\\":
        return "\\\\"
    if code < 0x80:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode gives it
        return f"\\x{code - 0xDC00:02x}"
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable_name(raw: str) -> str:
    """A submission's path or name as one printable line, the same way for every reporter.

    File names are untrusted text: a newline in one would forge a row of a text table, a bidi
    override would reorder it, and bytes that are not UTF-8 (``os.fsdecode`` gives them as lone
    surrogates) cannot be stored or written. Each such character is escaped, Python-style:
    control characters (C0, DEL) and non-UTF-8 bytes as ``\\xNN``, the other characters of
    Unicode categories Cc, Cf, Cs, Zl and Zp (C1 controls, invisible and direction-changing
    format characters, line and paragraph separators) as ``\\uNNNN``, and a backslash as ``\\\\``, so
    the mapping is injective (two different names never print the same). Anything else, including
    ``$``, ``<`` or ``=`` (each reporter escapes for its own format), is kept.

    Example:
        >>> printable_name("ada.py"), printable_name("a\\nb.py"), printable_name("a\\\\nb.py")
        ('ada.py', 'a\\\\x0ab.py', 'a\\\\\\\\nb.py')
    """
    if _PLAIN_ASCII.fullmatch(raw):
        return raw
    return "".join(_escape(c) if c == "\\" or ord(c) < 0x20 or ord(c) >= 0x7F else c for c in raw)


class SubmissionError(ValueError):
    """A submission path cannot be graded (missing, not a .py file, too large...)."""


@dataclass(frozen=True)
class Submission:
    """One submission, read into memory.

    Attributes:
        path: where it was found (a ``.py`` file or a folder), as given.
        files: ``(relative POSIX path, content)`` of every file to lay out in the sandbox.
        entry: relative path of the file that defines the graded function; ``None`` lets the
            sandboxed worker pick the one top-level ``.py`` file that defines it.
        problem: why a student's submission in a class could not be taken in (too many files,
            a file too large or unreadable), in the student's terms; it is then graded as
            missing, and the rest of the class is graded as usual.
        notes: what the student should know about how it was read, one line each: a notebook's
            cells that were skipped (a syntax error) and the names its functions use that the
            conversion left out, with the cell and statement that set them
            (:attr:`attnscore.submission.notebook.Notebook.notes`). Grading shows them with the
            result when some case did not pass.
    """

    path: Path
    files: tuple[tuple[str, bytes], ...]
    entry: str | None
    problem: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """What reports call it, as one printable line (:func:`printable_name`): the file or folder's
        own name (``ada.py``, ``bob``, ``hw3.zip``), which is its path relative to the class folder
        for a member of a class, and never a path of the grading machine (``/autograder/submission``
        is ``submission``, ``/grade/student`` is ``student``). The same name a class run's gradebook
        keys it by (:func:`attnscore.grade.gradebook.student_name`)."""
        return printable_name(self.path.name or self.path.absolute().name or str(self.path))

    @classmethod
    def from_file(cls, path: Path, source: bytes | None = None) -> Submission:
        """A single-file submission (``source``: its bytes, default read now); a notebook is
        converted to ``<stem>.py`` (a notebook that cannot be converted sets :attr:`problem`)."""
        content = _check_file(path).read_bytes() if source is None else source
        if path.suffix == NOTEBOOK_SUFFIX:
            return _notebook_submission(path, content)
        if path.suffix.lower() == ZIP_SUFFIX:
            return _zip_submission(path, content, None, strict=True)
        return cls(path, ((path.name, content),), path.name)


NOTEBOOK_SUFFIX = ".ipynb"
ZIP_SUFFIX = ".zip"


def _convert(name: str, content: bytes) -> tuple[bytes, tuple[str, ...]]:
    """A notebook's definitions as Python source, and its notes for the student, each naming the
    notebook (heavy import: IPython, only for notebooks)."""
    from attnscore.submission.notebook import convert_notebook

    converted = convert_notebook(content, name)
    return converted.source.encode("utf-8"), tuple(f"your notebook {name}: {n}" for n in converted.notes)


def _notebook_problem(name: str, exc: Exception) -> str:
    return f"your notebook {name} could not be read: {exc}"


def _unexpected(exc: BaseException) -> Exception:
    """A reader's failure that :func:`attnscore.submission.notebook.convert_notebook` did not name, as one line."""
    try:
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    except Exception:  # noqa: BLE001 - an exception whose text cannot be shown
        text = ""
    return ValueError(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _notebook_submission(path: Path, content: bytes) -> Submission:
    from attnscore.submission.notebook import NotebookError

    entry = path.stem + ".py"
    try:
        source, notes = _convert(path.name, content)
        return Submission(path, ((entry, source),), entry, notes=notes)
    except NotebookError as exc:
        return Submission(path, (), entry, problem=_notebook_problem(path.name, exc))
    except Exception as exc:  # noqa: BLE001 - never the class's failure: convert_notebook should say NotebookError
        return Submission(path, (), entry, problem=_notebook_problem(path.name, _unexpected(exc)))


def _with_notebooks(
    files: list[tuple[str, bytes]], notes: list[str] | None = None
) -> tuple[list[tuple[str, bytes]], str | None]:
    """``files`` with each top-level notebook replaced by its converted ``<stem>.py`` (an existing
    ``<stem>.py`` wins), and the first conversion problem, if any; the conversions' notes are
    appended to ``notes``."""
    from attnscore.submission.notebook import NotebookError

    names = {rel for rel, _ in files}
    out: list[tuple[str, bytes]] = []
    problem = None
    for rel, content in files:
        if "/" in rel or not rel.endswith(NOTEBOOK_SUFFIX):
            out.append((rel, content))
            continue
        target = rel[: -len(NOTEBOOK_SUFFIX)] + ".py"
        if target in names:
            continue
        try:
            source, found = _convert(rel, content)
            out.append((target, source))
            if notes is not None:
                notes += found
        except NotebookError as exc:
            problem = problem or _notebook_problem(rel, exc)
        except Exception as exc:  # noqa: BLE001 - never the class's failure
            problem = problem or _notebook_problem(rel, _unexpected(exc))
    return out, problem


def _check_file(path: Path) -> Path:
    if not path.exists():
        raise SubmissionError(f"{path}: no such file")
    if not path.is_file():
        raise SubmissionError(
            f"{path}: expected a .py file, found {'a directory' if path.is_dir() else 'a special file'}"
        )
    if path.suffix not in (".py", NOTEBOOK_SUFFIX) and path.suffix.lower() != ZIP_SUFFIX:
        raise SubmissionError(
            f"{path}: expected a Python file ending in .py or a notebook ending in .ipynb, "
            f"found {path.suffix or 'no suffix'!r} (a .zip of them is read too)"
        )
    size = path.stat().st_size
    limit = MAX_SUBMISSION_BYTES if path.suffix == ".py" else MAX_FOLDER_BYTES
    if size > limit:
        raise SubmissionError(f"{path}: expected at most {limit} bytes, found {size}")
    return path


def _read_no_follow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FOLDER_BYTES + 1)
    finally:
        os.close(fd)


_JUNK_FOLDERS = frozenset({"__MACOSX", "__pycache__"})
"""Folders never read: the resource forks macOS's archiver adds to a zip, and Python's caches."""
_JUNK_FILES = frozenset({"Thumbs.db", "desktop.ini"})
"""Files never read (with every hidden file, such as ``.DS_Store``): the desktop's own notes."""
_CODE_SUFFIXES = (".py", NOTEBOOK_SUFFIX)


def _read_folder(folder: Path, entry: str | None, strict: bool = True, outputs: tuple[Path, ...] = ()) -> Submission:
    """Every regular file under ``folder`` (no symbolic links followed; hidden files, ``__MACOSX``
    and ``__pycache__`` skipped), laid out as :func:`_assemble` says.

    ``strict``: a folder named on the command line must hold a ``.py`` file and the entry file; a
    student's folder inside a class need not (the sandbox then tells that student).
    """
    files: list[tuple[str, bytes]] = []
    total = 0
    for current, dirs, names in os.walk(folder, followlinks=False):
        relative = Path(current).relative_to(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _JUNK_FOLDERS and not _is_output(Path(current, d), outputs)
        )
        if len(relative.parts) >= _MAX_DEPTH:
            dirs[:] = []
        for name in sorted(names):
            full = Path(current, name)
            if (
                name.startswith(".")
                or name in _JUNK_FILES
                or not stat.S_ISREG(os.lstat(full).st_mode)
                or _is_output(full, outputs)
            ):
                continue  # symbolic links, sockets, fifos... are not part of a submission
            if len(files) >= MAX_FOLDER_FILES:
                raise SubmissionError(f"{folder}: expected at most {MAX_FOLDER_FILES} files, found more")
            content = _read_no_follow(full)
            if name.endswith(".py") and len(content) > MAX_SUBMISSION_BYTES:
                raise SubmissionError(f"{full}: expected at most {MAX_SUBMISSION_BYTES} bytes, found {len(content)}")
            total += len(content)
            if total > MAX_FOLDER_BYTES:
                raise SubmissionError(f"{folder}: expected at most {MAX_FOLDER_BYTES} bytes in all, found more")
            files.append((PurePosixPath(*relative.parts, name).as_posix(), content))
    return _assemble(folder, files, entry, strict)


def _read_zip(where: Path, content: bytes) -> list[tuple[str, bytes]]:
    """The regular files of a zip archive, read into memory with the limits of a folder.

    Directories, symbolic links, hidden files, ``__MACOSX`` and ``__pycache__`` are skipped, as in
    a folder; members are read with a bound, whatever sizes the archive claims (a zip bomb stops
    at the limit).

    Raises:
        SubmissionError: not a zip archive, a damaged or encrypted member, a member path that
            leaves the archive (absolute, ``..``), two members of the same name, or more files or
            bytes than :data:`MAX_FOLDER_FILES` / :data:`MAX_FOLDER_BYTES`.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise SubmissionError(f"{where}: expected a zip archive, found a file that is not one ({exc})") from None
    files: dict[str, bytes] = {}
    total = 0
    with archive:
        for info in archive.infolist():
            shown = printable_name(info.filename)
            name = info.filename.replace("\\", "/")  # some Windows archivers write backslashes
            parts = PurePosixPath(name).parts
            if info.is_dir() or not parts:
                continue
            if name.startswith("/") or ".." in parts or ":" in parts[0] or "\x00" in name:
                raise SubmissionError(f"{where}: expected relative paths inside the zip, found {shown!r}")
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG) or any(
                p.startswith(".") or p in _JUNK_FOLDERS for p in parts
            ):
                continue  # links and special files are not part of a submission; nor is junk
            if parts[-1] in _JUNK_FILES or len(parts) > _MAX_DEPTH + 1:
                continue
            if info.flag_bits & 0x1:
                raise SubmissionError(f"{where}: {shown} is encrypted: make the zip without a password")
            rel = PurePosixPath(*parts).as_posix()
            if rel in files:
                raise SubmissionError(f"{where}: the zip holds two files named {printable_name(rel)!r}")
            if len(files) >= MAX_FOLDER_FILES:
                raise SubmissionError(f"{where}: expected at most {MAX_FOLDER_FILES} files, found more")
            limit = MAX_SUBMISSION_BYTES if rel.endswith(".py") else MAX_FOLDER_BYTES
            try:
                with archive.open(info) as member:
                    data = member.read(min(limit, MAX_FOLDER_BYTES - total) + 1)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
                raise SubmissionError(f"{where}: {shown} could not be read from the zip ({exc})") from None
            if len(data) > limit:
                raise SubmissionError(f"{where}: {shown}: expected at most {limit} bytes, found more")
            total += len(data)
            if total > MAX_FOLDER_BYTES:
                raise SubmissionError(f"{where}: expected at most {MAX_FOLDER_BYTES} bytes in all, found more")
            files[rel] = data
    return sorted(files.items())


def _has_code(files: list[tuple[str, bytes]], entry: str | None) -> bool:
    """Whether ``files`` hold what grading starts from: the entry file (or its notebook), else a
    top-level ``.py`` or ``.ipynb`` file."""
    names = {rel for rel, _ in files}
    if entry is not None:
        return entry in names or entry[: -len(".py")] + NOTEBOOK_SUFFIX in names
    return any("/" not in rel and rel.endswith(_CODE_SUFFIXES) for rel in names)


def _one_level_down(where: Path, files: list[tuple[str, bytes]], entry: str | None) -> list[tuple[str, bytes]]:
    """``files`` as a student meant them: an upload whose top level holds nothing to grade is read
    from inside a lone ``.zip`` file at its top, and then from its one top folder (``hw3/solution.py``,
    the folder a zip was made of). Files outside that folder are left out.

    Raises:
        SubmissionError: several zips, or several folders, hold something to grade (which one is
            meant cannot be guessed), or code lies only two or more folders down.
    """
    if _has_code(files, entry):
        return files
    zips = [rel for rel, _ in files if "/" not in rel and rel.lower().endswith(ZIP_SUFFIX)]
    if len(zips) > 1:
        raise SubmissionError(
            f"{where}: expected one zip file, found {len(zips)} ({', '.join(map(printable_name, zips))})"
        )
    if zips:
        files = _read_zip(where / zips[0], dict(files)[zips[0]])
        if _has_code(files, entry):
            return files
    folders: dict[str, list[tuple[str, bytes]]] = {}
    for rel, content in files:
        top, _, rest = rel.partition("/")
        if rest:
            folders.setdefault(top, []).append((rest, content))
    holding = sorted(top for top, inside in folders.items() if _has_code(inside, entry))
    if len(holding) == 1:
        return folders[holding[0]]
    wanted = repr(entry) if entry is not None else "a .py or .ipynb file"
    if holding:
        listed = ", ".join(printable_name(f + "/") for f in holding)
        raise SubmissionError(
            f"{where}: expected {wanted} at the top of the upload or in one folder, found several folders "
            f"that hold one ({listed}): upload only the folder that is graded"
        )
    deep = [rel for rel, _ in files if rel.count("/") >= 2 and rel.endswith(_CODE_SUFFIXES)]
    if entry is None and deep:
        raise SubmissionError(
            f"{where}: expected a .py or .ipynb file at the top of the upload or in its one folder, found them "
            f"only further down ({printable_name(deep[0])}): upload the files themselves, or a zip of the folder "
            "that holds them"
        )
    return files


def _assemble(where: Path, files: list[tuple[str, bytes]], entry: str | None, strict: bool) -> Submission:
    """A submission from the files of an upload (a folder, or a zip): one level down when its top
    holds nothing to grade (:func:`_one_level_down`), then each top-level notebook converted."""
    files = _one_level_down(where, files, entry)
    notes: list[str] = []
    files, problem = _with_notebooks(files, notes)
    if problem is not None:
        return Submission(where, tuple(files), entry, problem=problem)
    if not strict:
        return Submission(where, tuple(files), entry, notes=tuple(notes))
    if not any(rel.endswith(".py") and "/" not in rel for rel, _ in files):
        raise SubmissionError(
            f"{where}: expected a .py or .ipynb file directly in this folder, found none "
            "(nor in one folder or zip file inside it)"
        )
    if entry is not None and entry not in dict(files):
        found = ", ".join(rel for rel, _ in files if rel.endswith(".py")) or "no .py file"
        raise SubmissionError(f"{where}: expected the entry file {entry!r} in this folder, found {found}")
    return Submission(where, tuple(files), entry, notes=tuple(notes))


def _zip_submission(path: Path, content: bytes, entry: str | None, strict: bool) -> Submission:
    """A zip file given as one submission: its files, as a folder's."""
    return _assemble(path, _read_zip(path, content), entry, strict)


def _check_entry(entry: str | None) -> str | None:
    if entry is None:
        return None
    pure = PurePosixPath(entry)
    if pure.is_absolute() or ".." in pure.parts or pure.suffix not in (".py", NOTEBOOK_SUFFIX) or not pure.parts:
        raise SubmissionError(
            f"--entry {entry!r}: expected a relative path to a .py or .ipynb file inside the submission folder, "
            "e.g. solution.py"
        )
    return pure.with_suffix(".py").as_posix()  # a notebook entry is graded as its converted .py


def _member(path: Path, entry: str | None, outputs: tuple[Path, ...] = ()) -> Submission:
    """One student's file or folder in a class: what cannot be read becomes that student's problem."""
    try:
        if path.is_dir():
            return _read_folder(path, entry, strict=False, outputs=outputs)
        content = _read_no_follow(path)
        limit = MAX_SUBMISSION_BYTES if path.suffix == ".py" else MAX_FOLDER_BYTES
        if len(content) > limit:
            raise SubmissionError(f"{path}: expected at most {limit} bytes, found {len(content)}")
        if path.suffix == NOTEBOOK_SUFFIX:
            return _notebook_submission(path, content)
        if path.suffix.lower() == ZIP_SUFFIX:
            return _zip_submission(path, content, entry, strict=False)
        return Submission(path, ((path.name, content),), path.name)
    except (SubmissionError, OSError) as exc:
        text = str(exc) if isinstance(exc, SubmissionError) else f"{exc.strerror or exc}"
        for prefix in (f"{path}/", f"{path}: ", f"{path}"):
            text = text.replace(prefix, "")
        return Submission(path, (), entry, problem=f"your submission could not be read: {text}")


_OUTPUT_MARKERS = ("gradebook.sqlite", "gradebook.sqlite.lock")  # attnscore.grade.class_run's own outputs


def _is_output(path: Path, exclude: tuple[Path, ...]) -> bool:
    """Whether ``path`` (in a class folder) is one of attnscore's outputs: a path in ``exclude``
    or below one, or a class run's output folder (it holds a gradebook)."""
    try:
        resolved = path.resolve()
        if any(resolved == e or e in resolved.parents for e in exclude):
            return True
        return path.is_dir() and any((path / marker).exists() for marker in _OUTPUT_MARKERS)
    except (OSError, RuntimeError):  # a symbolic link loop: not ours
        return False


def find_submissions(
    paths: list[str], entry: str | None = None, one: bool = False, exclude: Sequence[str | Path] | None = None
) -> list[Submission]:
    """Expand ``paths`` into submissions (sorted by name within a folder) and read every file.

    Args:
        paths: files and folders, as given on the command line.
        entry: the entry file of folder submissions (a relative path such as ``solution.py``).
        one: every folder is one submission (a single student's upload).
        exclude: attnscore's own outputs (``--out`` folder, ``--output`` file): a class folder's
            member that is one of them is not a submission, and no folder submission takes in
            their files. A folder that holds a class run's gradebook (``gradebook.sqlite``) is
            never a submission or part of one either.

    Raises:
        SubmissionError: a path is missing, not a .py file or folder, too large, a folder holds
            nothing to grade, or ``entry`` is not a relative ``.py`` path.
    """
    entry = _check_entry(entry)
    outputs: tuple[Path, ...] = ()
    for raw_output in exclude or ():
        try:
            outputs += (Path(raw_output).resolve(),)
        except OSError:
            continue
    found: list[Submission] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir() and path.suffix.lower() == ZIP_SUFFIX:
            found.append(_zip_submission(path, _check_file(path).read_bytes(), entry, strict=True))
        elif not path.is_dir():
            found.append(Submission.from_file(path))
        elif one or (entry is not None and any((path / entry).with_suffix(x).is_file() for x in (".py", ".ipynb"))):
            found.append(_read_folder(path, entry, outputs=outputs))
        else:
            children = sorted(
                p
                for p in path.iterdir()
                if not p.name.startswith(".")
                and p.name not in _JUNK_FOLDERS
                and not p.is_symlink()
                and not _is_output(p, outputs)
            )
            members = [
                _member(p, entry, outputs)
                for p in children
                if (p.suffix in _CODE_SUFFIXES or p.suffix.lower() == ZIP_SUFFIX) and p.is_file() or p.is_dir()
            ]
            if not members:
                raise SubmissionError(
                    f"{path}: expected .py or .ipynb files or one folder per student in this directory, found none "
                    "(or one .zip file per student)"
                )
            found += sorted(members, key=lambda s: s.path.name)
    return found
