"""Loading the catalogue (every mistake and property registered) does not import torch: ``verify``
forks its workers only while torch is not loaded, and the CLI starts the worker template before it."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        pytest.param("attnscore.catalogue.mistakes", id="mistakes"),
        pytest.param("attnscore.catalogue.properties", id="properties"),
        pytest.param("attnscore.check.verify", id="verify"),
    ],
)
def test_loading_the_catalogue_leaves_torch_unloaded(module: str) -> None:
    """Importing the module registers the whole catalogue without importing torch."""
    code = (
        f"import sys, {module}\n"
        "from attnscore.catalogue.mistakes import MISTAKES\n"
        "from attnscore.catalogue.properties import PROPERTIES\n"
        "print(len(MISTAKES) > 50, len(PROPERTIES) > 20, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "False"]
