"""The torch proxy's thread rule (attnscore.boundary.lazy_torch.one_thread): one torch thread while
a block runs, the count it had afterwards, and for a process that has not imported torch yet, one
thread from its first use on."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnscore.boundary import lazy_torch
from attnscore.spec.bundled import bundled_spec_paths

HANG_GUARD_S = 120


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_one_thread_inside_the_block_and_the_count_back_after(two_threads):
    with lazy_torch.one_thread():
        inside = torch.get_num_threads()
    assert (inside, torch.get_num_threads()) == (1, 2)


def test_the_count_comes_back_when_the_block_raises(two_threads):
    with pytest.raises(ZeroDivisionError), lazy_torch.one_thread():
        assert torch.get_num_threads() == 1
        _ = 1 / 0
    assert torch.get_num_threads() == 2


FIRST_USE = """
import json, sys
from attnscore.boundary import lazy_torch
from attnscore.boundary.lazy_torch import torch
seen = {"loaded_before": lazy_torch.loaded()}
with lazy_torch.one_thread():
    seen["during"] = torch.get_num_threads()  # the first use: the proxy binds torch here
seen["after"] = torch.get_num_threads()
sys.modules["torch"].set_num_threads(3)
with lazy_torch.one_thread():  # torch loaded now: no hook left from the block before
    pass
seen["again"] = torch.get_num_threads()
print(json.dumps(seen))
"""


def test_torch_first_used_inside_the_block_gets_one_thread_then_its_own_default():
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"}  # a default of 2 whatever the machine has
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"loaded_before": False, "during": 1, "after": 2, "again": 3}


PROCESS_RULE = """
import json, os
os.environ.pop("OMP_NUM_THREADS", None)
from attnscore.boundary import lazy_torch
lazy_torch.one_thread_in_this_process()  # torch not imported: nothing imported for it
loaded = lazy_torch.loaded()
import torch
print(json.dumps({"loaded": loaded, "threads": torch.get_num_threads()}))
"""


def test_a_process_without_torch_gets_one_thread_at_its_first_import_and_imports_nothing_now():
    done = subprocess.run(
        [sys.executable, "-c", PROCESS_RULE],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"loaded": False, "threads": 1}


def test_is_tensor_names_tensors_and_nothing_else():
    assert lazy_torch.is_tensor(torch.zeros(2))
    assert lazy_torch.is_tensor(torch.nn.Parameter(torch.zeros(2)))  # a subclass counts, as with isinstance
    assert not lazy_torch.is_tensor(np.zeros(2))
    assert not lazy_torch.is_tensor(3)
    assert not lazy_torch.is_tensor(None)


WITHOUT_TORCH = """
import json, sys
import numpy as np
from attnscore.boundary import lazy_torch
answers = [lazy_torch.is_tensor(v) for v in (np.zeros(2), 3, "x", None)]
from attnscore.spec.assignment import load_assignment_specs
from attnscore.spec.bundled import bundled_spec_paths
specs = load_assignment_specs([str(p) for p in bundled_spec_paths()])
print(json.dumps([answers, len(specs), "torch" in sys.modules]))
"""


def test_loading_every_bundled_spec_imports_no_torch():
    """``is_tensor`` answers without importing torch, and loading a spec (golden values of its
    worked examples included) needs no tensor: so ``attnscore verify`` forks its workers (it runs
    everything in one process once torch is loaded, as the multi-head spec's ``num_heads`` once made it)."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False
    )
    assert done.returncode == 0, done.stderr
    answers, count, loaded = json.loads(done.stdout.splitlines()[-1])
    assert answers == [False, False, False, False]
    assert count == len(list(bundled_spec_paths())) >= 28
    assert loaded is False
