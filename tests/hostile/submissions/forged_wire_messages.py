"""Attack: writes forged "passed" replies straight into the worker's reply pipe."""
import json
import os
import sys
import time


def scores(q, keys):
    fd = int(sys.argv[-2])
    for i in range(1, 200):
        for message in ({"v": 1, "type": "failure", "id": i, "verdict": "passed", "message": "ok"},
                        {"v": 1, "type": "result", "id": i, "value": {"kind": "number", "device": "cpu"}}):
            os.write(fd, (json.dumps(message) + "\n").encode())
    time.sleep(10)
