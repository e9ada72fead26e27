"""The bank's split (issue 37): catalogue entries are written from the "dev" half of the wrong
answers in tests/exercise_answers/, and named/right/wrong is measured on the "eval" half only.

The half of an answer is a hash of its assignment and label, fixed before any entry is written
from it and recorded in its block ("# split: dev" or "# split: eval");
tests/test_mistake_separation.py checks that every wrong answer carries the half its hash gives,
so an answer cannot be moved to the other half after the fact.
"""

from __future__ import annotations

import hashlib

HALVES = ("dev", "eval")


def split_of(assignment: str, label: str) -> str:
    """ "dev" or "eval": the first byte of sha256("<assignment>/<label>"), even or odd."""
    digest = hashlib.sha256(f"{assignment}/{label}".encode()).digest()
    return HALVES[digest[0] % 2]
