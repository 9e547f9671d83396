"""The pytest plugin from an engineer's project: bundled spec ids, rerunnable ids outside the
repository, JUnit class names, --attnscore-tie/-ratio/-keyword, and allow: entries per case.

The pytest runs happen inside this process (tests/plugin_runs.py), started in a folder outside the
repository as an engineer's would be.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnscore.check.engineer_options import EngineerOptions, OptionError
from tests.plugin_runs import ROOT, Run, run_in_process

pytestmark = pytest.mark.slow

BUNDLED_IDS = (
    "additive_scores, alibi, alibi_causal, attention, attention_weights, bilinear_scores, causal_attention, "
    "dot_product_scores, flash_attention_2, flash_attention_2_causal, gqa, key_padding, kv_cache, masked_scores, "
    "multihead_self_attention, multihead_self_attention_module, multihead_self_attention_rope, rope, "
    "scaled_score_matrix, score_matrix, sdpa, sdpa_causal, sdpa_float_mask, sliding_window, sliding_window_causal, "
    "softcap, softcap_gqa, varlen"
)


def run_pytest(folder: Path, *args: str) -> Run:
    """pytest started in ``folder`` (outside the repository, its own rootdir), attnscore importable."""
    return run_in_process(folder, "-q", "-p", "no:cacheprovider", "-rA", f"--rootdir={folder}", *args)


def test_bundled_spec_by_id_outside_the_repository_gives_rerunnable_ids_and_junit_classes(tmp_path):
    """--attnscore-spec=scaled_score_matrix from a folder outside the repository: no id
    starts with '::', a printed id reruns exactly that item, JUnit classes have no leading dot."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    base = ["--attnscore-impl=examples.impl.my_attention:scaled_score_matrix", "--attnscore-spec=scaled_score_matrix"]
    base.append("--attnscore-dtype=float64")
    listed = run_pytest(tmp_path, "--co", *base)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert len(ids) == 25
    spec_file = (ROOT / "specs" / "scaled_score_matrix.yaml").resolve().as_posix()
    assert all(i.startswith(f"{spec_file}::scaled_score_matrix::") for i in ids), ids[:3]
    node = f"{spec_file}::scaled_score_matrix::example:two_heads[float64]"
    assert node in ids
    again = run_pytest(tmp_path, node, *base)
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.search(r"^1 passed in ", again.stdout, flags=re.M), again.stdout
    assert f"PASSED {node}" in again.stdout
    junit = tmp_path / "junit.xml"
    run_pytest(tmp_path, f"--junitxml={junit}", *base)
    classes = set(re.findall(r'classname="([^"]*)"', junit.read_text(encoding="utf-8")))
    assert classes == {"scaled_score_matrix.yaml.scaled_score_matrix"}


def test_a_spec_outside_a_rootdir_set_elsewhere_reruns_by_its_id(tmp_path):
    """A spec file in the folder pytest started in, with --rootdir elsewhere: the id printed reruns
    the item, and JUnit's class is still <file name>.<spec id>."""
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    spec = project / "specs" / "score_matrix.yaml"
    spec.write_text((ROOT / "specs" / "score_matrix.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    other = tmp_path / "elsewhere"
    other.mkdir()
    args = ["-q", "-p", "no:cacheprovider", f"--rootdir={other}", "--attnscore-dtype=float64"]
    args += ["--attnscore-impl=examples.impl.my_attention:score_matrix", "--attnscore-spec=specs/score_matrix.yaml"]

    def run(*more: str) -> Run:
        return run_in_process(project, *args, *more)

    node = f"{spec.resolve().as_posix()}::score_matrix::example:two_by_two[float64]"
    assert node in run("--co").stdout.splitlines()
    junit = tmp_path / "junit.xml"
    again = run(node, f"--junitxml={junit}")
    assert re.search(r"^1 passed in ", again.stdout, flags=re.M), again.stdout + again.stderr
    assert 'classname="score_matrix.yaml.score_matrix" name="example:two_by_two[float64]"' in junit.read_text(
        encoding="utf-8"
    )


def test_an_unknown_spec_lists_the_bundled_ids(tmp_path):
    """Neither a file nor a bundled id: one usage error naming the text and listing the ids."""
    proc = run_pytest(tmp_path, "--attnscore-impl=examples.impl.my_attention:attention", "--attnscore-spec=atention")
    assert proc.returncode == 4
    assert (
        "--attnscore-spec: no such file 'atention', and no bundled spec has that id: expected a spec file "
        f"or one of {BUNDLED_IDS}"
    ) in proc.stderr


def test_keyword_tie_and_ratio_options(tmp_path):
    """--attnscore-keyword reaches every call, --attnscore-tie adapts the worked examples, and a bad
    value of each is a usage error worded as attnscore test words it (the same parser)."""
    (tmp_path / "kernel.py").write_text(
        "import torch\n\n"
        "def attention(Q, K, V, mask, *, is_causal=None):\n"
        "    if V.shape[-1] != Q.shape[-1]:\n"
        "        raise ValueError('this kernel needs d_v == d_k')\n"
        "    if is_causal is not False:\n"
        "        raise TypeError('pass is_causal=False')\n"
        "    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5\n"
        "    w = torch.softmax(S.masked_fill(~mask, float('-inf')), dim=-1)\n"
        "    return torch.where(mask.any(-1, keepdim=True), w, 0.0) @ V\n",
        encoding="utf-8",
    )
    base = ["--attnscore-impl=kernel:attention", "--attnscore-spec=attention", "--attnscore-dtype=float64"]
    plain = run_pytest(tmp_path, *base)
    assert plain.returncode == 1 and "pass is_causal=False" in plain.stdout
    both = run_pytest(tmp_path, *base, "--attnscore-keyword=is_causal=false", "--attnscore-tie=d_v=d_k")
    assert both.returncode == 0, both.stdout + both.stderr
    assert re.search(r"^15 passed in ", both.stdout, flags=re.M), both.stdout
    for option, message in [
        ("--attnscore-tie=d_v", "--attnscore-tie: expected NAME=VALUE, found 'd_v'"),
        ("--attnscore-keyword=x=[1]", "--attnscore-keyword: expected a scalar value for x, found '[1]'"),
        ("--attnscore-ratio=0.5", "--attnscore-ratio: expected a finite number >= 1, found 0.5"),
        ("--attnscore-ratio=nan", "--attnscore-ratio: expected a finite number >= 1, found nan"),
        (
            "--attnscore-tie=d_x=d_k",
            "--attnscore-tie: expected a shape symbol of contract attention (d_k, d_v, n_k, n_q), found 'd_x'",
        ),
    ]:
        bad = run_pytest(tmp_path, *base, option)
        assert bad.returncode == 4 and message in bad.stderr, (option, bad.stderr)


def test_ratio_option_is_the_low_precision_rule(tmp_path):
    """--attnscore-ratio 2 in float16: the float16 implementation passes within 2x the reference's
    own float16 error (the spec's own tolerance is the same rule's default; the message says which)."""
    (tmp_path / "bf16.py").write_text(
        "import torch\n\n"
        "def attention(Q, K, V, mask):\n"
        "    q, k, v = (t.to(torch.bfloat16) for t in (Q, K, V))\n"
        "    S = (q @ k.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, float('-inf'))\n"
        "    w = torch.where(mask.any(-1, keepdim=True), torch.softmax(S.float(), -1), 0.0)\n"
        "    return (w.to(torch.bfloat16) @ v).to(Q.dtype)\n",
        encoding="utf-8",
    )
    base = ["--attnscore-spec=attention", "--attnscore-dtype=float16", "--attnscore-ratio=2"]
    good = run_pytest(tmp_path, "--attnscore-impl=examples.impl.my_attention:attention", *base)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = run_pytest(tmp_path, "--attnscore-impl=bf16:attention", *base)
    assert bad.returncode == 1 and "error ratio: at most 2× the reference's own float16 error" in bad.stdout


FINFO_MIN = (
    "import torch\n\n"
    "def attention(Q, K, V, mask):\n"
    "    S = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, torch.finfo(Q.dtype).min)\n"
    "    return torch.softmax(S, dim=AXIS) @ V\n"
)


@pytest.mark.parametrize(
    "axis, outcome",
    [
        pytest.param(-1, "PASSED", id="finfo.min masking: only the corner differs, the case passes"),
        pytest.param(-2, "FAILED", id="softmax over queries too: the rest of the case still fails"),
    ],
)
def test_an_allow_entry_sets_only_the_corner_of_the_cases_it_names_aside(tmp_path, axis, outcome):
    """An allow:fully_masked_row entry for one case sets aside only that corner of that
    case: a finfo.min convention passes it, a second mistake in its other row is still caught, and
    the cases the entry does not name still report the convention."""
    (tmp_path / "bert.py").write_text(FINFO_MIN.replace("AXIS", str(axis)), encoding="utf-8")
    xfail = tmp_path / "xfail.txt"
    xfail.write_text(
        "attention::example:fully_masked_query[float64]  allow:fully_masked_row  finfo.min by design\n",
        encoding="utf-8",
    )
    proc = run_pytest(
        tmp_path,
        "--attnscore-impl=bert:attention",
        "--attnscore-spec=attention",
        "--attnscore-dtype=float64",
        f"--attnscore-xfail={xfail}",
    )
    out = proc.stdout
    assert proc.returncode == 1
    spec_file = (ROOT / "specs" / "attention.yaml").resolve().as_posix()
    assert f"{outcome} {spec_file}::attention::example:fully_masked_query[float64]" in out
    # not named by the entry: the property that tests the corner still judges it, as the convention
    assert f"FAILED {spec_file}::attention::property:attention_fully_masked_row_zero[float64]" in out
    # a case that only happens to hold a fully masked row sets the corner aside on its own: it
    # passes, or fails only for its other rows (softmax over queries: rows 0 and 2, not row 1)
    huge = f"FAILED {spec_file}::attention::example:masked_key_with_huge_score[float64]"
    assert (huge in out) == (outcome == "FAILED")
    if outcome == "FAILED":
        section = out.split("attention[float64]::example:masked_key_with_huge_score _", 1)[1].split("\n___", 1)[0]
        assert "4 of 6 entries of out are wrong" in section and "out[1, " not in section, section
    assert "Convention (fully_masked_row)" in out
    if outcome == "FAILED":
        section = out.split("attention[float64]::example:fully_masked_query _", 1)[1].split("\n___", 1)[0]
        assert "out[1, 0] = 4, expected 2" in section and "out[0, " not in section, section


def test_engineer_options_are_one_parser_for_both_spellings():
    """attnscore test and the plugin read the same texts into the same options; only the spelling of
    the option in a message differs."""
    texts = {"ties": ("d_v=d_k",), "wheres": ("n_q<=n_k",), "allows": ("fully-masked-row",), "keywords": ("a=1",)}
    cli = EngineerOptions.parse(**texts, ratio=2)
    plugin = EngineerOptions.parse(**texts, ratio="2", prefix="--attnscore-")
    assert (cli.ties, cli.bounds, cli.allows, cli.ratio, cli.keywords) == (
        plugin.ties,
        plugin.bounds,
        plugin.allows,
        plugin.ratio,
        plugin.keywords,
    )
    assert cli.allows == ("fully_masked_row",) and cli.keywords == {"a": 1} and cli.ratio == 2.0
    for prefix in ("--", "--attnscore-"):
        with pytest.raises(OptionError, match=f"^{prefix}where: expected SYMBOL OP SYMBOL"):
            EngineerOptions.parse(wheres=("n_q<<n_k",), prefix=prefix)
        with pytest.raises(OptionError, match=f"^{prefix}keyword: expected a keyword argument name, found '1x'"):
            EngineerOptions.parse(keywords=("1x=2",), prefix=prefix)
