"""The engineer's options (attnscore/check/engineer_options.py): keyword values read as their kinds,
the contract configured by --keyword, unknown names passed through, --sweep grids."""

from __future__ import annotations

import functools

import pytest

from attnscore.check.engineer_options import (
    EngineerOptions,
    OptionError,
    Reshaped,
    keyword_arguments,
    keyword_value,
)
from attnscore.check.verify import bundled_spec_path
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec

SLIDING = load_spec(bundled_spec_path("sliding_window"))
ATTENTION = load_spec(bundled_spec_path("attention"))
FLASH = get_contract("flash_attn")
KERNEL = get_contract("kernel_attention")


@pytest.mark.parametrize(
    "contract, name, text, value",
    [
        pytest.param(FLASH, "window_size", "3,0", (3, 0), id="window with a comma"),
        pytest.param(FLASH, "window_size", "[3, 0]", (3, 0), id="window as a YAML list"),
        pytest.param(FLASH, "window_size", "(3,0)", (3, 0), id="window as a tuple"),
        pytest.param(FLASH, "window_size", " -1 , -1 ", (-1, -1), id="unbounded window"),
        pytest.param(FLASH, "causal", "true", True, id="bool"),
        pytest.param(FLASH, "softmax_scale", "0.125", 0.125, id="scale"),
        pytest.param(FLASH, "softmax_scale", "null", None, id="scale null"),
        pytest.param(KERNEL, "softcap", "30", 30, id="softcap int"),
        pytest.param(KERNEL, "softcap", "none", None, id="softcap none"),
    ],
)
def test_values_are_read_as_their_kind(contract, name, text, value):
    """Each spelling the docs give reads as the keyword's value."""
    assert keyword_value(contract.keyword(name), text) == value


@pytest.mark.parametrize(
    "contract, name, text, message",
    [
        pytest.param(
            FLASH,
            "window_size",
            "3",
            "--keyword window_size: expected [left, right], two integers each >= 0 or -1 (unbounded), "
            "e.g. window_size=3,0, found '3'",
            id="one number for a window",
        ),
        pytest.param(
            FLASH,
            "window_size",
            "3,-2",
            "--keyword window_size: expected [left, right], two integers each >= 0 or -1 (unbounded), "
            "e.g. window_size=3,0, found '3,-2'",
            id="window below -1",
        ),
        pytest.param(FLASH, "causal", "1", "--keyword causal: expected true or false, found '1'", id="1 for a bool"),
        pytest.param(
            KERNEL,
            "softcap",
            "-2",
            "--keyword softcap: expected a number > 0, or null for the default, found '-2'",
            id="negative cap",
        ),
        pytest.param(
            FLASH,
            "dropout_p",
            "0.1",
            "--keyword dropout_p: expected 0 (the reference is deterministic), found '0.1'",
            id="dropout",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_keyword_expected_and_found(contract, name, text, message):
    """The OptionError is the whole message, one line."""
    with pytest.raises(OptionError) as info:
        keyword_value(contract.keyword(name), text)
    assert str(info.value) == message


def test_a_contract_keyword_configures_and_any_other_name_is_only_passed():
    """window_size and causal configure flash_attn (passed through its binding, not bound twice);
    a name it does not take is bound on the function and noted once."""
    options = EngineerOptions.parse(keywords=("window_size=[3, 0]", "causal=true", "trace=1"))
    spec, reshaped = options.reshape(SLIDING)
    assert dict(spec.contract.options) == {"causal": True, "window_size": (3, 0)}
    assert reshaped.passed_only == ("trace",)
    assert reshaped.notes("sliding_window") == [
        "sliding_window: the reference follows causal=true, window_size=(3, 0) (the spec fixes causal=false, "
        "window_size=(2, 1))",
        "sliding_window: left out 5 worked examples whose expected values assume causal=false, window_size=(2, 1), "
        "not causal=true, window_size=(3, 0): window_two_back_one_ahead, window_aligned_bottom_right, "
        "grouped_kv_heads, far_key_with_huge_score, scores_inside_the_window",
        "sliding_window: recomputed 1 worked example testing a convention corner under causal=true, "
        "window_size=(3, 0) (expected values from the float64 reference): window_before_every_key",
        "sliding_window: trace passed to the implementation only (the reference does not follow it; the "
        "contract's keywords: dropout_p, softmax_scale, causal, window_size)",
    ]
    assert reshaped.left_out()["example:scores_inside_the_window"] == (
        "left out: its expected value assumes causal=false, window_size=(2, 1)"
    )
    assert "example:window_before_every_key" not in reshaped.left_out()
    recomputed = next(ex for ex in spec.worked_examples if ex.id == "window_before_every_key")
    assert recomputed.expected[0, :, 0, 0].tolist() == [0.0, 0.0, 0.0, 5.0]  # queries 0..2 keep no key

    def impl(q, k, v, **kw):
        return kw

    bound = options.bind(impl, SLIDING)
    assert isinstance(bound, functools.partial) and bound.keywords == {"trace": 1}
    assert spec.contract.binding(bound)(1, 2, 3) == {"trace": 1, "causal": True, "window_size": (3, 0)}


def test_one_changed_keyword_says_its_old_and_new_value():
    """The line for one changed keyword reads 'assume window_size=(2, 1), not (3, 0)'."""
    _, reshaped = EngineerOptions.parse(keywords=("window_size=3,0",)).reshape(SLIDING)
    assert reshaped.notes("sliding_window")[1] == (
        "sliding_window: left out 5 worked examples whose expected values assume window_size=(2, 1), not (3, 0): "
        "window_two_back_one_ahead, window_aligned_bottom_right, grouped_kv_heads, far_key_with_huge_score, "
        "scores_inside_the_window"
    )


def test_a_contract_without_keywords_passes_every_name_as_before():
    """attention takes no keyword: is_causal is bound on the function, nothing is noted, and a value
    that is not a scalar is refused as it always was."""
    options = EngineerOptions.parse(keywords=("is_causal=false",))
    spec, reshaped = options.reshape(ATTENTION)
    assert spec is ATTENTION and reshaped == Reshaped() and reshaped.notes("attention") == []
    assert options.bind(len, ATTENTION).keywords == {"is_causal": False}
    assert options.bind(len).keywords == {"is_causal": False}
    with pytest.raises(OptionError, match=r"^--keyword: expected a scalar value for x, found '\[1\]'$"):
        EngineerOptions.parse(keywords=("x=[1]",)).reshape(ATTENTION)


def test_a_bad_value_of_a_contract_keyword_is_refused_on_reshape():
    """The plugin's spelling names the option."""
    options = EngineerOptions.parse(keywords=("causal=maybe",), prefix="--attnscore-")
    with pytest.raises(OptionError, match=r"^--attnscore-keyword causal: expected true or false, found 'maybe'$"):
        options.reshape(SLIDING)


def test_the_sweep_grid_is_the_product_in_the_order_given():
    """Two sweeps of two values: four points, the first sweep slowest; a point's options carry its
    keywords and its where bound."""
    options = EngineerOptions.parse(
        keywords=("softmax_scale=0.5",), sweeps=("causal=true;false", "where=n_q<=n_k; n_q>n_k")
    )
    assert options.grid() == [
        (("causal", "true"), ("where", "n_q<=n_k")),
        (("causal", "true"), ("where", "n_q>n_k")),
        (("causal", "false"), ("where", "n_q<=n_k")),
        (("causal", "false"), ("where", "n_q>n_k")),
    ]
    at = options.at(options.grid()[1])
    assert at.keyword_texts == {"softmax_scale": "0.5", "causal": "true"} and at.sweeps == ()
    assert [str(b) for b in at.bounds] == ["n_q > n_k"]
    assert EngineerOptions().grid() == [()]


@pytest.mark.parametrize(
    "sweeps, keywords, message",
    [
        pytest.param(("causal",), (), "--sweep: expected NAME=VALUE, found 'causal'", id="no values"),
        pytest.param(("causal=true;",), (), "--sweep: expected NAME=VALUE;VALUE;..., found 'causal=true;'", id="empty"),
        pytest.param(
            ("causal=true;false",),
            ("causal=true",),
            "--sweep causal: expected each name once among --keyword and --sweep, found it again",
            id="also a keyword",
        ),
        pytest.param(("where=n_q<<n_k",), (), "--sweep where: ", id="bad bound"),
    ],
)
def test_a_sweep_that_cannot_be_read_is_refused(sweeps, keywords, message):
    """Each problem is an OptionError naming the option."""
    with pytest.raises(OptionError) as info:
        EngineerOptions.parse(sweeps=sweeps, keywords=keywords)
    assert str(info.value).startswith(message)


def test_a_sweep_must_name_a_keyword_of_the_contract_with_its_values():
    """A sweep changes the reference, so a name the contract does not take is refused (the keywords
    it takes are named), and so is a value of the wrong kind."""
    with pytest.raises(OptionError) as info:
        EngineerOptions.parse(sweeps=("window=3,0;2,1",)).check_sweeps(SLIDING)
    assert str(info.value) == (
        "--sweep window: expected a keyword of contract flash_attn (dropout_p, softmax_scale, causal, window_size) "
        "or where, found 'window'"
    )
    with pytest.raises(OptionError, match=r"^--sweep causal: expected true or false, found 'no way'$"):
        EngineerOptions.parse(sweeps=("causal=true;no way",)).check_sweeps(SLIDING)
    EngineerOptions.parse(sweeps=("causal=true;false", "where=n_q<=n_k")).check_sweeps(SLIDING)


def test_a_keyword_given_twice_is_refused_never_the_last_one_silently():
    """Both spellings of the options refuse a second value for one name, saying both."""
    with pytest.raises(OptionError) as info:
        EngineerOptions.parse(keywords=("causal=true", "causal=false"), prefix="--attnscore-")
    assert str(info.value) == (
        "--attnscore-keyword causal: expected each name once, found causal=true and causal=false"
    )
    with pytest.raises(OptionError) as info:
        keyword_arguments(["scale=0.5", "scale=0.25"])
    assert str(info.value) == "--keyword scale: expected each name once, found it again in 'scale=0.25'"


def test_a_mistyped_keyword_is_passed_only_and_the_note_guesses_the_keyword_meant():
    """windowsize is not flash_attn's keyword: it is passed as before, and the note says which
    keyword it is close to; a name close to none gets no guess."""
    _, reshaped = EngineerOptions.parse(keywords=("windowsize=3,0", "trace=1")).reshape(SLIDING)
    assert reshaped.passed_only == ("windowsize", "trace")
    assert reshaped.notes("sliding_window") == [
        "sliding_window: windowsize, trace passed to the implementation only (the reference does not follow "
        "them; the contract's keywords: dropout_p, softmax_scale, causal, window_size); did you mean window_size?"
    ]
    _, plain = EngineerOptions.parse(keywords=("trace=1",)).reshape(SLIDING)
    assert "did you mean" not in plain.notes("sliding_window")[0]
