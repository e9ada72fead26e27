"""A learner's JupyterLab, as scripts/install.sh leaves the environment, in headless Chromium.

JupyterLab is started from this environment with nothing of the developer's (an empty HOME and
only PATH and LANG, as `env -i HOME=$(mktemp -d) PATH=... jupyter lab` would) in a learner's
folder: the course's nbgrader_config.py and chapter 1's exercise. The environment's settings
are what `scripts/install_helpers.py lab-roles` wrote (the learner's, the default): nbgrader's
instructor tools, its Assignment List and the Nbgrader menu off, JupyterLab's news pop-up off.

In Chromium the exercise opens with nbgrader's Validate button; no pop-up, dialog or
notification is shown; every menu of the menu bar opens without one, and every item of the
Nbgrader menu (a learner has none: the Assignment List, when on, shows "Error fetching
courses!" and three "The exchange directory does not exist" boxes) opens a panel with no error.
Screenshots: _build/screenshots/learner_lab_*.png.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


fg = _load("check_formgrader", ROOT / "scripts" / "check_formgrader.py")
helpers = _load("install_helpers", ROOT / "scripts" / "install_helpers.py")

NOTEBOOK = Path("exercises") / "ch01_attention" / "attention.ipynb"
SHOTS = fg.SCREENSHOTS
# what a learner must not meet: JupyterLab's dialogs (its error messages among them) and
# notifications (toasts: the news question, errors), and nbgrader's own error texts in a panel
DIALOGS = ".jp-Dialog, .Toastify__toast"
ERROR_TEXT = re.compile(r"error|does not exist|could not", re.IGNORECASE)
# the panel of the main area's current tab
CURRENT_PANEL = "#jp-main-dock-panel .lm-DockPanel-widget:not(.lm-mod-hidden)"


@dataclasses.dataclass
class Seen:
    """What the learner's JupyterLab showed, in Chromium."""

    validate: bool  # nbgrader's Validate button on the notebook's toolbar
    menus: dict[str, list[str]]  # each menu of the menu bar -> its items' labels
    dialogs: dict[str, list[str]]  # after each step -> the dialogs and notifications shown
    panels: dict[str, str]  # each Nbgrader menu item -> the text of the panel it opened


def learner_env(home: Path) -> dict[str, str]:
    """A new learner's shell: an empty HOME, this environment's bin/ first on PATH."""
    return {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }


def _shown(page) -> list[str]:
    return [text.strip() for text in page.locator(DIALOGS).all_inner_texts()]


def _open_menu(page, label: str) -> list[str]:
    page.locator(".lm-MenuBar-itemLabel", has_text=label).first.click()
    menu = page.locator(".lm-Menu").last
    menu.wait_for()
    return [item for item in menu.locator(".lm-Menu-itemLabel").all_inner_texts() if item]


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> Seen:
    pytest.importorskip("playwright", reason="pip install -r requirements.txt (playwright)")
    if fg.find_chromium() is None:
        pytest.skip("no Chromium: the test suite installs it (scripts/install.sh --chromium)")
    state = helpers.nbgrader_tools(Path(sys.prefix))
    if any(state[name] for name in helpers.INSTRUCTOR_LAB_PLUGINS):
        pytest.skip("this environment has the instructor's tools on (install.sh --instructor)")
    tmp = tmp_path_factory.mktemp("learner_lab")
    course, home = tmp / "course", tmp / "home"
    (course / NOTEBOOK).parent.mkdir(parents=True)
    home.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copy(ROOT / NOTEBOOK, course / NOTEBOOK)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("learner_lab_*.png"):  # a menu or item gone since must not linger
        old.unlink()
    menus, dialogs, panels = {}, {}, {}
    with fg.serve_lab(course, learner_env(home), tmp / "jupyter.log") as lab:
        with fg.chromium_page(width=1280, height=800) as page:
            page.goto(lab.page(f"/lab/tree/{NOTEBOOK.as_posix()}"))
            button = page.locator(".jp-NotebookPanel-toolbar jp-button", has_text="Validate")
            button.wait_for(timeout=90_000)
            # the news question is shown at start-up; give any late notification time to come
            page.wait_for_timeout(3_000)
            page.screenshot(path=str(SHOTS / "learner_lab_notebook.png"))
            dialogs["start"] = _shown(page)
            for label in page.locator(".lm-MenuBar-itemLabel").all_inner_texts():
                menus[label] = _open_menu(page, label)
                page.screenshot(path=str(SHOTS / f"learner_lab_menu_{label}.png"))
                dialogs[f"menu {label}"] = _shown(page)
                page.keyboard.press("Escape")
            for item in menus.get("Nbgrader", []):
                _open_menu(page, "Nbgrader")
                page.locator(".lm-Menu-itemLabel", has_text=item).first.click()
                page.wait_for_timeout(3_000)  # the panel asks the server for its lists
                page.screenshot(path=str(SHOTS / f"learner_lab_nbgrader_{item}.png"))
                panels[item] = " ".join(page.locator(CURRENT_PANEL).all_inner_texts())
                dialogs[f"Nbgrader > {item}"] = _shown(page)
            return Seen(button.count() == 1, menus, dialogs, panels)


def test_the_exercise_opens_with_validate_and_no_pop_up(seen):
    assert seen.validate
    assert "File" in seen.menus and "Help" in seen.menus, seen.menus  # the menu bar was read
    assert seen.dialogs["start"] == [], seen.dialogs["start"]  # the news question among them


def test_no_menu_a_learner_opens_shows_an_error(seen):
    assert all(seen.menus.values()), seen.menus  # each menu opened and was read
    assert {step: shown for step, shown in seen.dialogs.items() if shown} == {}
    errors = {item: text for item, text in seen.panels.items() if ERROR_TEXT.search(text)}
    assert errors == {}, errors


def test_a_learner_has_no_instructor_or_exchange_tools(seen):
    items = [item for labels in seen.menus.values() for item in labels]
    for tool in ("Assignment List", "Formgrader", "Course List"):
        assert tool not in items, (tool, seen.menus)
