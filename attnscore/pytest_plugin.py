"""pytest plugin: run attnscore specs against your implementation, one test item per case.

    pytest --attnscore-impl=pkg.mod:function --attnscore-spec=specs/attention.yaml \
           [--attnscore-dtype=float32 ...] [--attnscore-device=cuda] [--attnscore-xfail=FILE]
           [--attnscore-where='n_q<=n_k' ...] [--attnscore-allow=CORNER ...] [--attnscore-tie=d_v=d_k ...]
           [--attnscore-ratio=K] [--attnscore-keyword=NAME=VALUE ...] [--attnscore-sweep=NAME=V1;V2 ...]

``--attnscore-spec`` takes a spec file or a bundled spec's id (``--attnscore-spec=attention``). The
shape and tolerance options are parsed and applied by :mod:`attnscore.check.engineer_options`, as
for ``attnscore test``; every spec is loaded and reshaped once when pytest is configured, so an
invalid spec or option is one usage error before anything is collected. A keyword of the spec's
contract (``--attnscore-keyword=window_size=3,0``) configures the reference too; a worked example
whose expected value no longer holds is a skipped item saying why. ``--attnscore-sweep`` runs every
case at every point of a grid of keyword values (or ``where`` bounds), the point in the item's
parameter: ``property:matches_reference[float32-causal=true-window_size=3,0]``.

The spec files are collected like test files, so items have ordinary node ids,
``<spec file>::<spec id>::<case id>[<dtype>]`` (the dtype is the parameter, as in a parametrized
test), e.g. ``specs/attention.yaml::attention::property:deterministic[float32]``: pytest counts
them, ``-k`` selects among them, ``--lf`` reruns the failed ones, an id pytest printed runs that
item alone, and JUnit XML gets class ``specs.attention.yaml.attention`` and name
``property:deterministic[float32]``. A spec file outside the rootdir (a bundled spec in another
project) is given its absolute path, so that its ids never start with ``::`` and read back; its
JUnit class is ``<file name>.<spec id>``. JUnit ids are the same in serial runs and with
pytest-xdist (``-n 2``): never a leading dot or the install path.
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
                    f"{path}:{number}: expected allow:<corner> with <corner> one of {', '.join(sorted(CORNERS))}, "
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
        "--attnscore-spec",
        metavar="SPEC",
        action="append",
        default=[],
        help="spec to run: a file or a bundled spec's id, e.g. scaled_score_matrix (repeatable)",
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
        "--attnscore-tie",
        metavar="SYMBOL=SAME_AS",
        action="append",
        default=[],
        help="give two shape symbols one size, as a kernel requires, e.g. d_v=d_k (repeatable): worked examples "
        "that break it are adapted where that keeps what they check, else skipped items",
    )
    group.addoption(
        "--attnscore-ratio",
        metavar="K",
        default=None,
        help="use the low-precision rule: error at most K x the reference's own error in the same dtype",
    )
    group.addoption(
        "--attnscore-keyword",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="pass a constant keyword argument to every call, e.g. is_causal=true (repeatable); a keyword of the "
        "spec's contract (window_size=3,0, causal=true, softcap=30) configures the reference too",
    )
    group.addoption(
        "--attnscore-sweep",
        metavar="NAME=V1;V2;...",
        action="append",
        default=[],
        help="run every case at every point of a grid (repeatable; the grid is the product): NAME a keyword of "
        "the spec's contract, e.g. 'causal=true;false', or where with shape bounds, e.g. 'where=h_q==h_kv;h_q>h_kv'",
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

    def __init__(
        self, *, spec: Any, case: Any, dtype: str, function: Any, device: str, point: str = "", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.spec, self.case, self.dtype, self.function, self.device = spec, case, dtype, function, device
        self.point = point  # the --attnscore-sweep grid point, "causal=true-window_size=3,0", or ""

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
            how: dict[str, Any] = {
                "logsumexp": self.spec.logsumexp,
                "factory": self.spec.factory,
                "bind": self.spec.contract.binding,
                "module": self.spec.module,
            }
            (result,) = session.run(
                InProcessRunner(self.function, self.device, **how),
                make_runner=lambda: InProcessRunner(self.function, self.device, **how),
            ).cases
        if result.failure is not None:
            raise AttnscoreCaseFailure(pytest_text(result.failure))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, AttnscoreCaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        parameter = "-".join(p for p in (self.dtype, self.point) if p)
        return Path(self.spec.path), max(self.case.line - 1, 0), f"{self.spec.id}[{parameter}]::{self.case.id}"


class SpecNode(pytest.Collector):
    """The cases of one spec: the ``<spec id>`` node; each case once per requested dtype."""

    def __init__(self, *, spec: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self) -> list[pytest.Item]:
        from attnscore.check.cases import build_cases

        config = self.config
        device = config.getoption("attnscore_device")
        items: list[pytest.Item] = []
        points = config._attnscore_loaded[Path(self.spec.path).resolve()][1]  # type: ignore[attr-defined]
        for dtype in config.getoption("attnscore_dtype") or self.spec.dtypes:
            for label, spec, reshaped, function in points:
                reasons = reshaped.left_out()
                cases = build_cases(spec, dtype, config.getoption("attnscore_seed"))
                if reasons:  # left out by a tie, a keyword or a bound: skipped items, in the spec's order
                    kept = {c.id: c for c in cases}
                    original = build_cases(self.spec, dtype, config.getoption("attnscore_seed"))
                    cases = [kept.get(c.id, c) for c in original if c.id in kept or c.id in reasons]
                parameter = "-".join([dtype, *label])
                for case in cases:
                    if case.kind == "rule":  # an assignment rule is about a student's calls over a whole graded run
                        continue
                    item = SpecCaseItem.from_parent(
                        self,
                        name=f"{case.id}[{parameter}]",  # like a parametrized test: the dtype is the parameter
                        # given as a string, so pytest parses "[dtype]" as the parameter, as in the
                        # ids it stores for --lf and reads back from the command line
                        nodeid=f"{self.nodeid}::{case.id}[{parameter}]",
                        spec=spec,
                        case=case,
                        dtype=dtype,
                        function=function,
                        device=device,
                        point="-".join(label),
                    )
                    if case.id in reasons:
                        item.add_marker(pytest.mark.skip(reason=reasons[case.id]))
                    items.append(item)
        return items


class SpecFile(pytest.File):
    """A spec file given with ``--attnscore-spec``: its ``<spec id>`` node."""

    def collect(self) -> list[pytest.Collector]:
        spec = self.config._attnscore_loaded[self.path.resolve()][0]  # type: ignore[attr-defined]
        return [SpecNode.from_parent(self, name=spec.id, spec=spec)]


def _spec_paths(config: pytest.Config) -> list[Path]:
    """The resolved files of ``--attnscore-spec`` (a file, or a bundled spec's id), as configured."""
    return list(config.__dict__.get("_attnscore_spec_paths", []))


def _file_node_id(config: pytest.Config, path: Path) -> str | None:
    """The node id of a spec file outside the rootdir, which pytest would give an id starting with
    ``::`` (a file named on the command line): its absolute path, which ``pytest 'ID'`` reads back
    from any folder (and which pytest shows relative to the folder it started in, as it shows every
    id). None for a file inside the rootdir, whose id pytest makes relative to the rootdir as for
    any test file."""
    try:
        path.relative_to(config.rootpath)
        return None
    except ValueError:
        return path.as_posix()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "attnscore: a case generated from an attnscore spec")
    impl = config.getoption("attnscore_impl", None)
    specs = config.getoption("attnscore_spec", None) or []
    if not impl and not specs:
        return
    if not impl or not specs:
        raise pytest.UsageError("--attnscore-impl and --attnscore-spec go together: give both")
    from attnscore.check.engineer_options import EngineerOptions, OptionError
    from attnscore.check.implementation import ImplError, check_device, load_impl
    from attnscore.spec.bundled import SpecNotFound, resolve_spec

    paths = []
    for spec_path in specs:
        try:
            paths.append(resolve_spec(spec_path).resolve())
        except SpecNotFound as exc:
            raise pytest.UsageError(f"--attnscore-spec: {exc}") from None
    config._attnscore_spec_paths = paths  # type: ignore[attr-defined]
    config.pluginmanager.register(_JunitClasses(config), "attnscore-junit-classes")
    try:
        config._attnscore_function = load_impl(impl)  # type: ignore[attr-defined]
        check_device(config.getoption("attnscore_device"))
    except ImplError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        options = EngineerOptions.parse(
            ties=config.getoption("attnscore_tie"),
            wheres=config.getoption("attnscore_where"),
            allows=config.getoption("attnscore_allow"),
            ratio=config.getoption("attnscore_ratio"),
            keywords=config.getoption("attnscore_keyword"),
            sweeps=config.getoption("attnscore_sweep"),
            prefix="--attnscore-",
        )
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    config._attnscore_options = options  # type: ignore[attr-defined]
    # Each spec is loaded and reshaped once, here, so that an invalid spec or an option the spec's
    # contract does not have (--attnscore-tie d_x=d_k) is one usage error before anything runs.
    from attnscore.spec.load import load_spec
    from attnscore.spec.located import SpecError

    loaded = {}
    function = config._attnscore_function  # type: ignore[attr-defined]
    for path in paths:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            raise pytest.UsageError(f"--attnscore-spec {path}: invalid spec\n{exc}") from None
        try:  # per grid point (one without --attnscore-sweep): its label, spec, what changed, function
            options.check_sweeps(spec)
            points = []
            for point in options.grid():
                at = options.at(point)
                points.append(
                    ([f"{n}={v}".replace(" ", "") for n, v in point], *at.reshape(spec), at.bind(function, spec))
                )
        except OptionError as exc:
            raise pytest.UsageError(f"{exc} (spec {spec.id})") from None
        loaded[path] = (spec, points)
    config._attnscore_loaded = loaded  # type: ignore[attr-defined]
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
    node_id = _file_node_id(config, file_path.resolve())
    if node_id is None:
        return SpecFile.from_parent(parent, path=file_path)
    return SpecFile.from_parent(parent, path=file_path, nodeid=node_id)


def junit_class(config: pytest.Config, nodeid: str) -> str | None:
    """The JUnit class of the item ``nodeid`` when its spec file lies outside the rootdir (its node
    id starts with the file's absolute path, which pytest's JUnit writer would turn into a class
    name with a leading dot and the whole install path): ``<file name>.<spec id>``, as for a spec
    inside the rootdir. None for any other item (pytest's own class name is kept).

    Worked out from the node id alone, so the process that writes the JUnit file (pytest-xdist's
    controller, which never holds the items) names the class as a serial run does.
    """
    file, _, rest = nodeid.partition("::")
    if not file.startswith("/") or not rest or Path(file) not in _spec_paths(config):
        return None
    return f"{Path(file).name}.{rest.split('::', 1)[0]}"


class _JunitClasses:
    """The JUnit class names of items whose spec file lies outside the rootdir (:func:`junit_class`),
    in serial runs and under pytest-xdist alike: registered as a plugin when specs are configured."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Set the class on the JUnit writer's record of the item (found by the report, so each of
        xdist's per-worker records too) before the writer reads the report, for every phase (a
        skipped item's setup report too); the writer keeps an attribute set this way."""
        try:
            from _pytest.junitxml import xml_key  # the JUnit writer's handle: pytest has no public one
        except ImportError:  # pragma: no cover - a pytest without it writes its own class name
            return
        xml = self.config.stash.get(xml_key, None)  # None where no JUnit file is written (an xdist worker)
        classname = junit_class(self.config, report.nodeid)
        if xml is not None and classname is not None:
            xml.node_reporter(report).add_attribute("classname", classname)


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
