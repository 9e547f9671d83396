"""Per-variant seeds: one independent random stream per (family, variant, part).

A variant's numbers never come from global random state. Each stream is seeded from the
SHA-256 of a canonical JSON list ``[scheme, family id, family version, base seed, student id,
index, part]``, so:

- the same arguments always give the same numbers (on every platform and Python version);
- adding a family, a variant or a part (a new stream name) leaves every existing stream alone;
- a validation pass that opens its own stream never consumes the generation stream.

Example:
    >>> variant_seed("one-score", 1, 42, "alice", 0, "givens")
    1203408047821955186
"""

from __future__ import annotations

import hashlib
import json
import random

__all__ = ["SEED_SCHEME", "variant_seed", "variant_rng"]

SEED_SCHEME = "attnscore.practice/1"


def variant_seed(family_id: str, version: int, base_seed: int, student: str | None, index: int, part: str) -> int:
    """Return the 64-bit seed of one stream of one variant.

    Args:
        family_id: the family's ``id`` from its YAML file.
        version: the family's ``version``; bump it when the generator changes on purpose.
        base_seed: the seed given on the command line (``--seed``).
        student: the student id (``--student``) or ``None`` for a shared worksheet.
        index: the variant's 0-based position in the family's list.
        part: the stream name (``"givens"`` for the numbers, ``"choices"`` for option order...).

    Returns:
        An integer in ``[0, 2**64)``.
    """
    payload = json.dumps(
        [SEED_SCHEME, family_id, int(version), int(base_seed), student or "", int(index), part],
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return int.from_bytes(hashlib.sha256(payload.encode("ascii")).digest()[:8], "big")


def variant_rng(
    family_id: str, version: int, base_seed: int, student: str | None, index: int, part: str
) -> random.Random:
    """Return a private ``random.Random`` seeded with :func:`variant_seed` (same arguments)."""
    return random.Random(variant_seed(family_id, version, base_seed, student, index, part))
