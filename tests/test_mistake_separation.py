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
