"""Tests for the per-call binding of a worker serving several functions (attnscore.boundary.wire.Binding,
CallRequest.function) and the entry file chosen for several functions (attnscore.boundary.entry_file)."""

from __future__ import annotations

import pytest

from attnscore.boundary import wire
from attnscore.boundary.entry_file import choose_entry


def test_a_call_names_its_function_on_the_wire():
    """CallRequest.function travels as "function" and comes back; "" (one spec) is left out of the message."""
    named = wire.CallRequest(4, "float32", "cpu", ("S",), ({"name": "S"},), function="softmax")
    message = wire.encode_message(named)
    assert message["function"] == "softmax"
    assert wire.decode_call(message) == named
    plain = wire.encode_message(wire.CallRequest(4, "float32", "cpu", ("S",), ({"name": "S"},)))
    assert "function" not in plain and wire.decode_call(plain).function == ""


@pytest.mark.parametrize("bad", ["2fast", "a.b", 7, ["f"]], ids=["digit first", "dotted", "number", "list"])
def test_a_function_that_is_not_an_identifier_is_refused(bad):
    """The worker refuses a call whose function is not an identifier (what getattr would look up)."""
    message = {"type": "call", "id": 1, "dtype": "float32", "names": [], "inputs": [], "function": bad}
    with pytest.raises(ValueError, match="expected function as an identifier"):
        wire.decode_call(message)


def test_binding_is_a_plain_frozen_value():
    """A Binding compares by value and defaults to the function resolved at import with no settings."""
    assert wire.Binding() == wire.Binding("", (), (), None, False)
    assert wire.Binding("sdpa", ("attn_mask",), (("scale", 0.5),)) == wire.Binding(
        "sdpa", ("attn_mask",), (("scale", 0.5),)
    )
    with pytest.raises(AttributeError):
        wire.Binding().function = "x"  # type: ignore[misc]


def test_the_entry_for_several_functions_defines_the_most_of_them(tmp_path):
    """Several names: the file defining the most of them wins; one name chooses as before."""
    (tmp_path / "helpers.py").write_text("def softmax(x):\n    return x\n", encoding="utf-8")
    (tmp_path / "hw.py").write_text(
        "from helpers import softmax\n\ndef sdpa(q, k, v):\n    return q\n\ndef scores(q, k):\n    return q\n",
        encoding="utf-8",
    )
    assert choose_entry(str(tmp_path), ("softmax", "sdpa", "scores")) == ("hw.py", "")
    assert choose_entry(str(tmp_path), "softmax") == ("helpers.py", "")
    found, why = choose_entry(str(tmp_path), ("attention", "mha"))
    assert (
        found is None
        and why == "none of your files defines a function named any of attention, mha (files: helpers.py, hw.py)"
    )
    (tmp_path / "other.py").write_text("def sdpa(q, k, v):\n    return q\n\ndef scores(q, k):\n    return q\n")
    (tmp_path / "hw.py").write_text("def sdpa(q, k, v):\n    return q\n\ndef scores(q, k):\n    return q\n")
    found, why = choose_entry(str(tmp_path), ("sdpa", "scores"))
    assert found is None and why == (
        "more than one of your files defines any of sdpa, scores (hw.py, other.py); keep it in one file, "
        "or ask your instructor which file is graded"
    )
