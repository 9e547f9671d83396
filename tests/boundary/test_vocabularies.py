"""Closed vocabularies travel as enums: verdicts and return kinds, each spelled in one place."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import RETURN_KINDS, CallFailure, Received, ReturnKind, to_received
from attnscore.boundary.verdict import Verdict
from attnscore.check.compare import compare
from attnscore.report.feedback import mismatch_text
from attnscore.spec.load import DEFAULT_ACCEPT

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("verdict", list(Verdict))
def test_call_failure_verdict_is_a_verdict_from_member_or_word(verdict):
    """A CallFailure built from the member or from its word holds the member, and both are equal."""
    by_word = CallFailure(verdict.value, "m")
    by_member = CallFailure(verdict, "m")
    assert by_word.verdict is verdict and by_member.verdict is verdict
    assert by_word == by_member


def test_call_failure_refuses_a_word_outside_the_verdicts():
    """A misspelt verdict is one clear ValueError naming it, never a failure with a free string."""
    with pytest.raises(ValueError, match="'slow' is not a valid Verdict"):
        CallFailure("slow", "m")


def test_return_kinds_are_one_vocabulary():
    """The spec default, compare's default, the JSON Schema and the enum list the same kinds."""
    assert RETURN_KINDS == ("tensor", "ndarray", "list", "number") == tuple(k.value for k in ReturnKind)
    assert DEFAULT_ACCEPT == RETURN_KINDS
    for schema in (ROOT / "specs/spec-v1.schema.json", ROOT / "attnscore/bundled_specs/spec-v1.schema.json"):
        text = schema.read_text(encoding="utf-8")
        assert json.dumps(list(RETURN_KINDS)) in text, f"{schema}: accept's enum is not RETURN_KINDS"


def test_schema_names_every_contract():
    """The schema's description of function.contract lists exactly the registered contracts, in order."""
    from attnscore.maths.contracts import CONTRACTS

    schema = json.loads((ROOT / "specs/spec-v1.schema.json").read_text(encoding="utf-8"))
    text = schema["properties"]["function"]["properties"]["contract"]["description"]
    listed = text.removeprefix("Reference contract: ").removesuffix(".").replace(" or ", ", ").split(", ")
    assert listed == list(CONTRACTS)


@pytest.mark.parametrize(
    ("value", "kind"),
    [(np.zeros(2), ReturnKind.NDARRAY), ([1.0, 2.0], ReturnKind.LIST), (2.5, ReturnKind.NUMBER)],
)
def test_received_kind_is_a_return_kind_that_reads_as_its_word(value, kind):
    """to_received records the member; it prints and serialises as the spec's word."""
    received = to_received(value)
    assert isinstance(received, Received) and received.kind is kind
    assert f"{received.kind}" == kind.value and json.dumps(received.kind) == json.dumps(kind.value)
    assert Received(kind.value, "float64", "cpu", np.zeros(1)).kind is kind


def test_received_refuses_an_unknown_kind():
    """A kind outside the vocabulary is a ValueError at construction."""
    with pytest.raises(ValueError, match="'set' is not a valid ReturnKind"):
        Received("set", "float64", "cpu", np.zeros(1))


def test_refused_return_kind_names_the_words():
    """A kind the spec does not accept is named by its word in the feedback."""
    got = Received("list", "float64", "cpu", np.zeros(2))
    m = compare(got, np.zeros(2), np.zeros(2), accept=("tensor",))
    assert m is not None and m.verdict is Verdict.BAD_RETURN_TYPE
    assert mismatch_text(m) == "returned a list; this function must return a tensor"


def test_no_verdict_value_round_trips_outside_the_worker_side():
    """``Verdict.X.value`` is gone from boundary/outputs, check/, report/ and grade/."""
    pattern = re.compile(r"Verdict\.[A-Z_]+\.value")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("check", "report", "grade")
        for path in sorted((ROOT / "attnscore" / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if pattern.search(line)
    ]
    found += [
        f"boundary/outputs.py:{n}"
        for n, line in enumerate((ROOT / "attnscore/boundary/outputs.py").read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert found == []


def test_the_pytest_plugins_dtype_choice_is_the_dtype_table() -> None:
    """The plugin spells the dtype table out (importing it would load torch in every pytest run);
    it must stay the table, in its order."""
    from attnscore import pytest_plugin
    from attnscore.boundary.dtypes import DTYPES

    seen: dict[str, object] = {}

    class Group:
        def addoption(self, *names: str, **options: object) -> None:
            seen[names[0]] = options.get("choices")

    class Parser:
        def getgroup(self, *args: object, **kwargs: object) -> Group:
            return Group()

        def addini(self, *args: object, **kwargs: object) -> None:
            return None

    pytest_plugin.pytest_addoption(Parser())  # type: ignore[arg-type]
    assert seen["--attnscore-dtype"] == list(DTYPES)
