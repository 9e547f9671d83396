"""What a worksheet and its answer key say around the problems (shared by all writers)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Worksheet", "ROUNDING_RULE"]

ROUNDING_RULE = (
    "Give each number exactly (an integer, a decimal or a fraction) or rounded to {places} decimal places. "
    "Rounding is half away from zero: 0.1235 becomes 0.124 and -0.1235 becomes -0.124."
)


@dataclass(frozen=True)
class Worksheet:
    """Header data of one output: title, the arguments that regenerate it, the rounding rule.

    Attributes:
        title: the document title.
        base_seed: ``--seed``; student: ``--student`` or ``None``.
        command: the exact command line that regenerates the output (printed in the answer key).
        places: the decimals of the rounding rule stated in the header.
        with_solutions: whether the worksheet itself shows the worked solutions.
    """

    title: str
    base_seed: int
    student: str | None
    command: str
    places: int = 3
    with_solutions: bool = False

    @property
    def rounding(self) -> str:
        """The rounding rule as one sentence."""
        return ROUNDING_RULE.format(places=self.places)
