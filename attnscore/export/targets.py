"""The images a Gradescope bundle is built for, and the pinned requirements kept for each.

Gradescope builds an autograder on a base image the instructor selects (OS, version, variant);
its default is Ubuntu 22.04, and the *Base* variant is the OS's own Python (``python3`` from apt):
Python 3.10 on Ubuntu 22.04, 3.12 on Ubuntu 24.04 (glibc 2.35 and 2.39). A bundle's
``requirements.txt`` must therefore be pinned for that Python, not for the exporting machine's:
each target's pins live in this package (``gradescope_pins/<image>.txt``, the whole closure of
attnscore's dependencies, torch's CPU build from :data:`attnscore.export.bundle.TORCH_CPU_INDEX`)
and ``tests/export/test_gradescope_targets.py`` asks pip, online, whether every pin has a wheel
for the target and whether they resolve to exactly themselves.

A maintainer refreshes a target's pins (online) with
``python -m attnscore.export.targets ubuntu-22.04``: it keeps the version installed here where the
target has a wheel for it, otherwise takes the newest that resolves there.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from attnscore.export.bundle import TORCH_CPU_INDEX, ExportError

__all__ = [
    "DEFAULT_IMAGE",
    "TARGETS",
    "Target",
    "choose_target",
    "check_target",
    "pip_environment",
    "pip_report",
    "pip_target_options",
    "target_requirements",
]

PYPI = "https://pypi.org/simple"


@dataclass(frozen=True)
class Target:
    """One Gradescope base image: its name, the Python ``python3`` is there, and its glibc.

    ``python`` is ``"3.10"``-style; ``glibc`` says which ``manylinux_2_N`` wheels run there.
    """

    image: str
    python: str
    glibc: tuple[int, int]

    @property
    def label(self) -> str:
        """``ubuntu-22.04 (Python 3.10)``: how messages name the target."""
        return f"{self.image} (Python {self.python})"

    def environment(self) -> dict[str, str]:
        """The environment markers of the target (PEP 508), for evaluating requirements there."""
        return {
            "python_version": self.python,
            "python_full_version": f"{self.python}.0",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "implementation_version": f"{self.python}.0",
            "os_name": "posix",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": "x86_64",
            "platform_release": "",
            "platform_version": "",
            "extra": "",
        }


TARGETS: dict[str, Target] = {
    "ubuntu-22.04": Target("ubuntu-22.04", "3.10", (2, 35)),
    "ubuntu-24.04": Target("ubuntu-24.04", "3.12", (2, 39)),
}
"""Gradescope's Ubuntu base images (the *Base* variant), by name."""

DEFAULT_IMAGE = "ubuntu-22.04"
"""Gradescope's default base image for a new autograder."""


def choose_target(*, python: str | None = None, image: str | None = None) -> Target:
    """The target named by ``image`` and/or ``python``; :data:`DEFAULT_IMAGE` when neither is given.

    Raises:
        ExportError: an unknown image or Python, or an image whose Python is not ``python``.
    """
    if image is not None and image not in TARGETS:
        raise ExportError(f"unknown Gradescope base image {image!r}: expected one of {', '.join(TARGETS)}")
    if python is not None:
        matching = [t for t in TARGETS.values() if t.python == python]
        if not matching:
            pythons = ", ".join(f"{t.python} ({t.image})" for t in TARGETS.values())
            raise ExportError(f"no Gradescope base image has Python {python}: expected one of {pythons}")
        if image is not None and TARGETS[image].python != python:
            raise ExportError(
                f"--python {python} does not match --image {image}, whose Python is {TARGETS[image].python}"
            )
        return matching[0] if image is None else TARGETS[image]
    return TARGETS[image or DEFAULT_IMAGE]


def _pins_text(target: Target) -> str:
    return importlib.resources.files("attnscore.export").joinpath(f"gradescope_pins/{target.image}.txt").read_text()


def target_requirements(target: Target) -> list[str]:
    """The lines of ``requirements.txt`` for ``target``: pip options, then ``name==version`` (sorted)."""
    return [line for line in _pins_text(target).splitlines() if line.strip() and not line.startswith("#")]


def _pins(lines: list[str]) -> dict[str, Version]:
    pins = {}
    for line in lines:
        if not line.startswith("-"):
            name, _, version = line.partition("==")
            pins[_canonical(name)] = Version(version)
    return pins


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_target(target: Target) -> None:
    """Check, offline, that ``target``'s pins can carry attnscore as installed here.

    attnscore's ``Requires-Python`` must admit the target's Python, and each of its requirements
    whose markers hold there must be pinned to a version the requirement allows (a dependency
    raised in ``pyproject.toml`` beyond what the target's pins have stops the export here rather
    than ``pip install`` in the image). The pins' own closure is checked online by the tests.

    Raises:
        ExportError: naming every requirement the pins do not meet.
    """
    try:
        dist = importlib.metadata.distribution("attnscore")
    except importlib.metadata.PackageNotFoundError:
        raise ExportError("cannot check the target's pins: attnscore is not installed in this environment") from None
    requires_python = dist.metadata["Requires-Python"]
    if requires_python and Version(target.python) not in SpecifierSet(requires_python):
        raise ExportError(
            f"cannot build for {target.label}: attnscore requires Python {requires_python}; choose another --image"
        )
    pins = _pins(target_requirements(target))
    problems = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(target.environment()):
            continue
        pinned = pins.get(_canonical(requirement.name))
        if pinned is None:
            problems.append(f"{requirement} (not pinned)")
        elif not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{requirement} (pinned {pinned})")
    if problems:
        raise ExportError(
            f"cannot build for {target.label}: its pins (attnscore/export/gradescope_pins/{target.image}.txt) "
            f"do not meet attnscore's requirements: {'; '.join(problems)}; refresh them with "
            f"python -m attnscore.export.targets {target.image}"
        )


def pip_target_options(target: Target) -> list[str]:
    """``pip`` options that select wheels as pip on ``target`` would: its CPython ABI and every
    manylinux tag its glibc runs, wheels only (setup.sh installs with ``--only-binary=:all:``)."""
    major, minor = target.glibc
    tag = target.python.replace(".", "")
    platforms = [f"manylinux_{major}_{n}_x86_64" for n in range(minor, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    options = ["--only-binary=:all:", "--python-version", target.python, "--implementation", "cp", "--abi", f"cp{tag}"]
    for platform in platforms:
        options += ["--platform", platform]
    return options


def pip_environment() -> dict[str, str]:
    """This process's environment without pip's configuration (no local mirrors or constraints):
    pip then asks the indexes a Gradescope image would ask."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip_report(target: Target, requirements: list[str], *, no_deps: bool, index: str = PYPI) -> list[dict]:
    """Ask pip (dry run, nothing installed) what it would install on ``target`` for ``requirements``.

    Returns the ``install`` entries of pip's installation report (``metadata``, ``download_info``).

    Raises:
        ExportError: pip could not resolve them (its last error lines are in the message).
    """
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder, "report.json")
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        argv += ["--report", str(report), "--target", str(Path(folder, "t")), "--index-url", index]
        argv += pip_target_options(target) + (["--no-deps"] if no_deps else []) + requirements
        done = subprocess.run(argv, capture_output=True, text=True, env=pip_environment(), timeout=600)
        if done.returncode != 0 or not report.is_file():
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            raise ExportError(f"pip cannot resolve for {target.label}: {' '.join(errors[-3:]) or done.stderr[-500:]}")
        return list(json.loads(report.read_text())["install"])


def _torch_cpu_requirements(target: Target, version: str) -> list[str]:
    """torch's own requirements on ``target``, as its CPU build has them: the CPU index's metadata
    when reachable, else PyPI's same release without its CUDA runtime (``nvidia-*``, ``triton``)."""
    try:
        entry = pip_report(target, [f"torch=={version}+cpu"], no_deps=True, index=TORCH_CPU_INDEX)[0]
        drop: tuple[str, ...] = ()
    except ExportError:
        entry = pip_report(target, [f"torch=={version}"], no_deps=True)[0]
        drop = ("nvidia-", "triton", "cuda-")
    requirements = []
    for text in entry["metadata"].get("requires_dist", []):
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(target.environment()):
            continue
        if not drop or not _canonical(requirement.name).startswith(drop):
            requirements.append(str(requirement).split(";")[0].strip())
    return requirements


def refresh(target: Target) -> str:
    """The text of ``target``'s pins file, resolved online (see the module docstring)."""
    dist = importlib.metadata.distribution("attnscore")
    torch_version = importlib.metadata.version("torch").split("+")[0]
    top = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(target.environment()):
            if _canonical(requirement.name) != "torch":
                top.append(str(requirement))
    top += _torch_cpu_requirements(target, torch_version)
    here = {
        _canonical(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions()
        if d.metadata["Name"] and "+" not in d.version
    }
    # The versions tested here, where the target has a wheel for them.
    names = sorted({_canonical(Requirement(r).name) for r in top})
    preferred = []
    for entry in pip_report(target, top, no_deps=False):
        name = _canonical(entry["metadata"]["name"])
        if name in here:
            try:
                pip_report(target, [f"{name}=={here[name]}"], no_deps=True)
                preferred.append(f"{name}=={here[name]}")
            except ExportError:
                pass
    try:
        resolved = pip_report(target, top + preferred, no_deps=False)
    except ExportError:
        resolved = pip_report(target, top, no_deps=False)
    pins = sorted(f"{_canonical(e['metadata']['name'])}=={e['metadata']['version']}" for e in resolved)
    header = [
        f"# Pinned requirements of a Gradescope bundle for {target.label}, glibc {target.glibc[0]}.{target.glibc[1]}.",
        f"# Refreshed with: python -m attnscore.export.targets {target.image} (top level: {', '.join(names)}).",
        f"--extra-index-url {TORCH_CPU_INDEX}",
        f"torch=={torch_version}+cpu",
    ]
    return "\n".join(header + [p for p in pins if not p.startswith("torch==")]) + "\n"


def _main(argv: list[str]) -> int:
    if not argv or any(a not in TARGETS for a in argv):
        print(f"usage: python -m attnscore.export.targets IMAGE... (IMAGE: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    folder = Path(__file__).with_name("gradescope_pins")
    folder.mkdir(exist_ok=True)
    for image in argv:
        text = refresh(TARGETS[image])
        (folder / f"{image}.txt").write_text(text)
        print(f"wrote {folder / f'{image}.txt'}: {len(text.splitlines()) - 3} pins")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
