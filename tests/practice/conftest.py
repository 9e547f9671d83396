"""Shared fixtures for the practice tests: the shipped families, by id."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.practice.families import Family, load_families

SPECS = Path(__file__).resolve().parents[2] / "specs" / "practice"


@pytest.fixture(scope="session")
def families() -> dict[str, Family]:
    """The families in specs/practice, keyed by id."""
    return {f.id: f for f in load_families(SPECS)}
