"""The feedback of the checks in the learner's language (bertcourse/grading/i18n.py).

- `set_language` takes "en" or "zh_CN" and names the choices otherwise;
- the catalogue (locales/zh_CN/LC_MESSAGES/feedback.po) holds every message, hint and `what`
  the exercises' test cells pass to the checks, every named mistake and the helpers' own words,
  each translated and not fuzzy, with the placeholders of its msgid; the shipped .mo is
  compiled from it (`scripts/i18n_feedback.py check`);
- a filled-in template is found (an f-string's values, a `what` inside "wrong {what}:"), and
  what has no translation stays English, never empty;
- a wrong answer in a Chinese notebook gets a Chinese headline in the learner's kernel and under
  the referee of `python -m bertcourse.grade` (the notebook's metadata says zh_CN); the English
  notebook's feedback is unchanged, and a hidden test's values stay hidden in Chinese too.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
from pathlib import Path

import nbformat
import pytest
import torch

from bertcourse import grading
from bertcourse.grading import i18n, mistakes

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u4e00-\u9fff]")

# chapter 1's scores divided by d_k: a named mistake of the first graded part
WRONG_SDPA = """\
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs
"""
HEADLINE_EN = "scores divided by d_k, not sqrt(d_k) — chapter 1, Scaled dot-product attention"
HEADLINE_ZH = "分数除以了 d_k，而不是 sqrt(d_k) — 第 1 章，缩放点积注意力"
CHINESE_RELEASE = ROOT / "exercises-zh_CN" / "ch01_attention" / "attention.ipynb"


def _script():
    spec = importlib.util.spec_from_file_location(
        "i18n_feedback", ROOT / "scripts" / "i18n_feedback.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _english_after():
    yield
    grading.set_language("en")


def _failure(check, *args, **kwargs) -> str:
    with pytest.raises(grading.GradingError) as error:
        check(*args, **kwargs)
    return str(error.value)


# --- the language ---------------------------------------------------------------------------


def test_english_by_default_and_unknown_languages_are_refused():
    assert grading.get_language() == "en"
    with pytest.raises(ValueError, match=r"'fr'.*en, zh_CN"):
        grading.set_language("fr")
    assert grading.get_language() == "en"


# --- the catalogue --------------------------------------------------------------------------


def test_the_catalogue_is_complete_current_and_compiled():
    """Every msgid extracted now has a non-fuzzy translation with its placeholders, nothing
    stale, and the shipped .mo holds exactly the .po's translations."""
    script = _script()
    import polib

    po = polib.pofile(str(script.PO))
    found = script.extract()
    assert len(found) > 500, len(found)
    assert script.problems(po, found) + script.mo_problems(po) == []


def test_the_compiled_catalogue_ships_with_the_package():
    """pyproject.toml's package data takes the .mo (a wheel built from HEAD holds it)."""
    import fnmatch

    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["bertcourse"]
    mo = _script().MO.relative_to(ROOT / "bertcourse").as_posix()
    assert any(fnmatch.fnmatch(mo, pattern) for pattern in patterns), (mo, patterns)


def test_the_extraction_reads_the_test_cells_and_the_catalogues():
    """Literal messages, hints and whats, f-string templates, a name bound to a message, every
    mistake's name and why: each where the exercises and the catalogues have it."""
    found = _script().extract()
    expected = [
        "scaled_dot_product_attention modified its inputs",  # check_true, positional
        "use out-of-place operations (q / x, not q /= x)",  # hint=
        "label {label!r} is neither IS_NEXT (0) nor NOT_NEXT (1)",  # an f-string
        "the parameters after step {step + 1} (max_grad_norm=0.05)",  # check_value's what
        "mlm_head's scores carry no gradient to the tied decoder weight",  # TIED = "..."
        "The count per row has variance {variance:.2f}; independent draws give about "
        "{n * 0.21:.1f}.",  # known(...) + f"\n  ..."
        "choice with mlm_probability=1 and special ids {{[CLS], [SEP]}} (a set)",  # braces
        *i18n.HELPER_MESSAGES,
    ]
    for module in _script().catalogue_modules():
        for entries in module.CATALOGUE.values():
            expected += [text for m in entries for text in (m.name, m.why)]
    assert [m for m in expected if m not in found] == []


def test_the_check_catches_a_lost_number_identifier_or_placeholder():
    faithfulness = _script().faithfulness
    msgid = "the loss at step {step + 1} of bert_param_groups (max_grad_norm=0.05)"
    assert (
        faithfulness(msgid, "bert_param_groups 第 {step + 1} 步的损失（max_grad_norm=0.05）") == []
    )
    for wrong in (
        "bert_param_groups 第 {step + 1} 步的损失（max_grad_norm=0.5）",  # a number
        "参数组第 {step + 1} 步的损失（max_grad_norm=0.05）",  # an identifier
        "bert_param_groups 第 {step} 步的损失（max_grad_norm=0.05）",  # a placeholder
    ):
        assert faithfulness(msgid, wrong), wrong


def test_a_changed_msgid_keeps_its_translation_as_fuzzy():
    script = _script()
    import polib

    po = script._new_po()
    po.append(polib.POEntry(msgid="the loss at step {step}", msgstr="第 {step} 步的损失"))
    merged = script.merge(po, {"the loss at step {step + 1}": [("x.py", 1)]})
    (entry,) = list(merged)
    assert entry.fuzzy and entry.msgstr == "第 {step} 步的损失"
    assert entry.previous_msgid == "the loss at step {step}"
    assert any("fuzzy" in p for p in script.problems(merged, {entry.msgid: []}))


# --- the lookup -----------------------------------------------------------------------------


def test_checks_speak_chinese_with_their_values():
    grading.set_language("zh_CN")
    text = _failure(
        grading.check_value,
        torch.tensor([1.0, 2.0]),
        torch.tensor([1.0, 3.0]),
        "the loss at step 3",
        hint="use head.decoder.weight, not .data or .detach()",
    )
    assert text.splitlines() == [
        "第 3 步的损失有误：",
        "  第 3 步的损失：2 个值中有 1 个不同（atol=1e-05，rtol=0.0001）；最大绝对误差 1 在"
        "索引 (1,)：应为 3，实际为 2",
        "      应为   [1, 3]",
        "      实际为 [1, 2]",
        "提示：请用 head.decoder.weight，不要用 .data 或 .detach()",
    ]
    # an f-string of a test cell, its value (a helper's word) translated too
    text = _failure(grading.check_true, False, "weight_decay of the decayed group")
    assert text == "做权重衰减的参数组的 weight_decay\n"  # (check_true's text ends so)
    text = _failure(grading.check_tensor, torch.zeros(2), shape=(3,), what="labels")
    assert text == "labels：形状应为 (3,)，实际为 (2,)\n"  # an identifier stays as it is
    # a part of a value: its name translated, the index kept
    text = _failure(grading.check_close, lambda x: (x, x + 1), lambda x: (x, x), torch.zeros(2))
    assert text.splitlines()[1].startswith("  输出[1]：2 个值中有 2 个不同"), text
    text = _failure(grading.check_value, {"loss": 2.0}, {"loss": 3.0}, "the loss at step 3")
    assert text.splitlines()[1] == "  第 3 步的损失['loss']：应为 3，实际为 2（绝对误差 1）"


def test_a_forbidden_call_is_refused_in_chinese():
    """The messages the grading package raises itself (forbid.py, remote.py) are msgids too."""
    import torch.nn.functional as F

    grading.set_language("zh_CN")
    softmax = "torch.nn.functional.softmax"
    text = _failure(grading.run, lambda x: F.softmax(x, -1), torch.zeros(2), forbid=softmax)
    assert text.startswith(f"<lambda> 调用了 {softmax}，而这一部分要求你自己实现它。"), text


def test_what_has_no_translation_stays_english():
    grading.set_language("zh_CN")
    text = _failure(grading.check_true, False, "a message no catalogue has", hint="nor this")
    assert text == "a message no catalogue has\n\n提示：nor this"
    assert i18n.translate("") == "" and i18n.gettext("") == ""


def test_without_a_catalogue_everything_is_english(monkeypatch, tmp_path):
    """A missing .mo (a broken install) gives the English text, not an error."""
    monkeypatch.setattr(i18n, "LOCALE_DIR", str(tmp_path))
    i18n.catalogue.cache_clear()
    try:
        grading.set_language("zh_CN")
        text = _failure(grading.check_value, 2, 3, "the loss at step 3")
        assert text == "wrong the loss at step 3:\n  the loss at step 3: expected 3, got 2"
        assert mistakes.resolve("sdpa")[1].headline == (
            "scores divided by d_k, not sqrt(d_k) — chapter 1, Scaled dot-product attention"
        )
    finally:
        i18n.catalogue.cache_clear()


def test_a_translation_that_loses_a_value_is_not_used():
    assert i18n._template("{where}: expected {expected}", "{where}：应为") is None
    assert i18n._template("{where}: expected {expected}", "{where}：应为 {other}") is None
    assert i18n._template("{what}", "{what}") is None  # would match any line
    template = i18n._template("{where}: expected {expected}", "{where}：应为 {expected}")
    assert template.fill(["输出", "3"]) == "输出：应为 3"


def test_every_named_mistake_has_a_chinese_headline_that_fits():
    """83 columns at most (a Chinese character takes two), the section below when cut."""
    grading.set_language("zh_CN")
    for module in _script().catalogue_modules():
        for entries in module.CATALOGUE.values():
            for mistake in entries:
                headline = mistake.headline
                assert CJK.search(headline), headline
                assert mistakes._width(headline) <= mistakes.HEADLINE_WIDTH, headline
                text = mistakes.message(mistake)
                assert "原因：" in text and text.endswith("。"), text
                if not headline.endswith(mistake.chapter) or "，" not in mistake.chapter:
                    assert "参见：第" in text, text  # the section the headline left out


# --- the three places -----------------------------------------------------------------------


def _chinese_solution(assignment: str) -> nbformat.NotebookNode:
    """The solution notebook (hidden tests included) as a Chinese release runs it: its set-up
    cell ends with grading.set_language("zh_CN") (the interface of exercises-zh_CN)."""
    from test_exercises import builder

    nb = nbformat.read(builder.notebook_path(assignment), as_version=4)
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    setup.source += '\ngrading.set_language("zh_CN")'
    return nb


def test_a_wrong_answer_in_the_learners_kernel():
    """The same wrong answer: a Chinese headline in the Chinese notebook, the English one (as
    before) in the English notebook."""
    from test_exercises import builder, run_in_process

    english = nbformat.read(builder.notebook_path("ch01_attention"), as_version=4)
    result = run_in_process(english, {"sdpa": WRONG_SDPA})["sdpa_tests"]
    assert result.splitlines()[0] == f"GradingError: {HEADLINE_EN}"
    result = run_in_process(_chinese_solution("ch01_attention"), {"sdpa": WRONG_SDPA})
    assert result["sdpa_tests"].splitlines()[0] == f"GradingError: {HEADLINE_ZH}"
    assert result["split_heads_tests"] is None  # the other parts still pass


def test_the_chinese_release_in_the_learners_kernel():
    """The committed Chinese release (exercises-zh_CN, its set-up cell ends with
    grading.set_language("zh_CN")) with the wrong answer: its visible test names the mistake
    in Chinese."""
    from test_exercises import run_in_process

    release = nbformat.read(CHINESE_RELEASE, as_version=4)
    assert release.metadata["bertcourse"] == {"lang": "zh_CN"}
    result = run_in_process(release, {"sdpa": WRONG_SDPA})
    assert result["sdpa_tests"].splitlines()[0] == f"GradingError: {HEADLINE_ZH}"


def test_the_worker_takes_the_notebooks_language():
    from bertcourse.grade.worker import _use_notebook_language

    for metadata, lang in [
        ({"bertcourse": {"lang": "zh_CN"}}, "zh_CN"),
        ({}, "en"),
        ({"bertcourse": {"lang": "klingon"}}, "en"),
        ({"bertcourse": "zh_CN"}, "en"),
    ]:
        _use_notebook_language(nbformat.v4.new_notebook(metadata=metadata))
        assert grading.get_language() == lang


def test_the_class_report_names_a_chinese_headline():
    """The class report groups a Chinese submission's named mistake with the English ones."""
    from bertcourse.grade.classreport import _headlines

    sdpa = mistakes.resolve("sdpa")[1]
    assert _headlines()[HEADLINE_ZH] == _headlines()[HEADLINE_EN] == (sdpa.name, sdpa.where)
    assert grading.get_language() == "en"


def test_a_hidden_chinese_failure_shows_no_value():
    from bertcourse.grade.boundary.referee import _hidden_message

    grading.set_language("zh_CN")
    text = _failure(grading.check_tensor, torch.zeros(7, 5), shape=(7, 3), what="masked_input_ids")
    assert "(7, 3)" in text
    hidden = _hidden_message(grading.GradingError(text))
    assert "7" not in hidden and "5" not in hidden and "形状应为 ... (hidden)" in hidden


def test_a_wrong_answer_under_the_referee(tmp_path):
    """python -m bertcourse.grade on two submissions of one wrong answer, one from the English
    release, one from the committed Chinese release (its metadata says zh_CN): each gets the
    headline in its language."""
    from test_exercises import builder, fill, make_course, nbgrader

    from bertcourse.grade.runner import Options, run

    assignment = "ch01_attention"
    course = make_course(tmp_path, assignment)
    nbgrader(course, "generate_assignment", assignment)
    notebook = builder.notebook_path(assignment).stem
    release = nbformat.read(course / "exercises" / assignment / f"{notebook}.ipynb", as_version=4)
    chinese_release = nbformat.read(CHINESE_RELEASE, as_version=4)  # the metadata says zh_CN
    for student, notebook_release in (("en-student", release), ("zh-student", chinese_release)):
        nb = fill(notebook_release, {"sdpa": WRONG_SDPA})
        folder = course / ".grading" / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{notebook}.ipynb")
    os.environ.setdefault("BERTCOURSE_REFEREE_KEY", "00" * 32)
    summary = run(
        Options(assignment=assignment, course=str(course), workers=1, progress=False),
        log=lambda *a: None,
    )
    with open(summary.csv, newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert rows["en-student"]["status"] == rows["zh-student"]["status"] == "graded"
    assert float(rows["zh-student"]["sdpa_tests"] or 0) == 0.0

    def graded(student: str) -> str:  # the autograded notebook and the feedback of a student
        files = [
            p
            for p in course.rglob("*")
            if p.is_file() and student in p.parts and "submitted" not in p.parts
        ]
        assert files, student
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)

    english, chinese = graded("en-student"), graded("zh-student")
    assert HEADLINE_EN in english and HEADLINE_ZH not in english
    assert HEADLINE_ZH in chinese and HEADLINE_EN not in chinese
    assert grading.get_language() == "en"  # this process: grading ran in the workers
