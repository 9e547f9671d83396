"""Whole pytest runs of attnscore's plugin (attnscore.pytest_plugin), for tests/test_pytest_plugin*.py.

A run inside this process (:func:`run_in_process`) is ``pytest.main`` with the plugin given by
``-p``, as pytest's own ``pytester`` runs one: the same plugin code, command line, collection,
items, reports and exit code as an engineer's ``pytest`` in a terminal, without starting a Python,
importing torch and rewriting the assertions of attnscore's modules (seconds each on a busy
machine) for every run. A run in a subprocess (:func:`run_subprocess`) loads the plugin the
engineer's way, through its ``pytest11`` entry point; the tests that prove the entry point and the
runs that pytest-xdist spreads over processes use it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    """What a pytest run gave: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def run_in_process(folder: Path, *args: str, cwd: Path | None = None) -> Run:
    """``pytest -p attnscore.pytest_plugin ARGS`` run inside this process, started in ``cwd``
    (default ``folder``), with the repository (``examples.impl``) and ``folder`` (an engineer's
    own kernel files) importable, as ``PYTHONPATH`` makes them for :func:`run_subprocess`.

    The working folder, ``sys.path`` and ``sys.argv`` are put back afterwards. A module of a name
    that ``folder`` holds (``kernel`` for its ``kernel.py``), or imported from it, is forgotten
    before the run and after it (:func:`_forget`): the run imports ``folder``'s own file, not one
    of the same name that an earlier test in this process imported from elsewhere (``attnscore
    test --impl kernel:...`` run in process), and the next run imports its own; attnscore's
    modules stay imported, as in any process.
    """
    where, path, argv = os.getcwd(), list(sys.path), list(sys.argv)
    out, err = io.StringIO(), io.StringIO()
    sys.path[:0] = [str(ROOT), str(folder)]
    importlib.invalidate_caches()
    os.chdir(cwd or folder)
    _forget(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = pytest.main(["--disable-plugin-autoload", "-p", "attnscore.pytest_plugin", *args])
    finally:
        os.chdir(where)
        sys.path[:], sys.argv[:] = path, argv
        _forget(folder)
    return Run(int(code), out.getvalue(), err.getvalue())


def _forget(folder: Path) -> None:
    """Drop from ``sys.modules`` every module named like a top-level module or package of
    ``folder`` (and their submodules), wherever it came from, and every module imported from it."""
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    root = folder.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.split(".", 1)[0] in names or (file and Path(file).resolve().is_relative_to(root)):
            del sys.modules[name]


def run_subprocess(folder: Path, *args: str, cwd: Path | None = None) -> Run:
    """``python -m pytest ARGS`` in a new process started in ``cwd`` (default ``folder``), the
    plugin loaded through its entry point, with the repository and ``folder`` on ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{folder}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd or folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    return Run(done.returncode, done.stdout, done.stderr)
