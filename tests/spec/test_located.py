"""Reading YAML: libyaml's parse and PyYAML's own give the same nodes, data, positions and problems."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.spec import located
from attnscore.spec.located import compose, read_yaml

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in [*ROOT.rglob("*.yaml"), *ROOT.rglob("*.yml")] if ".venv" not in p.parts)
needs_libyaml = pytest.mark.skipif(located._LIBYAML is None, reason="PyYAML was built without libyaml")


def _difference(a: yaml.Node, b: yaml.Node, where: str = "", seen: set[int] | None = None) -> str | None:
    """Where the node trees ``a`` and ``b`` first differ (kind, tag, marks, value, style), else None."""
    seen = set() if seen is None else seen
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} against {type(b).__name__}"
    if id(a) in seen:  # an alias: the node was compared where its anchor is
        return None
    seen.add(id(a))
    for mark in ("start_mark", "end_mark"):
        ma, mb = getattr(a, mark), getattr(b, mark)
        if (ma.line, ma.column) != (mb.line, mb.column):
            return f"{where}: {mark} {ma.line}:{ma.column} against {mb.line}:{mb.column}"
    if a.tag != b.tag:
        return f"{where}: tag {a.tag} against {b.tag}"
    if isinstance(a, yaml.ScalarNode):
        same = a.value == b.value and (a.style or None) == (b.style or None)
        return None if same else f"{where}: {a.value!r} ({a.style!r}) against {b.value!r} ({b.style!r})"
    if bool(a.flow_style) != bool(b.flow_style) or len(a.value) != len(b.value):  # block: None or False
        return f"{where}: flow style or length"
    pairs = a.value if isinstance(a, yaml.MappingNode) else [(None, x) for x in a.value]
    others = b.value if isinstance(b, yaml.MappingNode) else [(None, x) for x in b.value]
    for i, ((ka, va), (kb, vb)) in enumerate(zip(pairs, others, strict=True)):
        if ka is not None and (found := _difference(ka, kb, f"{where}/key {i}", seen)):
            return found
        if found := _difference(va, vb, f"{where}/{i}", seen):
            return found
    return None


def _read_both(text: str) -> tuple[object, object]:
    """``read_yaml(text)`` with libyaml, then with PyYAML's parser alone."""
    fast = read_yaml(text, "f.yaml")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(located, "_LIBYAML", None)
        pure = read_yaml(text, "f.yaml")
    return fast, pure


@needs_libyaml
@pytest.mark.slow
def test_libyaml_and_pyyaml_compose_every_yaml_file_of_the_repository_alike():
    """Every spec, assignment and example file: the same node tree, marks included, from both parsers."""
    assert len(FILES) >= 40
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        fast = yaml.compose(text, Loader=located._LIBYAML)
        pure = yaml.compose(text, Loader=yaml.SafeLoader)
        assert (fast is None) == (pure is None), path
        if fast is not None:
            assert _difference(fast, pure) is None, (path, _difference(fast, pure))


_SCALARS = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["1e-3", "010", "0x1F", "1_000", "1:30", "yes", "no", "~", ".inf", "-.5", "null", "é √ ·", "a: b"]),
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@needs_libyaml
@settings(max_examples=150, deadline=None)
@given(document=_DOCUMENTS, flow=st.sampled_from([None, True, False]), unicode=st.booleans())
def test_libyaml_and_pyyaml_read_generated_documents_alike(document, flow, unicode):
    """Documents of every scalar kind (YAML 1.1's octal, sexagesimal and exponent traps, quoting,
    non-ASCII text), block and flow style: the same nodes, and read_yaml gives the same data,
    positions and problems either way."""
    text = yaml.safe_dump({"spec": document}, default_flow_style=flow, allow_unicode=unicode)
    assert _difference(compose(text), yaml.compose(text, Loader=yaml.SafeLoader)) is None
    (fast, fast_problems), (pure, pure_problems) = _read_both(text)
    assert fast_problems == pure_problems
    assert fast is not None and pure is not None
    assert (fast.data, fast.values, fast.keys, fast.texts) == (pure.data, pure.values, pure.keys, pure.texts)


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 2\n",  # an unclosed flow sequence
        "a: 1\n\tb: 2\n",  # a tab where indentation is read
        "a: 1\n---\nb: 2\n",  # two documents
        "a: \x07\n",  # a control character
        "a: b: c\n",  # a mapping value where none is allowed
        "",  # an empty file
        "step: 010\nrate: 1e-3\nflag: no\n",  # read, with YAML 1.1's octal flagged
    ],
    ids=["unclosed", "tab", "two-documents", "control-character", "nested-value", "empty", "traps"],
)
def test_a_file_s_problems_read_the_same_with_and_without_libyaml(text):
    """Whatever libyaml refuses is parsed again by PyYAML, so the located problem and its wording are
    PyYAML's either way; a file both read gives the same data and problems."""
    (fast, fast_problems), (pure, pure_problems) = _read_both(text)
    assert fast_problems == pure_problems
    assert (fast is None) == (pure is None)
    if fast is not None and pure is not None:
        assert (fast.data, fast.values, fast.texts) == (pure.data, pure.values, pure.texts)
    if text.startswith("step"):
        assert fast is not None and fast.data == {"step": 8, "rate": 0.001, "flag": False}
        assert [p.field for p in fast_problems] == ["step"] and "octal 8" in fast_problems[0].message
    elif text:
        assert fast is None and fast_problems[0].field == "(yaml)", fast_problems


@needs_libyaml
def test_libyaml_is_used_where_it_reads_the_text(monkeypatch):
    """The C parser composes a file it reads (PyYAML's pure parser is not called); the pure parser
    composes one libyaml refuses."""
    calls: list[str] = []
    pure_compose = yaml.compose

    def spy(text, Loader):  # noqa: N803 - PyYAML's own keyword
        calls.append("libyaml" if Loader is located._LIBYAML else "pyyaml")
        return pure_compose(text, Loader=Loader)

    monkeypatch.setattr(yaml, "compose", spy)
    assert compose("a: 1\n").value[0][1].value == "1"
    assert calls == ["libyaml"]
    calls.clear()
    with pytest.raises(yaml.YAMLError):
        compose("a: [1\n")
    assert calls == ["libyaml", "pyyaml"]
