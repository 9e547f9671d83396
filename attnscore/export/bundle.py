"""What every deployable grader carries: pinned requirements, an installable copy of attnscore,
and the grader files.

The grader files (``setup.sh``, ``run_autograder``; PrairieLearn's ``Dockerfile``, ``grade.py``,
``question.html``) are package data under ``attnscore/export/graders/`` (in a source checkout a
link to the top-level ``graders/`` folder), so exporting works the same from a checkout, an
editable install and an installed wheel. The copy of attnscore (:func:`source_files`) is made from
the installed package and its distribution's metadata, not from a checkout.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

__all__ = [
    "ExportError",
    "graders_dir",
    "pinned_requirements",
    "source_files",
    "source_pyproject",
    "TORCH_CPU_INDEX",
    "COPY_BUILD_REQUIRES",
    "check_output_folder",
]

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""Where pip finds CPU builds of torch (course platforms have no GPU); a requirements option."""

COPY_BUILD_REQUIRES = ("setuptools>=77.0.3", "packaging>=24.2")
"""What building the copy needs: setuptools with PEP 639 licence metadata, and the packaging
release it reads SPDX expressions with (the same as pyproject.toml's ``build-system``)."""

_PACKAGE = Path(__file__).resolve().parents[1]  # the installed (or checked-out) attnscore/
_GRADERS = Path(__file__).resolve().parent / "graders"
_SOURCE_SUFFIXES = (".py", ".json", ".yaml")


class ExportError(ValueError):
    """An export cannot be built (attnscore not installed, an output path that cannot be written...)."""


def graders_dir(platform: str) -> Path:
    """The folder of ``platform``'s grader files (``gradescope``, ``prairielearn``), shipped with the
    package (``attnscore/export/graders/<platform>``).

    Raises:
        ExportError: the folder is missing (an installation without its package data).
    """
    folder = _GRADERS / platform
    if not folder.is_dir():
        raise ExportError(
            f"cannot find {folder}: this attnscore installation lacks the graders' files (package data "
            "attnscore/export/graders); reinstall attnscore (pip install --force-reinstall attnscore)"
        )
    return folder


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements() -> list[str]:
    """``name==version`` for attnscore's dependencies and theirs, as installed here (sorted).

    The closure follows each installed distribution's requirements whose environment markers hold
    on this machine (extras are not followed). torch's CPU index comes first as a pip option when
    the installed torch is a CPU build (``+cpu``), so pip on the platform finds the same wheel.

    Raises:
        ExportError: attnscore or one of its dependencies is not installed.
    """
    environment = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    pins: dict[str, str] = {}
    todo = ["attnscore"]
    while todo:
        name = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise ExportError(f"cannot pin {name}: it is not installed in this environment") from None
        key = _canonical(dist.metadata["Name"])
        if key in pins:
            continue
        pins[key] = dist.version
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append(requirement.name)
    pins.pop("attnscore")
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
    if "+cpu" in pins.get("torch", ""):
        lines.insert(0, f"--extra-index-url {TORCH_CPU_INDEX}")
    return lines


def _distribution() -> importlib.metadata.Distribution:
    try:
        return importlib.metadata.distribution("attnscore")
    except importlib.metadata.PackageNotFoundError:
        raise ExportError(
            "cannot copy attnscore into the grader: it is not installed in this environment "
            "(pip install attnscore, or pip install -e . in a checkout)"
        ) from None


def _license_text(dist: importlib.metadata.Distribution) -> bytes | None:
    """The licence file the distribution names (``License-File``), as installed beside its metadata
    (``*.dist-info/licenses/``), else the one of the checkout the package comes from; None without."""
    names = dist.metadata.get_all("License-File") or ["LICENSE"]
    for entry in dist.files or []:
        if entry.parts[-2:-1] == ("licenses",) and entry.name in names:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path.read_bytes()
    beside = _PACKAGE.parent / "LICENSE"
    if (_PACKAGE.parent / "pyproject.toml").is_file() and beside.is_file():  # a checkout (editable install)
        return beside.read_bytes()
    return None


def _toml(value: object) -> str:
    """A TOML string or array of strings (JSON's escapes are TOML's for these)."""
    return json.dumps(value, ensure_ascii=False)


def source_pyproject(data_files: list[str], with_license: bool) -> str:
    """The ``pyproject.toml`` of the copy: name, version, summary, Python, licence, dependencies
    (extras left out) and entry points of the installed distribution; ``data_files``, paths
    relative to ``attnscore/``, as package data.

    Raises:
        ExportError: attnscore is not installed as a distribution.
    """
    dist = _distribution()
    meta = dist.metadata
    dependencies = [
        str(r) for r in map(Requirement, dist.requires or []) if r.marker is None or "extra" not in str(r.marker)
    ]
    lines = [
        "# attnscore as the grader installs it (pip install --no-deps .), written by `attnscore export`",
        "# from the metadata of the attnscore it ran from.",
        "[build-system]",
        f"requires = {_toml(list(COPY_BUILD_REQUIRES))}",
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {_toml(meta['Name'])}",
        f"version = {_toml(dist.version)}",
    ]
    for field, key in (
        ("Summary", "description"),
        ("Requires-Python", "requires-python"),
        ("License-Expression", "license"),
    ):
        value = (meta.get_all(field) or [""])[0]  # a field the metadata does not have is left out
        if value:
            lines.append(f"{key} = {_toml(value)}")
    if with_license:
        lines.append('license-files = ["LICENSE"]')
    lines.append(f"dependencies = {_toml(dependencies)}")
    groups: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for point in dist.entry_points:
        groups.setdefault(point.group, []).append(point)
    tables = {"console_scripts": "project.scripts", "gui_scripts": "project.gui-scripts"}
    for group, points in sorted(groups.items()):
        lines += ["", f"[{tables.get(group, f'project.entry-points.{_toml(group)}')}]"]
        lines += [f"{_toml(p.name)} = {_toml(p.value)}" for p in sorted(points, key=lambda p: p.name)]
    lines += [
        "",
        "[tool.setuptools.packages.find]",
        'include = ["attnscore*"]',
        "",
        "[tool.setuptools.package-data]",
        f"attnscore = {_toml(sorted(data_files))}",
    ]
    return "\n".join(lines) + "\n"


def source_files() -> list[tuple[str, bytes]]:
    """``(path in the bundle, content)`` for an installable copy of the attnscore this runs from:
    every ``.py``, ``.json`` and ``.yaml`` file of the package (no caches, not the graders' own
    files), its licence as ``LICENSE`` and a ``pyproject.toml`` made from the installed
    distribution's metadata (:func:`source_pyproject`). The same from a checkout, an editable
    install or an installed wheel.

    Raises:
        ExportError: attnscore is not installed as a distribution.
    """
    found: list[tuple[str, bytes]] = []
    # followlinks: attnscore/bundled_specs links to the top-level specs/ in a checkout; the copy
    # holds the files themselves.
    for current, dirs, names in os.walk(_PACKAGE, followlinks=True):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith(".") and here / d != _GRADERS)
        for name in names:
            path = here / name
            if path.suffix in _SOURCE_SUFFIXES and path.is_file():
                found.append((f"attnscore/{path.relative_to(_PACKAGE).as_posix()}", path.read_bytes()))
    found.sort()
    data = [name.removeprefix("attnscore/") for name, _ in found if not name.endswith(".py")]
    license_text = _license_text(_distribution())
    head = [("pyproject.toml", source_pyproject(data, license_text is not None).encode("utf-8"))]
    if license_text is not None:
        head.append(("LICENSE", license_text))
    return head + found


def check_output_folder(target: Path) -> None:
    """Check that the folder of output file ``target`` exists or can be made: it, or the folder
    above it (the exporter then creates the one missing folder, as ``export prairielearn -o DIR``
    creates DIR; a longer missing path is more likely a typo than a wish).

    Raises:
        ExportError: neither the folder nor its parent exists, or the folder is a file.
    """
    folder = target.parent
    if folder.is_dir():
        return
    if folder.exists():
        raise ExportError(f"cannot write {target}: {folder} is not a folder")
    if not folder.parent.is_dir():
        raise ExportError(f"cannot write {target}: its folder {folder} does not exist, nor does {folder.parent}")
