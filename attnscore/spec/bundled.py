"""The bundled specs, and a spec named either by its file or by a bundled spec's id.

The bundled specs are the repository's ``specs/`` folder, shipped in the package as
``attnscore/bundled_specs`` (a link in a checkout, a copy in an installed wheel). Everywhere a spec
is taken (every command's ``--spec``, the pytest plugin's ``--attnscore-spec``,
:func:`attnscore.load_spec`, :func:`attnscore.check_path`) the text is a file when such a file
exists, else the id of a bundled spec (``scaled_score_matrix``, or ``scaled_score_matrix.yaml``):
a file of that name in the current folder always wins over the bundled spec.

Example:
    >>> resolve_spec("dot_product_scores").name
    'dot_product_scores.yaml'
    >>> resolve_spec("no_such_spec")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    attnscore.spec.bundled.SpecNotFound: no such file 'no_such_spec', and no bundled spec has that id: ...
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SpecNotFound", "bundled_spec_ids", "bundled_spec_paths", "bundled_spec_path", "resolve_spec"]

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "bundled_specs"
"""The folder of the bundled specs (``specs/`` in a checkout)."""


class SpecNotFound(ValueError):
    """A spec named neither an existing file nor a bundled spec's id; the message lists the ids."""


def bundled_spec_paths() -> list[Path]:
    """The bundled spec files, sorted by name; relative to the current folder when they lie below it."""
    folder = BUNDLED_DIR.resolve()
    return sorted(_relative(p) for p in folder.glob("*.yaml"))


def bundled_spec_ids() -> list[str]:
    """The ids of the bundled specs (each file's name without ``.yaml``), sorted."""
    return [p.stem for p in bundled_spec_paths()]


def bundled_spec_path(spec_id: str) -> Path:
    """The bundled spec file of ``spec_id`` (its file name without ``.yaml``), as in :func:`bundled_spec_paths`.

    >>> bundled_spec_path("dot_product_scores").name
    'dot_product_scores.yaml'

    Raises:
        SpecNotFound: (a ValueError) no bundled spec has that id (the message lists the ones there are).
    """
    paths = {p.stem: p for p in bundled_spec_paths()}
    if spec_id not in paths:
        raise SpecNotFound(f"no bundled spec {spec_id!r}: expected one of {', '.join(sorted(paths))}")
    return paths[spec_id]


def resolve_spec(text: str | Path) -> Path:
    """The spec file ``text`` names: the file itself when it exists (of any kind: the loader says
    what is wrong with a folder or a FIFO), else the bundled spec whose id (or file name) it is.

    Raises:
        SpecNotFound: (a ValueError) neither; the message names the text and lists the bundled ids.
    """
    path = Path(text)
    if path.exists() or path.is_symlink():
        return path
    name = str(text)
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    paths = {p.stem: p for p in bundled_spec_paths()}
    if stem in paths and "/" not in name and "\\" not in name:
        return paths[stem]
    ids = ", ".join(sorted(paths))
    raise SpecNotFound(f"no such file {name!r}, and no bundled spec has that id: expected a spec file or one of {ids}")


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
