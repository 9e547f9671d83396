"""The suite's one scheduling rule for pytest-xdist (``make test`` runs ``--dist loadgroup``).

A fixture of module (or wider) scope defined in this suite is set up once per xdist worker that runs
a test using it: split across two workers, the attack suite's sandboxes, an exported bundle or an
installed wheel would be built twice. So every test that uses such a fixture joins the group of its
module and of the fixture's parameters (one group per sandbox shape, say): a group runs on one
worker, different groups run side by side, and every other test is scheduled alone. xdist starts
the largest groups first (``--loadscope-reorder``, its default).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SUITE = Path(__file__).resolve().parent


def _shared_setup_group(item: pytest.Item) -> str | None:
    """``module::fixture=index,...`` (``module::shared`` when none of them is parametrized) for a test
    that uses a fixture of module or wider scope defined in this suite; None for any other test."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    callspec = getattr(item, "callspec", None)
    shared, parameters = False, []
    for name in sorted(info.names_closure):
        definitions = info.name2fixturedefs.get(name)
        if not definitions:
            continue
        definition = definitions[-1]
        if definition.scope == "function" or not _ours(definition.func):
            continue
        shared = True
        index = callspec.indices.get(name) if callspec is not None else None
        if index is not None:  # one group per parameter: each is set up once, the groups run side by side
            parameters.append(f"{name}={index}")
    if not shared:
        return None
    return f"{item.nodeid.split('::', 1)[0]}::{','.join(parameters) or 'shared'}"


def _ours(func: object) -> bool:
    code = getattr(func, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(_SUITE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _shared_setup_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
