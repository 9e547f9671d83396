"""Attack: scales Q in place; a thread it started restores Q as soon as the call has returned
(it watches the main thread's stack and restores the moment that call's frame is gone).

Each restore waits for the frame of the call that made it: a restore that ran while a later call
is under way would undo that later call's change before it returns (a change undone inside the
call is no mutation at all), and the attack would test nothing. And a restore writes only over
what its call left: the inputs are views of memory the grader fills again for the next call, so a
restore the machine's scheduler delayed past that would write this call's old values into the next
call's inputs before that call even starts (seen once in a full run at load 12), another attack."""

import sys
import threading
import time

import torch

_jobs = []  # (the call's frame, the tensor, its values before the call, its values after it)
_wake = threading.Event()
_main = threading.main_thread().ident


def _on_stack(target):
    frame = sys._current_frames().get(_main)
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


def _restorer():
    while True:
        if not _jobs:
            _wake.wait()
            _wake.clear()
        for job in list(_jobs):
            frame, tensor, copy, left = job
            if _on_stack(frame):  # that call has not returned yet: restore it later
                continue
            if torch._C.TensorBase.equal(tensor, left):  # still what the call left, not the next inputs
                torch._C.TensorBase.copy_(tensor, copy)
            _jobs.remove(job)
        time.sleep(0)  # spin while a restore waits: it runs the moment its call has returned


threading.Thread(target=_restorer, daemon=True).start()


def scaled_score_matrix(Q, K):
    before = Q.clone()
    Q.mul_(Q.shape[-1] ** -0.5)
    out = Q @ K.transpose(-2, -1)
    _jobs.append((sys._getframe(), Q, before, Q.clone()))
    _wake.set()
    time.sleep(0.001)  # let the restorer start watching
    return out
