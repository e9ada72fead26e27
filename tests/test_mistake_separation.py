"""A name only where the probes tell it apart (issue 37), as a property of every catalogue.

`mistakes.diagnose` names a mistake only when the learner's function gives what that mistake
gives on every probe of its part. That is right only if, for every pair of entries of a part,
some probe gives them different outputs (both applying to it): otherwise a learner who makes
one is told the other, as "only the first encoder layer" was told to a loop that stops one
layer early (equal on a 2-layer model). The same holds between each entry and its part's
unnamed plausible neighbours (`NEIGHBOURS`). Catalogues of random draws (`RANDOM`) are
recognised by a property in their test cells and have no probes.
"""

from __future__ import annotations

import itertools

import pytest

from bertcourse.grading.mistakes import neighbours, probes, resolve, separated
from tests.test_catalogues import KEYS, RANDOM, compare

DETERMINISTIC = [key for key in KEYS if key not in RANDOM]


def unseparated(key: str) -> list[str]:
    """The pairs (entry, entry) and (entry, neighbour) of `key` that no probe tells apart."""
    cases = probes(key)
    entries = resolve(key)
    pairs = [*itertools.combinations(entries, 2)]
    pairs += [(entry, n) for entry in entries for n in neighbours(key)]
    return [
        f"{key}: {a.name!r} and {getattr(b, 'name', getattr(b, 'what', b))!r}"
        for a, b in pairs
        if not separated(a, b, cases, compare)
    ]


@pytest.mark.parametrize("key", DETERMINISTIC)
def test_every_pair_of_a_part_is_separated_by_a_probe(key):
    problems = unseparated(key)
    assert not problems, "no probe tells these apart:\n" + "\n".join(problems)


def test_two_equal_entries_are_caught():
    """The property can fail: a catalogue with an entry twice is not separated."""
    import dataclasses

    from bertcourse.grading import mistakes

    entry = mistakes.CATALOGUE["sdpa"][0]
    twin = dataclasses.replace(entry, name="the same mistake under another name")
    cases = probes("sdpa")
    assert not separated(entry, twin, cases, compare)
    assert separated(entry, mistakes.CATALOGUE["sdpa"][1], cases, compare)


def test_every_wrong_answer_carries_the_half_its_hash_gives():
    """The bank's split is the hash's (tests/answer_split.py), recorded in every wrong block."""
    from tests.answer_split import split_of
    from tests.test_exercises import ANSWERS, ASSIGNMENTS, load_answers

    problems = [
        f"{assignment}: {answer.label!r} says {answer.split!r}, its hash gives "
        f"{split_of(assignment, answer.label)!r}"
        for assignment in ASSIGNMENTS
        if (ANSWERS / f"{assignment}.py").exists()  # an assignment being written has no bank yet
        for answer in load_answers(assignment)
        if answer.kind == "wrong" and answer.split != split_of(assignment, answer.label)
    ]
    assert not problems, "\n".join(problems)


def _two_layer_forward_inputs():
    """The issue's case: a 2-layer model, on which 'only the first layer' and 'stops one
    layer early' give the same outputs."""
    from bertcourse.grading.catalogues import ch07

    ((model, *rest), _) = ch07.PROBES["forward"]()[0]
    small = ch07._build(type(model), 7, num_hidden_layers=2)
    return (small, *rest)


def test_the_loop_that_stops_one_layer_early_is_named_as_itself():
    """On a 2-layer model both forward mistakes fit; the 3-layer probe tells them apart."""
    from bertcourse.grading.mistakes import diagnose

    (first_only, early) = [
        m for m in resolve("ch07:forward") if "first encoder" in m.name or "early" in m.name
    ]
    args = _two_layer_forward_inputs()
    for mistake in (first_only, early):
        got = mistake.compute(*args)
        assert not compare(got, (first_only if mistake is early else early).compute(*args))
        assert diagnose(got, "ch07:forward", args, {}, compare, call=mistake.compute) is mistake


def test_a_probe_the_learner_cannot_take_names_nothing_it_alone_would_separate():
    """A learner's function that raises on the probe that separates two entries gets no name;
    one that raises on a probe the others also separate keeps its name."""
    from bertcourse.grading.mistakes import diagnose

    (early,) = [m for m in resolve("ch07:forward") if "early" in m.name]
    args = _two_layer_forward_inputs()

    def only_two_layers(model, *rest):
        if len(model.bert.encoder.layer) != 2:
            raise ValueError("written for the 2-layer model only")
        return early.compute(model, *rest)

    got = early.compute(*args)
    assert diagnose(got, "ch07:forward", args, {}, compare, call=only_two_layers) is None

    (d_k,) = [m for m in resolve("ch01:sdpa") if "d_k, not" in m.name]

    def four_d_only(q, k, v, bias=None):
        if q.dim() != 4:
            raise ValueError("written for (B, A, L, D) inputs")
        return d_k.compute(q, k, v, bias)

    (q, k, v), _ = probes("ch01:sdpa")[0]
    got = d_k.compute(q, k, v)
    assert diagnose(got, "ch01:sdpa", (q, k, v), {}, compare, call=four_d_only) is d_k


def test_a_skipped_probe_leaves_no_name_that_only_it_would_tell_from_a_neighbour(monkeypatch):
    """The issue's ch06 case with the learner's function refusing the probe that holds both
    spellings of the norms: 'LayerNorm' only and 'bias' only (made a neighbour here) are then
    equal on every probe it takes, so no name is given."""
    from bertcourse.grading.catalogues import ch06
    from bertcourse.grading.mistakes import Neighbour, diagnose

    entries = ch06.CATALOGUE["groups"]
    (layernorm,) = [m for m in entries if "'LayerNorm'" in m.name]
    (biases,) = [m for m in entries if "only the biases" in m.name]
    monkeypatch.setitem(ch06.CATALOGUE, "groups", [m for m in entries if m is not biases])
    neighbour = Neighbour("the biases only", biases.compute)
    monkeypatch.setitem(ch06.NEIGHBOURS, "groups", [*ch06.NEIGHBOURS["groups"], neighbour])

    def bert_models_only(model, wd):
        if isinstance(model, ch06.NormNames):
            raise AttributeError("'NormNames' object has no attribute 'bert'")
        return biases.compute(model, wd)

    (model, wd), _ = ch06.PROBES["groups"]()[0]
    got = biases.compute(model, wd)
    assert not compare(got, layernorm.compute(model, wd))  # equal on bertcourse's models
    assert diagnose(got, "ch06:groups", (model, wd), {}, compare, call=biases.compute) is None
    assert diagnose(got, "ch06:groups", (model, wd), {}, compare, call=bert_models_only) is None
