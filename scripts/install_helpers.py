"""Two decisions of scripts/install.sh, in Python so that tests can feed them every case.

    python scripts/install_helpers.py torch-plan --pin torch==2.13.0 [--cuda]
    python scripts/install_helpers.py lab-roles PREFIX [--learner | --instructor]

1. Which torch build. PyPI's torch for Linux is the CUDA build (with the nvidia-* packages:
   a 5.9 GB environment); the course needs only the CPU build (2.3 GB), which PyTorch serves
   from its own index. `torch_plan` decides from what the probes found, without the network:
   --cuda (or BERTCOURSE_TORCH=cuda) keeps PyPI's build; a pip configuration that already offers
   the CPU wheel (a local wheel folder or index, as on the developers' machines) is left to pip;
   otherwise the CPU index when it answers; otherwise PyPI, with a warning that says how to
   switch later. `local_cpu_torch` reads pip's configuration (`pip config list`, PIP_* variables
   included) and `cpu_index_reachable` asks the index for its torch page (nothing is downloaded).
2. A learner's JupyterLab. nbgrader installs its instructor tools (the formgrader, the course
   list, "Create Assignment") and its exchange's Assignment List into every JupyterLab of the
   environment. `lab_roles` turns them off at the environment's (sys-prefix) level, with the
   Nbgrader menu they fill, writing what `jupyter server extension disable --sys-prefix` and
   `jupyter labextension disable --level=sys_prefix` write (those commands take about 25 s each:
   they import every server extension), and keeps the student's Validate button. A choice
   already made (by `--instructor`, `--learner` or the jupyter commands) is kept: with neither
   option an environment with an instructor's tool on is left alone, and in any other only the
   parts that never chose are turned off. JupyterLab's "Jupyter news" pop-up is turned off in
   the environment's settings overrides (a user's own setting still wins).

Standard library only: it runs before requirements.txt is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SIZE_CPU = "about 2.3 GB"  # du -sh .venv with torch 2.13.0+cpu and every pin of requirements.txt
SIZE_CUDA = "about 5.9 GB"  # issue 21: torch 2.13.0 from PyPI, 15 nvidia-* packages and triton

# nbgrader 0.9.6 (docs/source/user_guide/installation.rst): the instructor's tools.
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)
INSTRUCTOR_LAB_PLUGINS = (
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
)
# The Assignment List fetches and submits through an exchange folder that a class's JupyterHub
# shares (/srv/nbgrader/exchange). A learner with this repository works in its exercises/ folder
# and hands in through a learning platform (book/exercises.md), so there is no exchange: the list
# could only show "Error fetching courses!". With it goes the Nbgrader menu, which would be
# empty (its items are the Assignment List, the course list and the formgrader). The student's
# Validate button (validate_assignment, a notebook toolbar button) stays on.
EXCHANGE_SERVER_EXTENSIONS = ("nbgrader.server_extensions.assignment_list",)
EXCHANGE_LAB_PLUGINS = ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu")
LEARNER_OFF_SERVER_EXTENSIONS = INSTRUCTOR_SERVER_EXTENSIONS + EXCHANGE_SERVER_EXTENSIONS
LEARNER_OFF_LAB_PLUGINS = INSTRUCTOR_LAB_PLUGINS + EXCHANGE_LAB_PLUGINS
# JupyterLab 4's "Would you like to get notified about official Jupyter news?" pop-up covers a
# new profile's notebook (and "Always" would fetch from the web): "false" is its "Never"
NEWS_PLUGIN = "@jupyterlab/apputils-extension:notification"
NEWS_SETTINGS = {"fetchNews": "false"}
INSTRUCTOR_COMMAND = "bash scripts/install.sh --instructor"


# --- 1. which torch build ------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchPlan:
    index: str | None  # install torch alone from this index first; None: with requirements.txt
    message: str
    warning: bool = False


def torch_plan(
    pin: str,
    *,
    cuda: bool,
    system: str,
    local: str | None,
    reachable: str | None,
    index: str = CPU_INDEX,
) -> TorchPlan:
    """The decision. `local`: where pip's configuration already offers the CPU wheel (None:
    nowhere); `reachable`: None when PyTorch's CPU `index` answered, else why it did not."""
    if cuda:
        return TorchPlan(
            None, f"torch: the CUDA build from PyPI (asked for), {SIZE_CUDA} in all", False
        )
    if system != "Linux":
        return TorchPlan(None, f"torch: PyPI's build, which is CPU-only on {system}")
    if local:
        return TorchPlan(None, f"torch: the CPU build, which pip's configuration offers ({local})")
    if reachable is None:
        return TorchPlan(
            index,
            f"torch: the CPU build from PyTorch's index {index} ({SIZE_CPU} in all; "
            "BERTCOURSE_TORCH=cuda or --cuda keeps PyPI's CUDA build)",
        )
    return TorchPlan(
        None,
        f"warning: PyTorch's CPU index {index} cannot be reached ({reachable}), so torch "
        f"comes from PyPI: on Linux the CUDA build, {SIZE_CUDA} in all instead of {SIZE_CPU} "
        "(it runs on a CPU too). For the CPU build later, where the index answers: "
        f"python -m pip install --force-reinstall --no-deps --index-url {index} {pin}",
        True,
    )


def _pip_locations(pip_config: str) -> list[str]:
    """Folders and URLs of `find-links`, `index-url` and `extra-index-url` in `pip config list`."""
    out = []
    for line in pip_config.splitlines():
        m = re.match(r"^[^=]*\.(find-links|index-url|extra-index-url)='(.*)'$", line.strip())
        if m:
            out += m.group(2).split()
    return out


def _offers(location: str, wheel_prefix: str, project: str) -> bool:
    if CPU_INDEX in location:
        return True
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme not in ("", "file"):
        return False  # a remote index: not asked (nothing goes over the network here)
    folder = Path(urllib.parse.unquote(parsed.path) if parsed.scheme else location)
    candidates = [folder, folder / project]  # a find-links folder, or a simple index
    for place in candidates:
        if place.is_dir() and any(p.name.startswith(wheel_prefix) for p in place.iterdir()):
            return True
        index = place / "index.html"
        if index.is_file() and wheel_prefix in index.read_text(errors="replace"):
            return True
    return False


def local_cpu_torch(pin: str, pip_config: str | None = None) -> str | None:
    """Where pip's configuration already offers the CPU wheel of `pin`, or None."""
    project, version = pin.split("==")
    if pip_config is None:
        pip_config = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
        ).stdout
    prefix = f"{project}-{version}+cpu-"
    for location in _pip_locations(pip_config):
        if _offers(location, prefix, project):
            return location
    return None


def cpu_index_reachable(url: str = CPU_INDEX, timeout: float = 10) -> str | None:
    """None when the index answers for torch (a HEAD request), else why not."""
    request = urllib.request.Request(url.rstrip("/") + "/torch/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status < 400:
                return None
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))


# --- 2. a learner's JupyterLab -------------------------------------------------------------------


def _server_file(prefix: Path, name: str) -> Path:
    # where `jupyter server extension enable/disable --sys-prefix NAME` writes
    return prefix / "etc" / "jupyter" / "jupyter_server_config.d" / f"{name}.json"


def _page_config(prefix: Path) -> Path:
    # where `jupyter labextension enable/disable --level=sys_prefix NAME` writes
    return prefix / "etc" / "jupyter" / "labconfig" / "page_config.json"


def _overrides(prefix: Path) -> Path:
    # the environment's JupyterLab settings defaults: jupyterlab_server reads
    # {app_settings_dir}/overrides.json, and app_settings_dir is {sys.prefix}/share/jupyter/lab/settings
    return prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def _read_json(path: Path) -> dict:
    """The JSON object in `path` ({} when there is no such file); a clear error otherwise."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SystemExit(
            f"{path} is not JSON ({err}): repair or remove it, then run this again"
        ) from None
    if not isinstance(data, dict):
        raise SystemExit(
            f"{path} holds a {type(data).__name__}, not a JSON object: repair or remove it"
        )
    return data


def _disabled(config: dict) -> dict[str, bool]:
    disabled = config.get("disabledExtensions", {})
    if isinstance(disabled, list):  # jupyterlab_server < 2.10 wrote a list
        disabled = dict.fromkeys(disabled, True)
    return disabled


def nbgrader_tools(prefix: Path) -> dict[str, bool | None]:
    """Each extension/plugin a learner's JupyterLab turns off -> True (on), False (off) or None
    (never chosen)."""
    state: dict[str, bool | None] = {}
    for name in LEARNER_OFF_SERVER_EXTENSIONS:
        data = _read_json(_server_file(prefix, name))
        state[name] = data.get("ServerApp", {}).get("jpserver_extensions", {}).get(name)
    disabled = _disabled(_read_json(_page_config(prefix)))
    for name in LEARNER_OFF_LAB_PLUGINS:
        state[name] = None if name not in disabled else not disabled[name]
    return state


def set_nbgrader_tools(prefix: Path, on: bool, *, only_unset: bool = False) -> None:
    """Turn the instructor's and the exchange's extensions on or off for the environment at
    `prefix`; with only_unset, those that never chose."""
    state = nbgrader_tools(prefix)
    change = [name for name, value in state.items() if not (only_unset and value is not None)]
    for name in set(change) & set(LEARNER_OFF_SERVER_EXTENSIONS):
        path = _server_file(prefix, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        config = {"ServerApp": {"jpserver_extensions": {name: on}}}
        path.write_text(json.dumps(config, indent=2) + "\n")
    page = _page_config(prefix)
    page.parent.mkdir(parents=True, exist_ok=True)
    config = _read_json(page)
    disabled = _disabled(config)
    disabled.update({name: not on for name in LEARNER_OFF_LAB_PLUGINS if name in change})
    config["disabledExtensions"] = disabled
    # present (even empty), so that JupyterLab >= 4.1 does not copy every disabled plugin into
    # it ("locked": a plugin an instructor could then not turn on again)
    config.setdefault("lockedExtensions", {})
    page.write_text(json.dumps(config, indent=2) + "\n")


def news_off(prefix: Path) -> None:
    """No "Jupyter news" pop-up: NEWS_SETTINGS in the environment's overrides.json, unless it
    already says otherwise (the overrides are defaults: a user's own settings still win)."""
    path = _overrides(prefix)
    overrides = _read_json(path)
    plugin = overrides.setdefault(NEWS_PLUGIN, {})
    if NEWS_SETTINGS.keys() <= plugin.keys():
        return
    for key, value in NEWS_SETTINGS.items():
        plugin.setdefault(key, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(overrides, indent=2) + "\n")


def lab_roles(prefix: Path, choice: str | None) -> str:
    """Apply `choice` ("learner", "instructor") or, with None, keep an instructor's environment
    and give any other the learner's parts it never chose. Returns the line install.sh prints."""
    news_off(prefix)
    if choice is None:
        state = nbgrader_tools(prefix)
        on = [k for k in INSTRUCTOR_SERVER_EXTENSIONS + INSTRUCTOR_LAB_PLUGINS if state[k]]
        if on:
            return f"JupyterLab: the instructor's nbgrader tools are on ({len(on)} parts)"
        set_nbgrader_tools(prefix, on=False, only_unset=True)
    else:
        set_nbgrader_tools(prefix, on=choice == "instructor")
    if choice == "instructor":
        return (
            "JupyterLab: the instructor's nbgrader tools are on (formgrader, course list, "
            "Create Assignment, the Assignment List); `bash scripts/install.sh --learner` turns "
            "them off"
        )
    kept = [name for name, value in nbgrader_tools(prefix).items() if value]
    return (
        "JupyterLab: the learner's: nbgrader's Validate button; the instructor's tools "
        "(formgrader, course list, Create Assignment) and the exchange's Assignment List are "
        f"off: {INSTRUCTOR_COMMAND} turns them on"
        + (f" (on, as chosen before: {', '.join(kept)})" if kept else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    torch = sub.add_parser("torch-plan", help="which torch build; prints the index, then why")
    torch.add_argument("--pin", required=True, help="torch==X.Y.Z, from requirements.txt")
    torch.add_argument("--cuda", action="store_true", help="keep PyPI's CUDA build")
    torch.add_argument("--index", default=os.environ.get("BERTCOURSE_CPU_INDEX", CPU_INDEX))
    roles = sub.add_parser("lab-roles", help="the nbgrader tools of the environment's JupyterLab")
    roles.add_argument("prefix", type=Path)
    group = roles.add_mutually_exclusive_group()
    group.add_argument("--learner", dest="choice", action="store_const", const="learner")
    group.add_argument("--instructor", dest="choice", action="store_const", const="instructor")
    args = parser.parse_args(argv)

    if args.command == "lab-roles":
        print(lab_roles(args.prefix, args.choice))
        return 0
    system = platform.system()
    local = None if args.cuda or system != "Linux" else local_cpu_torch(args.pin)
    reachable = None
    if not (args.cuda or system != "Linux" or local):
        reachable = cpu_index_reachable(args.index)
    plan = torch_plan(
        args.pin, cuda=args.cuda, system=system, local=local, reachable=reachable, index=args.index
    )
    print(plan.index or "-")
    print(plan.message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
