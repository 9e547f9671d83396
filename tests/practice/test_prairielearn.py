"""PrairieLearn export: randomised questions whose server.py reproduces `attnscore practice`; PL's schemas pass."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.cli import main
from attnscore.practice.export_prairielearn import (
    ASSESSMENT,
    COURSE_INSTANCE,
    KIND_ELEMENTS,
    PrairieLearnExportError,
    prairielearn_course,
    question_html,
    question_template,
    server_py,
)
from attnscore.practice.families import KINDS
from attnscore.practice.generators import featured_problems, generate_variant
from attnscore.practice.prairielearn_server import (
    SEED_MAX,
    VariantSeedError,
    answers_name,
    fill_data,
    problem_params,
    variant_seed_of,
)
from attnscore.practice.tolerance import prairielearn_accepts
from attnscore.practice.vendor import PACKAGE_PREFIX, VendorError, vendor_package
from attnscore.practice.worksheet import Worksheet
from tests.guards import HANG_GUARD_S

from . import prairielearn_format as pl_format

chevron = pytest.importorskip("chevron")  # PrairieLearn's own mustache renderer (a test dependency)

SPECS = Path(__file__).resolve().parents[2] / "specs" / "practice"
SHEET = Worksheet("Attention scores: practice", 0, None, "attnscore practice --format prairielearn")
SEEDS = [0, 1, 7, 12345, 2**32 - 1, SEED_MAX]
EPS = 1e-9

# The driver PrairieLearn's zygote amounts to: question folder first on sys.path, exec server.py, call generate().
_DRIVER = r"""
import json, sys
sys.path.insert(0, ".")
try:
    import attnscore
    found = "attnscore importable"
except ImportError:
    found = ""
mod = {"__file__": "server.py"}
exec(compile(open("server.py", encoding="utf-8").read(), "server.py", "exec"), mod)
out = []
for seed in json.loads(sys.argv[1]):
    data = {"variant_seed": seed, "params": {}, "correct_answers": {}, "options": {}}
    try:
        mod["generate"](data)
        out.append({"data": data})
    except Exception as exc:
        out.append({"error": type(exc).__name__, "message": str(exc)})
print(json.dumps({"attnscore": found, "results": out}))
"""


def run(*args: str):
    """Invoke the CLI with the shipped families folder."""
    return CliRunner().invoke(main, ["practice", "--families-dir", str(SPECS), *args])


_SCHEMAS = {
    "infoQuestion.json": pl_format.QUESTION,
    "infoAssessment.json": pl_format.ASSESSMENT,
    "infoCourseInstance.json": pl_format.COURSE_INSTANCE,
    "infoCourse.json": pl_format.COURSE,
}


def _validate(instance: dict, schema_name: str) -> None:
    schema = _SCHEMAS[schema_name]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(instance)


def _check_elements(html: str) -> ET.Element:
    """Parse the markup; every answer element's attributes pass PrairieLearn's element schema."""
    root = ET.fromstring(f"<root>{html}</root>")
    for el in root.iter():
        if el.tag in pl_format.ELEMENTS:
            jsonschema.Draft202012Validator(pl_format.ELEMENTS[el.tag]).validate(dict(el.attrib))
        elif el.tag.startswith("pl-"):
            assert el.tag in ("pl-question-panel", "pl-answer-panel"), el.tag
    for mc in root.iter("pl-multiple-choice"):
        assert [a.get("correct") for a in mc].count("true") == 1
    return root


@pytest.fixture(scope="module")
def course(tmp_path_factory, families):
    """`attnscore practice --format prairielearn --featured` for every shipped family."""
    out = tmp_path_factory.mktemp("pl")
    result = run("--format", "prairielearn", "--featured", "--count", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def served(course, families):
    """Each family's server.py run with SEEDS in a fresh `python -I -S` (no attnscore, no site-packages)."""
    out = {}
    for fam_id in families:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _DRIVER, json.dumps(SEEDS)],
            cwd=course / "questions" / fam_id,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        out[fam_id] = json.loads(proc.stdout)
    return out


def test_cli_layout(course, families):
    """One randomised folder per family (info.json, question.html, server.py, vendored package), static fixed ones."""
    names = {p.relative_to(course).as_posix() for p in course.rglob("*") if p.is_file()}
    for fam_id in families:
        base = f"questions/{fam_id}"
        assert {f"{base}/info.json", f"{base}/question.html", f"{base}/server.py"} <= names
        vendored = {n.split("/")[2] for n in names if n.startswith(f"{base}/{PACKAGE_PREFIX}")}
        assert len(vendored) == 1  # one package, the same hash in every folder
    assert f"courseInstances/{COURSE_INSTANCE}/assessments/{ASSESSMENT}/infoAssessment.json" in names
    assert "questions/one-score-v2-fixed-01/question.html" in names  # --featured stays static
    assert "answer-key.json" in names  # ... and keyed


def test_fixed_questions_are_single_variant_and_randomised_ones_are_not(course, families):
    """A fixed problem (numbers written in) says singleVariant: true; a family's question draws variants."""
    seen = {}
    for path in course.rglob("questions/*/info.json"):
        seen[path.parent.name] = json.loads(path.read_text(encoding="utf-8")).get("singleVariant", False)
    assert {name for name, single in seen.items() if single} == set(seen) - set(families)
    assert len(set(seen) - set(families)) == 7


def test_info_files_match_prairielearn_schemas(course):
    """info.json, infoAssessment.json, infoCourseInstance.json and infoCourse.json pass PrairieLearn's schemas."""
    seen = 0
    for path in course.rglob("info*.json"):
        schema = {
            "info.json": "infoQuestion.json",
            "infoAssessment.json": "infoAssessment.json",
            "infoCourseInstance.json": "infoCourseInstance.json",
            "infoCourse.json": "infoCourse.json",
        }[path.name]
        _validate(json.loads(path.read_text(encoding="utf-8")), schema)
        seen += 1
    assert seen == 7 + 7 + 3  # 7 randomised + 7 featured questions, assessment, instance, course


def test_schema_check_catches_a_bad_file():
    """The schema check is real: a question without a topic and an assessment of an unknown type fail."""
    with pytest.raises(jsonschema.ValidationError, match="'topic' is a required property"):
        _validate({"uuid": "6f1c7f0e-8d0b-5a3e-9a55-61747473636f", "type": "v3", "title": "t"}, "infoQuestion.json")
    with pytest.raises(jsonschema.ValidationError, match="'Quiz' is not one of"):
        _validate(
            {"uuid": "6f1c7f0e-8d0b-5a3e-9a55-61747473636f", "type": "Quiz", "title": "t", "set": "HW", "number": "1"},
            "infoAssessment.json",
        )


def test_assessment_pools_every_question(course, families):
    """The assessment lists every question folder exactly once (families as Homework: a fresh variant per attempt)."""
    assessment = json.loads(
        (course / "courseInstances" / COURSE_INSTANCE / "assessments" / ASSESSMENT / "infoAssessment.json").read_text()
    )
    assert assessment["type"] == "Homework"
    qids = [q["id"] for zone in assessment["zones"] for q in zone["questions"]]
    folders = sorted(p.parent.relative_to(course / "questions").as_posix() for p in course.rglob("info.json"))
    assert sorted(qids) == folders and len(set(qids)) == len(qids)
    assert set(families) <= set(qids)
    uuids = [json.loads(p.read_text())["uuid"] for p in course.rglob("info*.json") if "uuid" in p.read_text()]
    assert len(set(uuids)) == len(uuids)
    tags = {t["name"] for t in json.loads((course / "infoCourse.json").read_text())["tags"]}
    assert all(set(json.loads(p.read_text())["tags"]) <= tags for p in course.rglob("info.json"))


@pytest.mark.slow
def test_server_runs_without_attnscore_and_matches_the_generator(served, families):
    """server.py in `python -I -S`: attnscore not importable, params and keys equal the generator's for each seed."""
    for fam_id, out in served.items():
        assert out["attnscore"] == "", fam_id
        for seed, result in zip(SEEDS, out["results"], strict=True):
            assert "data" in result, (fam_id, seed, result)
            data = result["data"]
            p = generate_variant(families[fam_id], seed, None, 0)
            assert data["params"] == json.loads(json.dumps(problem_params(p))), (fam_id, seed)
            keys = {answers_name(q.part, a.name): float(Fraction(a.key)) for q in p.questions for a in q.numeric}
            assert data["correct_answers"] == keys, (fam_id, seed)
            assert data["params"]["attnscore"]["uid"] == f"{p.family_id}-v{p.family_version}-s{seed}-0000"


@pytest.mark.parametrize("fam_id", ["one-score", "score-matrix", "softmax-exact", "multiple-choice"])
def test_server_matches_the_command_line(tmp_path, served, fam_id):
    """`attnscore practice FAMILY --seed SEED --count 1` keys the same answers and options as PrairieLearn's variant."""
    for seed, result in list(zip(SEEDS, served[fam_id]["results"], strict=True))[:3]:
        out = tmp_path / str(seed)
        assert run(fam_id, "--seed", str(seed), "--count", "1", "--format", "json", "--out", str(out)).exit_code == 0
        key = json.loads((out / "answer-key.json").read_text())["problems"][0]
        data = result["data"]
        assert key["uid"] == data["params"]["attnscore"]["uid"]
        numeric = {answers_name(*name.split(".", 1)): float(Fraction(v["key"])) for name, v in key["answers"].items()}
        assert numeric == data["correct_answers"]
        for name, choice in key["choices"].items():
            part = next(
                p
                for p in data["params"]["parts"]
                if p["choice"] and p["choice"]["name"] == answers_name(*name.split(".", 1))
            )
            flags = [o["correct"] for o in part["choice"]["options"]]
            assert flags.index("true") == choice["position"], (fam_id, seed, name)


def test_rendered_question_matches_the_static_markup(course, served, families):
    """question.html rendered (chevron) with server.py's params is the static markup of the same problem, keys aside."""
    for fam_id, out in served.items():
        template = (course / "questions" / fam_id / "question.html").read_text()
        for seed, result in zip(SEEDS, out["results"], strict=True):
            data = result["data"]
            html = chevron.render(template, data)
            root = _check_elements(html)
            static = ET.fromstring(f"<root>{question_html(generate_variant(families[fam_id], seed, None, 0))}</root>")

            def shape(r: ET.Element) -> list[tuple[str, dict[str, str], str]]:
                return [
                    (e.tag, {k: v for k, v in e.attrib.items() if k != "correct-answer"}, (e.text or "").strip())
                    for e in r.iter()
                    if e.tag.startswith("pl-") and e.tag != "pl-answer-panel"
                ]

            assert shape(root) == shape(static), (fam_id, seed)
            numeric = {e.get("answers-name"): float(e.get("atol")) for e in root.iter("pl-number-input")}
            assert set(numeric) == set(data["correct_answers"]), (fam_id, seed)
            for name, atol in numeric.items():  # PrairieLearn's relabs rule, rtol=0: key in, key ± (atol + ε) out
                key = data["correct_answers"][name]
                assert prairielearn_accepts(key, key, 0.0, atol)
                assert not prairielearn_accepts(key + atol + EPS, key, 0.0, atol)
                assert not prairielearn_accepts(key - atol - EPS, key, 0.0, atol)
            assert f"attnscore practice {fam_id} --seed {seed} --count 1" in html


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            "one-score",
            "score-vector",
            "score-matrix",
            "scaled-score",
            "softmax-exact",
            "softmax-ranking",
            "multiple-choice",
        ]
    ),
    st.integers(0, SEED_MAX),
)
def test_fill_data_is_the_variant_of_the_seed(families, fam_id, seed):
    """For any seed, fill_data gives the params and keys of generate_variant(seed, index 0), the same every time."""
    fam = families[fam_id]
    a = {"variant_seed": seed, "params": {}, "correct_answers": {}}
    b = {"variant_seed": seed}
    p = fill_data(fam, a)
    fill_data(fam, b)
    assert a == {**b, "variant_seed": seed}
    assert p == generate_variant(fam, seed, None, 0)
    assert sorted(a["params"]["answers_names"]) == sorted(
        [answers_name(q.part, x.name) for q in p.questions for x in q.numeric]
        + [answers_name(q.part, q.choice.name) for q in p.questions if q.choice]
    )


@pytest.mark.parametrize(
    ("data", "found"),
    [
        pytest.param({"variant_seed": "12"}, "'12' (str)", id="numeric string"),
        pytest.param({"variant_seed": 1.0}, "1.0 (float)", id="float"),
        pytest.param({"variant_seed": True}, "True (bool)", id="boolean"),
        pytest.param({"variant_seed": -1}, "-1 (int)", id="negative"),
        pytest.param({"variant_seed": 2**63}, f"{2**63} (int)", id="above 2**63 - 1"),
        pytest.param({"variant_seed": None}, "None (NoneType)", id="null"),
        pytest.param({"params": {}}, "nothing (no 'variant_seed' key)", id="missing"),
        pytest.param([7], "nothing (no 'variant_seed' key)", id="not a dict"),
    ],
)
def test_bad_variant_seed(families, data, found):
    """A seed that is not an integer in [0, 2**63 - 1] is refused with a message naming what was found."""
    with pytest.raises(VariantSeedError) as info:
        fill_data(families["one-score"], data)
    assert str(info.value) == (
        f"data['variant_seed'] must be an integer from 0 to {SEED_MAX} (PrairieLearn passes one to generate(data)), "
        f"found {found}; call generate() with PrairieLearn's data dict"
    )
    assert isinstance(info.value, ValueError)


def test_bad_seed_inside_the_vendored_server(course):
    """The vendored server.py refuses a string seed with the same message (no attnscore installed)."""
    driver = _DRIVER.replace("json.loads(sys.argv[1])", '["abc"]')
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", driver],
        cwd=course / "questions" / "softmax-exact",
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    result = json.loads(proc.stdout)["results"][0]
    assert result["error"] == "VariantSeedError"
    assert result["message"].startswith("data['variant_seed'] must be an integer from 0 to ")
    assert "found 'abc' (str)" in result["message"]


def test_variant_seed_of_accepts_the_bounds():
    """0 and 2**63 - 1 (the --seed range) are valid seeds."""
    assert variant_seed_of({"variant_seed": 0}) == 0
    assert variant_seed_of({"variant_seed": SEED_MAX}) == SEED_MAX


def test_every_kind_has_prairielearn_elements():
    """Every family kind the YAML accepts maps to PrairieLearn answer elements."""
    assert set(KIND_ELEMENTS) == set(KINDS)


def test_kind_that_cannot_be_expressed(families):
    """A family kind without PrairieLearn elements is refused, naming the kind and the known ones."""
    odd = replace(families["one-score"], kind="attention_map")
    message = "PrairieLearn export: kind 'attention_map': no PrairieLearn elements are known for this kind (known: "
    for call in (lambda: question_template("attention_map"), lambda: server_py(odd, "pkg")):
        with pytest.raises(PrairieLearnExportError, match="^" + re.escape(message)):
            call()
    with pytest.raises(PrairieLearnExportError, match="kind 'attention_map'"):
        prairielearn_course([families["one-score"], odd], [], SHEET)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda f: ([], []), "PrairieLearn export: (nothing): no family and no fixed problem", id="empty"),
        pytest.param(
            lambda f: ([f["one-score"], f["one-score"]], []),
            "PrairieLearn export: one-score: two families share this id",
            id="same family twice",
        ),
        pytest.param(
            lambda f: ([replace(f["one-score"], id="one-score-v2-fixed-01")], featured_problems(f["one-score"])),
            "PrairieLearn export: one-score-v2-fixed-01: a family and a fixed problem would share",
            id="folder clash",
        ),
    ],
)
def test_course_errors(families, make, message):
    """Nothing to export, a repeated family and clashing folders are refused."""
    fams, fixed = make(families)
    with pytest.raises(PrairieLearnExportError) as info:
        prairielearn_course(fams, fixed, SHEET)
    assert str(info.value).startswith(message)


def test_vendored_package(families):
    """The vendored closure: stdlib-only imports (no YAML reader), relative imports, a content-hashed name."""
    files = vendor_package(["prairielearn_server"], "9.9")
    package = {name.split("/")[0] for name in files}
    assert len(package) == 1 and next(iter(package)).startswith(PACKAGE_PREFIX)
    modules = sorted(name.split("/", 1)[1] for name in files)
    assert modules == [
        "__init__.py",
        "claims.py",
        "drawing.py",
        "family.py",
        "generators.py",
        "kinds/__init__.py",
        "kinds/base.py",
        "kinds/multiple_choice.py",
        "kinds/one_score.py",
        "kinds/scaled_score.py",
        "kinds/scaled_value.py",
        "kinds/score_matrix.py",
        "kinds/score_vector.py",
        "kinds/softmax.py",
        "kinds/softmax_ranking.py",
        "numbers.py",
        "prairielearn_server.py",
        "problem.py",
        "richtext.py",
        "seeds.py",
        "solutions.py",
        "worked.py",
    ]
    for name, data in files.items():
        text = data.decode()
        imported = [
            node.module or "" if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        ]
        assert not [m for m in imported if m.startswith("attnscore")], name
        assert not [m for m in imported if m.split(".")[0] in ("yaml", "torch", "numpy", "matplotlib")], name
    family_py = files[f"{next(iter(package))}/family.py"].decode()
    assert "(attnscore 9.9)" in family_py
    assert vendor_package(["prairielearn_server"], "other").keys() == files.keys()  # name hashes the code only


def test_vendor_guards_third_party_imports():
    """A module-level third-party import is wrapped in try/except ImportError binding the name to None."""
    files = vendor_package(["math_images"], "9.9")
    text = next(data.decode() for name, data in files.items() if name.endswith("/math_images.py"))
    assert "try:\n    from matplotlib.figure import Figure\nexcept ImportError:" in text
    assert "    Figure = None  # type: ignore[assignment]\n" in text


@pytest.mark.parametrize(
    ("roots", "message"),
    [
        pytest.param(
            ["verify"],
            # float64.py takes torch (attnscore.boundary) and the reference (attnscore.maths): the first one is named
            "it imports attnscore.boundary.lazy_torch, which is not part of attnscore.practice",
            id="imports attnscore.boundary and attnscore.maths",
        ),
        pytest.param(
            ["families"],
            "it imports attnscore.spec.located, which is not part of attnscore.practice",
            id="the family-file reader (located YAML) stays out",
        ),
        pytest.param(["no_such_module"], "no such pure-Python module in attnscore.practice", id="missing module"),
    ],
)
def test_vendor_refuses(roots, message):
    """Modules that need attnscore outside attnscore.practice, or do not exist, are refused by name."""
    with pytest.raises(VendorError, match=message):
        vendor_package(roots)


def test_cli_message(tmp_path):
    """The command says what it wrote: randomised questions per family and fixed ones."""
    result = run("one-score", "scaled-score", "--format", "prairielearn", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        "wrote 2 randomised question(s) (one per family, variants drawn from PrairieLearn's seed) and 0 fixed "
        f"question(s) as prairielearn to {tmp_path}: 53 file(s)"
    )
    result = run("--q", "0,1", "--k", "0,-1", "--format", "prairielearn", "--out", str(tmp_path / "fixed"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "fixed" / "questions" / "one-score-v2-fixed-01" / "question.html").is_file()
    assert not list((tmp_path / "fixed").rglob("server.py"))


def test_element_check_catches_a_typo_and_a_bad_value():
    """The element schemas are real: an unknown attribute and a comparison PrairieLearn lacks fail."""
    with pytest.raises(jsonschema.ValidationError, match="Additional properties are not allowed"):
        _check_elements('<pl-number-input answers-name="s" rel-tol="0"></pl-number-input>')
    with pytest.raises(jsonschema.ValidationError, match="'exact' is not one of"):
        _check_elements('<pl-number-input answers-name="s" comparison="exact"></pl-number-input>')
    _check_elements('<pl-number-input answers-name="s" comparison="relabs" rtol="0" atol="0.0005"></pl-number-input>')
