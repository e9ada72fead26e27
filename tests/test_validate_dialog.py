"""What a learner sees after pressing JupyterLab's Validate button, in headless Chromium.

A learner's folder (the course's nbgrader_config.py and chapter 1's exercise notebook), served
by a learner's JupyterLab (nbgrader's instructor tools off, as scripts/install.sh leaves them:
scripts/check_formgrader.py's `jupyter_lab(..., instructor=False)`). The notebook has part 1
answered with a known mistake (the scores divided by d_k instead of sqrt(d_k)), part 2 answered
right and parts 3 and 4 not started. Validate runs the notebook (nbgrader's validate server
extension) and shows a dialog with each failed cell. The dialog must show the mistake's first
line (`<mistake> — chapter 1, <section>`) whole, inside the dialog and the window, the parts
checked so far (part 2's pass included), and no frame of the grading package. Screenshots:
_build/screenshots/validate_dialog.png (part 1's error), validate_dialog_parts.png (part 3's).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from bertcourse.grading.mistakes import HEADLINE_WIDTH, resolve

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "check_formgrader", ROOT / "scripts" / "check_formgrader.py"
)
fg = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fg  # dataclasses look their module up there
_spec.loader.exec_module(fg)

ASSIGNMENT = "ch01_attention"
NOTEBOOK = Path("exercises") / ASSIGNMENT / "attention.ipynb"
MISTAKE = "scores divided by d_k, not sqrt(d_k)"
WRONG_SDPA = '''def scaled_dot_product_attention(q, k, v, bias=None):
    """softmax(q k^T / sqrt(d_k) + bias) v -> (context (..., Lq, Dv), probs (..., Lq, Lk))."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs'''
(HEADLINE,) = [m.headline for m in resolve("sdpa") if m.name == MISTAKE]
PASSED = "✓ split_heads"
SCREENSHOT = fg.SCREENSHOTS / "validate_dialog.png"  # part 1's error: the mistake
PARTS_SHOT = fg.SCREENSHOTS / "validate_dialog_parts.png"  # part 3's: part 2 passed

# The part of `text` (the first match) as the window shows it: its box, and the boxes of every
# ancestor that clips its overflow; `cut` when any of its characters lies outside one of them.
VISIBLE_JS = """([root, text]) => {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(text);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + text.length);
    const rects = Array.from(range.getClientRects());
    const box = range.getBoundingClientRect();
    const clips = [];
    for (let el = node.parentElement; el; el = el.parentElement) {
      const style = getComputedStyle(el);
      const r = el.getBoundingClientRect();
      // an element of no area (<body> above absolutely placed panels) clips nothing here
      if ((style.overflowX !== "visible" || style.overflowY !== "visible") &&
          r.width > 0 && r.height > 0) {
        clips.push({tag: el.tagName, cls: String(el.className), left: r.left, right: r.right,
                    top: r.top, bottom: r.bottom, scrollWidth: el.scrollWidth,
                    clientWidth: el.clientWidth});
      }
    }
    const view = {left: 0, right: window.innerWidth, top: 0, bottom: window.innerHeight};
    const inside = (r, c) => r.left >= c.left - 0.5 && r.right <= c.right + 0.5 &&
                             r.top >= c.top - 0.5 && r.bottom <= c.bottom + 0.5;
    const cut = rects.some(r => !inside(r, view) || clips.some(c => !inside(r, c)));
    return {lines: rects.length, left: box.left, right: box.right, top: box.top,
            bottom: box.bottom, clips: clips, cut: cut, element: node.parentElement.tagName,
            white_space: getComputedStyle(node.parentElement).whiteSpace};
  }
  return null;
}"""


def learner_folder(folder: Path) -> Path:
    """A learner's copy of the course: nbgrader's configuration and chapter 1's exercise, with
    part 1 answered wrongly, part 2 right, parts 3 and 4 as released."""
    builder = fg._builder()
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", folder / "nbgrader_config.py")
    release = nbformat.read(ROOT / NOTEBOOK, as_version=4)
    solution = nbformat.read(ROOT / "solutions" / ASSIGNMENT / NOTEBOOK.name, as_version=4)
    answers = builder.solution_answers(solution)
    nb = builder.fill(release, {"sdpa": WRONG_SDPA, "split_heads": answers["split_heads"]})
    (folder / NOTEBOOK).parent.mkdir(parents=True)
    nbformat.write(nb, folder / NOTEBOOK)
    return folder / NOTEBOOK


def nbgrader_menu(page) -> list[str]:
    """The items of JupyterLab's Nbgrader menu (empty when there is no such menu)."""
    menu = page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")
    if menu.count() == 0:
        return []
    menu.click()
    items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
    return items


@dataclasses.dataclass
class Dialog:
    """The Validate dialog as the window shows it."""

    text: str  # the dialog's body
    errors: list[str]  # each failed cell's error, in the order of the notebook
    error_widths: list[tuple[int, int]]  # each error's <pre>: (scrollWidth, clientWidth)
    places: dict[str, dict | None]  # a text -> where it lies (VISIBLE_JS), None: not shown
    menu: list[str]  # JupyterLab's Nbgrader menu


@pytest.fixture(scope="module")
def dialog(tmp_path_factory) -> Dialog:
    """Validate pressed in a learner's JupyterLab (Chromium's window 1280 x 900)."""
    pytest.importorskip("playwright", reason="pip install -r requirements.txt (playwright)")
    if fg.find_chromium() is None:
        pytest.skip("no Chromium: the test suite installs it (scripts/install.sh --chromium)")
    tmp = tmp_path_factory.mktemp("validate")
    course = tmp / "learner"
    learner_folder(course)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with fg.jupyter_lab(course, tmp / "jupyter", instructor=False) as lab:
        with fg.chromium_page(width=1280, height=900) as page:
            page.goto(lab.page(f"/lab/tree/{NOTEBOOK.as_posix()}"))
            button = page.locator(".jp-NotebookPanel-toolbar jp-button", has_text="Validate")
            button.wait_for(timeout=60_000)
            menu = nbgrader_menu(page)
            button.click()
            # validate runs the whole notebook in a new kernel (torch's import included)
            body = page.locator(".jp-Dialog .validation-failed")
            body.wait_for(timeout=240_000)
            # each failed cell: a <pre> of its source, then a <pre> of its error
            pres = body.locator(".jp-RenderedText pre")
            places = {}
            for needle in (HEADLINE, PASSED):
                shown = pres.filter(has_text=needle)
                if shown.count():
                    shown.first.scroll_into_view_if_needed()
                places[needle] = page.evaluate(VISIBLE_JS, [body.element_handle(), needle])
                page.screenshot(path=str(SCREENSHOT if needle == HEADLINE else PARTS_SHOT))
            texts = pres.all_inner_texts()
            widths = pres.evaluate_all("pres => pres.map(p => [p.scrollWidth, p.clientWidth])")
            return Dialog(
                text=body.inner_text(),
                errors=texts[1::2],
                error_widths=[tuple(w) for w in widths[1::2]],
                places=places,
                menu=menu,
            )


def test_the_dialog_shows_the_mistake_first_and_whole(dialog):
    place = dialog.places[HEADLINE]
    assert place is not None, f"the dialog does not show {HEADLINE!r}:\n{dialog.text}"
    assert not place["cut"], f"{HEADLINE!r} is cut off in the dialog: {place}"
    # part 1's cell is the first that failed; its message begins with the mistake and fits
    # its box (nothing behind a horizontal scroll)
    assert dialog.errors[0].splitlines()[0] == HEADLINE, dialog.errors[0]
    scroll, client = dialog.error_widths[0]
    assert scroll <= client, (scroll, client, dialog.errors[0])
    assert SCREENSHOT.stat().st_size > 10_000 and PARTS_SHOT.stat().st_size > 10_000


def test_the_dialog_lists_the_parts_and_no_grading_frame(dialog):
    text = dialog.text
    assert "Parts checked so far: ✗ scaled_dot_product_attention (this cell)" in dialog.errors[0]
    # part 3's cell fails (NotImplementedError) after part 2's passed: its summary says so
    summary = "Parts checked so far: ✗ scaled_dot_product_attention, ✓ split_heads, ✗ merge_heads"
    assert summary in " ".join(dialog.errors[1].split()), dialog.errors[1]
    assert dialog.places[PASSED] is not None and not dialog.places[PASSED]["cut"]
    for frame in ("checks.py", "GradingError(", "bertcourse/grading", "values.py"):
        assert frame not in text, f"{frame!r} in the learner's dialog:\n{text}"


def test_only_the_test_cells_own_lines_are_wider_than_the_messages(dialog):
    """The dialog does not wrap (a <pre>): the messages are cut at HEADLINE_WIDTH columns by
    the grading package; a longer line can only be a test cell's source, which the dialog
    shows above each error and IPython's traceback quotes."""
    nb = nbformat.read(ROOT / NOTEBOOK, as_version=4)
    source = {line.strip() for c in nb.cells for line in c.source.splitlines() if line.strip()}
    long = [line for line in dialog.text.splitlines() if len(line) > HEADLINE_WIDTH]
    assert long, "expected the test cells' long lines in the dialog"
    assert all(any(line.rstrip().endswith(s) for s in source) for line in long), long


def test_a_learner_sees_no_instructor_tools(dialog):
    # no Nbgrader menu: its items are the instructor's tools and the exchange's Assignment List
    # (scripts/install_helpers.py); the learner's part of nbgrader is the Validate button
    assert dialog.menu == [], dialog.menu
