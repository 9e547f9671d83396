"""No module of the package is longer than one sitting's reading (``docs/architecture.md``: one module
per concept): at most :data:`MAX_LINES` lines."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnscore"
MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """Every attnscore module has at most 600 lines; a longer one is split by concept."""
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 100  # the walk read the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
