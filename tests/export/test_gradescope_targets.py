"""Online checks of the Gradescope targets' pins: pip, told it runs on the target (its Python, ABI
and glibc, wheels only), finds every pin and resolves them to exactly themselves.

They ask PyPI (and PyTorch's CPU index) as the image's ``setup.sh`` would, with this machine's pip
configuration (local mirrors, constraints) switched off; without network access they skip.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
from packaging.requirements import Requirement

from attnscore.export.bundle import TORCH_CPU_INDEX, ExportError
from attnscore.export.targets import PYPI, TARGETS, pip_report, pip_target_options, target_requirements


def reachable(url: str) -> bool:
    """Whether a TCP connection to ``url``'s host opens within a few seconds."""
    host = urlsplit(url).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=5).close()
    except OSError:
        return False
    return True


online = pytest.mark.skipif(not reachable(PYPI), reason="PyPI is not reachable (offline)")


def split(target):
    """(torch's pin, the other ``name==version`` pins) of ``target``."""
    pins = [line for line in target_requirements(target) if not line.startswith("-")]
    torch = [p for p in pins if p.startswith("torch==")]
    assert len(torch) == 1
    return torch[0], [p for p in pins if not p.startswith("torch==")]


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@pytest.mark.parametrize("image", sorted(TARGETS))
def test_pins_file_is_a_requirements_file(image):
    """Each target's pins: the CPU index option, torch's CPU build, then name==version, no duplicates."""
    lines = target_requirements(TARGETS[image])
    assert lines[0] == f"--extra-index-url {TORCH_CPU_INDEX}"
    torch, others = split(TARGETS[image])
    assert torch.endswith("+cpu")
    names = [canonical(Requirement(p).name) for p in others]
    assert len(names) == len(set(names)) and all("==" in p for p in others)


@pytest.mark.parametrize("image", sorted(TARGETS))
def test_pip_target_options_cover_the_glibc(image):
    """The platform tags run from the image's glibc down to manylinux1, as pip there accepts."""
    target = TARGETS[image]
    options = pip_target_options(target)
    platforms = [options[i + 1] for i, o in enumerate(options) if o == "--platform"]
    assert platforms[0] == f"manylinux_2_{target.glibc[1]}_x86_64" and "manylinux_2_17_x86_64" in platforms
    assert platforms[-3:] == ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    assert options[options.index("--abi") + 1] == "cp" + target.python.replace(".", "")


def resolve(target):
    """(pinned, what pip resolves them to on ``target`` with dependencies followed, wheel or not)."""
    _, others = split(target)
    installs = pip_report(target, others, no_deps=False)
    got = sorted(f"{canonical(e['metadata']['name'])}=={e['metadata']['version']}" for e in installs)
    wheels = all(e["download_info"]["url"].endswith(".whl") for e in installs)
    return sorted(canonical(p.split("==")[0]) + "==" + p.split("==")[1] for p in others), got, wheels


@pytest.mark.slow
@online
def test_pins_resolve_to_themselves_on_every_target():
    """pip (dependencies followed) installs exactly the pinned set on each target, each from a wheel.

    The targets are asked at once (pip waits on the network, not on the CPU).
    """
    with ThreadPoolExecutor(len(TARGETS)) as pool:
        answers = dict(zip(sorted(TARGETS), pool.map(resolve, [TARGETS[i] for i in sorted(TARGETS)]), strict=True))
    for image, (pinned, got, wheels) in answers.items():
        assert got == pinned, image
        assert wheels, image


@pytest.mark.slow
@online
@pytest.mark.parametrize("image", sorted(TARGETS))
def test_torch_has_a_wheel_for_the_target(image):
    """torch's pinned release has a wheel for the target's CPython, and its requirements are pinned.

    From the CPU index when it is reachable; else PyPI's build of the same release (the same
    version and Python tags), whose CUDA runtime requirements the CPU build lacks.
    """
    target = TARGETS[image]
    torch, others = split(target)
    if reachable(TORCH_CPU_INDEX):
        entry = pip_report(target, [torch], no_deps=True, index=TORCH_CPU_INDEX)[0]
    else:
        entry = pip_report(target, [torch.removesuffix("+cpu")], no_deps=True)[0]
    assert f"-cp{target.python.replace('.', '')}-" in entry["download_info"]["url"].rsplit("/", 1)[-1]
    pinned = {canonical(p.split("==")[0]) for p in others}
    needed = set()
    for text in entry["metadata"].get("requires_dist", []):
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(target.environment()):
            needed.add(canonical(requirement.name))
    missing = {n for n in needed - pinned if not n.startswith(("nvidia-", "triton", "cuda-"))}
    assert missing == set()


@online
def test_the_exporting_machines_pins_fail_on_ubuntu_2204():
    """The fault the targets fix: numpy 2.4.6 (pinned on Python 3.11 here) has no Python 3.10 wheel."""
    with pytest.raises(ExportError, match=r"pip cannot resolve for ubuntu-22.04 \(Python 3.10\):.*numpy==2.4.6"):
        pip_report(TARGETS["ubuntu-22.04"], ["numpy==2.4.6"], no_deps=True)
