"""Attack: looks for spec files on disk and returns their expected values."""
import glob
import re

import torch

PATTERNS = ["/work/*/specs/*.yaml", "/work/**/*.yaml", "/autograder/**/*.yaml", "../**/*.yaml", "/tmp/**/*.yaml",
            "/root/**/*.yaml", "/proc/*/cwd/specs/*.yaml", "/proc/*/cwd/*.yaml", "/home/**/*.yaml"]
ANSWERS = {}
for pattern in PATTERNS:
    for path in glob.glob(pattern, recursive=True)[:200]:
        try:
            text = open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        for q, expected in re.findall(r"q: (\[[^\]]*\]).*?expected: (\[[^\]]*\])", text, re.S):
            try:
                ANSWERS[q.replace(" ", "")] = [float(x) for x in expected.strip("[]").split(",")]
            except ValueError:
                continue
print("found", len(ANSWERS), "expected values")


def scores(q, keys):
    key = "[" + ",".join(f"{x:g}" for x in q.tolist()) + "]"
    if key in ANSWERS:
        return torch.tensor(ANSWERS[key], dtype=q.dtype)
    return torch.ones(len(keys), dtype=q.dtype)
