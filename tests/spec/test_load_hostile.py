"""Hostile and malformed specs: whatever a spec file holds, the loader returns a spec or located
problems (exit 2 from the CLI), never a traceback, a crash or unbounded memory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnscore.check.cases import build_cases
from attnscore.cli import main
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "specs" / "dot_product_scores.yaml").read_text(encoding="utf-8")


def variant(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def replace_line(prefix: str, new: str, text: str = BASE) -> str:
    return "\n".join(new if line.startswith(prefix) else line for line in text.split("\n"))


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p).removeprefix(f"{path}:") for p in info.value.problems]


LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param(
            LAUGHS,
            "1:1: (yaml): expected at most 200000 values once aliases (*name) are expanded, "
            "found more (an alias bomb?)",
            id="billion laughs",
        ),
        pytest.param(
            "a: &a [*a]\n",
            "1:4: a[0]: expected an anchor (&name) that does not contain its own alias, found one that does",
            id="recursive alias",
        ),
        pytest.param(
            replace_line("title:", "title: " + "[" * 280 + "]" * 280),
            "expected at most 64 levels of nesting, found more",
            id="list nested 280 deep",
        ),
        pytest.param(
            BASE.replace("examples: 20", "examples: 20.0"),
            "properties[0].examples: expected integer, found number 20.0",
            id="integer written as float",
        ),
        pytest.param(
            replace_line("version:", "version: 1.0"),
            "4:10: version: expected integer, found number 1.0",
            id="version 1.0",
        ),
        pytest.param(
            replace_line("seed:", "seed: 20261130.0"),
            "seed: expected integer, found number 20261130.0",
            id="seed as float",
        ),
        pytest.param(
            BASE.replace("mistakes: [", "mistakes: !!python/tuple [", 1),
            "mistakes: expected a plain mapping or list, found the tag tag:yaml.org,2002:python/tuple",
            id="tag on a sequence",
        ),
        pytest.param(
            replace_line("timeout_s:", "timeout_s: 1.0e-9"),
            "timeout_s: expected a number >= 0.1, found 1e-09",
            id="timeout no call can meet",
        ),
        pytest.param(
            replace_line("  name: scores", "  name: lambda"),
            "function.name: expected a name a submission can define with def, found 'lambda' "
            "(a Python keyword or a special __name__)",
            id="function named lambda",
        ),
        pytest.param(
            replace_line("  name: scores", "  name: __class__"),
            "function.name: expected a name a submission can define with def, found '__class__'",
            id="function named __class__",
        ),
        pytest.param(
            re.sub(r"points: \d+", "points: 0", BASE),
            "worked_examples: expected some points to award, found 0 points in every case",
            id="every item worth 0",
        ),
        pytest.param(
            BASE.replace("  mode: dot_bound\n", "  mode: exact\n  rtol: 0.1\n", 1),
            "tolerance.rtol: expected only fields mode exact uses (no other field), found rtol",
            id="rtol under exact",
        ),
        pytest.param(
            replace_line("title:", 'title: "\\e[31mRed\\e[0m"'),
            "5:8: title: expected printable text, found the control character U+001B",
            id="terminal escape in a title",
        ),
    ],
)
def test_malformed_specs_get_located_problems(tmp_path, text, expected):
    """Each kind of malformed spec is refused with the located problem that names it."""
    found = problems(variant(tmp_path, text))
    assert any(expected in line for line in found), found


def test_rectangular_array_with_too_many_dimensions_is_not_called_ragged(tmp_path):
    """A rectangular 40-D input is refused for its dimensions, not as ragged."""
    start = BASE.index("q: ", BASE.index("    inputs:"))
    end = BASE.index("\n", start)
    text = BASE[:start] + "q: " + "[" * 40 + "1" + "]" * 40 + BASE[end:]
    [line] = problems(variant(tmp_path, text))
    assert line.endswith("worked_examples[0].inputs.q: expected at most 8 dimensions, found 40")


def test_bad_byte_is_located_by_line_and_column(tmp_path):
    """A byte that is not UTF-8 is reported at its line and column."""
    path = tmp_path / "spec.yaml"
    path.write_bytes(BASE.encode().replace(b"title:", b"ti\xfftle:", 1))
    assert problems(path) == ["5:3: (file): expected UTF-8 text, found the byte 0xff (not UTF-8)"]


def test_required_fields_each_named_once(tmp_path):
    """Several missing fields give one problem each, each naming its own field."""
    found = problems(variant(tmp_path, "format: attnscore-spec/1\n"))
    named = sorted(re.findall(r"expected field '(\w+)', found it missing", "\n".join(found)))
    assert named == ["function", "id", "title", "version", "worked_examples"]


@pytest.mark.slow
def test_property_nothing_can_satisfy_is_a_spec_problem(tmp_path):
    """A property whose inputs cannot be generated is a located spec problem, from verify and grade alike."""
    start = BASE.index("- name: scores_not_normalised")
    text = BASE[:start] + BASE[start:].replace("    examples:", "    max_value: 0.01\n    examples:", 1)
    path = variant(tmp_path, text)
    with pytest.raises(SpecError, match=r"properties\[2\]: expected inputs that scores_not_normalised can be tried"):
        build_cases(load_spec(path))
    sub = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    for args in (["verify", str(path), "--no-mutations"], ["grade", str(sub), "--spec", str(path)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and "Error: invalid spec (1 problem)" in result.output


_yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)
_spec_fields = st.fixed_dictionaries(
    {},
    optional={
        "format": st.just("attnscore-spec/1") | _yaml_values,
        "id": st.just("fuzz") | _yaml_values,
        "version": st.integers(-2, 3) | _yaml_values,
        "title": st.text(max_size=10) | _yaml_values,
        "function": _yaml_values,
        "worked_examples": _yaml_values,
        "properties": _yaml_values,
        "tolerance": _yaml_values,
        "seed": _yaml_values,
        "timeout_s": _yaml_values,
    },
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        _spec_fields.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
        st.text(max_size=200),
        st.sampled_from(BASE.split("\n")).flatmap(
            lambda line: st.text(max_size=30).map(lambda junk: BASE.replace(line, line + junk, 1))
        ),
    )
)
def test_fuzzed_yaml_gives_a_spec_or_located_problems(tmp_path_factory, text):
    """Generated YAML and mutated bundled specs: load_spec returns a Spec or raises SpecError, nothing else."""
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_spec(path)
    except SpecError as exc:
        assert exc.problems
        assert all(p.line >= 1 and p.col >= 1 and p.file == str(path) for p in exc.problems)


def test_ambiguous_mask_rank_in_a_worked_example_is_located(tmp_path):
    """A (B, n_q, n_k) mask next to (B, H, n_q, d_k) queries: refused where it is written."""
    import yaml

    from attnscore.spec.load import load_spec

    doc = yaml.safe_load(open("specs/attention.yaml"))
    example = next(e for e in doc["worked_examples"] if e["id"] == "padding_mask_per_batch")
    example["inputs"]["mask"] = [[[True, True]], [[True, False]]]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert "worked_examples[" in text
    assert "inputs.mask: expected a mask of shape (n_q, n_k) or of the scores' full " in text
    assert "rank 4 (1 for broadcast dims), found the ambiguous shape (2, 1, 2)" in text


# --- what the spec path is, what the spec asks the loader to compute, tolerances ---

MATRIX = (ROOT / "specs" / "score_matrix.yaml").read_text(encoding="utf-8")


def _one_problem(path) -> str:
    """The single located problem of ``path``."""
    found = problems(path)
    assert len(found) == 1, found
    return found[0]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """A named pipe as spec is refused at once (opened non-blocking), never waited on."""
    import os

    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    assert _one_problem(fifo) == "1:1: (file): expected a regular spec file, found a FIFO (named pipe)"


@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device")])
def test_a_device_is_refused_before_anything_is_read(target, kind):
    """`/dev/zero` would be read forever: it is refused for what it is."""
    [line] = problems(Path(target))
    assert line == f"1:1: (file): expected a regular spec file, found {kind}"


def test_a_symlink_to_a_device_and_a_symlink_loop_are_refused(tmp_path):
    """Links are followed to what they name: a device is refused, a loop is one clear line."""
    import os

    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    assert problems(tmp_path / "zero.yaml") == ["1:1: (file): expected a regular spec file, found a character device"]
    os.symlink(tmp_path / "b.yaml", tmp_path / "a.yaml")
    os.symlink(tmp_path / "a.yaml", tmp_path / "b.yaml")
    assert problems(tmp_path / "a.yaml") == [
        "1:1: (file): expected a readable spec file, found: Too many levels of symbolic links"
    ]
    (tmp_path / "good.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "good.yaml")
    assert load_spec(tmp_path / "link.yaml").id == "dot_product_scores"


def test_a_directory_and_an_unreadable_file_are_refused(tmp_path):
    """A folder, and a file the process may not read (when not root), are one line each."""
    import os

    assert problems(tmp_path) == ["1:1: (file): expected a regular spec file, found a directory"]
    secret = variant(tmp_path, BASE, "secret.yaml")
    secret.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        assert problems(secret) == ["1:1: (file): expected a readable spec file, found: Permission denied"]


def test_a_spec_file_larger_than_the_bound_is_refused_without_reading_it_all(tmp_path):
    """A 5 MiB spec (a comment) is refused for its size."""
    from attnscore.spec.load import MAX_SPEC_BYTES

    path = variant(tmp_path, BASE + "#" + "x" * MAX_SPEC_BYTES + "\n")
    assert problems(path) == [f"1:1: (file): expected a spec file of at most {MAX_SPEC_BYTES} bytes, found more"]


def _example_inputs(Q: str, K: str, expected: str) -> str:
    start = MATRIX.index("      Q: [[1, 2], [3, 4]]")
    end = MATRIX.index("    explanation:", start)
    return MATRIX[:start] + f"      Q: {Q}\n      K: {K}\n    expected: {expected}\n" + MATRIX[end:]


def test_inputs_whose_batch_dims_broadcast_to_a_huge_tensor_are_refused_before_computing(tmp_path, monkeypatch):
    """Q of batch (40, 1, 40, 1) against K of batch (1, 40, 1, 40): 1,600 values each, 2.6
    million scores once broadcast (and the same with six batch axes would be 32 GB): a located
    problem, and the golden value is never computed."""
    from attnscore.maths.contract import Contract

    real = Contract.golden

    def small_only(self, args):
        assert sum(a.size for a in args.values()) < 1000, "the golden value of the huge example was computed"
        return real(self, args)

    monkeypatch.setattr(Contract, "golden", small_only)
    q = _nested([40, 1, 40, 1, 1, 1])
    k = _nested([1, 40, 1, 40, 1, 1])
    line = _one_problem(variant(tmp_path, _example_inputs(q, k, "[[1]]")))
    assert line.startswith("38:7: worked_examples[0].inputs: expected at most 1,000,000 index combinations")
    assert "found 2,560,000 (batch (40, 40, 40, 40) · n_q=1 · d_k=1 · n_k=1)" in line


def test_batch_dims_that_do_not_broadcast_are_a_located_problem(tmp_path):
    """Q batch (2,) against K batch (3,): one line, not numpy's error."""
    path = variant(tmp_path, _example_inputs(_nested([2, 1, 1]), _nested([3, 1, 1]), "[[[1]], [[1]]]"))
    assert _one_problem(path) == "38:7: worked_examples[0].inputs: expected batch dims that broadcast, found (2,), (3,)"


def _nested(shape: list[int]) -> str:
    if not shape:
        return "1"
    return "[" + ", ".join([_nested(shape[1:])] * shape[0]) + "]"


@pytest.mark.parametrize(
    ("tolerance", "field"),
    [
        ("{mode: close, atol: 1e300}", "atol"),
        ("{mode: close, rtol: 1}", "rtol"),
        ("{mode: close, rtol: 1e300, atol: 0}", "rtol"),
        ("{mode: dot_bound, factor: 1e300}", "factor"),
        ("{mode: ratio, factor: 1e300}", "factor"),
        ("{mode: close, atol: 60}", "atol"),
    ],
)
def test_a_per_example_tolerance_that_accepts_anything_is_refused(tmp_path, tolerance, field):
    """`atol: 1e300` (or rtol 1, a huge factor) on a worked example lets an all-zero output pass:
    a located problem at that field, so `attnscore verify` fails the spec (exit 2)."""
    text = MATRIX.replace("    tolerance: {mode: exact}\n", f"    tolerance: {tolerance}\n", 1)
    line = _one_problem(variant(tmp_path, text))
    assert re.match(rf"46:\d+: worked_examples\[0\]\.tolerance\.{field}: expected a tolerance under which an", line)
    assert "all-zero output fails worked example 'two_by_two' (largest |expected| 53), found one that accepts" in line


def test_verify_fails_a_spec_whose_tolerance_accepts_anything(tmp_path):
    """`attnscore verify` on a spec with `atol: 1e300`: the located line, exit 2."""
    import subprocess
    import sys

    text = MATRIX.replace("    tolerance: {mode: exact}\n", "    tolerance: {mode: close, atol: 1e300}\n", 1)
    path = variant(tmp_path, text)
    attnscore = Path(sys.executable).parent / "attnscore"
    proc = subprocess.run([str(attnscore), "verify", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    said = proc.stdout + proc.stderr
    assert f"{path}:46:36: worked_examples[0].tolerance.atol: expected a tolerance under which" in said


def test_a_spec_tolerance_that_accepts_anything_is_refused_even_when_examples_override_it(tmp_path):
    """The spec's tolerance also grades every property: it must fail the trivial answers too."""
    text = MATRIX.replace("  mode: dot_bound\n  factor: 2\n", "  mode: close\n  atol: 1.0e+300\n", 1)
    assert _one_problem(variant(tmp_path, text)).startswith(
        "29:9: tolerance.atol: expected a tolerance under which an all-zero output fails worked example 'two_by_two'"
    )


def test_an_all_zero_example_needs_a_tolerance_that_rejects_being_off_by_one(tmp_path):
    """Where the answer is 0 (a perpendicular key), zeros are right: the tolerance must still
    reject an output off by 1."""
    text = _example_inputs("[[1, 0]]", "[[0, 1]]", "[[0]]").replace(
        "    tolerance: {mode: exact}\n", "    tolerance: {mode: close, atol: 1}\n", 1
    )
    line = _one_problem(variant(tmp_path, text))
    assert "an output off by 1 in every entry fails worked example 'two_by_two' (largest |expected| 0)" in line


def test_sensible_tolerances_still_load(tmp_path):
    """The field notes' tolerances (torch's float32 defaults, KernelBench's 1e-2) load."""
    for tolerance in ("{mode: close, rtol: 1.3e-6, atol: 1e-5}", "{mode: close, rtol: 0.01, atol: 0.01}"):
        text = MATRIX.replace("    tolerance: {mode: exact}\n", f"    tolerance: {tolerance}\n", 1)
        assert load_spec(variant(tmp_path, text)).worked_examples[0].tolerance.mode == "close"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("seed: " + "9" * 5000, "seed: expected a plain YAML value"),
        ("timeout_s: 1e999", "timeout_s"),
    ],
)
def test_huge_numbers_are_located_problems(tmp_path, line, expected):
    """Numbers too large to read or to use are problems, not crashes."""
    key = line.split(":")[0]
    found = problems(variant(tmp_path, replace_line(f"{key}:", line)))
    assert any(expected in p for p in found), found


@pytest.mark.slow
def test_deep_nesting_and_alias_bombs_are_bounded(tmp_path):
    """100,000-deep flow nesting and a billion-laughs alias chain: one line each."""
    deep = variant(tmp_path, BASE + "extra: " + "[" * 100_000 + "]" * 100_000 + "\n", "deep.yaml")
    assert any("nesting" in p for p in problems(deep))
    bomb = variant(tmp_path, LAUGHS, "bomb.yaml")
    assert any("alias" in p for p in problems(bomb))
