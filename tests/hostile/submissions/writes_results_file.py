"""Attack: writes results files where graders look for them, returns wrong values."""
import json
import os

FAKE = json.dumps({"score": 10, "tests": []})


def scores(q, keys):
    for path in ("results.json", "/autograder/results/results.json", os.path.expanduser("~/results.json"),
                 "/tmp/results.json", "../results.json"):
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                f.write(FAKE)
        except OSError:
            pass
    return (keys @ q) * 0 + 1
