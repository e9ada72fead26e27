"""What a kernel's root file system holds and the environment it starts with.

The jail shows a list, not the host minus a list: `layout()` names the host paths the kernel
may read (Python's prefixes and site-packages, bertcourse, the shared libraries the grader's
Python has loaded, the loader's cache, the C.UTF-8 locale) and the launcher builds a new root
from them and nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import re
import site
import struct
import sys
import sysconfig
from pathlib import Path

DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
LD_CACHE = "/etc/ld.so.cache"  # where the dynamic loader finds libraries by name
LOCALE = "/usr/lib/locale/C.utf8"  # the locale the kernel's environment names (glibc >= 2.35)
_SHARED_OBJECT = re.compile(r"^/.*\.so(\.[0-9]+)*$")


def inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    """`paths` without those inside another one, sorted."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(inside(path, k) for k in kept):
            kept.append(path)
    return kept


def _python_paths() -> set[str]:
    """Folders the kernel's Python must read: the virtual environment, the standard library,
    site-packages, bertcourse. Not the base installation's prefix: for Debian's Python that is
    /usr, every program of the machine (the interpreter itself is bound as a file, `layout`)."""
    import bertcourse

    paths = {sys.prefix} if sys.prefix != sys.base_prefix else set()  # a virtual environment
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    paths.update(site.getsitepackages())
    paths.add(os.path.dirname(os.path.abspath(bertcourse.__file__)))
    return {os.path.realpath(p) for p in paths if p and os.path.isdir(p)}


def _elf_interpreter(path: str) -> str | None:
    """The program interpreter (PT_INTERP, the dynamic loader) an ELF executable names."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return None
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        phoff = struct.unpack_from(order + ("Q" if wide else "I"), head, 32 if wide else 28)[0]
        entry_size, count = struct.unpack_from(order + "HH", head, 54 if wide else 42)
        for i in range(count):
            f.seek(phoff + i * entry_size)
            header = f.read(entry_size)
            if struct.unpack_from(order + "I", header)[0] != 3:  # PT_INTERP
                continue
            fields = order + ("QQQQ" if wide else "IIII")
            offset, _, _, size = struct.unpack_from(fields, header, 8 if wide else 4)
            f.seek(offset)
            return f.read(size).rstrip(b"\0").decode()
    return None


def _links_on(path: str) -> dict[str, str]:
    """Every symbolic link met while resolving `path` (link -> its text), in resolution order."""
    links: dict[str, str] = {}
    todo, current = list(Path(path).parts[1:]), "/"
    while todo and len(links) < 40:
        candidate = os.path.join(current, todo.pop(0))
        if os.path.islink(candidate):
            text = os.readlink(candidate)
            links[candidate] = text
            target = os.path.normpath(os.path.join(current, text))
            todo, current = list(Path(target).parts[1:]) + todo, "/"
        else:
            current = candidate
    return links


def _loaded_libraries() -> set[str]:
    """Shared objects mapped into this process (libc, libm, libffi, ...), by their real paths."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if _SHARED_OBJECT.search(path) and os.path.isfile(path):
                found.add(path)
    return found


@dataclasses.dataclass(frozen=True)
class Layout:
    """A kernel's root file system: these host paths (same names) and nothing else of the host.

    The launcher adds, of its own, an empty `/tmp` and `/dev/shm`, the devices in `DEVICES`
    and the kernel's `/proc`; the kernel's scratch folder is bound read-write.
    """

    # Python's prefixes and site-packages, bertcourse, the folders of the shared libraries the
    # grader's Python has loaded, the loader's cache, the C.UTF-8 locale
    read_only: tuple[str, ...]
    links: dict[str, str]  # symbolic links on the way to them (merged /usr: /lib -> usr/lib)
    hide: tuple[str, ...]  # folders inside `read_only` the kernel still must not see


def layout(hide: list[str]) -> Layout:
    """The allow-list for kernels of this Python (see `Layout`); `hide`: the course, the
    gradebook's folder, the outputs, the repository (hidden where an allowed folder holds them)."""
    python = _python_paths()
    hidden = {os.path.realpath(h) for h in hide}
    wanted = set(python)
    interpreter = _elf_interpreter(os.path.realpath(sys.executable))
    named = [sys.executable, *([interpreter] if interpreter else [])]
    for library in _loaded_libraries():
        if not any(inside(library, p) for p in python | hidden):  # never the course's own
            wanted.add(os.path.dirname(library))
    named += [p for p in (LD_CACHE, LOCALE) if os.path.exists(p)]
    links: dict[str, str] = {}
    for path in named:
        links.update(_links_on(path))
        wanted.add(os.path.realpath(path))
    read_only = _outermost(wanted)
    if "/" in read_only:
        raise RuntimeError("Python is installed at / : the kernel's jail would be the host")
    # links that lie inside an allowed folder are there already
    links = {k: v for k, v in links.items() if not any(inside(k, p) for p in read_only)}
    inner = sorted(h for h in hidden if any(inside(h, p) and h != p for p in read_only))
    return Layout(tuple(read_only), links, tuple(h for h in inner if os.path.isdir(h)))


def kernel_env(home: str, extra_pythonpath: str) -> dict[str, str]:
    path = os.pathsep.join(
        dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    )
    return {
        "PATH": path,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": extra_pythonpath,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "IPYTHONDIR": os.path.join(home, ".ipython"),
        "MPLCONFIGDIR": os.path.join(home, ".matplotlib"),
        "MPLBACKEND": "agg",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HOME": os.path.join(home, ".hf"),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "NBGRADER_EXECUTION": "autograde",
    }
