"""tests/plugin_runs.py: a pytest run inside the test's process imports the run's own files."""

from __future__ import annotations

import sys

from tests.plugin_runs import run_in_process

TEST = "import kernel\n\ndef test_the_runs_own_kernel():\n    assert kernel.WHICH == 'the run'\n"


def test_a_module_of_the_same_name_imported_earlier_is_not_the_runs(tmp_path, monkeypatch):
    """An earlier test imported its own kernel.py (``attnscore test --impl kernel:...`` in process):
    the run still imports the kernel.py of its folder, and leaves neither behind."""
    earlier, folder = tmp_path / "earlier", tmp_path / "run"
    earlier.mkdir()
    folder.mkdir()
    (earlier / "kernel.py").write_text("WHICH = 'an earlier test'\n", encoding="utf-8")
    (folder / "kernel.py").write_text("WHICH = 'the run'\n", encoding="utf-8")
    (folder / "test_which.py").write_text(TEST, encoding="utf-8")
    monkeypatch.syspath_prepend(str(earlier))
    monkeypatch.delitem(sys.modules, "kernel", raising=False)
    import kernel  # type: ignore[import-not-found]

    assert kernel.WHICH == "an earlier test"
    run = run_in_process(folder, "-q", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "kernel" not in sys.modules and "test_which" not in sys.modules
