"""Named mistakes on one half of the bank of wrong answers (issue 37): named, right, wrong.

    python scripts/named_mistakes.py [--split eval|dev|all] [ASSIGNMENT ...]

Each wrong answer of tests/exercise_answers/<assignment>.py in the chosen half (its "# split:"
line, tests/answer_split.py) replaces its cell of the solution notebook, and the notebook runs
in process as in tests/test_exercises.py. Answers that call a forbidden library function are
left out (no misconception to name). For each answer the first line of its part's failure is a
named mistake or not; the name is right when it is the answer's own mistake (its "# names:"
line, or tests/test_exercises.py's KNOWN_MISTAKES: what the answer does, in the catalogue's
words) and wrong otherwise, a name given to an
answer whose mistake has no entry included. Prints one row per assignment and the total.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Tally:
    answers: int = 0
    named: int = 0
    right: int = 0
    wrong: int = 0

    def add(self, other: Tally) -> None:
        for field in ("answers", "named", "right", "wrong"):
            setattr(self, field, getattr(self, field) + getattr(other, field))

    def row(self, name: str) -> str:
        share = self.right / self.answers if self.answers else 0.0
        return (
            f"{name:<18} {self.answers:>7} {self.named:>5} {self.right:>5} {self.wrong:>5} "
            f"{share:>12.0%}"
        )


def tally(assignment: str, half: str, verbose: bool) -> Tally:
    import nbformat

    from tests.test_exercises import (
        builder,
        expected_name,
        load_answers,
        named_mistake,
        run_in_process,
    )

    source = nbformat.read(builder.notebook_path(assignment), as_version=4)
    correct = builder.solution_answers(source)
    result = Tally()
    for answer in load_answers(assignment):
        if answer.kind != "wrong" or "(forbidden)" in answer.label:
            continue
        if half != "all" and answer.split != half:
            continue
        results = run_in_process(source, {**correct, answer.grade_id: answer.source})
        error = results.get(f"{answer.grade_id}_tests") or ""
        named = named_mistake(error) if error.split(": ", 1)[-1].strip() else None
        truth = expected_name(assignment, answer)
        right = bool(named and truth and truth in named)
        result.answers += 1
        result.named += bool(named)
        result.right += right
        result.wrong += bool(named) and not right
        if verbose:
            verdict = "right" if right else ("WRONG" if named else "-")
            print(f"  {assignment} {answer.grade_id}: {answer.label} -> {verdict} {named or ''}")
    return result


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.test_exercises import ANSWERS, ASSIGNMENTS

    banked = [a for a in ASSIGNMENTS if (ANSWERS / f"{a}.py").exists()]

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("eval", "dev", "all"), default="eval")
    parser.add_argument("--verbose", action="store_true", help="one line per answer")
    parser.add_argument("assignments", nargs="*", choices=[[], *banked], default=[])
    args = parser.parse_args(argv)
    total = Tally()
    print(
        f"{'half: ' + args.split:<18} {'answers':>7} {'named':>5} {'right':>5} {'wrong':>5} "
        f"{'right/answers':>12}"
    )
    for assignment in args.assignments or banked:
        counts = tally(assignment, args.split, args.verbose)
        print(counts.row(assignment), flush=True)
        total.add(counts)
    print(total.row("total"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
