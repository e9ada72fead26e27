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
   list, "Create Assignment") into every JupyterLab of the environment. `lab_roles` turns them off
   at the environment's (sys-prefix) level, writing what `jupyter server extension disable
   --sys-prefix` and `jupyter labextension disable --level=sys_prefix` write (those commands take
   about 25 s each: they import every server extension), and keeps the student's Validate button
   and assignment list. A choice already made (by `--instructor`, `--learner` or the jupyter
   commands) is kept: with neither option only an environment that never chose is changed.

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

# nbgrader 0.9.6 (docs/source/user_guide/installation.rst): the instructor's tools. The
# student's validate_assignment and assignment_list stay on.
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)
INSTRUCTOR_LAB_PLUGINS = (
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
)
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


def instructor_tools(prefix: Path) -> dict[str, bool | None]:
    """Each instructor extension/plugin -> True (on), False (off) or None (never chosen)."""
    state: dict[str, bool | None] = {}
    for name in INSTRUCTOR_SERVER_EXTENSIONS:
        path = _server_file(prefix, name)
        data = json.loads(path.read_text()) if path.is_file() else {}
        state[name] = data.get("ServerApp", {}).get("jpserver_extensions", {}).get(name)
    page = _page_config(prefix)
    disabled = json.loads(page.read_text()).get("disabledExtensions", {}) if page.is_file() else {}
    if isinstance(disabled, list):  # jupyterlab_server < 2.10 wrote a list
        disabled = dict.fromkeys(disabled, True)
    for name in INSTRUCTOR_LAB_PLUGINS:
        state[name] = None if name not in disabled else not disabled[name]
    return state


def set_instructor_tools(prefix: Path, on: bool) -> None:
    """Turn the instructor's extensions on or off for the environment at `prefix`."""
    for name in INSTRUCTOR_SERVER_EXTENSIONS:
        path = _server_file(prefix, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        config = {"ServerApp": {"jpserver_extensions": {name: on}}}
        path.write_text(json.dumps(config, indent=2) + "\n")
    page = _page_config(prefix)
    page.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads(page.read_text()) if page.is_file() else {}
    disabled = config.get("disabledExtensions", {})
    if isinstance(disabled, list):
        disabled = dict.fromkeys(disabled, True)
    disabled.update(dict.fromkeys(INSTRUCTOR_LAB_PLUGINS, not on))
    config["disabledExtensions"] = disabled
    # present (even empty), so that JupyterLab >= 4.1 does not copy every disabled plugin into
    # it ("locked": a plugin an instructor could then not turn on again)
    config.setdefault("lockedExtensions", {})
    page.write_text(json.dumps(config, indent=2) + "\n")


def lab_roles(prefix: Path, choice: str | None) -> str:
    """Apply `choice` ("learner", "instructor") or, with None, the learner's default when the
    environment never chose. Returns the line install.sh prints."""
    state = instructor_tools(prefix)
    if choice is None:
        if any(v is not None for v in state.values()):
            on = [k for k, v in state.items() if v]
            if on:
                return f"JupyterLab: the instructor's nbgrader tools are on ({len(on)} parts)"
            return "JupyterLab: the learner's (nbgrader's instructor tools off, as chosen before)"
        choice = "learner"
    set_instructor_tools(prefix, on=choice == "instructor")
    if choice == "instructor":
        return (
            "JupyterLab: the instructor's nbgrader tools are on (formgrader, course list, "
            "Create Assignment); `bash scripts/install.sh --learner` turns them off"
        )
    return (
        "JupyterLab: the learner's: nbgrader's Validate button and assignment list; the "
        f"instructor's tools (formgrader, course list, Create Assignment) are off: {INSTRUCTOR_COMMAND}"
        " turns them on"
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
