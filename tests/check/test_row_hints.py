"""Row hints: non-finite entries and wrong rows read off which keys each output row keeps."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.boundary.outputs import to_received
from attnscore.check.cases import build_cases, spec_call
from attnscore.check.diagnosis_inputs import resized_args
from attnscore.check.implementation import run_impl
from attnscore.check.row_hints import empty_rows_wrong, masking_words, nonfinite_hint, unwritten_rows_hint
from attnscore.spec.load import load_spec

GENERIC = "look for a division by zero"


@pytest.mark.parametrize(
    "spec_file, words",
    [
        pytest.param("attention.yaml", "the mask", id="a mask argument"),
        pytest.param("sdpa.yaml", "attn_mask", id="SDPA's attn_mask"),
        pytest.param("sdpa_causal.yaml", "is_causal (the keys after the query)", id="SDPA's causal flag"),
        pytest.param("causal_attention.yaml", "the causal mask (the keys after the query)", id="a causal family"),
        pytest.param("key_padding.yaml", "key_lengths (the keys past a batch item's length)", id="key lengths"),
        pytest.param("kv_cache.yaml", "causal (the keys after the query)", id="FlashAttention's causal"),
        pytest.param("sliding_window.yaml", "window_size (the keys outside the window)", id="a window"),
        pytest.param(
            "varlen.yaml",
            "cu_seqlens_k (the keys of other sequences) and causal (the keys after the query)",
            id="packed sequences, causal",
        ),
    ],
)
def test_masking_words_name_what_masks_keys_by_features(spec_file, words):
    """What masks keys is read off the contract's parameters and configured keywords, not a name."""
    assert masking_words(load_spec(f"specs/{spec_file}").contract) == words


def _case_call(spec, case_id):
    return next(c for c in build_cases(spec, "float32") if c.id == case_id).calls[0]


def test_nan_in_a_fully_masked_sdpa_row_gets_the_specific_hint():
    """SDPA's bool attn_mask (no parameter called ``mask``): NaN in a query with no kept key says so."""
    spec = load_spec("specs/sdpa.yaml")
    call = _case_call(spec, "example:fully_masked_query_is_zero")
    got = np.array(call.golden, dtype=np.float32)
    got[0, 1, :] = np.nan  # query 1 keeps no key
    hint = nonfinite_hint(spec, call, to_received(torch.tensor(got)))
    assert hint is not None and hint.startswith("this query keeps no key (attn_mask masks every key): ")
    assert "0/0 = NaN" in hint


def test_nan_in_a_causal_row_with_no_key_names_the_causal_flag():
    """FlashAttention's bottom-right causal with more queries than keys: the first queries keep no
    key; NaN there gets the no-key hint naming ``causal``, NaN in a later row the masked-keys one."""
    spec = load_spec("specs/kv_cache.yaml")
    args = resized_args(spec, {"n_q": 5, "n_k": 3})
    call = spec_call(spec, args, "float32", spec.tolerance)
    golden = np.asarray(call.golden)  # (b, n_q, h_q, d_v): queries 0 and 1 keep no key
    got = golden.astype(np.float32).copy()
    got[0, 0, 0, :] = np.nan
    hint = nonfinite_hint(spec, call, to_received(torch.tensor(got)))
    assert hint is not None and hint.startswith("this query keeps no key (causal (the keys after the query)")
    got = golden.astype(np.float32).copy()
    got[0, 3, 0, :] = np.nan  # query 3 keeps keys 0 and 1 of 3
    hint = nonfinite_hint(spec, call, to_received(torch.tensor(got)))
    assert hint is not None and "keeps 2 of 3" in hint and GENERIC not in hint


def test_nan_in_a_row_that_keeps_every_key_keeps_the_generic_hint():
    """A query that keeps every key has no masking cause: no specific hint."""
    spec = load_spec("specs/sdpa.yaml")
    call = _case_call(spec, "example:fully_masked_query_is_zero")
    got = np.array(call.golden, dtype=np.float32)
    got[0, 0, :] = np.nan  # query 0 keeps both keys
    assert nonfinite_hint(spec, call, to_received(torch.tensor(got))) is None


def test_wrong_values_only_in_rows_with_no_kept_key_are_found():
    """Garbage in the no-key row only: that row is flagged; a wrong kept row as well: nothing."""
    spec = load_spec("specs/sdpa.yaml")
    call = _case_call(spec, "example:fully_masked_query_is_zero")
    got = np.array(call.golden, dtype=np.float64)
    got[0, 1, :] = 4.5e7
    wrong = empty_rows_wrong(spec, call, to_received(torch.tensor(got)), call.allowed)
    assert wrong is not None and wrong.tolist() == [[False, True]]
    text = unwritten_rows_hint(spec, call, wrong, changed=True)
    assert text.startswith("every wrong row (1 of 2) belongs to a query that keeps no key (attn_mask masks every key)")
    assert "changed between two calls on the same inputs" in text and "the zero vector" in text
    got[0, 0, :] += 1.0
    assert empty_rows_wrong(spec, call, to_received(torch.tensor(got)), call.allowed) is None


def _student(path: Path, garbage) -> types.FunctionType:
    """The example submission's function, its ``torch.empty`` holding ``garbage(shape)``: what
    memory held, made reproducible for the test (the module's own torch name only)."""
    spec = importlib.util.spec_from_file_location("rows_left_unwritten", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    proxy = types.SimpleNamespace(**{n: getattr(torch, n) for n in dir(torch) if not n.startswith("__")})
    proxy.empty = lambda *shape, dtype=None: garbage(shape).to(dtype)
    module.torch = proxy
    return module.scaled_dot_product_attention


UNWRITTEN = Path("examples/submissions/sdpa/rows_left_unwritten.py")


@pytest.mark.slow
def test_rows_left_unwritten_get_a_note_never_a_name():
    """torch.empty rows never written for a query with no kept key: the fully masked case says
    which rows are wrong and that they changed between two calls; nothing is named. Garbage that
    happens to repeat gets the note without the claim that it changed."""
    calls = iter(range(1, 1000))
    changing = _student(UNWRITTEN, lambda shape: torch.full(shape, 1000.0 + next(calls)))
    result = run_impl(load_spec("specs/sdpa.yaml"), changing, dtype="float32", shrink=False)
    failed = [c for c in result.cases if not c.passed]
    assert [c.id for c in failed] == ["example:fully_masked_query_is_zero"]
    case = failed[0]
    assert case.diagnosis is None and "Known mistake" not in case.message
    assert "Likely cause: every wrong row (1 of 2) belongs to a query that keeps no key" in case.message
    assert "changed between two calls on the same inputs: your code never writes them" in case.message
    repeating = _student(UNWRITTEN, lambda shape: torch.full(shape, 7.0))
    result = run_impl(load_spec("specs/sdpa.yaml"), repeating, dtype="float32", shrink=False)
    case = next(c for c in result.cases if not c.passed)
    assert case.diagnosis is None
    assert "rows left unwritten after torch.empty (or empty_like) hold whatever that memory held" in case.message
    assert "changed between two calls" not in case.message
