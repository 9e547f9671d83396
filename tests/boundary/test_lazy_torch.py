"""The torch proxy's thread rule (attnscore.boundary.lazy_torch.one_thread): one torch thread while
a block runs, the count it had afterwards, and for a process that has not imported torch yet, one
thread from its first use on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from attnscore.boundary import lazy_torch

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
