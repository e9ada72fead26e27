"""The Chinese edition's catalogues (scripts/i18n.py) and Sphinx extension (bertcourse/viz/i18n_ext.py).

* The rules a translation must keep (inline code, math, roles and their targets, link targets,
  numbers) are checked on hand-made pairs that break each rule once, and on every translated
  entry of the real catalogues.
* `update` keeps translations, marks a changed paragraph fuzzy and writes the previous English
  beside it, also across a second update (babel alone forgets it).
* The real catalogues: one per page of `_toc.yml`, Language zh_CN, no fuzzy or untranslated entry
  in a page declared translated, and not stale against the English (a fresh extraction without
  execution, ~40 s).
* The language switch's relative links lead to the same page in the other edition.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


i18n = _load("bertcourse_i18n_script", ROOT / "scripts" / "i18n.py")
i18n_ext = _load("i18n_ext", ROOT / "bertcourse" / "viz" / "i18n_ext.py")

EN = (
    "Write a sequence as $x_1, \\dots, x_L$, counting `[CLS]`, with $\\rho = 0.15$ and "
    "{ref}`the masks chapter <ch02-masks>`; see {doc}`ch03_mlm` and "
    "[the paper](https://arxiv.org/abs/1810.04805): 15% of 512 tokens, 8,192 pieces."
)
ZH = (
    "把序列写成 $x_1, \\dots, x_L$，`[CLS]` 也计算在内，$\\rho = 0.15$，见"
    "{ref}`掩码一章 <ch02-masks>`、{doc}`ch03_mlm` 和[原论文](https://arxiv.org/abs/1810.04805)："
    "512 个词元中的 15%，共 8192 个子词。"
)


def test_a_faithful_translation_passes() -> None:
    assert i18n.invariant_problems(EN, ZH) == []


@pytest.mark.parametrize(
    ("broken", "what"),
    [
        (ZH.replace("`[CLS]`", "[CLS]"), "inline code"),
        (ZH.replace("`[CLS]`", "`[SEP]`"), "inline code"),
        (ZH.replace("$\\rho = 0.15$", "$\\rho=0.15$"), "math"),
        (ZH.replace("$x_1, \\dots, x_L$", "x_1 到 x_L"), "math"),
        (ZH.replace("<ch02-masks>", "<ch02-mask>"), "roles"),
        (ZH.replace("{doc}`ch03_mlm`", "第 3 章"), "roles"),
        (ZH.replace("{ref}`掩码一章 <ch02-masks>`", "掩码一章"), "roles"),
        (ZH.replace("1810.04805", "1810.04806"), "link targets"),
        (ZH.replace("[原论文](https://arxiv.org/abs/1810.04805)", "原论文"), "link targets"),
        (ZH.replace("15%", "百分之十五"), "numbers"),
        (ZH.replace("512", "521"), "numbers"),
        (ZH.replace("8192", "8129"), "numbers"),
    ],
)
def test_each_broken_rule_is_caught(broken: str, what: str) -> None:
    problems = i18n.invariant_problems(EN, broken)
    assert problems, f"a translation that breaks the {what} rule passed: {broken}"
    assert any(what in p for p in problems), problems


def test_role_text_is_translatable_but_role_targets_are_not() -> None:
    inv = i18n.invariants("see {ref}`the chapter <ch02-masks>` and {doc}`ch03_mlm`")
    assert sorted(inv.roles) == ["{doc}`ch03_mlm`", "{ref}<ch02-masks>"]
    assert "the chapter" in inv.rest


def test_what_needs_no_translation() -> None:
    assert not i18n.needs_translation("`bertcourse.mlm`")
    assert not i18n.needs_translation("$D = H / A$")
    assert not i18n.needs_translation("30,522")
    assert not i18n.needs_translation("{doc}`ch04_loss`")
    assert i18n.needs_translation("[0. From text to ids](ch00_tokenization.md)")
    assert i18n.needs_translation("{ref}`the questions page <seed-texts>`")
    assert i18n.needs_translation("Learning goals")


def _write_pot(path: Path, messages: list[str]) -> None:
    pot = polib.POFile()
    pot.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for m in messages:
        pot.append(polib.POEntry(msgid=m, msgstr=""))
    pot.save(str(path))


def test_update_keeps_translations_and_shows_the_previous_english(tmp_path: Path) -> None:
    pot, po = tmp_path / "page.pot", tmp_path / "page.po"
    old = "The learning rate rises linearly during the warmup of 10,000 steps."
    new = "The learning rate rises linearly during the warmup of 1,000 steps."
    _write_pot(pot, [old, "Gradient clipping", "`bertcourse.optim`"])
    assert i18n.merge(pot, po)[0] == "created"
    cat = polib.pofile(str(po))
    assert cat.metadata["Language"] == "zh_CN"
    assert cat.find("`bertcourse.optim`").msgstr == "`bertcourse.optim`"  # nothing to translate
    cat.find(old).msgstr = "学习率在 10,000 步的预热中线性上升。"
    cat.find("Gradient clipping").msgstr = "梯度裁剪"
    cat.save()

    _write_pot(pot, [new, "Gradient clipping", "`bertcourse.optim`"])
    for _ in range(2):  # a second update must not forget the previous English
        i18n.merge(pot, po)
        cat = polib.pofile(str(po))
        entry = cat.find(new)
        assert entry.fuzzy, "a changed paragraph must become fuzzy"
        assert entry.previous_msgid == old, "the translator must see the previous English"
        assert not entry.tcomment, "the previous English must not come back as a comment"
        assert entry.msgstr == "学习率在 10,000 步的预热中线性上升。"
        assert cat.find("Gradient clipping").msgstr == "梯度裁剪"
        assert not cat.find("Gradient clipping").fuzzy
        assert cat.find(old) is None
    # ... and the fuzzy entry's old translation now misses the new number
    assert any("numbers" in p for p in i18n.invariant_problems(new, entry.msgstr))


def test_update_stops_on_a_page_that_does_not_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page docutils cannot parse (a broken list-table) loses its messages from the .pot; a
    merge would then drop their translations, so extraction stops before any merge."""
    import subprocess

    error = 'book/p.md:12: ERROR: Error parsing content block for the "list-table" directive\n'
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stderr=error)
    )
    with pytest.raises(SystemExit, match="no catalogue was changed"):
        i18n.extract(tmp_path / "pot")
    warning = "book/p.md:12: WARNING: a warning only\n"
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stderr=warning)
    )
    assert i18n.extract(tmp_path / "pot") == {}  # warnings pass (nothing was written here)


def test_check_fails_on_fuzzy_and_untranslated_pages_declared_translated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pot = tmp_path / "p.pot"
    cats = tmp_path / "zh_CN" / "LC_MESSAGES"
    _write_pot(pot, ["Warmup", "Gradient clipping", "A paragraph with `code`."])
    i18n.merge(pot, cats / "book" / "p.po")
    listing = tmp_path / "translated.txt"
    listing.write_text("# comment\nbook/p\n", encoding="utf-8")
    monkeypatch.setattr(i18n, "CATALOGS", cats)
    monkeypatch.setattr(i18n, "TRANSLATED_LIST", listing)
    problems = i18n.check(stale=False, verbose=False)
    assert any("declared translated but 0 fuzzy and 3 untranslated" in p for p in problems)

    cat = polib.pofile(str(cats / "book" / "p.po"))
    cat.find("Warmup").msgstr = "预热"
    cat.find("Gradient clipping").msgstr = "梯度裁剪"
    cat.find("A paragraph with `code`.").msgstr = "一段含有代码的文字。"  # the code is lost
    cat.find("Warmup").flags.append("fuzzy")
    cat.save()
    problems = i18n.check(stale=False, verbose=False)
    assert any("1 fuzzy and 0 untranslated" in p for p in problems), problems
    assert any("inline code differ" in p for p in problems), problems

    listing.write_text("", encoding="utf-8")  # not declared: coverage only, but code still checked
    problems = i18n.check(stale=False, verbose=False)
    assert len(problems) == 1 and "inline code" in problems[0], problems


def test_glossary_is_parsed_and_each_term_appears_once() -> None:
    terms = i18n_ext.glossary_terms(ROOT / "book" / "glossary.md")
    zh = [t for t, _ in terms]
    en = [e.lower() for _, e in terms]
    assert len(terms) >= 50
    assert len(set(zh)) == len(zh), "a Chinese term twice in the glossary"
    assert len(set(en)) == len(en), "an English term twice in the glossary"
    wanted = {
        "注意力": "attention",
        "掩码": "mask",
        "掩码语言模型": "masked language model",
        "下一句预测": "next sentence prediction",
        "预热": "warmup",
        "学习率调度": "learning rate schedule",
        "梯度裁剪": "gradient clipping",
        "词元化": "tokenization",
        "全词掩码": "whole-word masking",
        "词表": "vocabulary",
        "子词": "subword",
        "注意力掩码": "attention mask",
        "填充": "padding",
        "交叉熵": "cross-entropy",
        "微调": "fine-tuning",
        "预训练": "pretraining",
        "隐状态": "hidden state",
        "嵌入": "embedding",
    }
    assert {z: e for z, e in terms if z in wanted} == wanted


def test_glossary_warning() -> None:
    glossary = [("梯度裁剪", "gradient clipping"), ("预热", "warmup")]
    assert (
        i18n.glossary_problems("Gradient clipping and warmup.", "梯度裁剪与预热。", glossary) == []
    )
    warned = i18n.glossary_problems("Gradient clipping and warmup.", "梯度截断与热身。", glossary)
    assert len(warned) == 2
    # a term inside inline code is a name, not a term
    assert i18n.glossary_problems("`warmup_steps`", "`warmup_steps`", glossary) == []


def test_language_switch_links_lead_to_the_same_page() -> None:
    assert i18n_ext.switch_href("book/ch03_mlm", "en", "zh_CN") == "../zh/book/ch03_mlm.html"
    assert i18n_ext.switch_href("book/ch03_mlm", "zh_CN", "en") == "../../book/ch03_mlm.html"
    assert i18n_ext.switch_href("index", "en", "zh_CN") == "zh/index.html"
    assert i18n_ext.switch_href("index", "zh_CN", "en") == "../index.html"
    with pytest.raises(ValueError, match="no edition"):
        i18n_ext.switch_href("index", "en", "fr")


def test_the_catalogues_cover_every_page_and_keep_the_rules() -> None:
    catalogs = i18n.page_catalogs()
    pages = i18n.toc_pages()
    assert sorted(catalogs) == sorted(pages), "one catalogue per page of _toc.yml"
    problems = i18n.check(stale=False, verbose=False)
    assert problems == [], "\n".join(problems)


def test_the_catalogues_are_not_stale() -> None:
    """A fresh extraction of the English (without executing the pages) has no new message."""
    problems = i18n.stale_problems(fast=True)
    assert problems == [], "\n".join(problems)


# --- figures -----------------------------------------------------------------------------------


def _render(text: str, family: list[str]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    with matplotlib.rc_context({"font.family": family}):
        fig = plt.figure(figsize=(0.6, 0.6), dpi=50)
        fig.text(0.1, 0.2, text, fontsize=20)
        fig.canvas.draw()
        pixels = np.asarray(fig.canvas.buffer_rgba())[..., 0].copy()
        plt.close(fig)
    return pixels


def test_chinese_figure_labels_render_with_real_glyphs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging
    import warnings

    from bertcourse.viz import lang

    po = tmp_path / "zh_CN" / "LC_MESSAGES" / "figures.po"
    po.parent.mkdir(parents=True)
    cat = polib.POFile()
    cat.metadata = {"Language": "zh_CN", "Content-Type": "text/plain; charset=UTF-8"}
    cat.append(polib.POEntry(msgid="head size $d_k$", msgstr="头的维度 $d_k$"))
    cat.append(polib.POEntry(msgid="attention", msgstr="注意力", flags=["fuzzy"]))
    cat.save(str(po))
    monkeypatch.setattr(lang, "LOCALES", tmp_path)
    lang._catalog.cache_clear()
    try:
        assert lang.label("head size $d_k$") == "head size $d_k$"  # English by default
        lang.set_language("zh")
        assert lang.get_language() == "zh_CN"
        assert lang.label("head size $d_k$") == "头的维度 $d_k$"
        assert lang.label("attention") == "attention", "a fuzzy translation is not used"
        assert lang.label("not in the catalogue") == "not in the catalogue"
        with pytest.raises(ValueError, match="no figure language"):
            lang.set_language("fr")

        import matplotlib

        family = list(matplotlib.rcParams["font.family"])
        assert family[0] == lang.CJK_FAMILY
        # A missing glyph is drawn as the same empty box for every character: with the CJK font
        # two different characters give two different bitmaps; with DejaVu Sans alone they do not.
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a warning
            a, b = _render("注", family), _render("意", family)
            _render(lang.label("head size $d_k$"), family)  # mathtext with Chinese around it
        assert (a != b).any() and (a < 128).sum() > 20
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            box_a, box_b = _render("注", ["DejaVu Sans"]), _render("意", ["DejaVu Sans"])
        assert (box_a == box_b).all(), "without the CJK font both are the same empty box"
    finally:
        lang.set_language("en")
        import matplotlib

        matplotlib.rcParams["font.family"] = ["sans-serif"]
        lang._catalog.cache_clear()


def test_a_page_opts_in_to_figures_in_its_language() -> None:
    page = "---\nfigure_language: true\nkernelspec:\n  name: python3\n---\n\n# Title\n\nText.\n"
    out = i18n_ext.figure_language_cell(page, "zh_CN")
    assert out.index("# Title") < out.index('lang.set_language("zh_CN")') < out.index("Text.")
    assert ":tags: [remove-cell]" in out
    plain = page.replace("figure_language: true\n", "")
    assert i18n_ext.figure_language_cell(plain, "zh_CN") == plain


def test_jieba_caches_in_the_build_folder_quietly(tmp_path: Path) -> None:
    """Sphinx's Chinese search runs jieba; its dictionary cache goes to the build's folder (not
    the shared temporary folder, where another user's `jieba.cache` made every build print a
    PermissionError traceback), and it logs nothing."""
    import subprocess

    code = (
        "from pathlib import Path; import sys\n"
        "from bertcourse.viz.i18n_ext import _jieba_cache_in\n"
        "_jieba_cache_in(Path(sys.argv[1]))\n"
        "import jieba; print(jieba.lcut('掩码语言模型的注意力'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "doctrees")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "注意力" in proc.stdout
    assert (tmp_path / "doctrees" / "jieba.cache").is_file()
    assert proc.stderr == ""


# --- figures in Chinese ---------------------------------------------------------------------


@pytest.fixture
def chinese_figures():
    """The figure language set to zh_CN with the real figures.po, reset afterwards."""
    import matplotlib

    from bertcourse.viz import lang

    family = list(matplotlib.rcParams["font.family"])
    lang._catalog.cache_clear()
    lang.set_language("zh_CN")
    try:
        yield lang
    finally:
        lang.set_language("en")
        matplotlib.rcParams["font.family"] = family
        lang._catalog.cache_clear()


def _figure_texts(fig) -> set[str]:
    """Every string a figure will draw (texts, legends, tick labels fixed by the plot)."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels are written from their formatters at draw time
    return {t.get_text() for t in fig.findobj(Text) if t.get_text()}


def _catalogue() -> dict[str, str]:
    po = polib.pofile(str(i18n.CATALOGS / f"{i18n.FIGURES_DOMAIN}.po"))
    return {e.msgid: e.msgstr for e in po if e.msgstr and not e.fuzzy and not e.obsolete}


def test_a_figure_drawn_for_zh_cn_shows_the_catalogues_chinese_words(chinese_figures) -> None:
    """A plot function's own words, a page's title and legend names (seen only at run time),
    and an f-string label (its fields filled in) come out as figures.po says: every drawn string
    that is a catalogue entry in English is drawn in its Chinese instead."""
    import matplotlib.pyplot as plt

    from bertcourse.viz import attention, masks, mlm

    table = _catalogue()
    page_names = {
        "received by [MASK]": [0.2, 0.3],
        "received by an average other token": [0.1, 0.1],
    }
    title = "[MASK] is an ordinary key for attention (sentence 1)"
    rule = "transformers rule (mask_tokens)"
    figs = [
        attention.plot_softmax_saturation(
            [4, 16], {"a": [0.5, 0.9]}, {"a": [0.3, 0.1]}, num_keys=8
        ),
        masks.plot_attention_received(page_names, uniform=0.25, title=title),
        mlm.plot_replacement_shares({rule: (0.8, 0.1, 0.1)}),  # names as tick labels
    ]
    try:
        drawn = set().union(*(_figure_texts(f) for f in figs))
    finally:
        for f in figs:
            plt.close(f)
    expected = {
        table["head size $d_k$"],
        table["Gradient through the softmax"],
        table["Peakedness ({num_keys} keys; 1 = one-hot)"].replace("{num_keys}", "8"),
        table[title],
        *(table[name] for name in page_names),
        table["mean attention received"],
        table[rule],
    }
    assert expected <= drawn, sorted(expected - drawn)
    english = {en for en, zh in table.items() if en != zh}
    assert not drawn & english, f"English words left in the figure: {sorted(drawn & english)}"


def test_labels_with_fields_and_math(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A field `{...}` outside math matches any text and its value is translated too; braces
    inside `$...$` are TeX and match only themselves."""
    from bertcourse.viz import lang

    po = tmp_path / "zh_CN" / "LC_MESSAGES" / "figures.po"
    po.parent.mkdir(parents=True)
    cat = polib.POFile()
    cat.metadata = {"Language": "zh_CN", "Content-Type": "text/plain; charset=UTF-8"}
    for en, zh in [
        ("layer {layer}, head {head}", "第 {layer} 层，第 {head} 个头"),
        ("{title} (dashed: the mean)", "{title}（虚线：均值）"),
        ("Losses", "损失"),
        ("$\\sqrt{d_k}$ scale", "$\\sqrt{d_k}$ 缩放"),
    ]:
        cat.append(polib.POEntry(msgid=en, msgstr=zh))
    cat.save(str(po))
    monkeypatch.setattr(lang, "LOCALES", tmp_path)
    monkeypatch.setattr(lang, "_language", "zh_CN")
    lang._catalog.cache_clear()
    try:
        assert lang.label("layer 10, head 3") == "第 10 层，第 3 个头"
        assert lang.label("Losses (dashed: the mean)") == "损失（虚线：均值）"
        assert lang.label("Accuracy (dashed: the mean)") == "Accuracy（虚线：均值）"
        assert lang.label("$\\sqrt{d_k}$ scale") == "$\\sqrt{d_k}$ 缩放"
        assert lang.label("$\\sqrt{64}$ scale") == "$\\sqrt{64}$ scale", "TeX braces are no field"
        assert lang.label("layer 10 head 3") == "layer 10 head 3"
    finally:
        lang._catalog.cache_clear()


def test_figure_words_are_found_in_modules_pages_and_svgs() -> None:
    module = 'ax.set_title(lang.label(f"Peakedness ({n} keys)"))\nx = label(f"{v:.1%}")\nf("no")\n'
    assert i18n.figure_words_of_module(module) == ["Peakedness ({n} keys)"]  # a number: no words
    page = (
        "```{code-cell} ipython3\n:tags: [hide-input]\n"
        'd = {"untrained tiny BERT": p, "whole words": p, "characters": p, "mlm_loss": q}\n'
        'e = {"lr": 1, "epochs": 2, "a run": 3}\nd[f"L = {n} words"] = r\n'
        'fig = viz.plot_x(d, title="Top predictions", fmt="o-", x=r["a key"])\n'
        'p = viz.Pair("word F1", "random", "pretrained", s["random"], [1], [0])\n```\n'
    )
    assert sorted(i18n.figure_words_of_page(page)) == [
        "L = {n} words", "Top predictions", "a run", "characters", "pretrained", "random",
        "untrained tiny BERT", "whole words", "word F1",
    ]  # fmt: skip
    svg = '<svg aria-label="a b"><title>A &amp; B</title><text x="1">hidden states</text></svg>'
    assert i18n.svg_texts(svg) == ["A & B", "hidden states"]
    chinese = i18n.translated_svg(svg, lambda w: {"A & B": "甲 & 乙"}.get(w, w))
    assert chinese == svg.replace("A &amp; B", "甲 &amp; 乙")


def test_the_chinese_svgs_are_the_catalogues_translation() -> None:
    """Each SVG figure has a Chinese copy that `update` wrote from figures.po, with every word
    translated (Sphinx's figure_language_filename puts it on the Chinese pages)."""
    assert i18n.write_zh_svgs(check_only=True) == [], "run `python scripts/i18n.py update`"
    table = _catalogue()
    for svg in i18n.english_svgs():
        english = i18n.svg_texts(svg.read_text(encoding="utf-8"), words_only=False)
        chinese = i18n.svg_texts(i18n.zh_svg_path(svg).read_text(encoding="utf-8"), False)
        assert chinese == [table.get(w, w) for w in english]
        untranslated = [w for w in english if w not in table and i18n._HAS_WORDS.search(w)]
        assert not untranslated, f"{svg.name}: words without a translation: {untranslated}"


def test_the_theme_words_the_book_adds_are_in_chinese() -> None:
    """The footer of _config.yml and every prompt myst-nb writes over a hidden cell have a
    translation in sphinx.po (bertcourse/viz/i18n_ext.py applies them; test_zh_site.py sees them
    on the built pages)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    footer = config["html"]["extra_footer"]  # jupyter-book puts it in html_theme_options
    from myst_nb.core.config import NbParserConfig

    prompts = [
        getattr(NbParserConfig(), f"code_prompt_{what}").replace("{type}", kind)
        for what in ("show", "hide")
        for kind in ("content", "source", "output", "outputs")  # myst_nb.sphinx_.HideInputCells
    ]
    po = {e.msgid: e.msgstr for e in polib.pofile(str(i18n.CATALOGS / "sphinx.po")) if e.msgstr}
    for message in [footer, *prompts]:
        assert i18n._CJK.search(po.get(message, "")), f"sphinx.po: no Chinese for {message!r}"


# --- emphasis that Chinese punctuation breaks ------------------------------------------------


def _literal_stars(markdown: str) -> int:
    """Stars a reader sees: `*` left in the text of `markdown` once the book's parser (MyST's
    markdown-it, with _config.yml's extensions) has made emphasis and strong of the others."""
    return sum(token.content.count("*") for token in _text_tokens(_md_parser().parse(markdown)))


@functools.cache
def _md_parser():
    import yaml
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    parse = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["parse"]
    config = MdParserConfig(
        enable_extensions=set(parse["myst_enable_extensions"]),
        dmath_double_inline=parse.get("myst_dmath_double_inline", False),
    )
    return create_md_parser(config, RendererHTML)


def _text_tokens(tokens):
    for token in tokens:
        if token.type == "text":
            yield token
        yield from _text_tokens(token.children or [])


def test_emphasis_survives_chinese_punctuation() -> None:
    """`**…吗？**在` never closes: CommonMark does not let `**` end a run when a punctuation mark
    precedes it and a letter follows. Every translated entry of the pages' and exercises'
    catalogues is rendered; it must not show more literal stars than its English."""
    broken = []
    for po in sorted(i18n.CATALOGS.rglob("*.po")):
        if po.stem in (*i18n.THEME_DOMAINS, i18n.FIGURES_DOMAIN, i18n.FEEDBACK_DOMAIN):
            continue  # not markdown
        for entry in polib.pofile(str(po)):
            if entry.msgstr and not entry.fuzzy and not entry.obsolete:
                if _literal_stars(entry.msgstr) > _literal_stars(entry.msgid):
                    broken.append(f"{po.relative_to(i18n.CATALOGS)}: {entry.msgstr[:70]!r}")
    assert not broken, "emphasis left as stars:\n" + "\n".join(broken)


def test_a_star_run_closed_by_punctuation_is_seen() -> None:
    assert _literal_stars("**实现了 80/10/10 吗？**在实际的长度下") == 4
    assert _literal_stars("**实现了 80/10/10 吗**？在实际的长度下") == 0
    assert _literal_stars("把*所有参数*训练几个迭代周期") == 0
    assert _literal_stars("`a * b` 与 $a * b$") == 0  # code and math are not text


def test_every_figure_word_is_translated() -> None:
    """figures.po has a current Chinese for every word (a fuzzy entry is drawn in English)."""
    po = polib.pofile(str(i18n.CATALOGS / f"{i18n.FIGURES_DOMAIN}.po"))
    left = [e.msgid for e in po if not e.obsolete and (e.fuzzy or not e.msgstr)]
    assert not left, f"figures.po: translate {left}"


@pytest.mark.parametrize("language", ["zh_CN", "en"])
def test_pages_run_side_by_side_as_sphinx_reads_them(tmp_path: Path, language: str) -> None:
    """book_ext executes uncached pages before Sphinx reads them, side by side: in the Chinese
    build a page that opts in must be executed as Sphinx will read it, with its language cell,
    or the cache misses and Sphinx executes it again, alone."""
    import types

    from myst_nb.core.config import NbParserConfig
    from myst_parser.config.main import MdParserConfig

    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    page = tmp_path / "page.md"
    page.write_text(
        "---\nfigure_language: true\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n# Title\n\n"
        "```{code-cell} ipython3\nx = 1\n```\n",
        encoding="utf-8",
    )
    env = types.SimpleNamespace(
        mystnb_config=NbParserConfig(
            execution_cache_path=str(tmp_path / "cache"), execution_excludepatterns=()
        ),
        myst_config=MdParserConfig(),
        config=types.SimpleNamespace(language=language),
        doc2path=lambda docname: str(tmp_path / f"{docname}.md"),
    )
    [(_, _, notebook, _)] = book_ext._pages_to_execute(env, ["page"])
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    assert ('lang.set_language("zh_CN")' in code[0]) == (language == "zh_CN")
    assert code[-1] == "x = 1" and len(code) == (2 if language == "zh_CN" else 1)
