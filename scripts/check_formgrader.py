"""nbgrader's formgrader in JupyterLab, driven in headless Chromium, on graded submissions.

    python scripts/check_formgrader.py                 # temporary course, checks, screenshots
    python scripts/check_formgrader.py --keep /tmp/fg  # keep the course folder to look at it

What it does, as an instructor would (tests/test_formgrader.py runs the same steps):

1. A course in a temporary folder: `nbgrader_config.py` and every assignment's source from
   `solutions/`; `nbgrader generate_assignment ch02_masks`.
2. Three submissions of ch02_masks: alice (the solution), bob (the release, untouched), carol
   (the solution, with a locked test cell replaced by `pass`), graded by ONE
   `nbgrader autograde`. nbgrader puts the original test back and grades carol like alice, and
   does not flag her: its only trace is a log warning "Attribute 'checksum' ... has changed",
   which it prints for every student of an assignment with hidden tests (their release copies
   lack the hidden lines), so it cannot single her out.
3. `python -m bertcourse.grade ch02_masks --student carol`: the project's grader finds the
   edited test cell, gives her the status `tampered` and flags her notebook in nbgrader's
   gradebook (the formgrader's "Flagged?" column).
4. JupyterLab with the formgrader server extension on that course (a free port, a random token,
   HOME, settings, runtime, data, config and exchange folders of its own, where the instructor's
   tools are turned on for this JupyterLab only: scripts/install.sh turns them off in the
   environment for learners), opened in headless Chromium through
   Playwright (`executable_path` = the system Chromium; no browser download): the Nbgrader >
   Formgrader menu, Manage Assignments (every assignment), Manage Submissions (students,
   statuses, scores), the notebook's gradebook (scores, "Tests Failed?", "Flagged?").
   Screenshots: _build/screenshots/formgrader_*.png.

Every number read in the browser is compared with nbgrader's gradebook read through its API.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "ch02_masks"
SCREENSHOTS = ROOT / "_build" / "screenshots"
TAMPERED_CELL = "masked_softmax_tests"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def environment(**extra: str) -> dict[str, str]:
    """This process's environment, offline, with this Python's bin/ first on PATH: nbgrader
    runs `alembic` (and JupyterLab its kernels) from PATH, as in an activated environment."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return {**os.environ, **ENV, "PATH": path, **extra}


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _builder():
    spec = importlib.util.spec_from_file_location(
        "_build_notebooks", ROOT / "solutions" / "_build_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the course -----------------------------------------------------------------------------


def run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        cmd,
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def build_course(course: Path, assignment: str = ASSIGNMENT) -> str:
    """The course folder with three submissions of `assignment`; returns the notebook name."""
    builder = _builder()
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for name in builder.assignment_names():  # every assignment, for Manage Assignments
        shutil.copytree(ROOT / "solutions" / name, course / "solutions" / name)
    run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment], course)
    notebook = builder.notebook_path(assignment).stem
    release = nbformat.read(course / "exercises" / assignment / f"{notebook}.ipynb", as_version=4)
    solution = nbformat.read(course / "solutions" / assignment / f"{notebook}.ipynb", as_version=4)
    answers = builder.solution_answers(solution)
    carol = builder.fill(release, answers)
    edited = [
        c for c in carol.cells if c.metadata.get("nbgrader", {}).get("grade_id") == TAMPERED_CELL
    ]
    assert edited, f"{assignment} has no cell {TAMPERED_CELL}"
    edited[0].source = "pass  # the test was in the way"
    submissions = {"alice": builder.fill(release, answers), "bob": release, "carol": carol}
    for i, (student, nb) in enumerate(submissions.items()):
        folder = course / ".grading" / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{notebook}.ipynb")
        (folder / "timestamp.txt").write_text(f"2026-02-06 2{i}:00:00.000000 UTC\n")
    return notebook


NAMES = {"alice": ("Alice", "Doe"), "bob": ("Bob", "Roe"), "carol": ("Carol", "Poe")}


def autograde(course: Path, assignment: str = ASSIGNMENT) -> str:
    """One `nbgrader autograde` for every submission (then the students' names); its log."""
    result = run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--create"], course)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / '.grading' / 'gradebook.db'}", "bertcourse") as gb:
        for student, (first, last) in NAMES.items():
            gb.update_or_create_student(student, first_name=first, last_name=last)
    return result.stdout + result.stderr


def regrade_with_bertcourse(course: Path, assignment: str, students: list[str]) -> str:
    cmd = [sys.executable, "-m", "bertcourse.grade", assignment, "--quiet", "--no-feedback"]
    for student in students:
        cmd += ["--student", student]
    return run(cmd, course).stdout


@dataclasses.dataclass(frozen=True)
class Row:
    """One submitted notebook as nbgrader's gradebook holds it."""

    student: str
    score: float
    max_score: float
    failed_tests: bool
    flagged: bool


def gradebook_rows(course: Path, assignment: str, notebook: str) -> dict[str, Row]:
    """From nbgrader's own API, outside the browser."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(f"sqlite:///{course / '.grading' / 'gradebook.db'}", "bertcourse") as gb:
        for nb in gb.notebook_submissions(notebook, assignment):
            rows[nb.student.id] = Row(
                nb.student.id, nb.score, nb.max_score, nb.failed_tests, nb.flagged
            )
    return rows


# --- JupyterLab -----------------------------------------------------------------------------


@dataclasses.dataclass
class Lab:
    url: str  # http://127.0.0.1:PORT
    token: str
    log: Path

    def page(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.url}{path}{sep}token={self.token}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _install_helpers():
    """scripts/install_helpers.py: the nbgrader parts it turns off for learners."""
    spec = importlib.util.spec_from_file_location(
        "install_helpers", ROOT / "scripts" / "install_helpers.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def write_lab_config(state: Path, *, instructor: bool) -> dict[str, str]:
    """Settings, runtime, config, data and home folders of one JupyterLab under `state`, with
    nbgrader's instructor tools on or off; returns the environment variables that select them.

    Jupyter reads configuration from the user's folder (JUPYTER_CONFIG_DIR), the environment's
    (sys.prefix/etc/jupyter, where scripts/install.sh turns the instructor's tools off for a
    learner) and the system's. Inside a virtual environment jupyter_core puts the environment's
    folder FIRST (JUPYTER_PREFER_ENV_PATH defaults to true there), so a user-level switch loses
    to the environment's: JUPYTER_PREFER_ENV_PATH=0 gives this JupyterLab's own folder the last
    word, whatever an earlier install or manual run left in the environment or in ~/.jupyter.
    """
    folders = {
        name: state / name
        for name in ("settings", "runtime", "config", "data", "home", "exchange", "workspaces")
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    # no "Jupyter news" pop-up (and no request for it): JupyterLab's notification settings
    news = folders["settings"] / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    config = folders["config"]
    # the formgrader warns when nbgrader's exchange folder is missing: give it one
    (config / "nbgrader_config.py").write_text(
        f"c = get_config()  # noqa: F821\nc.Exchange.root = {str(folders['exchange'])!r}\n"
    )
    # what `jupyter server extension enable|disable --user` and `jupyter labextension
    # enable|disable --level=user` write
    helpers = _install_helpers()
    server = dict.fromkeys(helpers.LEARNER_OFF_SERVER_EXTENSIONS, instructor)
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": server}})
    )
    (config / "labconfig").mkdir(exist_ok=True)
    disabled = dict.fromkeys(helpers.LEARNER_OFF_LAB_PLUGINS, not instructor)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": disabled, "lockedExtensions": {}})
    )
    return {
        "HOME": str(folders["home"]),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(folders["data"]),
        "JUPYTER_RUNTIME_DIR": str(folders["runtime"]),
        "JUPYTER_PREFER_ENV_PATH": "0",
        "JUPYTERLAB_SETTINGS_DIR": str(folders["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(folders["workspaces"]),
        "IPYTHONDIR": str(folders["home"] / ".ipython"),
    }


@contextmanager
def jupyter_lab(
    course: Path, state: Path, *, instructor: bool = True, timeout: float = 60
) -> Iterator[Lab]:
    """JupyterLab serving `course`, with folders of its own under `state` (write_lab_config):
    an instructor's (nbgrader's tools on) or a learner's (only nbgrader's Validate button)."""
    lab_env = write_lab_config(state, instructor=instructor)
    with serve_lab(course, environment(**lab_env), state / "jupyter.log", timeout) as lab:
        yield lab


@contextmanager
def serve_lab(course: Path, env: dict[str, str], log: Path, timeout: float = 60) -> Iterator[Lab]:
    """This Python's JupyterLab serving `course` with exactly the environment `env`, on a free
    port with a random token, its output in `log`; stopped on leaving."""
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}",
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=course, env=env, stdout=out, stderr=subprocess.STDOUT)
    lab = Lab(f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(lab.page("/api/status"), timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"jupyter lab did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.25)
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def chromium_page(width: int = 1280, height: int = 800):
    """A page of headless Chromium (the system's, through Playwright)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        raise RuntimeError("no Chromium found: apt-get install -y chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()


# --- what the formgrader shows --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SubmissionLine:
    """A line of Manage Submissions."""

    student: str
    name: str  # "Doe, Alice"
    status: str
    score: str  # "7 / 7"


@dataclasses.dataclass(frozen=True)
class GradebookLine:
    """A line of the notebook's gradebook (Manual Grading > assignment > notebook)."""

    name: str  # "Doe, Alice" (the student id when the gradebook has no name)
    score: str
    failed_tests: bool
    flagged: bool


def _loaded(page) -> None:
    page.wait_for_function(
        "() => document.querySelector('tbody') && "
        "!document.querySelector('tbody').innerText.includes('Loading, please wait')"
    )


def open_formgrader_in_lab(page, lab: Lab, screenshot: Path | None) -> list[str]:
    """JupyterLab's menu Nbgrader > Formgrader; returns the assignments its panel lists."""
    page.goto(lab.page("/lab"))
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Formgrader").first.click()
    frame = page.frame_locator("iframe").first
    frame.locator("tbody td.name").first.wait_for()
    names = frame.locator("tbody td.name").all_inner_texts()
    if screenshot:
        frame.locator("tbody").scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot))
    return names


def manage_assignments(page, lab: Lab) -> dict[str, int]:
    """Manage Assignments: assignment -> number of submissions."""
    page.goto(lab.page("/formgrader/manage_assignments"))
    _loaded(page)
    rows = page.locator("tbody tr")
    return {
        rows.nth(i).locator("td.name").inner_text(): int(
            rows.nth(i).locator("td.num-submissions").inner_text()
        )
        for i in range(rows.count())
    }


def manage_submissions(
    page, lab: Lab, assignment: str, screenshot: Path | None
) -> list[SubmissionLine]:
    page.goto(lab.page(f"/formgrader/manage_submissions/{assignment}"))
    _loaded(page)
    rows = page.locator("tbody tr")
    lines = [
        SubmissionLine(
            rows.nth(i).locator("td.student-id").inner_text(),
            rows.nth(i).locator("td.student-name").inner_text(),
            rows.nth(i).locator("td.status").inner_text(),
            rows.nth(i).locator("td.score").inner_text(),
        )
        for i in range(rows.count())
    ]
    if screenshot:
        page.screenshot(path=str(screenshot), full_page=True)
    return lines


def notebook_gradebook(
    page, lab: Lab, assignment: str, notebook: str, screenshot: Path | None
) -> list[GradebookLine]:
    page.goto(lab.page(f"/formgrader/gradebook/{assignment}/{notebook}"))
    _loaded(page)
    page.locator("#toggle_names").click()  # "Show All Names": students instead of "Submission #n"
    rows = page.locator("tbody tr")
    lines = [
        GradebookLine(
            rows.nth(i).locator("td.name a.name-shown").inner_text(),
            rows.nth(i).locator("td.score").inner_text(),
            rows.nth(i).locator("td.tests-failed").get_attribute("data-order") == "1",
            rows.nth(i).locator("td.flagged").get_attribute("data-order") == "1",
        )
        for i in range(rows.count())
    ]
    if screenshot:
        page.screenshot(path=str(screenshot), full_page=True)
    return lines


def score_text(row: Row) -> str:
    """How the formgrader writes a score: "7 / 7", "4.5 / 7"."""
    return f"{row.score:g} / {row.max_score:g}"


# --- all of it ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build the course here and keep it")
    parser.add_argument("--screenshots", type=Path, default=SCREENSHOTS)
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bertcourse-formgrader-"))
    args.screenshots.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    course = work / "course"
    step = time.perf_counter()

    def lap(what: str) -> None:
        nonlocal step
        print(f"[{time.perf_counter() - step:5.1f} s] {what}")
        step = time.perf_counter()

    notebook = build_course(course)
    lap("course and submissions (nbgrader generate_assignment)")
    autograde(course)
    lap("nbgrader autograde, 3 students")
    print(f"graded by nbgrader: {gradebook_rows(course, ASSIGNMENT, notebook)}")
    regrade_with_bertcourse(course, ASSIGNMENT, ["carol"])
    lap("python -m bertcourse.grade --student carol")
    expected = gradebook_rows(course, ASSIGNMENT, notebook)
    with jupyter_lab(course, work / "jupyter") as lab, chromium_page() as page:
        lap("JupyterLab and Chromium started")
        print(
            "lab panel:", open_formgrader_in_lab(page, lab, args.screenshots / "formgrader_lab.png")
        )
        print("assignments:", manage_assignments(page, lab))
        print(
            "submissions:",
            manage_submissions(
                page, lab, ASSIGNMENT, args.screenshots / "formgrader_submissions.png"
            ),
        )
        shown = notebook_gradebook(
            page, lab, ASSIGNMENT, notebook, args.screenshots / "formgrader_gradebook.png"
        )
    lap("formgrader pages read, screenshots taken")
    print("gradebook page:", shown)
    student_of = {f"{last}, {first}": s for s, (first, last) in NAMES.items()}
    problems = []
    for line in shown:
        row = expected[student_of.get(line.name, line.name)]
        if (line.score, line.failed_tests, line.flagged) != (
            score_text(row),
            row.failed_tests,
            row.flagged,
        ):
            problems.append(f"{row.student}: the page shows {line}, the gradebook {row}")
    print(f"{time.perf_counter() - start:.1f} s; screenshots in {args.screenshots}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    for problem in problems:
        print("MISMATCH", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
