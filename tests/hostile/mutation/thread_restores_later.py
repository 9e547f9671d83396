"""Attack: scales Q in place; a thread it started restores Q as soon as the call has returned
(it watches the main thread's stack and restores the moment the function's frame is gone)."""

import sys
import threading
import time

import torch

_jobs = []
_wake = threading.Event()
_main = threading.main_thread().ident


def _in_call():
    frame = sys._current_frames().get(_main)
    while frame is not None:
        if frame.f_code.co_name == "scaled_score_matrix":
            return True
        frame = frame.f_back
    return False


def _restorer():
    while True:
        _wake.wait()
        _wake.clear()
        while _in_call():
            time.sleep(0)
        for tensor, copy in list(_jobs):
            torch._C.TensorBase.copy_(tensor, copy)
        _jobs.clear()


threading.Thread(target=_restorer, daemon=True).start()


def scaled_score_matrix(Q, K):
    _jobs.append((Q, Q.clone()))
    Q.mul_(Q.shape[-1] ** -0.5)
    out = Q @ K.transpose(-2, -1)
    _wake.set()
    time.sleep(0.001)  # let the restorer start watching
    return out
