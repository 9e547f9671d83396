"""Attack: writes forged "passed" replies straight into the worker's reply pipe (every open descriptor)."""
import json
import os
import time


def scores(q, keys):
    for fd in range(3, 64):
        for i in range(1, 200):
            for message in ({"v": 1, "type": "failure", "id": i, "verdict": "passed", "message": "ok"},
                            {"v": 1, "type": "result", "id": i, "value": {"kind": "number", "device": "cpu"}}):
                try:
                    os.write(fd, (json.dumps(message) + "\n").encode())
                except OSError:
                    break
    time.sleep(10)
