"""An instructor's reference file may import a helper module beside it (`from my_helpers import f`):
its folder is on the import path while it loads, the helper becomes one of the spec's reference
files (cache key, export bundle), and nothing leaks into another spec's load."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from attnscore.export.assignment_files import spec_reference_layout
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
BODY = "    shifted = x - x.amax(dim=dim, keepdim=True)\n"


def _course(folder: Path, helper: str, broken: bool = False) -> Path:
    """The example spec whose reference file only imports softmax (and its registrations) from ``helper``."""
    folder.mkdir(parents=True)
    for name in ("softmax_own_reference.yaml", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    text = (EXAMPLES / "softmax_reference.py").read_text(encoding="utf-8")
    assert BODY in text
    if broken:  # the helper's softmax returns its input: the worked examples catch it
        text = text.replace(BODY, "    return x\n" + BODY)
    (folder / f"{helper}.py").write_text(text, encoding="utf-8")
    (folder / "softmax_reference.py").write_text(f"from {helper} import softmax  # noqa: F401\n", encoding="utf-8")
    return folder / "softmax_own_reference.yaml"


def test_a_helper_beside_the_reference_loads_and_travels(tmp_path: Path) -> None:
    """The spec loads with the helper's function and registrations; the helper is a reference file."""
    spec = load_spec(_course(tmp_path / "a", "course_helpers_a"))
    folder = str((tmp_path / "a").resolve())
    assert spec.reference_files == (
        f"{folder}/softmax_reference.py",
        f"{folder}/course_helpers_a.py",
        f"{folder}/softmax_check.py",
    )
    assert "course_helpers_a" not in sys.modules and folder not in sys.path
    layout = [name for name, _ in spec_reference_layout(spec)]
    assert layout == ["softmax_reference.py", "course_helpers_a.py", "softmax_check.py"]


def test_another_specs_helper_of_the_same_name_is_its_own(tmp_path: Path) -> None:
    """Two folders each with my_helpers.py: the second spec gets its own (broken) helper, not the first's."""
    good = load_spec(_course(tmp_path / "good", "my_helpers"))
    assert good.id == "softmax_own_reference"
    with pytest.raises(SpecError) as info:
        load_spec(_course(tmp_path / "bad", "my_helpers", broken=True))
    assert any(p.field.startswith("worked_examples[") for p in info.value.problems), info.value.problems
    assert "my_helpers" not in sys.modules


def test_a_missing_helper_is_one_located_problem(tmp_path: Path) -> None:
    """`from nowhere_helpers import f` with no such file: the import's own error, at function.reference."""
    path = _course(tmp_path / "c", "course_helpers_c")
    (tmp_path / "c" / "softmax_reference.py").write_text("from nowhere_helpers import softmax\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert problem.field == "function.reference"
    assert problem.message == (
        "expected a reference file that imports, found that it raised ModuleNotFoundError: No module named "
        "'nowhere_helpers' (softmax_reference.py line 1)"
    )


def test_a_package_below_the_folder_on_its_own_path_stays_imported(tmp_path: Path, monkeypatch) -> None:
    """A virtual environment kept in the course's folder: a package the reference imports first from
    there (reached through the environment's own import path, not the reference's folder) is not a
    helper and stays imported, so that the next import finds the same module (for torch, importing it
    a second time crashes); a helper beside the reference is still forgotten."""
    site = tmp_path / "course" / ".venv" / "lib" / "site-packages"
    (site / "venv_package_below").mkdir(parents=True)
    (site / "venv_package_below" / "__init__.py").write_text("VALUE = 7\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    spec_path = _course(tmp_path / "course" / "specs", "course_helpers_venv")
    reference = spec_path.parent / "softmax_reference.py"
    reference.write_text(
        "import venv_package_below  # noqa: F401\n" + reference.read_text(encoding="utf-8"), encoding="utf-8"
    )
    shutil.move(str(spec_path.parent), str(tmp_path / "course" / "specs_moved"))  # the folder holds the venv
    for name in ("softmax_own_reference.yaml", "softmax_reference.py", "softmax_check.py", "course_helpers_venv.py"):
        shutil.move(str(tmp_path / "course" / "specs_moved" / name), str(tmp_path / "course" / name))
    try:
        spec = load_spec(tmp_path / "course" / "softmax_own_reference.yaml")
        assert "venv_package_below" in sys.modules  # kept: found through its own path entry
        assert "course_helpers_venv" not in sys.modules  # the helper beside the reference: forgotten
        assert str((tmp_path / "course" / "course_helpers_venv.py").resolve()) in spec.reference_files
        assert not any("venv_package_below" in f for f in spec.reference_files)
    finally:
        sys.modules.pop("venv_package_below", None)
