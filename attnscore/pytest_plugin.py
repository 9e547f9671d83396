"""pytest plugin: run attnscore specs against your implementation, one test item per case.

    pytest --attnscore-impl=pkg.mod:function --attnscore-spec=specs/attention.yaml \
           [--attnscore-dtype=float32 ...] [--attnscore-device=cuda] [--attnscore-xfail=FILE]
           [--attnscore-where='n_q<=n_k' ...]

The spec files are collected like test files, so items have ordinary node ids,
``<spec file>::<spec id>::<case id>[<dtype>]`` (the dtype is the parameter, as in a parametrized
test), e.g. ``specs/attention.yaml::attention::property:deterministic[float32]``: pytest counts
them, ``-k`` selects among them, ``--lf`` reruns the failed ones, an id pytest printed runs that
item alone, and JUnit XML gets class ``specs.attention.yaml.attention`` and name
``property:deterministic[float32]``.
A failing item prints the case's feedback: statement and spec line, counterexample, expected vs got
with the tolerance, the diagnosed mistake, and a one-line reproduction.

The xfail file lists expected failures and skips, one per line, ``#`` starts a comment::

    attention[float16]::property:matches_reference   xfail   fp16 kernel is approximate
    *::property:deterministic                        skip    atomics on GPU

An ``allow:<corner>`` line sets a convention corner aside for the items it matches (any value is
taken as right there, every other entry is still compared; :mod:`attnscore.catalogue.conventions`)::

    *::*   allow:fully_masked_row   finfo.min masking: the mean of V by design

The first column is matched (fnmatch, so ``*`` works) against ``<spec id>[<dtype>]::<case id>``,
the end of the node id ``<spec id>::<case id>[<dtype>]``, or just ``<case id>``. An entry that
matches no item is reported as a warning (when whole spec files are collected), so stale entries do
not pile up. Registered through the ``pytest11`` entry point in pyproject.toml.
"""

from __future__ import annotations

import fnmatch
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pytest's own type for a failure's representation; only for the annotation
    from _pytest._code.code import TerminalRepr

__all__ = ["XfailEntry", "read_xfail_file", "AttnscoreXfailWarning"]


class AttnscoreXfailWarning(pytest.PytestWarning):
    """An entry of the ``--attnscore-xfail`` file is malformed or matches no test item."""


@dataclass(frozen=True)
class XfailEntry:
    """One line of the xfail file: a pattern, ``xfail`` or ``skip``, a reason, and its line."""

    pattern: str
    action: str
    reason: str
    line: int

    def matches(self, key: str, case_id: str) -> bool:
        if self.pattern in (key, case_id):  # literal first: "[float32]" is not a character class here
            return True
        return fnmatch.fnmatchcase(key, self.pattern) or fnmatch.fnmatchcase(case_id, self.pattern)


def read_xfail_file(path: str | Path) -> list[XfailEntry]:
    """Parse the xfail file; raise pytest.UsageError naming the line for a malformed entry."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise pytest.UsageError(f"--attnscore-xfail {path}: cannot read the file ({exc})") from None
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or not (parts[1] in ("xfail", "skip") or parts[1].startswith("allow:")):
            raise pytest.UsageError(
                f"{path}:{number}: expected '<case id> xfail|skip|allow:<corner> [reason]', found {raw.strip()!r}"
            )
        if parts[1].startswith("allow:"):
            from attnscore.catalogue.conventions import CORNERS

            if parts[1][len("allow:") :] not in CORNERS:
                raise pytest.UsageError(
                    f"{path}:{number}: expected allow:<corner> with a corner of {', '.join(sorted(CORNERS))}, "
                    f"found {parts[1]!r}"
                )
        entries.append(XfailEntry(parts[0], parts[1], parts[2] if len(parts) > 2 else "", number))
    return entries


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attnscore", "attnscore: run attention specs against an implementation")
    group.addoption(
        "--attnscore-impl",
        metavar="MODULE:FUNCTION",
        default=None,
        help="implementation to test, e.g. mypkg.attention:scaled_score_matrix",
    )
    group.addoption(
        "--attnscore-spec", metavar="SPEC", action="append", default=[], help="spec file to run (repeatable)"
    )
    group.addoption(
        "--attnscore-dtype",
        metavar="DTYPE",
        action="append",
        default=[],
        choices=["float64", "float32", "float16", "bfloat16"],  # DTYPES, spelled out: no torch at plugin load
        help="dtype to test (repeatable; default: each spec's dtypes)",
    )
    group.addoption("--attnscore-device", metavar="DEVICE", default="cpu", help="cpu (default), cuda or cuda:N")
    group.addoption("--attnscore-seed", metavar="N", type=int, default=None, help="base seed (default: the spec's)")
    group.addoption(
        "--attnscore-xfail", metavar="FILE", default=None, help="file of expected failures and skips by case id"
    )
    group.addoption(
        "--attnscore-allow",
        metavar="CORNER",
        action="append",
        default=[],
        help="set a convention corner aside, e.g. fully_masked_row (repeatable): any value is taken as right "
        "there and every other entry is still compared",
    )
    group.addoption(
        "--attnscore-where",
        metavar="BOUND",
        action="append",
        default=[],
        help="bound the shapes to the kernel's domain, e.g. n_q<=n_k (repeatable): generated inputs are drawn "
        "inside it; worked examples outside it are skipped by constraint",
    )


class AttnscoreCaseFailure(AssertionError):
    """A case failed; the message is the case's full feedback."""


class SpecCaseItem(pytest.Item):
    """One case of one spec in one dtype."""

    def __init__(self, *, spec: Any, case: Any, dtype: str, function: Any, device: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.case, self.dtype, self.function, self.device = spec, case, dtype, function, device

    def runtest(self) -> None:
        from attnscore.check.implementation import pinned_precision
        from attnscore.check.runner import InProcessRunner
        from attnscore.check.session import Session
        from attnscore.report.feedback import pytest_text

        seed = self.config.getoption("attnscore_seed")
        session = Session(
            self.spec, (self.case,), self.dtype, self.device, self.nodeid, self.spec.seed if seed is None else seed
        )
        with pinned_precision():
            bound = self.spec.contract.binding(self.function)
            (result,) = session.run(
                InProcessRunner(bound, self.device),
                make_runner=lambda: InProcessRunner(bound, self.device),
            ).cases
        if result.failure is not None:
            raise AttnscoreCaseFailure(pytest_text(result.failure))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, AttnscoreCaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.spec.path), max(self.case.line - 1, 0), f"{self.spec.id}[{self.dtype}]::{self.case.id}"


class SpecNode(pytest.Collector):
    """The cases of one spec: the ``<spec id>`` node; each case once per requested dtype."""

    def __init__(self, *, spec: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self) -> list[pytest.Item]:
        from attnscore.check.cases import build_cases

        config = self.config
        function = config._attnscore_function  # type: ignore[attr-defined]
        device = config.getoption("attnscore_device")
        items: list[pytest.Item] = []
        bounds = config._attnscore_bounds  # type: ignore[attr-defined]
        spec, skipped = self.spec.bounded(bounds) if bounds else (self.spec, [])
        try:
            spec = spec.allowing(tuple(config.getoption("attnscore_allow")))
        except ValueError as exc:
            raise pytest.UsageError(f"--attnscore-allow: {exc}") from None
        reasons = {text.split(" ", 1)[0]: text.split(" ", 1)[1].strip("()") for text in skipped}
        for dtype in config.getoption("attnscore_dtype") or self.spec.dtypes:
            cases = build_cases(spec, dtype, config.getoption("attnscore_seed"))
            if reasons:  # skipped by constraint: listed as skipped items, in the spec's order
                kept = {c.id: c for c in cases}
                cases = [kept.get(c.id, c) for c in build_cases(self.spec, dtype, config.getoption("attnscore_seed"))]
            for case in cases:
                item = SpecCaseItem.from_parent(
                    self,
                    name=f"{case.id}[{dtype}]",  # like a parametrized test: the dtype is the parameter
                    # given as a string, so pytest parses "[dtype]" as the parameter, as in the
                    # ids it stores for --lf and reads back from the command line
                    nodeid=f"{self.nodeid}::{case.id}[{dtype}]",
                    spec=spec,
                    case=case,
                    dtype=dtype,
                    function=function,
                    device=device,
                )
                if case.id in reasons:
                    item.add_marker(pytest.mark.skip(reason=f"skipped by constraint: {reasons[case.id]}"))
                items.append(item)
        return items


class SpecFile(pytest.File):
    """A spec file given with ``--attnscore-spec``: its ``<spec id>`` node."""

    def collect(self) -> list[pytest.Collector]:
        from attnscore.spec.load import load_spec
        from attnscore.spec.located import SpecError

        try:
            spec = load_spec(self.path)
        except SpecError as exc:
            raise pytest.UsageError(f"--attnscore-spec {self.path}: invalid spec\n{exc}") from None
        try:
            spec.contract.bounded(self.config._attnscore_bounds)  # type: ignore[attr-defined]
        except ValueError as exc:
            raise pytest.UsageError(f"--attnscore-where: {exc}") from None
        return [SpecNode.from_parent(self, name=spec.id, spec=spec)]


def _spec_paths(config: pytest.Config) -> list[Path]:
    return [Path(p).resolve() for p in config.getoption("attnscore_spec", None) or []]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "attnscore: a case generated from an attnscore spec")
    impl = config.getoption("attnscore_impl", None)
    specs = config.getoption("attnscore_spec", None) or []
    if not impl and not specs:
        return
    if not impl or not specs:
        raise pytest.UsageError("--attnscore-impl and --attnscore-spec go together: give both")
    from attnscore.check.implementation import ImplError, check_device, load_impl

    for spec_path in specs:
        if not Path(spec_path).is_file():
            raise pytest.UsageError(f"--attnscore-spec {spec_path}: no such file")
    try:
        config._attnscore_function = load_impl(impl)  # type: ignore[attr-defined]
        check_device(config.getoption("attnscore_device"))
    except ImplError as exc:
        raise pytest.UsageError(str(exc)) from None
    from attnscore.maths.bounds import parse_bound

    try:
        config._attnscore_bounds = tuple(parse_bound(t) for t in config.getoption("attnscore_where"))  # type: ignore[attr-defined]
    except ValueError as exc:
        raise pytest.UsageError(f"--attnscore-where: {exc}") from None
    xfail = config.getoption("attnscore_xfail")
    config._attnscore_xfail = read_xfail_file(xfail) if xfail else []  # type: ignore[attr-defined]
    # The spec files are collected like test files: pytest counts, selects (-k, --lf) and reruns
    # their items by the node ids it prints. A spec already named in the arguments (a whole file or
    # one of its node ids) is not added again.
    named = {Path(str(arg).split("::", 1)[0]).resolve() for arg in config.args}
    config._attnscore_whole = [p for p in _spec_paths(config) if p not in named]  # type: ignore[attr-defined]
    config.args.extend(str(p) for p in config._attnscore_whole)  # type: ignore[attr-defined]
    whole_named = {Path(str(arg)).resolve() for arg in config.args if "::" not in str(arg)}
    config._attnscore_complete = all(p in whole_named for p in _spec_paths(config))  # type: ignore[attr-defined]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not config.getoption("attnscore_impl", None) or file_path.resolve() not in _spec_paths(config):
        return None
    seen: set[Path] = config.__dict__.setdefault("_attnscore_seen", set())
    if file_path.resolve() in seen:  # reached twice (a folder argument holding it, and the file): once
        return None
    seen.add(file_path.resolve())
    return SpecFile.from_parent(parent, path=file_path)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("attnscore_spec", None) or not config.getoption("attnscore_impl", None):
        return
    entries: list[XfailEntry] = config._attnscore_xfail  # type: ignore[attr-defined]
    used: set[int] = set()
    for item in items:
        if not isinstance(item, SpecCaseItem):
            continue
        item.add_marker(pytest.mark.attnscore)
        key = f"{item.spec.id}[{item.dtype}]::{item.case.id}"
        node_key = f"{item.spec.id}::{item.case.id}[{item.dtype}]"  # the end of the item's node id
        for entry in entries:  # allow:<corner> entries: every matching one sets its corner aside
            if entry.action.startswith("allow:") and (
                entry.matches(key, item.case.id) or entry.matches(node_key, item.case.id)
            ):
                used.add(entry.line)
                try:
                    item.spec = item.spec.allowing((entry.action[len("allow:") :],))
                except ValueError as exc:
                    raise pytest.UsageError(f"{config.getoption('attnscore_xfail')}:{entry.line}: {exc}") from None
        for entry in entries:
            if entry.action.startswith("allow:"):
                continue
            if entry.matches(key, item.case.id) or entry.matches(node_key, item.case.id):
                used.add(entry.line)
                marker = (
                    pytest.mark.skip(reason=entry.reason or "listed in the xfail file")
                    if entry.action == "skip"
                    else pytest.mark.xfail(reason=entry.reason or "listed in the xfail file", strict=False)
                )
                item.add_marker(marker)
                break
    if not config._attnscore_complete:  # type: ignore[attr-defined]
        return  # only some items were asked for: an entry for the others is not stale
    for entry in entries:
        if entry.line not in used:
            warnings.warn(
                AttnscoreXfailWarning(
                    f"{config.getoption('attnscore_xfail')}:{entry.line}: {entry.pattern!r} "
                    "matches no attnscore test item"
                ),
                stacklevel=1,
            )
