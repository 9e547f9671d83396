"""Generation: reproducible per seed and student, independent streams, fast, never global state."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from attnscore.practice.generators import GenerationError, generate_family, generate_variant, givens_key
from attnscore.practice.seeds import variant_seed


def test_seed_is_pinned():
    """The seed derivation is stable across runs and platforms (sha256 of canonical JSON)."""
    import hashlib

    payload = b'["attnscore.practice/1","one-score",1,42,"alice",0,"givens"]'
    assert (
        variant_seed("one-score", 1, 42, "alice", 0, "givens")
        == int.from_bytes(hashlib.sha256(payload).digest()[:8], "big")
        == 1203408047821955186
    )


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"family_id": "other"}, id="family id"),
        pytest.param({"version": 2}, id="version"),
        pytest.param({"base_seed": 43}, id="base seed"),
        pytest.param({"student": "bob"}, id="student"),
        pytest.param({"index": 1}, id="index"),
        pytest.param({"part": "choices"}, id="part"),
    ],
)
def test_every_seed_input_matters(change):
    """Changing any one input of the seed gives a different seed."""
    args = {
        "family_id": "one-score",
        "version": 1,
        "base_seed": 42,
        "student": "alice",
        "index": 0,
        "part": "givens",
    }
    assert variant_seed(**args) != variant_seed(**{**args, **change})


def test_same_arguments_same_problems(families):
    """Generating twice with the same arguments gives equal problems."""
    fam = families["score-vector"]
    a, _ = generate_family(fam, 20, 7, "alice")
    b, _ = generate_family(fam, 20, 7, "alice")
    assert a == b


def test_more_variants_keep_the_first_ones(families):
    """Asking for more variants does not change the earlier ones."""
    fam = families["multiple-choice"]
    short, _ = generate_family(fam, 5, 3)
    long, _ = generate_family(fam, 12, 3)
    assert long[:5] == short


def test_students_get_different_variants(families):
    """Two students with the same base seed get different numbers."""
    fam = families["score-matrix"]
    alice = [givens_key(p) for p in generate_family(fam, 10, 1, "alice")[0]]
    bob = [givens_key(p) for p in generate_family(fam, 10, 1, "bob")[0]]
    assert alice != bob


def test_regenerate_one_variant_alone(families):
    """Variant 7 can be regenerated on its own from the arguments in the answer key."""
    fam = families["softmax-ranking"]
    problems, _ = generate_family(fam, 10, 5, "carol")
    assert generate_variant(fam, 5, "carol", 7) == problems[7]
    assert problems[7].seed == variant_seed(fam.id, fam.version, 5, "carol", 7, "givens")


def test_global_random_state_is_not_used(families):
    """Reseeding the global RNG changes nothing, and generation leaves the global RNG alone."""
    fam = families["one-score"]
    random.seed(1)
    a, _ = generate_family(fam, 10, 0)
    state = random.getstate()
    random.seed(2)
    b, _ = generate_family(fam, 10, 0)
    random.seed(2)
    random.random()
    after = random.getstate()
    random.seed(2)
    generate_family(fam, 3, 0)
    random.random()
    assert a == b and after == random.getstate() and state is not None


def test_adding_a_family_changes_no_other_family(families):
    """A family's variants depend only on its own id and version, not on the other families."""
    fam = families["one-score"]
    before, _ = generate_family(fam, 5, 9)
    new = replace(families["score-vector"], id="brand-new")
    generate_family(new, 5, 9)
    assert generate_family(fam, 5, 9)[0] == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "family",
    [
        "one-score",
        "score-vector",
        "score-matrix",
        "scaled-score",
        "softmax-exact",
        "softmax-ranking",
        "multiple-choice",
    ],
)
def test_thousand_variants_and_their_acceptance(families, family):
    """1000 variants of each family are drawn and acceptance is reported (the time they take is a
    figure of benchmarks/bench_practice.py, never an assertion here)."""
    problems, stats = generate_family(families[family], 1000, 0)
    assert len(problems) == 1000 and stats.variants == 1000
    assert (0.05 if family == "multiple-choice" else 0.3) < stats.acceptance_rate <= 1.0


def test_impossible_constraints_fail_with_reasons(families):
    """A family whose grid cannot satisfy its constraints fails with the rejection reasons and a fix."""
    from fractions import Fraction as F

    fam = replace(families["one-score"], values=(F(0), F(1), F(1)), d_k=(2,), max_attempts=50)
    with pytest.raises(GenerationError, match=r"no acceptable numbers in 50 attempts \(.*\); widen 'values'"):
        generate_family(fam, 9, 0)  # capacity 9, but no negated key on a [0, 1] grid


def test_no_possible_variant_is_a_capacity_error(families):
    """Four distinct nonzero keys cannot come from three nonzero vectors: capacity 0, said up front."""
    from fractions import Fraction as F

    from attnscore.practice.generators import CapacityError

    fam = replace(families["score-vector"], values=(F(0), F(1), F(1)), d_k=(2,), n_k=(4,), max_attempts=50)
    with pytest.raises(CapacityError, match="capacity of 0 distinct variants"):
        generate_family(fam, 3, 0)


def test_capacity_is_stated_and_enforced(families):
    """Every bundled family states a capacity far above a class; a count above it is refused."""
    from dataclasses import replace
    from fractions import Fraction as F

    from attnscore.practice.generators import CapacityError, capacity

    assert all(capacity(f) > 100_000 for f in families.values())
    tiny = replace(families["one-score"], d_k=(2,), values=(F(0), F(1), F(1)))
    assert capacity(tiny) == 9  # (2**2 - 1) ** 2 nonzero (q, k) pairs
    with pytest.raises(CapacityError, match="capacity of 9 distinct variants"):
        generate_family(tiny, 10, 0)


def test_one_score_meaning_options_are_shuffled(families):
    """The sign question lists Positive/Zero/Negative in all six orders, keyed correctly."""
    from attnscore.practice.solutions import dot

    problems, _ = generate_family(families["one-score"], 120, 0)
    assert len({p.givens["order"] for p in problems}) == 6
    for p in problems:
        c = p.questions[1].choice
        s = dot(p.givens["q"], p.givens["k"])
        assert c.claims[c.correct] == ("sign", (s > 0) - (s < 0))
