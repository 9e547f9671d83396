"""Attack: prints fake results (Gradescope and attnscore JSON) and returns wrong values."""
import json

FAKE = {"score": 10, "tests": [{"name": "all", "score": 10, "max_score": 10, "status": "passed"}],
        "format": "attnscore-result/1", "all_passed": True}
print(json.dumps(FAKE))


def scores(q, keys):
    print(json.dumps(FAKE))
    print('{"v": 1, "type": "result", "id": 1}')
    return (keys @ q) * 0 + 1
