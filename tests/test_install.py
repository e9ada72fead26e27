"""The install logic of issue 11: a virtual environment by default, Python only for learners.

scripts/install.sh picks the environment (the active virtualenv, else the active conda
environment, else the project's .venv, made with `python3 -m venv`), installs python3-venv
with apt-get where Debian lacks ensurepip (or says what to install), never swallows a failed
`pip install`, and copies MathJax from the PyPI package django-static-mathjax. The README's
commands, scripts/build_book.sh and scripts/test.sh, source it.

The scripts run here for real, with stand-ins on PATH for the commands that need root or take
minutes (apt-get, sudo, id, npm, node: each records its call) and, for the build and test
commands, an environment whose `python` records `pip install`, the book build, ruff and pytest
instead of running them. One test makes a real virtual environment (about 6 s).
The whole path from Debian's own python3 is what .ci/run runs on every submission.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
_spec = importlib.util.spec_from_file_location("install_helpers", SCRIPTS / "install_helpers.py")
helpers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = helpers  # dataclasses look their module up there
_spec.loader.exec_module(helpers)


def _load_book_ext():
    spec = importlib.util.spec_from_file_location(
        "book_ext_under_test", ROOT / "bertcourse" / "viz" / "book_ext.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


book_ext = _load_book_ext()


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


class Fakes:
    """A folder of stand-in commands put first on PATH; each appends its call to `calls`."""

    def __init__(self, folder: Path) -> None:
        self.bin = folder / "bin"
        self.calls = folder / "calls.log"
        folder.mkdir(parents=True)
        self.calls.touch()
        for name in ("apt-get", "sudo", "npm", "node"):
            self.add(name, "exit 0\n")

    def add(self, name: str, body: str) -> None:
        _script(self.bin / name, f'echo "{name} $*" >> "{self.calls}"\n{body}')

    def called(self) -> list[str]:
        return self.calls.read_text().splitlines()

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment (no active virtualenv or conda) with the stand-ins first."""
        env = {
            "HOME": os.environ.get("HOME", "/root"),
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "LANG": "C.UTF-8",
        }
        env.update(extra)
        return env


@pytest.fixture
def fakes(tmp_path: Path) -> Fakes:
    return Fakes(tmp_path / "fakes")


def _run(cmd: list[str], env: dict[str, str], cwd: Path = ROOT, timeout: float = 120):
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _recording_env(
    folder: Path,
    calls: Path,
    *,
    pip_fails: bool = False,
    fresh: bool = False,
    build_log: str | None = None,
    i18n_log: str | None = None,
) -> Path:
    """A fake environment whose python records what install/build/test would run.

    `-m pip install`, the requirements check, the book build, check_site, ruff and pytest are
    recorded and answered with success (or, with pip_fails, pip fails as Debian's python3 does
    outside a virtual environment); anything else (pip --version, the MathJax copy, the torch
    plan, the JupyterLab roles) runs on this interpreter for real. `fresh`: nothing installed
    yet (no torch; the requirements check passes once pip has run). `build_log`: the book
    build prints it and fails. `i18n_log`: the Chinese edition's build prints it.
    """
    installed = folder / "installed"
    if pip_fails:
        pip = 'echo "error: externally-managed-environment" >&2; exit 1'
        check = "exit 1"
    elif fresh:
        pip = f'touch "{installed}"; exit 0'
        check = f'[ -e "{installed}" ]; exit $?'
    else:
        pip = check = "exit 0"
    torch = "exit 0" if fresh else "echo 2.13.0+cpu; exit 0"
    build = "exit 0"
    if build_log is not None:
        (folder / "build.log").parent.mkdir(parents=True, exist_ok=True)
        (folder / "build.log").write_text(build_log)
        build = f'cat "{folder / "build.log"}"; exit 1'
    i18n = "exit 0"
    if i18n_log is not None:
        (folder / "i18n.log").parent.mkdir(parents=True, exist_ok=True)
        (folder / "i18n.log").write_text(i18n_log)
        i18n = f'cat "{folder / "i18n.log"}"; exit 0'
    _script(
        folder / "bin" / "python",
        f"""echo "python $*" | tr '\\n' ' ' >> "{calls}"; echo >> "{calls}"
case "$*" in
  *"editable install points"*) {check} ;;  # the requirements check of install.sh
  *"-m pip install"*) {pip} ;;
  *'m.version("torch")'*) {torch} ;;
  *jupyter_book*) {build} ;;
  *i18n.py*) {i18n} ;;
  *check_site.py*|*"-m ruff"*|*"-m pytest"*) exit 0 ;;
esac
exec "{sys.executable}" "$@"
""",
    )
    return folder


# --- which environment ------------------------------------------------------------------------


def test_an_active_virtualenv_is_used_and_no_venv_is_made(tmp_path: Path, fakes: Fakes) -> None:
    env_dir = _recording_env(tmp_path / "active env", fakes.calls)
    proc = _run(
        ["bash", str(SCRIPTS / "install.sh"), "--env-only"], fakes.env(VIRTUAL_ENV=str(env_dir))
    )
    assert proc.returncode == 0, proc.stderr
    assert f"Python: {env_dir}/bin/python (the active virtual environment)" in proc.stdout
    assert "next:" not in proc.stdout  # already active: nothing to do next
    assert not [c for c in fakes.called() if not c.startswith("python")]


def test_virtualenv_wins_over_conda_and_conda_is_used_alone(tmp_path: Path, fakes: Fakes) -> None:
    venv = _recording_env(tmp_path / "venv", fakes.calls)
    conda = _recording_env(tmp_path / "conda", fakes.calls)
    cmd = ["bash", str(SCRIPTS / "install.sh"), "--env-only"]
    both = _run(cmd, fakes.env(VIRTUAL_ENV=str(venv), CONDA_PREFIX=str(conda)))
    assert f"Python: {venv}/bin/python (the active virtual environment)" in both.stdout
    alone = _run(cmd, fakes.env(CONDA_PREFIX=str(conda)))
    assert alone.returncode == 0, alone.stderr
    assert f"Python: {conda}/bin/python (the active conda environment)" in alone.stdout


def test_a_broken_active_environment_is_named(tmp_path: Path, fakes: Fakes) -> None:
    gone = tmp_path / "deleted-env"
    proc = _run(
        ["bash", str(SCRIPTS / "install.sh"), "--env-only"], fakes.env(VIRTUAL_ENV=str(gone))
    )
    assert proc.returncode != 0
    assert f"VIRTUAL_ENV is {gone} but {gone}/bin/python does not exist" in proc.stderr
    assert "deactivate" in proc.stderr


def _repo_copy(tmp_path: Path) -> Path:
    """A checkout in a path with a space and a non-ASCII character (only what install.sh reads)."""
    repo = tmp_path / "my course é" / "bertcourse"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "install.sh", repo / "scripts" / "install.sh")
    return repo


def _shadow_ensurepip(folder: Path) -> Path:
    """PYTHONPATH folder whose `ensurepip` fails to import, as on Debian without python3-venv."""
    (folder / "ensurepip").mkdir(parents=True)
    (folder / "ensurepip" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ensurepip'\")\n"
    )
    return folder


def _venv_package() -> str:
    """What install.sh should ask apt for: python3-venv for Debian's default python3."""
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    debian = Path("/usr/bin/python3")
    if debian.exists():
        out = subprocess.run(
            [str(debian), "-c", 'import sys; print("%d.%d" % sys.version_info[:2])'],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if out == mine:
            return "python3-venv"
    return f"python{mine}-venv"


def test_without_ensurepip_as_root_apt_installs_python3_venv_then_makes_dotvenv(
    tmp_path: Path, fakes: Fakes
) -> None:
    repo = _repo_copy(tmp_path)
    shadow = _shadow_ensurepip(tmp_path / "no-ensurepip")
    fakes.add("id", 'if [ "$1" = -u ]; then echo 0; else exec /usr/bin/id "$@"; fi\n')
    # "installing python3-venv" makes ensurepip importable again
    fakes.add("apt-get", f'case "$*" in *install*) rm -rf "{shadow}/ensurepip" ;; esac\n')
    # what Debian's failed `python3 -m venv` leaves behind: a .venv without pip
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env = fakes.env(VENV_PYTHON=sys.executable, PYTHONPATH=str(shadow))

    proc = _run(["bash", str(repo / "scripts" / "install.sh"), "--env-only"], env, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pkg = _venv_package()
    apt = [c for c in fakes.called() if c.startswith("apt-get")]
    assert apt[-1] == f"apt-get install -y -qq --no-install-recommends {pkg}", apt
    assert "half-made environment" in proc.stdout
    venv = repo / ".venv"
    assert f"Python: {venv}/bin/python (the project's virtual environment)" in proc.stdout
    # the one line the user needs next, relative to where they are
    assert "== next: source .venv/bin/activate" in proc.stdout
    assert not [c for c in fakes.called() if c.startswith(("npm", "node"))]

    # from another folder: the path from there (or the full path), quoted, and it works as printed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd, shown in ((tmp_path, "my course é/bertcourse/.venv"), (elsewhere, str(venv))):
        again = _run(["bash", str(repo / "scripts" / "install.sh"), "--env-only"], env, cwd=cwd)
        assert again.returncode == 0, again.stderr
        assert "creating the virtual environment" not in again.stdout  # kept, not made again
        line = re.search(r"== next: (source '[^']+')", again.stdout)
        assert line and line.group(1) == f"source '{shown}/bin/activate'", again.stdout
        prefix = subprocess.run(
            ["bash", "-c", f"{line.group(1)} && python -c 'import sys; print(sys.prefix)'"],
            env={"PATH": "/usr/bin:/bin", "HOME": env["HOME"]},
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        assert prefix.stdout.strip() == str(venv), prefix.stderr
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--version"]
    assert subprocess.run(pip, capture_output=True).returncode == 0


def test_without_ensurepip_and_without_root_it_says_what_to_install(
    tmp_path: Path, fakes: Fakes
) -> None:
    repo = _repo_copy(tmp_path)
    shadow = _shadow_ensurepip(tmp_path / "no-ensurepip")
    fakes.add("id", 'if [ "$1" = -u ]; then echo 1000; else exec /usr/bin/id "$@"; fi\n')
    fakes.add("sudo", "exit 1\n")  # `sudo -n true`: a password would be needed
    env = fakes.env(VENV_PYTHON=sys.executable, PYTHONPATH=str(shadow))
    proc = _run(["bash", str(repo / "scripts" / "install.sh")], env, cwd=repo)
    assert proc.returncode != 0
    assert "ensurepip is missing" in proc.stderr
    assert f"`sudo apt-get install -y {_venv_package()}`" in proc.stderr
    assert "not root, and no sudo" in proc.stderr
    assert not (repo / ".venv").exists()
    assert not [c for c in fakes.called() if c.startswith("apt-get")]


# --- what the README's commands run -----------------------------------------------------------


def test_build_book_needs_python_only(tmp_path: Path, fakes: Fakes) -> None:
    """`build_book.sh` never calls apt-get, sudo, npm or node; `--check` adds Chromium's check."""
    env_dir = _recording_env(tmp_path / "env", fakes.calls)
    env = fakes.env(VIRTUAL_ENV=str(env_dir))
    proc = _run(["bash", str(SCRIPTS / "build_book.sh")], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = fakes.called()
    assert not [c for c in calls if not c.startswith("python")], calls
    builds = [c for c in calls if "jupyter_book" in c]
    assert len(builds) == 1 and "build -W -n --keep-going ." in builds[0]
    # the Chinese edition after the English one, from its catalogues
    assert [c.strip() for c in calls if "i18n.py" in c] == ["python scripts/i18n.py build"]
    # the static checks only (no page shows an error output), no browser
    assert [c.strip() for c in calls if "check_site.py" in c] == [
        "python scripts/check_site.py _build/html --no-browser"
    ]
    assert "chromium" not in proc.stdout.lower()  # not even looked for
    assert (
        proc.stdout.splitlines()[-1] == f"== the website is at file://{ROOT}/_build/html/index.html"
    )
    assert (ROOT / "_mathjax" / "site" / "mathjax" / "tex-mml-chtml.js").is_file()

    fakes.calls.write_text("")
    checked = _run(["bash", str(SCRIPTS / "build_book.sh"), "--check"], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [c for c in fakes.called() if "check_site.py _build/html --screenshots" in c]
    if shutil.which("chromium", path=os.environ["PATH"]):
        assert "Debian packages already there: chromium" in checked.stdout
    assert not [c for c in fakes.called() if c.startswith(("npm", "node"))]


def test_the_glossary_notes_go_to_the_log_not_the_last_lines(tmp_path: Path, fakes: Fakes) -> None:
    """The Chinese edition's catalogue check prints glossary notes for translators (a term's
    Chinese name missing from a translation); the build keeps them in _build/i18n.log and shows
    everything else of that step, its warnings and failures included."""
    note = "  glossary warning: book/ch07_model: 'batch' without '批量': 'Mask a batch…'"
    kept = ["book/ch07_model  79/79  100.0%", "WARNING: a real warning of the Chinese build"]
    i18n_log = "\n".join([kept[0], note, kept[1]]) + "\n"
    env_dir = _recording_env(tmp_path / "env", fakes.calls, i18n_log=i18n_log)
    proc = _run(["bash", str(SCRIPTS / "build_book.sh")], fakes.env(VIRTUAL_ENV=str(env_dir)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "glossary warning" not in proc.stdout + proc.stderr
    assert all(line in proc.stdout for line in kept), proc.stdout
    assert (ROOT / "_build" / "i18n.log").read_text() == i18n_log


def test_without_apt_or_root_chromium_is_skipped_with_the_reason(
    tmp_path: Path, fakes: Fakes
) -> None:
    """A machine without Chromium: skipped, with why and how, and the install goes on."""
    tools = tmp_path / "tools"  # a PATH with the few tools the scripts use, and no chromium
    tools.mkdir()
    for name in ("bash", "dirname", "grep", "env", "tr", "sed"):
        (tools / name).symlink_to(shutil.which(name))
    env_dir = _recording_env(tmp_path / "env", fakes.calls)
    fakes.add("id", 'if [ "$1" = -u ]; then echo 1000; else exec /usr/bin/id "$@"; fi\n')
    fakes.add("sudo", "exit 1\n")
    env = fakes.env(VIRTUAL_ENV=str(env_dir), PATH=f"{fakes.bin}:{tools}")
    cmd = [str(tools / "bash"), str(SCRIPTS / "install.sh"), "--chromium"]

    no_root = _run(cmd, env)
    assert no_root.returncode == 0, no_root.stdout + no_root.stderr
    assert "skipped: apt-get install chromium (not root, and no sudo)" in no_root.stdout
    assert "`sudo apt-get install -y chromium`" in no_root.stdout
    assert "== installed" in no_root.stdout
    (fakes.bin / "apt-get").unlink()
    no_apt = _run(cmd, env)
    assert no_apt.returncode == 0, no_apt.stdout + no_apt.stderr
    assert "skipped: apt-get install chromium (no apt-get on this machine" in no_apt.stdout
    assert not [c for c in fakes.called() if c.startswith("apt-get")]


def test_test_sh_lints_then_runs_pytest_with_the_arguments(tmp_path: Path, fakes: Fakes) -> None:
    env_dir = _recording_env(tmp_path / "env", fakes.calls)
    proc = _run(
        ["bash", str(SCRIPTS / "test.sh"), "-k", "masks"], fakes.env(VIRTUAL_ENV=str(env_dir))
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    python = [c.removeprefix("python ").strip() for c in fakes.called() if c.startswith("python")]
    steps = [c for c in python if c.startswith(("-m ruff", "-m pytest"))]
    assert steps == [
        "-m ruff check .",
        "-m ruff format --check bertcourse tests benchmarks",
        "-m pytest -p no:cacheprovider -n 2 --dist worksteal --durations=15 -k masks",
    ]
    assert not [c for c in fakes.called() if c.startswith(("npm", "node"))]


def test_a_failed_pip_install_stops_the_install(tmp_path: Path, fakes: Fakes) -> None:
    """Issue 11: pip's error was filtered away and the user saw `No module named 'torch'`."""
    env_dir = _recording_env(tmp_path / "env", fakes.calls, pip_fails=True)
    proc = _run(["bash", str(SCRIPTS / "build_book.sh")], fakes.env(VIRTUAL_ENV=str(env_dir)))
    assert proc.returncode != 0
    assert "error: externally-managed-environment" in proc.stdout + proc.stderr
    assert "pip install failed" in proc.stderr
    calls = fakes.called()
    assert not [c for c in calls if "jupyter_book" in c or "install-mathjax" in c], calls


def _requirements_check() -> str:
    text = (SCRIPTS / "install.sh").read_text()
    return re.search(r"^_BERTCOURSE_CHECK='(.*?)^'$", text, flags=re.S | re.M).group(1)


def _fake_editable_install(site: Path, checkout: Path) -> None:
    """What `pip install -e <checkout>` records: a dist-info with direct_url.json (PEP 610)."""
    info = site / "bertcourse-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bertcourse\nVersion: 0.1.0\n")
    url = {"url": checkout.as_uri(), "dir_info": {"editable": True}}
    (info / "direct_url.json").write_text(json.dumps(url))


def test_the_requirements_check_names_what_is_missing(tmp_path: Path) -> None:
    """install.sh skips pip only when every pin is installed and bertcourse is this checkout's."""
    check = _requirements_check()
    numpy = importlib.metadata.version("numpy")
    repo, other, site = tmp_path / "my repo é", tmp_path / "other-clone", tmp_path / "site"
    repo.mkdir()
    other.mkdir()
    _fake_editable_install(site, repo)  # found before the real one: PYTHONPATH comes first
    env = dict(os.environ, PYTHONPATH=str(site))

    def run(root: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", check, str(root)],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
        )

    (repo / "requirements.txt").write_text(f"# pins\nnumpy=={numpy}\n")
    ok = run(repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (repo / "requirements.txt").write_text(
        f"numpy=={numpy}\ntqdm==0.0.1  # too old\nno-such-package-bertcourse==1.0\n"
    )
    bad = run(repo)
    assert bad.returncode == 1
    assert "tqdm==0.0.1 (have " in bad.stdout
    assert "no-such-package-bertcourse==1.0 (not installed)" in bad.stdout
    assert "numpy" not in bad.stdout
    # pins satisfied, but bertcourse points at another clone: pip install -e . is needed, even
    # though the checkout itself (the current folder) holds a bertcourse.egg-info
    (other / "requirements.txt").write_text(f"numpy=={numpy}\n")
    egg = other / "bertcourse.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: bertcourse\nVersion: 0.1.0\n")
    elsewhere = run(other)
    assert elsewhere.returncode == 1
    assert f"bertcourse editable from {other} (have {repo})" in elsewhere.stdout


# --- MathJax from PyPI -------------------------------------------------------------------------


def test_mathjax_is_copied_complete_from_the_pypi_package(tmp_path: Path) -> None:
    source, version = book_ext.mathjax_source()
    assert version == "3.2.2"
    assert source.name == "es5" and "site-packages" in source.parts
    site = tmp_path / "site"
    first = book_ext.install_mathjax(site)
    assert first.copied and first.dest == site / "mathjax"
    copied = book_ext.mathjax_files(first.dest)
    assert copied == book_ext.mathjax_files(source)
    js = (first.dest / "tex-mml-chtml.js").read_text(encoding="utf-8")
    assert 'VERSION="3.2.2"' in js
    fonts = [f for f in copied if f.startswith("output/chtml/fonts/woff-v2/")]
    assert len(fonts) == 23 and all(f.endswith(".woff") for f in fonts)
    for ext in ("ams.js", "physics.js", "mhchem.js", "boldsymbol.js"):
        assert f"input/tex/extensions/{ext}" in copied, ext
    assert list(site.iterdir()) == [site / "mathjax"]  # no temporary folder left behind

    assert book_ext.install_mathjax(site).copied is False  # idempotent
    damaged = first.dest / fonts[0]
    damaged.write_bytes(damaged.read_bytes()[:100])  # a truncated font is noticed and replaced
    (first.dest / "input/tex/extensions/ams.js").unlink()
    assert book_ext.install_mathjax(site).copied is True
    assert book_ext.mathjax_files(first.dest) == copied


def test_a_missing_mathjax_package_names_the_pip_command(monkeypatch) -> None:
    def not_installed(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(book_ext.importlib.metadata, "distribution", not_installed)
    with pytest.raises(
        book_ext.MathJaxError, match=r"pip install django-static-mathjax==3\.2\.2\.1"
    ):
        book_ext.install_mathjax(Path("/nonexistent"))


def test_the_book_serves_mathjax_from_the_folder_the_extension_fills() -> None:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["html_extra_path"] == ["_mathjax/site"]
    # Sphinx resolves a relative mathjax_path from _static/
    assert config["mathjax_path"] == f"../{book_ext.MATHJAX_FILE}"
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    assert book_ext.MATHJAX_PIN in pins
    for script in ("install_mathjax.sh", "install.sh", "build_book.sh"):
        code = [ln for ln in (SCRIPTS / script).read_text().splitlines() if not ln.startswith("#")]
        assert not [ln for ln in code if re.search(r"\b(npm|node)\b", ln)], script


def test_the_book_extension_copies_mathjax_before_sphinx_checks_the_folder(tmp_path: Path) -> None:
    """Sphinx drops html_extra_path entries that do not exist (config-inited, priority 800), so
    the copy must come first: on a fresh clone `_mathjax/site` does not exist yet."""
    connected: list[tuple[str, object, int]] = []

    class FakeApp:
        srcdir = str(tmp_path)

        def connect(self, event: str, handler, priority: int = 500) -> None:
            connected.append((event, handler, priority))

        def add_config_value(self, *args) -> None:
            pass

    book_ext.setup(FakeApp())
    (event, _, priority) = next(c for c in connected if c[1] is book_ext._provide_mathjax)
    assert event == "config-inited" and priority < 800

    class Config:
        bertcourse_mathjax_site = "_mathjax/site"
        html_extra_path = ["_mathjax/site"]

    book_ext._provide_mathjax(FakeApp(), Config())
    assert (tmp_path / "_mathjax" / "site" / book_ext.MATHJAX_FILE).is_file()
    Config.html_extra_path = ["_static_extra"]
    with pytest.raises(book_ext.ExtensionError, match="not in html_extra_path"):
        book_ext._provide_mathjax(FakeApp(), Config())


# --- the build's last lines (issue 21) ---------------------------------------------------------


def test_a_failed_build_ends_with_the_page_the_cell_and_the_error(
    tmp_path: Path, fakes: Fakes
) -> None:
    """Issue 21: the cause sat in 67 lines of Sphinx output and the script stopped before its
    last line. Now its last line names the page, the cell and the error."""
    page = ROOT / "book" / "ch99_missing.md"  # not built: no executed notebook to read
    log = (
        "reading sources... [ 90%] book/ch99_missing\n"
        f"{page}: WARNING: Executing notebook failed: CellExecutionError\n"
        "Traceback (most recent call last):\n  ...\nValueError: the learning rate is negative\n"
        " [mystnb.exec]\n"
        "build finished with problems, 1 warning.\n"
    )
    env_dir = _recording_env(tmp_path / "env", fakes.calls, build_log=log)
    proc = _run(["bash", str(SCRIPTS / "build_book.sh")], fakes.env(VIRTUAL_ENV=str(env_dir)))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == (
        "== FAILED: book/ch99_missing.md: ValueError: the learning rate is negative"
    )
    assert "the website is at" not in proc.stdout
    assert not [c for c in fakes.called() if "check_site.py" in c]  # nothing after a failure
    assert (ROOT / "_build" / "build.log").read_text() == log


def test_a_failed_install_still_ends_with_one_line(tmp_path: Path, fakes: Fakes) -> None:
    env_dir = _recording_env(tmp_path / "env", fakes.calls, pip_fails=True)
    proc = _run(["bash", str(SCRIPTS / "build_book.sh")], fakes.env(VIRTUAL_ENV=str(env_dir)))
    assert proc.returncode != 0
    assert proc.stdout.splitlines()[-1] == "== FAILED: the install (see the messages above)"


# --- which torch build (issue 21: a learner got the 5.9 GB CUDA build) -----------------------

PIN = "torch==2.13.0"


def test_the_torch_decision_in_every_case() -> None:
    """Decided without the network: tests feed what the probes would have found."""

    def plan(**kw):
        args = dict(cuda=False, system="Linux", local=None, reachable=None) | kw
        return helpers.torch_plan(PIN, **args)

    cpu = plan()  # a learner's laptop where PyTorch's CPU index answers
    assert cpu.index == helpers.CPU_INDEX and not cpu.warning
    assert "the CPU build from PyTorch's index https://download.pytorch.org/whl/cpu" in cpu.message
    assert "--cuda keeps PyPI's CUDA build" in cpu.message
    local = plan(local="/opt/wheels")  # the developers' machines: pip already offers it
    assert local.index is None and "pip's configuration offers (/opt/wheels)" in local.message
    cuda = plan(cuda=True, local="/opt/wheels")  # asked for: PyPI, whatever else is there
    assert cuda.index is None and "the CUDA build from PyPI" in cuda.message
    assert helpers.SIZE_CUDA in cuda.message
    mac = plan(system="Darwin")
    assert mac.index is None and "CPU-only on Darwin" in mac.message
    cut_off = plan(reachable="[Errno -2] Name or service not known")
    assert cut_off.index is None and cut_off.warning
    assert "cannot be reached ([Errno -2] Name or service not known)" in cut_off.message
    assert (
        "python -m pip install --force-reinstall --no-deps --index-url "
        "https://download.pytorch.org/whl/cpu torch==2.13.0"
    ) in cut_off.message  # the way out, to run later
    mirror = plan(index="http://mirror.example/cpu")
    assert mirror.index == "http://mirror.example/cpu" and "mirror.example" in mirror.message


def test_pips_configuration_is_read_for_a_local_cpu_wheel(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_text("")
    simple = tmp_path / "pypi" / "simple"
    config = f"global.find-links='{wheels}'\n:env:.extra-index-url='{simple.as_uri()}'\n"
    assert helpers.local_cpu_torch(PIN, config) is None
    (simple / "torch").mkdir(parents=True)  # a PEP 503 index on disk
    (simple / "torch" / "index.html").write_text(
        '<a href="torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl">x</a>'
    )
    assert helpers.local_cpu_torch(PIN, config) == simple.as_uri()
    assert helpers.local_cpu_torch("torch==2.14.0", config) is None  # another version
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_text("")
    assert helpers.local_cpu_torch(PIN, config) == str(wheels)
    # a remote index is not asked; PyTorch's CPU index named in pip's configuration counts
    assert helpers.local_cpu_torch(PIN, "global.index-url='https://pypi.example/simple'") is None
    named = f"global.extra-index-url='{helpers.CPU_INDEX}'"
    assert helpers.local_cpu_torch(PIN, named) == helpers.CPU_INDEX


def _serve(folder: Path):
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_cpu_index_probe_asks_for_the_torch_page_only(tmp_path: Path) -> None:
    (tmp_path / "whl" / "cpu" / "torch").mkdir(parents=True)
    (tmp_path / "whl" / "cpu" / "torch" / "index.html").write_text("<a>torch-2.13.0+cpu</a>")
    server = _serve(tmp_path)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert helpers.cpu_index_reachable(f"{base}/whl/cpu", timeout=5) is None
        assert helpers.cpu_index_reachable(f"{base}/whl/cu999", timeout=5) == "HTTP 404"
    finally:
        server.shutdown()
        server.server_close()
    port = server.server_address[1]  # closed now
    assert "refused" in helpers.cpu_index_reachable(f"http://127.0.0.1:{port}/cpu", timeout=5)


def _fresh_install(tmp_path: Path, fakes: Fakes, *args: str, **env: str):
    env_dir = _recording_env(tmp_path / "env", fakes.calls, fresh=True)
    environ = fakes.env(VIRTUAL_ENV=str(env_dir), PIP_CONFIG_FILE=os.devnull, **env)
    proc = _run(["bash", str(SCRIPTS / "install.sh"), *args], environ)
    pips = [c.strip() for c in fakes.called() if c.startswith("python -m pip install")]
    return proc, pips, env_dir


def test_install_takes_the_cpu_build_from_pytorchs_index(tmp_path: Path, fakes: Fakes) -> None:
    (tmp_path / "idx" / "torch").mkdir(parents=True)
    server = _serve(tmp_path / "idx")
    index = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        proc, pips, _ = _fresh_install(tmp_path, fakes, BERTCOURSE_CPU_INDEX=index)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"== torch: the CPU build from PyTorch's index {index}" in proc.stdout
    assert pips[0] == f"python -m pip install -q --no-deps --index-url {index} {PIN}"
    assert pips[1].startswith("python -m pip install -q -r requirements.txt -e .")


def test_install_with_cuda_or_without_the_index_takes_pypis_build(
    tmp_path: Path, fakes: Fakes
) -> None:
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens
    proc, pips, _ = _fresh_install(tmp_path / "a", fakes, "--cuda", BERTCOURSE_CPU_INDEX=closed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== torch: the CUDA build from PyPI (asked for)" in proc.stdout
    assert not [p for p in pips if "--index-url" in p]

    fakes.calls.write_text("")
    proc, pips, _ = _fresh_install(tmp_path / "b", fakes, BERTCOURSE_CPU_INDEX=closed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"== warning: PyTorch's CPU index {closed} cannot be reached" in proc.stdout
    assert not [p for p in pips if "--index-url" in p]
    bad = _run(["bash", str(SCRIPTS / "install.sh")], fakes.env(BERTCOURSE_TORCH="rocm"))
    assert (
        bad.returncode == 2
        and "BERTCOURSE_TORCH is 'rocm': cpu (the default) or cuda" in bad.stderr
    )


# --- a learner's JupyterLab (issue 21: the instructor's tools were shown to learners) ----------


def _lab_state(prefix: Path, user: Path) -> tuple[dict, dict]:
    """What Jupyter itself makes of the configuration: server extensions, disabled plugins."""
    code = (
        "import json, sys\n"
        "from jupyter_core.paths import jupyter_config_path\n"
        "from jupyter_server.extension.config import ExtensionConfigManager\n"
        "from jupyterlab_server.config import get_static_page_config\n"
        "server = ExtensionConfigManager(read_config_path=jupyter_config_path())\n"
        "print(json.dumps([server.get_jpserver_extensions(),\n"
        "                  get_static_page_config(level='all').get('disabledExtensions', {})]))\n"
    )
    env = dict(
        os.environ, JUPYTER_CONFIG_DIR=str(user), JUPYTER_CONFIG_PATH=f"{prefix}/etc/jupyter"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    server, disabled = json.loads(proc.stdout)
    return server, disabled


def _news_default(prefix: Path) -> str:
    """JupyterLab's fetchNews for a user with no settings of their own, as jupyterlab_server
    composes it from the schema and the environment's overrides.json."""
    from jupyterlab_server.settings_utils import get_settings

    lab = prefix / "share" / "jupyter" / "lab"
    with tempfile.TemporaryDirectory() as user_settings:
        found, _ = get_settings(
            app_settings_dir=str(lab / "settings"),
            schemas_dir=str(Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"),
            settings_dir=user_settings,
            schema_name=helpers.NEWS_PLUGIN,
        )
    return found["schema"]["properties"]["fetchNews"]["default"]


def test_lab_roles_upgrade_a_learner_and_keep_every_choice_made(tmp_path: Path) -> None:
    """An environment that chose the learner's before the Assignment List joined the parts a
    learner has off gets it off; a part turned on by hand, an instructor's environment and a
    news setting already made are kept; a settings file that is not JSON is named."""
    old_learner, by_hand, teacher = (tmp_path / n for n in ("old", "by_hand", "teacher"))
    for prefix in (old_learner, by_hand, teacher):
        page = prefix / "etc" / "jupyter" / "labconfig" / "page_config.json"
        page.parent.mkdir(parents=True)
        instructor = prefix == teacher
        disabled = dict.fromkeys(helpers.INSTRUCTOR_LAB_PLUGINS, not instructor)
        if prefix == by_hand:  # `jupyter labextension enable ...:assignment-list`
            disabled["@jupyter/nbgrader:assignment-list"] = False
        page.write_text(json.dumps({"disabledExtensions": disabled}))
    overrides = by_hand / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    overrides.parent.mkdir(parents=True)
    overrides.write_text(json.dumps({helpers.NEWS_PLUGIN: {"fetchNews": "true"}}))

    assert "the learner's" in helpers.lab_roles(old_learner, None)
    assert all(v is False for v in helpers.nbgrader_tools(old_learner).values())
    line = helpers.lab_roles(by_hand, None)
    assert "as chosen before: @jupyter/nbgrader:assignment-list" in line
    assert helpers.nbgrader_tools(by_hand)["@jupyter/nbgrader:menu"] is False
    assert "instructor's nbgrader tools are on" in helpers.lab_roles(teacher, None)
    assert helpers.nbgrader_tools(teacher)["@jupyter/nbgrader:assignment-list"] is None
    assert [_news_default(p) for p in (old_learner, by_hand, teacher)] == ["false", "true", "false"]

    overrides.write_text("{'fetchNews': 'true'}")  # JSON5, not JSON
    with pytest.raises(SystemExit, match=f"{re.escape(str(overrides))} is not JSON"):
        helpers.lab_roles(by_hand, "learner")


def test_a_new_environment_gets_a_learners_jupyterlab(tmp_path: Path, fakes: Fakes) -> None:
    proc, _, env_dir = _fresh_install(tmp_path, fakes, "--cuda")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== JupyterLab: the learner's" in proc.stdout
    assert helpers.INSTRUCTOR_COMMAND in proc.stdout  # how to turn them on
    # nbgrader's own file, as pip installs it, turns every extension on
    shipped = Path(sys.prefix) / "etc/jupyter/jupyter_server_config.d/nbgrader.json"
    data = env_dir / "etc" / "jupyter" / "jupyter_server_config.d"
    shutil.copy2(shipped, data / "nbgrader.json")
    user = tmp_path / "user-config"
    user.mkdir()
    server, disabled = _lab_state(env_dir, user)
    assert server["nbgrader.server_extensions.formgrader"] is False
    assert server["nbgrader.server_extensions.course_list"] is False
    assert server["nbgrader.server_extensions.validate_assignment"] is True  # the student's
    # no exchange for a learner of this repository: the Assignment List could only show errors
    assert server["nbgrader.server_extensions.assignment_list"] is False
    for plugin in helpers.LEARNER_OFF_LAB_PLUGINS:
        assert disabled[plugin] is True, plugin
    assert not disabled.get("@jupyter/nbgrader:validate-assignment")
    assert _news_default(env_dir) == "false"  # JupyterLab's "Never": no news pop-up

    # the instructor's command turns them on, and a later install keeps that choice
    for args in (["--instructor"], []):
        again = _run(
            ["bash", str(SCRIPTS / "install.sh"), *args], fakes.env(VIRTUAL_ENV=str(env_dir))
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert "== JupyterLab: the instructor's nbgrader tools are on" in again.stdout
        server, disabled = _lab_state(env_dir, user)
        assert server["nbgrader.server_extensions.formgrader"] is True
        assert server["nbgrader.server_extensions.assignment_list"] is True
        assert not any(disabled.get(p) for p in helpers.LEARNER_OFF_LAB_PLUGINS)
    learner = _run(
        ["bash", str(SCRIPTS / "install.sh"), "--learner"], fakes.env(VIRTUAL_ENV=str(env_dir))
    )
    assert "== JupyterLab: the learner's" in learner.stdout
    assert _lab_state(env_dir, user)[0]["nbgrader.server_extensions.formgrader"] is False


def test_the_instructor_tools_are_named_as_nbgrader_names_them() -> None:
    """The names of nbgrader 0.9.6's own installation guide (and of its installed config), and
    the menu's plugin id as its JupyterLab extension's code spells it (the guide does not)."""
    shipped = json.loads(
        (Path(sys.prefix) / "etc/jupyter/jupyter_server_config.d/nbgrader.json").read_text()
    )["ServerApp"]["jpserver_extensions"]
    assert set(helpers.LEARNER_OFF_SERVER_EXTENSIONS) < set(shipped)
    assert (
        "nbgrader.server_extensions.validate_assignment"
        not in helpers.LEARNER_OFF_SERVER_EXTENSIONS
    )
    import nbgrader

    guide = Path(nbgrader.__file__).parent / "docs/source/user_guide/installation.rst"
    text = guide.read_text()
    menu = "@jupyter/nbgrader:menu"
    for name in helpers.LEARNER_OFF_LAB_PLUGINS + helpers.LEARNER_OFF_SERVER_EXTENSIONS:
        assert name == menu or f"disable {name}" in text, name
    static = Path(sys.prefix) / "share/jupyter/labextensions/@jupyter/nbgrader/static"
    declared = set().union(
        *(re.findall(r'"(@jupyter/nbgrader:[\w-]+)"', p.read_text()) for p in static.glob("*.js"))
    )
    assert set(helpers.LEARNER_OFF_LAB_PLUGINS) < declared, declared
    assert "@jupyter/nbgrader:validate-assignment" in declared - set(
        helpers.LEARNER_OFF_LAB_PLUGINS
    )


# --- test tiers ----------------------------------------------------------------------------------


def test_every_test_named_for_the_slow_tier_exists() -> None:
    """tests/conftest.py marks the heavy tests by name: a renamed test must not fall out of the
    slow tier unnoticed (it would then run in the everyday `pytest -m "not slow"`)."""
    import ast

    import conftest

    for name in conftest.SLOW_FILES:
        assert (ROOT / "tests" / name).is_file(), name
    for file, test in conftest.SLOW_TESTS:
        source = (ROOT / "tests" / file).read_text()
        functions = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        function = test.partition("[")[0]  # a parametrized case: its function
        assert function in functions, f"{file} has no {function}"
