"""The pytest plugin: one item per case, readable ids, xfail/skip file with stale-entry warnings.

The plugin's pytest runs happen inside this process (tests/plugin_runs.py: the same command line,
items and reports, without a new Python importing torch each time); the usage error comes from a
run in a subprocess, which loads the plugin through its ``pytest11`` entry point as an engineer's
pytest does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnscore.pytest_plugin import XfailEntry, read_xfail_file
from tests.plugin_runs import ROOT, Run, run_in_process, run_subprocess

pytestmark = pytest.mark.slow


def run_pytest(tmp_path: Path, *args: str) -> Run:
    """Run pytest in an empty folder (so only attnscore items are collected)."""
    return run_in_process(tmp_path, "-q", "-p", "no:cacheprovider", "-rA", f"--rootdir={tmp_path}", *args)


def test_correct_impl_one_item_per_case(tmp_path):
    """Each case of each dtype is one passing item named spec[dtype]::case."""
    proc = run_pytest(
        tmp_path,
        "--attnscore-impl=examples.impl.my_attention:attention",
        f"--attnscore-spec={ROOT / 'specs/attention.yaml'}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "30 passed" in proc.stdout
    assert "attention::example:two_keys[float32]" in proc.stdout
    assert "attention::property:deterministic[float64]" in proc.stdout


def test_failures_xfails_skips_and_stale_entries(tmp_path):
    """Listed cases xfail or skip; the failure shows the feedback; an unmatched entry warns."""
    xfail = tmp_path / "xfail.txt"
    xfail.write_text(
        "# expected failures\n"
        "example:masked_key_gets_zero  xfail  the mask is ignored on purpose\n"
        "attention_weights[float32]::example:fully_masked_row  skip  not today\n"
        "property:no_such_case  xfail  stale\n",
        encoding="utf-8",
    )
    proc = run_pytest(
        tmp_path,
        "--attnscore-impl=examples.impl.my_attention:buggy_attention_weights",
        f"--attnscore-spec={ROOT / 'specs/attention_weights.yaml'}",
        "--attnscore-dtype=float32",
        f"--attnscore-xfail={xfail}",
    )
    out = proc.stdout
    assert proc.returncode == 1
    # the ignored mask fails the value cases, and the dtype, determinism, mutation and layout cases too:
    # a property that does not compare values earns its point only beside right values
    assert "14 failed, 3 passed, 1 skipped, 1 xfailed" in out
    assert "xfail.txt:4: 'property:no_such_case' matches no attnscore test item" in out
    assert "Known mistake (mask_ignored)" in out and "Reproduce: attention_weights(" in out


def test_impl_without_spec_is_a_usage_error(tmp_path):
    """--attnscore-impl alone is refused with a one-line usage error, by the plugin pytest loads
    through its entry point (a subprocess)."""
    proc = run_subprocess(
        tmp_path,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--rootdir={tmp_path}",
        "--attnscore-impl=examples.impl.my_attention:attention",
    )
    assert proc.returncode == 4
    assert "--attnscore-impl and --attnscore-spec go together" in proc.stderr


@pytest.mark.parametrize(
    "text, entries",
    [
        pytest.param(
            "a xfail why not\n\n# c\nb skip\n",
            [XfailEntry("a", "xfail", "why not", 1), XfailEntry("b", "skip", "", 4)],
            id="two entries",
        ),
        pytest.param("x xfail  # trailing comment\n", [XfailEntry("x", "xfail", "", 1)], id="comment"),
    ],
)
def test_read_xfail_file(tmp_path, text, entries):
    """The xfail file is read into entries with their line numbers."""
    path = tmp_path / "x.txt"
    path.write_text(text, encoding="utf-8")
    assert read_xfail_file(path) == entries


def test_malformed_xfail_line_names_the_line(tmp_path):
    """An entry without xfail/skip is a usage error naming file and line."""
    path = tmp_path / "x.txt"
    path.write_text("ok xfail\nbroken maybe\n", encoding="utf-8")
    with pytest.raises(
        pytest.UsageError, match=r"x.txt:2: expected '<case id> xfail\|skip\|allow:<corner> \[reason\]'"
    ):
        read_xfail_file(path)


def test_brackets_in_ids_are_literal():
    """A pattern with [float32] matches the item literally, not as a character class."""
    entry = XfailEntry("attention[float32]::property:deterministic", "xfail", "", 1)
    assert entry.matches("attention[float32]::property:deterministic", "property:deterministic")
    assert not entry.matches("attention[float64]::property:deterministic", "property:deterministic")
    assert XfailEntry("*::property:deterministic", "skip", "", 1).matches("a[float64]::property:deterministic", "x")


def _copy_spec(tmp_path: Path, name: str) -> str:
    """The spec inside the rootdir, so that node ids are relative paths (as in a project)."""
    (tmp_path / name).write_text((ROOT / "specs" / name).read_text(encoding="utf-8"), encoding="utf-8")
    return name


def test_items_are_collected_selected_and_rerun_like_tests(tmp_path):
    """pytest counts the items, -k selects among them, a printed id reruns one, --lf
    reruns the failures only, and JUnit names carry no stray bracket."""
    spec = _copy_spec(tmp_path, "attention_weights.yaml")
    base = [
        "--attnscore-impl=examples.impl.my_attention:buggy_attention_weights",
        f"--attnscore-spec={spec}",
        "--attnscore-dtype=float32",
    ]
    listed = run_pytest(tmp_path, "--co", *base)
    assert "19 tests collected" in listed.stdout
    assert "attention_weights.yaml::attention_weights::example:masked_key_gets_zero[float32]" in listed.stdout
    picked = run_pytest(tmp_path, "-k", "masked_key_gets_zero or equal_scores", *base)
    assert "1 failed, 1 passed, 17 deselected" in picked.stdout
    node = "attention_weights.yaml::attention_weights::example:masked_key_gets_zero[float32]"
    again = run_pytest(tmp_path, node, *base)
    assert again.returncode == 1 and "1 failed in" in again.stdout
    # one whole run writes the JUnit file and (the cache provider on) the failures --lf reruns
    junit = tmp_path / "junit.xml"
    command = ["-q", f"--rootdir={tmp_path}", *base]
    run_in_process(tmp_path, *command, f"--junitxml={junit}")
    xml = junit.read_text(encoding="utf-8")
    assert 'classname="attention_weights.yaml.attention_weights" name="example:equal_scores[float32]"' in xml
    assert not re.search(r'name="[^"]*\]\]"', xml)  # no stray "]" after the parameter
    last = run_in_process(tmp_path, *command, "--lf")
    assert "16 failed, 3 deselected" in last.stdout, last.stdout  # properties earn only beside right values


def test_where_skips_examples_outside_the_bound_and_draws_inside(tmp_path):
    """--attnscore-where n_q<=n_k: the worked example with more queries than keys is a skipped item
    (skipped by constraint, with the sizes), and no other item fails by the kernel's refusal."""
    (tmp_path / "decode.py").write_text(
        "import torch\n\n"
        "def causal_attention(Q, K, V):\n"
        "    if Q.shape[-2] > K.shape[-2]:\n"
        "        raise ValueError('needs n_q <= n_k')\n"
        "    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)\n",
        encoding="utf-8",
    )
    args = ["--attnscore-impl=decode:causal_attention", f"--attnscore-spec={ROOT / 'specs/causal_attention.yaml'}"]
    args += ["--attnscore-dtype=float64", f"--rootdir={tmp_path}"]
    proc = run_in_process(tmp_path, "-q", "-p", "no:cacheprovider", "-rA", *args, "--attnscore-where=n_q<=n_k")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "skipped by constraint: n_q = 3, n_k = 2 break n_q <= n_k" in out
    assert "10 passed, 1 skipped" in out
    bad = run_in_process(tmp_path, "-q", "-p", "no:cacheprovider", *args, "--attnscore-where=n_q<<n_k")
    assert bad.returncode == 4 and "--attnscore-where: expected SYMBOL OP SYMBOL" in bad.stderr


def test_allow_line_sets_a_convention_aside(tmp_path):
    """An allow:fully_masked_row line sets the corner aside for the items it matches (the finfo.min
    convention then passes them); --attnscore-allow does it for every item; a bad corner is named."""
    (tmp_path / "bert.py").write_text(
        "import torch\n\n"
        "def attention(Q, K, V, mask):\n"
        "    S = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, torch.finfo(Q.dtype).min)\n"
        "    return torch.softmax(S, dim=-1) @ V\n",
        encoding="utf-8",
    )
    base = ["-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}"]
    base += ["--attnscore-impl=bert:attention", f"--attnscore-spec={ROOT / 'specs/attention.yaml'}"]
    base += ["--attnscore-dtype=float64"]

    def run(*args: str) -> Run:
        return run_in_process(tmp_path, *base, *args)

    plain = run()
    assert plain.returncode == 1 and "Convention (fully_masked_row)" in plain.stdout
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("*  allow:fully_masked_row  finfo.min masking by design\n", encoding="utf-8")
    allowed = run(f"--attnscore-xfail={xfail}")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "15 passed" in allowed.stdout
    option = run("--attnscore-allow=fully_masked_row")
    assert option.returncode == 0 and "15 passed" in option.stdout
    xfail.write_text("*  allow:fully_masked_col\n", encoding="utf-8")
    bad = run(f"--attnscore-xfail={xfail}")
    assert bad.returncode == 4
    expected = "expected allow:<corner> with <corner> one of fully_masked_row, nonfinite_masked_key"
    assert f"xfail.txt:1: {expected}, found 'allow:fully_masked_col'" in bad.stderr
