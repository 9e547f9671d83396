"""Non-contiguous inputs: views with the same values, and the property that uses them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnscore.boundary.calls import to_torch
from attnscore.boundary.layouts import LAYOUTS, effective_layout, expand_values, strided_form
from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec

SPECS = [
    "specs/dot_product_scores.yaml",
    "specs/score_matrix.yaml",
    "specs/scaled_score_matrix.yaml",
    "specs/bilinear_scores.yaml",
    "specs/additive_scores.yaml",
    "specs/masked_scores.yaml",
    "specs/attention_weights.yaml",
    "specs/attention.yaml",
]

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), layout=st.sampled_from(LAYOUTS), as_bool=st.booleans())
def test_every_layout_holds_the_same_values(data, layout, as_bool):
    shape = data.draw(shapes)
    if as_bool:
        array = data.draw(hnp.arrays(np.bool_, shape))
    else:
        array = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-9, 9, width=32)))
    array = expand_values(array, layout)
    view = to_torch(array, "float32", layout=layout)
    assert tuple(view.shape) == array.shape
    assert view.dtype == (torch.bool if as_bool else torch.float32)
    expected = array if as_bool else array.astype(np.float32)
    assert np.array_equal(view.numpy(), expected)


def test_views_are_really_not_contiguous():
    array = np.arange(12.0).reshape(3, 4)
    transposed = to_torch(array, "float64", layout="transposed")
    assert not transposed.is_contiguous() and transposed.stride() == (1, 3)
    sliced = to_torch(array, "float64", layout="sliced")
    assert not sliced.is_contiguous() and sliced.stride() == (8, 2) and sliced.storage_offset() == 1
    raw = torch.tensor(strided_form(array, "sliced").storage)
    assert torch.isnan(raw[0::2]).all() and raw[1::2].tolist() == array.reshape(-1).tolist()
    expanded = to_torch(expand_values(array, "expanded"), "float64", layout="expanded")
    assert expanded.stride() == (0, 1) and expanded.tolist() == [[0.0, 1.0, 2.0, 3.0]] * 3
    mask = to_torch(np.array([[True, False]]), "float32", layout="sliced")
    assert mask.dtype == torch.bool and mask.tolist() == [[True, False]]
    assert torch.tensor(strided_form(np.array([[True, False]]), "sliced").storage).tolist() == [
        False,
        True,
        True,
        False,
    ]


def test_layouts_fall_back_where_the_shape_cannot_show_them():
    assert effective_layout("transposed", (4,)) == "sliced"
    assert effective_layout("transposed", (1, 4)) == "sliced"
    assert effective_layout("expanded", (1, 1)) == "sliced"
    assert effective_layout("expanded", (1, 3)) == "expanded"
    with pytest.raises(ValueError, match="unknown layout 'diagonal'"):
        effective_layout("diagonal", (2, 2))
    with pytest.raises(ValueError, match="equal values along the expanded axis"):
        strided_form(np.arange(4.0).reshape(2, 2), "expanded")


def _property_case(spec_path: str):
    spec = load_spec(spec_path)
    return spec, next(c for c in build_cases(spec) if c.id == "property:non_contiguous_inputs")


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS)
def test_every_spec_has_the_property_and_the_reference_passes_it(path):
    spec, case = _property_case(path)
    # each example: contiguous, then each argument alone as a view, then (several arguments) all of them
    n = len(spec.parameter_names)
    per = 1 + n + (1 if n > 1 else 0)
    assert case.points == 1 and len(case.calls) == 10 * per
    groups = [case.calls[i : i + per] for i in range(0, len(case.calls), per)]
    assert all(g[0].layouts is None for g in groups)
    assert all([set(c.layouts) for c in g[1 : 1 + n]] == [{name} for name in spec.parameter_names] for g in groups)
    used = {
        effective_layout(layout, np.shape(g[-1].args[name])) for g in groups for name, layout in g[-1].layouts.items()
    }
    assert used == set(LAYOUTS)
    assert all(set(g[-1].layouts) == set(spec.parameter_names) for g in groups)
    for dtype in spec.dtypes:
        cases = [c for c in build_cases(spec, dtype) if c.id == case.id]
        result = judge_case(spec, cases[0], InProcessRunner(spec.contract.reference), dtype)
        assert result.passed, result.message


def _view_user(q, keys):
    n, d = keys.shape
    return (keys.view(n * d).view(n, d) * q).sum(-1)


def _storage_reader(q, keys):
    flat_k = torch.as_strided(keys, (keys.numel(),), (1,), 0)  # storage read as if contiguous
    flat_q = torch.as_strided(q, (q.numel(),), (1,), 0)
    return flat_k.reshape(keys.shape) @ flat_q


def test_code_that_assumes_contiguous_inputs_fails_with_the_layout_shown():
    spec, case = _property_case("specs/dot_product_scores.yaml")
    result = judge_case(spec, case, InProcessRunner(_view_user), "float32")
    assert result.verdict is Verdict.EXCEPTION
    assert "raised RuntimeError: view size is not compatible with input tensor's size and stride" in result.message
    # one argument at a time: the call that raised had only keys as a view, and the layout says so
    assert "Layout: keys was a transposed view (keys.mT.contiguous().mT" in result.message
    assert "q was a" not in result.message
    assert ".mT)" in result.message.splitlines()[-1]  # the reproduction builds the same view

    result = judge_case(spec, case, InProcessRunner(_storage_reader), "float32")
    assert result.verdict is Verdict.WRONG_VALUE
    assert "as contiguous tensors but " in result.message
    assert re.search(
        r"when (q|keys) was a \w+ view .*; your code reads that input as if it were contiguous", result.message
    )

    # the same implementations are right on fresh contiguous tensors
    for fn in (_view_user, _storage_reader):
        other = next(c for c in build_cases(spec) if c.id == "property:equals_qk_entries")
        assert judge_case(spec, other, InProcessRunner(fn), "float32").passed


def test_the_sandbox_hands_over_the_same_views(tmp_path):
    from attnscore.grade.grading import grade_submission
    from attnscore.sandbox.launch import Limits

    path = tmp_path / "storage.py"
    path.write_text(
        "import torch\n"
        "def scores(q, keys):\n"
        "    flat_k = torch.as_strided(keys, (keys.numel(),), (1,), 0)\n"
        "    flat_q = torch.as_strided(q, (q.numel(),), (1,), 0)\n"
        "    return flat_k.reshape(keys.shape) @ flat_q\n"
    )
    spec = load_spec("specs/dot_product_scores.yaml")
    result = grade_submission(path, spec, build_cases(spec), limits=Limits(call_timeout_s=30))
    by_id = {c.id: c for c in result.cases}
    assert by_id["property:non_contiguous_inputs"].verdict is Verdict.WRONG_VALUE
    assert all(c.passed for i, c in by_id.items() if i != "property:non_contiguous_inputs")
