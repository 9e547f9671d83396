"""Attack: looks for the grader's case cache (pickled cases: every input and expected value,
hidden ones included), reads what it can, and tries to plant an entry there."""
import glob
import os
import pickle

import torch

FOLDERS = ["/root/.cache/attnscore/cases", os.path.expanduser("~/.cache/attnscore/cases")]
FOLDERS += glob.glob("/home/*/.cache/attnscore/cases") + glob.glob("/tmp/**/attnscore/cases", recursive=True)
ANSWERS = {}
listed = read = wrote = 0
for folder in FOLDERS:
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    listed += len(names)
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as fh:
                entry = pickle.load(fh)
            read += 1
        except Exception:  # noqa: BLE001
            continue
        for case in entry.get("cases", []):
            for call in case.calls:
                if "q" in call.args:
                    ANSWERS[tuple(call.args["q"].tolist())] = call.golden.tolist()
    try:
        with open(os.path.join(folder, "planted.cases"), "wb") as fh:
            fh.write(b"planted by a submission")
        wrote += 1
    except OSError:
        pass
print(f"case cache: listed {listed}, read {read}, wrote {wrote}, {len(ANSWERS)} expected values")


def scores(q, keys):
    key = tuple(q.tolist())
    if key in ANSWERS:
        return torch.tensor(ANSWERS[key], dtype=q.dtype)
    return torch.ones(len(keys), dtype=q.dtype)
