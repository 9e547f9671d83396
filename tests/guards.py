"""Shared test constants that keep verdicts independent of the machine's speed."""

from __future__ import annotations

# How long a test waits for a subprocess (a CLI run, an exported grader) before calling it hung.
# Only a guard against a hang, never a limit a run is judged by: a CI runner with both cores busy
# runs these commands many times slower than a quiet laptop, so it is far above any of them.
HANG_GUARD_S = 1800
