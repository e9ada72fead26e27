"""One Chinese term for each technical term, in every catalogue and in the glossary.

The glossary (book/glossary.md) fixes the Chinese of each term; translators drifted to variants
(批量 / 小批量 / 批次 for "batch", 绑定 / 共享权重 for weight tying, ...). TERMS below lists, for
each term that drifted, the glossary's choice and the variants it replaces; every translated
msgstr of locales/zh_CN (the pages, the exercises, the feedback, the figures) and the glossary's
Chinese column must be free of the variants. A rule may hold only where the English says a
given word (`only_if`): 轮 is a fine word, but not for "epoch"; 分词 is word segmentation, so a
paragraph about tokenizing that says 分词 alone is using it for the other thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
GLOSSARY = ROOT / "book" / "glossary.md"


@dataclass(frozen=True)
class Term:
    english: str
    chinese: str  # the glossary's term
    banned: str  # a regular expression of the variants it replaces
    only_if: str = ""  # checked only where the English (msgid) matches this (case-insensitive)
    unless: str = ""  # ... and does not match this
    term: bool = True  # a technical term, in the glossary (not a form such as a hint's label)


TERMS = (
    # d2l-zh: 批量 is batch (批量大小 batch size), 小批量 minibatch, which the English never says
    Term("batch", "批量", r"小批量|批次|批量维(?!度)", unless=r"mini-?batch"),
    Term("weight tying", "权重绑定", r"共享权重|权重共享"),
    # 分词 is word segmentation; tokenizing is 词元化 / 切分成词元 (a tokenizer stays 分词器)
    Term("tokenize", "词元化", r"(?<![预基中])分词(?!器|工具|结果|标准)", r"tokeniz", r"segment"),
    Term("segmenter", "分词工具", r"分词器", r"segmenter", r"tokenizer"),
    Term("paraphrase", "释义句", r"复述"),
    Term("character masking", "逐字掩码", r"字符掩码"),
    Term("character vocabulary", "字级词表", r"单字词表|字符词表|(?<![数文名])字表"),
    Term("hidden state", "隐状态", r"隐藏状态"),
    # most Chinese BERT texts say 池化层: named once, in brackets after 汇聚层
    Term("pooler", "汇聚层", r"(?<!汇聚层（)(?<!汇聚层\*\*（)池化层"),
    Term("epoch", "迭代周期", r"轮次|轮数|轮训练|\d\s*轮|几轮|每轮|一轮", r"epoch"),
    # the course keeps 掩码 (mask, masked language model) where d2l-zh writes 掩蔽
    Term("mask", "掩码", r"掩蔽", unless=r"d2l"),  # (the glossary says why, naming d2l-zh's)
    # the forms of a hint's label and of a citation of the seed texts
    Term("*Hint:*", "*提示*：", r"\*提示：\*", term=False),
    Term("seed NNN", "种子文本 NNN", r"种子\s*0\d\d|种子文本 0\d\d、种子文本", term=False),
    Term(
        "Going further (not graded)",
        "进一步探索（不计分）",
        r"延伸思考|进一步思考",
        r"going further",
    ),
)


@dataclass(frozen=True)
class Text:
    where: str
    english: str
    chinese: str


def _catalogue_texts() -> list[Text]:
    out = []
    for po in sorted(CATALOGS.rglob("*.po")):
        for entry in polib.pofile(str(po)):
            if entry.msgstr and not entry.fuzzy and not entry.obsolete:
                where = f"{po.relative_to(CATALOGS)}: {entry.msgid[:60]!r}"
                out.append(Text(where, entry.msgid, entry.msgstr))
    return out


def _glossary_texts() -> list[Text]:
    rows = re.findall(r"^\* - (.+)\n  - (.+)$", GLOSSARY.read_text(encoding="utf-8"), re.M)
    return [Text(f"glossary.md: {en}", en, zh) for zh, en in rows]


def violations(term: Term, texts: list[Text]) -> list[str]:
    banned = re.compile(term.banned)
    out = []
    for text in texts:
        if term.only_if and not re.search(term.only_if, text.english, re.I):
            continue
        if term.unless and re.search(term.unless, text.english, re.I):
            continue
        for m in banned.finditer(text.chinese):
            context = text.chinese[max(0, m.start() - 12) : m.end() + 12].replace("\n", " ")
            out.append(f"{text.where}: {m.group(0)!r} in …{context}…")
    return out


@pytest.mark.parametrize("term", TERMS, ids=lambda t: t.english)
def test_one_chinese_term(term: Term) -> None:
    found = violations(term, _catalogue_texts() + _glossary_texts())
    assert not found, f"{term.english}: use {term.chinese}:\n" + "\n".join(found)


def test_the_glossary_names_each_term() -> None:
    chinese = {
        zh for zh, _ in re.findall(r"^\* - (.+)\n  - (.+)$", GLOSSARY.read_text("utf-8"), re.M)
    }
    missing = [t.chinese for t in TERMS if t.term and not t.only_if and t.chinese not in chinese]
    assert not missing, f"not in the glossary's Chinese column: {missing}"


def test_a_variant_is_caught() -> None:
    texts = [
        Text("a", "the hidden states of a batch", "一个小批量的隐藏状态"),
        Text("b", "two epochs", "两个轮次"),
        Text("c", "two rounds", "两轮"),  # 轮 is not "epoch" here
        Text("d", "tokenize the text", "对文本分词"),
        Text("e", "word segmentation", "中文分词"),
    ]
    by_name = {t.english: t for t in TERMS}
    assert len(violations(by_name["batch"], texts)) == 1
    assert len(violations(by_name["hidden state"], texts)) == 1
    assert len(violations(by_name["epoch"], texts)) == 1
    assert len(violations(by_name["tokenize"], texts)) == 1
