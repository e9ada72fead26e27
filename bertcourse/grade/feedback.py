"""Feedback HTML for a student: nbgrader's feedback page, without the hidden tests.

`nbgrader generate_feedback` renders the autograded notebook, whose test cells hold the hidden
tests (that is how they were run), so students would receive them. Here the same exporter and
template (`HTMLExporter` with nbgrader's `feedback` template and its `GetGrades` preprocessor,
reading the scores from the gradebook) render a copy in which

- `ClearHiddenTests` has removed the hidden-test regions from the test cells;
- any output line that repeats a hidden-test line verbatim is replaced by a notice (student
  code that printed the test source it saw at grading time);
- a first cell states the grading status and what was found (time-outs, tampering, ...).
"""

from __future__ import annotations

import copy
import functools
import html
import os
import re
from typing import Any

import nbformat
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.v4 import new_markdown_cell
from nbgrader.converters import GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets.config import Config

from bertcourse.grade.assignment import NotebookSpec
from bertcourse.grade.results import SubmissionResult

PENDING = "pending review"
WITHHELD_NOTE = (
    "Your points are withheld until an instructor has read your code: the grader found code "
    "it cannot judge by reading it (listed below). The scores shown are pending."
)
_SCORE = re.compile(r"Score: -?[\d.]+ / ")  # the template's "Score: {{ score }} / {{ max }}"
# what a feedback page may show of a submission's outputs (anything else can carry script)
_INERT_MIME = ("text/plain", "image/png", "image/jpeg")


def _inert_markdown(nb: nbformat.NotebookNode) -> None:
    """The learner's own markdown cells as plain text: raw HTML in markdown would run in the
    page (nbconvert passes it through). The instructor's locked cells are rendered."""
    for cell in nb.cells:
        if cell.cell_type in ("markdown", "raw"):
            md = cell.metadata.get("nbgrader", {})
            if not (md.get("locked") and not md.get("solution")):
                cell.cell_type = "markdown"
                fence = "~~~~~~~~"
                cell.source = f"{fence}text\n{cell.source.replace(fence, '~~~')}\n{fence}"
                cell.pop("attachments", None)


def _hidden_lines(spec: NotebookSpec) -> set[str]:
    lines = set()
    for cell in spec.cells:
        if cell.is_test:
            visible = set(cell.visible_source.splitlines())
            for line in cell.source.splitlines():
                line = line.strip()
                if len(line) >= 16 and line not in visible and not line.startswith("###"):
                    lines.add(line)
    return lines


def _redact(nb: nbformat.NotebookNode, hidden: set[str]) -> None:
    notice = "[output removed by the grader: it repeated hidden test code]\n"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data")
            if isinstance(data, dict):  # no HTML, script or SVG from a submission in the page
                for mime in [m for m in data if m not in _INERT_MIME]:
                    data.pop(mime)
                if not data:
                    data["text/plain"] = "[rich output not shown in feedback]"
            if "metadata" in out:
                out["metadata"] = {}
            texts = []
            if out.get("output_type") == "stream":
                texts.append(out.get("text", ""))
            elif out.get("output_type") == "error":
                texts.extend(out.get("traceback", []))
                texts.append(out.get("evalue", ""))
            else:
                texts.extend(v for v in out.get("data", {}).values() if isinstance(v, str))
            if any(h in text for text in texts for h in hidden):
                if out.get("output_type") == "stream":
                    out["text"] = notice
                elif out.get("output_type") == "error":
                    out["traceback"] = [notice]
                    out["evalue"] = "output removed"
                else:
                    out["data"] = {"text/plain": notice}


NO_ALT_TEXT = "No description has been provided for this image"  # nbconvert's own words
_IMG_WITHOUT_ALT = re.compile(r"<img\b(?![^>]*\salt=)", re.IGNORECASE)


class FeedbackExporter(HTMLExporter):
    """nbconvert's `HTMLExporter` without its BeautifulSoup pass over the finished page.

    That pass (nbconvert 7) gives every `<img>` without one an alternative text and makes the
    *lab* template's input and output areas focusable (`tabindex`); on the classic template
    that nbgrader's feedback page extends, the second part finds nothing. Parsing and
    re-serialising the 330 KB page took 40% of its export, about 0.1 s a notebook, so the
    alternative text is added here with one regular expression over the template's own
    `<img>` tags (learner text reaches the page escaped; tests/test_grade_units.py compares
    the result with `HTMLExporter`'s). The rest is `HTMLExporter.from_notebook_node`'s body.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._highlighted: dict[tuple[Any, ...], str] = {}  # see _Remembered

    def from_notebook_node(  # type: ignore[override]
        self, nb: nbformat.NotebookNode, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight = _Remembered(
            self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)),
            self._highlighted,
            lexer,
        )
        resources = self._init_resources(resources)
        data_type = WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources
        )
        self.register_filter("highlight_code", highlight)
        self.register_filter("filter_data_type", data_type)
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return _IMG_WITHOUT_ALT.sub(f'<img alt="{NO_ALT_TEXT}"', page), resources


class _Remembered:
    """The `highlight_code` filter, remembering the HTML of the instructor's locked cells: they
    are the same in every submission, and pygments took a quarter of a page's export. Only
    locked cells (their metadata comes from the gradebook, see `submission.repair`), so what
    a worker keeps from one page to the next is the course's, never a learner's cell, however
    large. The HTML depends only on the source, the language, the cell's `magics_language`
    and the notebook's lexer (nbconvert's `_pygments_highlight`)."""

    MAX_ENTRIES = 2000

    def __init__(self, highlight: Any, cache: dict[tuple[Any, ...], str], lexer: Any) -> None:
        self.highlight, self.cache, self.lexer = highlight, cache, lexer

    def __call__(self, source: str, language: str | None = None, metadata: Any = None) -> str:
        md = metadata if isinstance(metadata, dict) else {}
        grading = md.get("nbgrader")
        if not (isinstance(grading, dict) and grading.get("locked")):
            return self.highlight(source, language, metadata)
        key = (source, language, str(md.get("magics_language")), self.lexer)
        if key not in self.cache:
            if len(self.cache) >= self.MAX_ENTRIES:
                self.cache.clear()
            self.cache[key] = self.highlight(source, language, metadata)
        return self.cache[key]


@functools.cache
def _exporter() -> HTMLExporter:
    # nbgrader's own feedback configuration (template, CSS paths), as GenerateFeedback sets it.
    # One per worker process: its template is compiled once, not once per submission (0.3 s
    # each); GetGrades reads the student and the gradebook from each call's resources.
    config = GenerateFeedback().config
    merged = Config(config)
    merged.HTMLExporter.exclude_input_prompt = False
    # the notebook's schema checked once after all the preprocessors, not after each
    merged.HTMLExporter.optimistic_validation = True
    exporter = FeedbackExporter(config=merged)
    exporter.register_preprocessor(GetGrades(), enabled=True)
    exporter.register_preprocessor(CSSHTMLHeaderPreprocessor(), enabled=True)
    return exporter


def write_feedback(task: Any, result: SubmissionResult) -> None:
    """One HTML page per graded notebook under the student's feedback folder."""
    os.makedirs(task.feedback_dir, exist_ok=True)
    exporter = _exporter()
    for nb_spec in task.spec.notebooks:
        path = os.path.join(task.autograded_dir, f"{nb_spec.name}.ipynb")
        if not os.path.exists(path):
            continue
        nb = copy.deepcopy(nbformat.read(path, as_version=4))
        resources = {
            "nbgrader": {
                "notebook": nb_spec.name,
                "assignment": task.spec.name,
                "student": task.student,
                "db_url": task.db_url,
            }
        }
        nb, resources = ClearHiddenTests(enforce_metadata=False).preprocess(nb, resources)
        _redact(nb, _hidden_lines(nb_spec))
        _inert_markdown(nb)
        graded = result.notebooks.get(nb_spec.name)
        parts = graded.parts if graded else {}
        lines = [f"**Grading status: {result.status.feedback}.**", ""]
        if result.withheld:
            lines += [WITHHELD_NOTE, ""]
        if result.late:
            lines += [f"Late submission: {html.escape(result.late)}", ""]
        for spec_part in nb_spec.parts:
            part = parts.get(spec_part.name)
            shown = "-" if part is None or part.score is None else f"{part.score:g}"
            shown = PENDING if result.withheld else shown
            note = (part.message or part.outcome) if part else ""
            note = html.escape(note.splitlines()[0][:200]) if note else ""
            lines.append(
                f"- `{spec_part.name}`: {shown} / {spec_part.points:g} {('— ' + note) if note else ''}"
            )
        if result.problems:
            lines += ["", "Notes from the grader:", ""]
            lines += [f"- {html.escape(p.splitlines()[0][:300])}" for p in result.problems[:20]]
        nb.cells.insert(0, new_markdown_cell("\n".join(lines)))
        page, _ = exporter.from_notebook_node(nb, resources=resources)
        if result.withheld:  # nbgrader's template shows the gradebook's scores: not these
            page = _SCORE.sub(f"Score: {PENDING} / ", page)
        target = os.path.join(task.feedback_dir, f"{nb_spec.name}.html")
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(target + ".tmp", target)
