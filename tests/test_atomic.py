"""One atomic writer for every output: complete or absent, 0666 less the umask."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.atomic import write_atomic
from attnscore.cli import main


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_written_file_has_the_usual_mode_and_no_temporary_is_left(tmp_path):
    target = tmp_path / "deep" / "report.json"
    write_atomic(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_bytes(b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_practice_files_and_grade_reports_get_the_same_mode(tmp_path):
    out = tmp_path / "practice"
    result = CliRunner().invoke(main, ["practice", "--count", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and {p.stat().st_mode & 0o777 for p in files} == {0o666 & ~_umask()}
    assert not [p for p in out.rglob(".*.tmp")]
    assert Path(out).is_dir()


@pytest.mark.parametrize("name", ["a" * 251 + ".txt", "é" * 123 + ".txt", "x" * 255])
def test_a_target_name_as_long_as_the_file_system_allows_is_written(tmp_path, name):
    """A 255-byte target name (NAME_MAX) is written: the temporary name is short and bounded."""
    target = tmp_path / name
    assert len(name.encode("utf-8")) <= 255
    write_atomic(target, b"data")
    write_atomic(target, b"again")
    assert target.read_bytes() == b"again"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_temporary_name_is_at_most_50_bytes(tmp_path, monkeypatch):
    """The temporary file's name stays short for long names in any script."""
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append(Path(src).name)
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    for name in ("a" * 250, "日本" * 42, "short"):
        write_atomic(tmp_path / name, b"x")
    assert len(seen) == 3
    assert all(len(n.encode("utf-8")) <= 50 and n.startswith(".") and n.endswith(".tmp") for n in seen)
    assert seen[2].startswith(".short.")
