"""The ``format:`` markers attnscore reads, and the one problem of a file whose marker is another.

A spec says ``format: attnscore-spec/1``; an assignment ``format: attnscore-assignment/1``. A file
whose marker is a known kind with an unknown version (``attnscore-assignment/2``), the other kind,
or no attnscore format at all is reported as that, alone: none of the fields it lacks for the kind
expected (a spec's ``function`` and ``worked_examples``) is listed after it.
"""

from __future__ import annotations

from attnscore.spec.located import Positioned, SpecProblem

__all__ = ["SPEC_FORMAT", "ASSIGNMENT_FORMAT", "KNOWN_FORMATS", "format_problem"]

SPEC_FORMAT = "attnscore-spec/1"
ASSIGNMENT_FORMAT = "attnscore-assignment/1"
KNOWN_FORMATS = {SPEC_FORMAT: "a spec", ASSIGNMENT_FORMAT: "an assignment"}
"""Every format this attnscore reads, with the kind of file it marks."""

_KNOWN_TEXT = ", ".join(f"{marker} ({kind})" for marker, kind in KNOWN_FORMATS.items())


def format_problem(doc: Positioned, expected: str) -> SpecProblem | None:
    """The problem of ``doc``'s ``format:`` when it is a string other than ``expected`` (a missing or
    non-string one is the schema's to report), else None.

    >>> from attnscore.spec.located import read_yaml
    >>> doc, _ = read_yaml("format: attnscore-assignment/2\\n", "a1.yaml")
    >>> print(format_problem(doc, SPEC_FORMAT).message)  # doctest: +ELLIPSIS
    expected a known format, found 'attnscore-assignment/2', an unknown format version (known: ...)
    """
    found = doc.data.get("format") if isinstance(doc.data, dict) else None
    if not isinstance(found, str) or found == expected:
        return None
    if found in KNOWN_FORMATS:
        what = (
            "a spec file: grade it with --spec directly"
            if found == SPEC_FORMAT
            else "an assignment file, where a spec is expected"
        )
        return doc.problem(("format",), f"expected {expected!r}, found {found!r} ({what})")
    family = found.rsplit("/", 1)[0] + "/"
    unknown = (
        "an unknown format version"
        if any(marker.startswith(family) for marker in KNOWN_FORMATS)
        else "not an attnscore format"
    )
    return doc.problem(("format",), f"expected a known format, found {found!r}, {unknown} (known: {_KNOWN_TEXT})")
