"""What every deployable grader carries: pinned requirements, a copy of attnscore's source, and
the grader files of the top-level ``graders/`` folder.

The grader files (``graders/gradescope/``, ``graders/prairielearn/``) live beside the package in a
source checkout (or an editable install); an installed wheel has no ``graders/`` folder, so
exporting needs the checkout.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

__all__ = ["ExportError", "graders_dir", "pinned_requirements", "source_files", "TORCH_CPU_INDEX"]

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""Where pip finds CPU builds of torch (course platforms have no GPU); a requirements option."""

_PROJECT = Path(__file__).resolve().parents[2]


class ExportError(ValueError):
    """An export cannot be built (no source checkout, an output path that cannot be written...)."""


def graders_dir(platform: str) -> Path:
    """The folder ``graders/<platform>`` of the source checkout this package comes from.

    Raises:
        ExportError: attnscore is not running from a source checkout (no ``graders/`` beside it).
    """
    folder = _PROJECT / "graders" / platform
    if not folder.is_dir() or not (_PROJECT / "pyproject.toml").is_file():
        raise ExportError(
            f"cannot find {folder}: exporting a grader needs attnscore's source checkout "
            "(git clone, then pip install -e .), whose graders/ folder holds the deployable graders"
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


def source_files() -> list[tuple[str, Path]]:
    """``(path in the bundle, file here)`` for an installable copy of attnscore: ``pyproject.toml``,
    ``README.md`` and every ``.py``, ``.json`` and ``.yaml`` file of the package (no caches).

    Raises:
        ExportError: not running from a source checkout.
    """
    graders_dir("gradescope")  # the same precondition: a checkout
    files = [("pyproject.toml", _PROJECT / "pyproject.toml"), ("README.md", _PROJECT / "README.md")]
    found = []
    # followlinks: attnscore/bundled_specs links to the top-level specs/ in a checkout; the copy
    # holds the files themselves.
    for current, dirs, names in os.walk(_PROJECT / "attnscore", followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in names:
            path = Path(current, name)
            if path.suffix in (".py", ".json", ".yaml") and path.is_file():
                found.append((path.relative_to(_PROJECT).as_posix(), path))
    return files + sorted(found)
