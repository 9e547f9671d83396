"""How the suite shares two cores: whole files to each xdist worker, slow files first, one torch
thread per worker.

`make test` hands pytest-xdist whole files (``--dist loadfile --no-loadscope-reorder``), so that a
file's module fixtures (every attack graded once per sandbox shape, built cases, worker templates)
are built once by one worker instead of once per worker that draws one of its tests. A file is
handed out in the order collected; :func:`pytest_collection_modifyitems` puts the files with slow
tests (sandbox sweeps, ``torch.compile``, whole pytest runs) first, so that the many quick files
fill the end of the run on both workers instead of one long file running alone at the end. The
order inside a file is pytest's own (grouped by module fixture parameters), and no test depends on
the order of files (tests/README.md).

Each xdist worker is one of as many processes as there are cores, beside the sandbox workers it
starts, so it computes with one torch thread (:func:`pytest_configure`): the tensors of a test are
small, and torch's OpenMP threads spin while they wait for a core the other processes hold
(measured on 2 cores at load 6-9: a FlashAttention diagnosis test took 15.8 s of CPU with two
threads and 6.1 s with one).
"""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in an xdist worker (and in the processes its tests start)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.environ["OMP_NUM_THREADS"] = "1"  # read by torch when it is first imported, here or in a subprocess
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Items of files holding a ``slow`` test first, files otherwise in collection order (stable)."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in heavy)
