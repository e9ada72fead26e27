"""Chinese feedback is wrapped by display width, not by characters (bertcourse.grading.i18n.wrap).

A Chinese character takes two columns in the Validate dialog's <pre> and on a terminal, so a
line of 83 characters can take 166 columns. Random lines mixing Chinese, Chinese punctuation,
Latin words, numbers and code (fixed seeds) are wrapped at several widths: every line fits, no
character is lost or reordered, no Latin word is split, and no line starts with closing
punctuation or ends with opening punctuation. Then a real failure (a GradingError with a
Chinese message, as `learner_traceback` shows it) fits HEADLINE_WIDTH columns.
"""

from __future__ import annotations

import random
import re

import pytest
from wcwidth import wcswidth  # an independent measure of columns (IPython's dependency)

from bertcourse.grading import checks, i18n
from bertcourse.grading.mistakes import HEADLINE_WIDTH

HAN = "的损失位置被选中平均值结果偏小请只在求用或者布尔索引见第章交叉熵算词元掩码"
CLOSING = "，。、；：！？）”"
OPENING = "（“"
LATIN = ["labels", "ignore_index=-100", "x.clone()", "[MASK]", "BertModel", "0.15", "logits", "12"]


def _random_line(rng: random.Random) -> str:
    pieces = []
    for _ in range(rng.randint(5, 60)):
        kind = rng.random()
        if kind < 0.55:
            pieces.append("".join(rng.choice(HAN) for _ in range(rng.randint(1, 6))))
        elif kind < 0.7:
            pieces.append(rng.choice(CLOSING))
        elif kind < 0.75:
            pieces.append(rng.choice(OPENING) + rng.choice(HAN))
        else:
            pieces.append(f" {rng.choice(LATIN)} ")
    text = "".join(pieces).strip()
    # as Chinese is written: no space before closing punctuation or after opening punctuation
    text = re.sub(rf"\s+(?=[{CLOSING}])|(?<=[{OPENING}])\s+", "", text)
    return " " * rng.choice([0, 2, 4]) + text


@pytest.mark.parametrize("seed", range(20))
def test_wrapped_lines_fit_their_columns_and_keep_every_character(seed: int) -> None:
    rng = random.Random(seed)
    line = _random_line(rng)
    width = rng.choice([30, 50, HEADLINE_WIDTH])
    wrapped = i18n.wrap(line, width)
    assert all(wcswidth(w) <= width for w in wrapped), wrapped
    assert "".join("".join(w.split()) for w in wrapped) == "".join(line.split())
    for word in LATIN:
        assert line.count(word) == sum(w.count(word) for w in wrapped), (word, wrapped)
    for w in wrapped[1:]:
        assert w.strip()[0] not in CLOSING, wrapped
    for w in wrapped[:-1]:
        assert w.strip()[-1] not in OPENING, wrapped
    lead = line[: len(line) - len(line.lstrip())]
    assert wrapped[0].startswith(lead)
    assert all(w.startswith(lead + "    ") for w in wrapped[1:])


def test_a_line_of_chinese_is_cut_by_columns() -> None:
    """41 Chinese characters are 82 columns: one line at 83; 42 are 84 columns: two lines."""
    assert i18n.wrap("掩" * 41, HEADLINE_WIDTH) == ["掩" * 41]
    assert i18n.wrap("掩" * 42, HEADLINE_WIDTH) == ["掩" * 41, "    掩"]
    assert i18n.display_width("掩码 [MASK]，") == wcswidth("掩码 [MASK]，") == 2 * 2 + 1 + 6 + 2


def test_a_chinese_failure_fits_the_dialog() -> None:
    message = (
        "错误的损失："
        + "被忽略的位置（labels 为 -100）也计入了平均值，" * 4
        + "请只在被选中的位置上求平均。"
    )
    lines = checks.learner_traceback(checks.GradingError(message), None)
    assert all(wcswidth(line) <= HEADLINE_WIDTH for line in lines), lines
    assert "".join("".join(x.split()) for x in lines).startswith("".join(message.split()))


def test_english_lines_wrap_as_before() -> None:
    line = "  wrong labels: " + "the ignored positions count in the mean, " * 4
    assert checks._wrap(line) == __import__("textwrap").wrap(
        line, HEADLINE_WIDTH, subsequent_indent="      ", break_on_hyphens=False
    )
