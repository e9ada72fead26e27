"""Host side of the kernel jail: what this machine offers, the grading user, cgroups, the spec.

`detect()` probes once per run what can be enforced here (root, namespaces, cgroup v2 or v1
memory and pids controllers) and `KernelJail` turns that into the spec that
`bertcourse/grade/sandbox.py` (the launcher) builds the jail from, plus the cgroups and a
watchdog on the kernel's process tree. Measured on the development machine (2 cores, Debian
12, kernel 6.18, root, cgroup v1 memory + pids): all of it available.

Why not RLIMIT_AS: it limits *virtual* address space, and PyTorch reserves far more than it
uses (here `import torch` + a 512x512 matmul: VmSize 716 MB for 231 MB resident; glibc malloc
arenas and OpenBLAS buffers grow with the number of cores). With RLIMIT_AS = 512 MiB torch
aborts ("OpenBLAS error: Memory allocation still failed"). The memory cap here is a cgroup
limit on the whole process tree when the machine has one, else an RSS watchdog over the
tree, always backed by RLIMIT_DATA per process (counts written private memory; `import torch`
works under 256 MiB).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import re
import shutil
import signal
import site
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

GRADER_USER = "bertcourse-grader"
SANDBOX_SCRIPT = str(Path(__file__).with_name("sandbox.py"))
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What this machine lets the grader enforce (see the instructors' guide)."""

    root: bool
    namespaces: bool
    uid: int | None
    gid: int | None
    cgroup: str | None  # "v2", "v1" or None
    memory_cgroup: str | None  # parent folder for per-kernel memory cgroups
    pids_cgroup: str | None  # parent folder for per-kernel pids cgroups (v1), or None

    def describe(self) -> str:
        if not self.root:
            return (
                "not root: kernels run as this user, without namespaces or cgroups "
                "(resource limits, clean environment and scratch folder only)"
            )
        parts = [f"kernels run as uid {self.uid}"]
        parts.append("namespaces (mount, network, pid)" if self.namespaces else "NO namespaces")
        parts.append(f"cgroup {self.cgroup} memory/pids limits" if self.cgroup else "RSS watchdog")
        return ", ".join(parts)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Capabilities:
        return cls(**json.loads(text))


def ensure_grader_user(name: str = GRADER_USER) -> tuple[int, int]:
    """The (uid, gid) of the unprivileged grading user, created as a system user if missing."""
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    try:
        subprocess.run(
            [
                useradd,
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except (OSError, subprocess.CalledProcessError, KeyError):
        entry = pwd.getpwnam("nobody")  # still unprivileged, but shared with other daemons
        return entry.pw_uid, entry.pw_gid


def _probe_namespaces() -> bool:
    """Can this process unshare mount, network and PID namespaces? (tried in a child)"""
    pid = os.fork()
    if pid == 0:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            os._exit(0 if libc.unshare(0x00020000 | 0x40000000 | 0x20000000) == 0 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _own_cgroup_v1(controller: str) -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
    except OSError:
        pass
    return None


def _probe_cgroup() -> tuple[str | None, str | None, str | None]:
    """(kind, memory parent, pids parent) for per-kernel cgroups, or Nones."""
    tag = f"bertcourse-grade-probe-{uuid.uuid4().hex[:8]}"
    # cgroup v2: the unified hierarchy at /sys/fs/cgroup with the memory controller
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        try:
            own = Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip()
            parent = root / own.lstrip("/") / "bertcourse-grade"
            parent.mkdir(exist_ok=True)
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
            probe = parent / tag
            probe.mkdir()
            (probe / "memory.max").write_text(str(1 << 30))
            probe.rmdir()
            return "v2", str(parent), str(parent)
        except (OSError, IndexError):
            pass
    # cgroup v1: separate memory and pids hierarchies
    mem_root = root / "memory"
    own = _own_cgroup_v1("memory")
    if (mem_root / "memory.limit_in_bytes").exists() and own is not None:
        try:
            parent = mem_root / own.lstrip("/") / "bertcourse-grade"
            parent.mkdir(exist_ok=True)
            probe = parent / tag
            probe.mkdir()
            (probe / "memory.limit_in_bytes").write_text(str(1 << 30))
            probe.rmdir()
            pids_parent = None
            own_pids = _own_cgroup_v1("pids")
            if (root / "pids").is_dir() and own_pids is not None:
                p = root / "pids" / own_pids.lstrip("/") / "bertcourse-grade"
                try:
                    p.mkdir(exist_ok=True)
                    pids_parent = str(p)
                except OSError:
                    pids_parent = None
            return "v1", str(parent), pids_parent
        except OSError:
            pass
    return None, None, None


def detect(user: str = GRADER_USER, isolate: bool = True) -> Capabilities:
    """Probe what can be enforced here; creates the grading user when running as root."""
    root = os.geteuid() == 0
    if not (root and isolate):
        return Capabilities(False, False, None, None, None, None, None)
    uid, gid = ensure_grader_user(user)
    namespaces = _probe_namespaces()
    kind, mem, pids = _probe_cgroup()
    return Capabilities(True, namespaces, uid, gid, kind, mem, pids)


def release(caps: Capabilities) -> None:
    """Remove the (empty) parent cgroups this run created."""
    for parent in {caps.memory_cgroup, caps.pids_cgroup} - {None}:
        try:
            os.rmdir(parent)  # type: ignore[arg-type]
        except OSError:
            pass  # another grader on this machine still uses it


def _mount_tmpfs(path: str, size: int) -> bool:
    """Mount a tmpfs of `size` bytes on `path` (mode 0700); False where mounting is not allowed."""
    from bertcourse.grade.sandbox import MS_NODEV, MS_NOSUID, SandboxError, _mount

    try:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=700")
    except (SandboxError, OSError):
        return False
    return True


def _umount(path: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(path.encode(), 2)  # MNT_DETACH


# --- what a kernel's root file system holds ----------------------------------------------------

DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
LD_CACHE = "/etc/ld.so.cache"  # where the dynamic loader finds libraries by name
LOCALE = "/usr/lib/locale/C.utf8"  # the locale the kernel's environment names (glibc >= 2.35)
_SHARED_OBJECT = re.compile(r"^/.*\.so(\.[0-9]+)*$")


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    """`paths` without those inside another one, sorted."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(_inside(path, k) for k in kept):
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
        if not any(_inside(library, p) for p in python | hidden):  # never the course's own
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
    links = {k: v for k, v in links.items() if not any(_inside(k, p) for p in read_only)}
    inner = sorted(h for h in hidden if any(_inside(h, p) and h != p for p in read_only))
    return Layout(tuple(read_only), links, tuple(h for h in inner if os.path.isdir(h)))


def _kernel_env(home: str, extra_pythonpath: str) -> dict[str, str]:
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


# --- the zygote -------------------------------------------------------------------------------


class Zygote:
    """A process that has imported ipykernel, torch and bertcourse, and forks jailed kernels.

    One per grading worker (see `sandbox.serve`); about 2 s of CPU saved per kernel start.
    """

    def __init__(self, preload: list[str], start_timeout: float = 180.0) -> None:
        import bertcourse

        self.dir = tempfile.mkdtemp(prefix="bcz-")  # root only (0700): the socket
        self.socket = os.path.join(self.dir, "zygote.sock")
        self.log_path = os.path.join(self.dir, "zygote.log")
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(bertcourse.__file__)))
        env = _kernel_env("/", package_parent)
        # ipykernel.debugger: every kernel imports it (and debugpy) while starting, 0.2 s of CPU
        modules = ["ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger", "IPython"]
        modules += preload
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, SANDBOX_SCRIPT, "serve", self.socket, *dict.fromkeys(modules)],
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                close_fds=True,
            )
        ready = self._wait_ready(start_timeout)
        if not ready:
            self.close()
            raise RuntimeError(f"the kernel zygote did not start: {self.read_log()}")

    def _wait_ready(self, timeout: float) -> bool:
        import select

        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return bool(ready) and self.proc.stdout.readline().strip() == b"READY"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def read_log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# --- what a dead worker leaves -----------------------------------------------------------------

CGROUPS_FILE = "cgroups"  # in a kernel's private folder: the cgroups made for it, one a line


def _remove_cgroup(path: str) -> None:
    """Kill what is still in a kernel's cgroup, then remove it (a cgroup in use cannot go)."""
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    members = [int(pid) for pid in f.read().split()]
            except (OSError, ValueError):
                members = []
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)


def clean_after(scratch_dir: str) -> None:
    """Remove what the kernels of a grader worker that died left under its scratch folder (the
    `base_dir` of its `KernelJail`s): their cgroups (with any process still in them), the
    scratch tmpfs mounts, then the folders. What a kernel mounted inside its own mount
    namespace (its root file system) went away with its last process."""
    if not scratch_dir or not os.path.isdir(scratch_dir):
        return
    for record in Path(scratch_dir).glob(f"p-*/{CGROUPS_FILE}"):
        for group in reversed(record.read_text().split()):
            _remove_cgroup(group)
    try:
        from bertcourse.grade.sandbox import mount_points

        mounts = mount_points()
    except OSError:
        mounts = []
    for mount in sorted(mounts, key=len, reverse=True):
        if _inside(mount, scratch_dir):
            _umount(mount)
    shutil.rmtree(scratch_dir, ignore_errors=True)


# --- one kernel's jail ------------------------------------------------------------------------


@dataclasses.dataclass
class Limits:
    """Resource limits per kernel (per submission notebook)."""

    memory_bytes: int = 2 << 30
    max_processes: int = 256
    file_size_bytes: int = 256 << 20
    open_files: int = 1024
    scratch_bytes: int = 256 << 20  # the kernel's working folder, all files together


class KernelJail:
    """Scratch folder, spec, cgroups and watchdog for one kernel. Use as a context manager."""

    def __init__(
        self,
        caps: Capabilities,
        limits: Limits,
        base_dir: str,
        hide: list[str],
        workers: int,
    ) -> None:
        self.caps = caps
        self.limits = limits
        self.hide = hide
        self.workers = workers
        self.id = uuid.uuid4().hex[:12]
        # the scratch folder: the kernel's cwd and HOME, holding its connection file and sockets
        self.dir = os.path.join(base_dir, f"k-{self.id}")
        os.makedirs(self.dir, mode=0o700)
        # the whole folder is a size-limited tmpfs when this machine allows it (root): a kernel
        # cannot fill the host's disk with many files, each under the per-file limit
        self.scratch_mounted = caps.root and _mount_tmpfs(self.dir, limits.scratch_bytes)
        os.makedirs(os.path.join(self.dir, ".ipython"), mode=0o700)
        self.private_dir = os.path.join(base_dir, f"p-{self.id}")  # root-only: spec, logs
        os.makedirs(self.private_dir, mode=0o700)
        self.root_dir = os.path.join(self.private_dir, "root")
        if caps.uid is not None:
            for dirpath, _, _ in os.walk(self.dir):
                os.chown(dirpath, caps.uid, caps.gid)
        self.connection_file = os.path.join(self.dir, "kernel.json")
        self.log_path = os.path.join(self.private_dir, "kernel.log")
        self.pid_file = os.path.join(self.private_dir, "supervisor.pid")
        self.cgroups: list[str] = []
        self.memory_cgroup: str | None = None
        self._watchdog: threading.Thread | None = None
        self._stop = threading.Event()
        self.killed_for_memory = False
        self.oom = False  # the memory cgroup killed a process (read before it is removed)
        self.peak_memory = 0
        self.launcher_pid: int | None = None

    # cgroups ---------------------------------------------------------------------------------
    def _new_cgroup(self, parent: str) -> Path:
        """A cgroup for this kernel under `parent`, written down in the private folder first:
        if this worker dies, the parent process finds and removes it (`clean_after`)."""
        group = Path(parent) / f"k-{self.id}"
        with open(os.path.join(self.private_dir, CGROUPS_FILE), "a") as f:
            f.write(f"{group}\n")
        group.mkdir()
        self.cgroups.append(str(group))
        return group

    def _make_cgroups(self) -> list[str]:
        procs = []
        caps, lim = self.caps, self.limits
        try:
            if caps.cgroup == "v2" and caps.memory_cgroup:
                g = self._new_cgroup(caps.memory_cgroup)
                (g / "memory.max").write_text(str(lim.memory_bytes))
                try:
                    (g / "memory.swap.max").write_text("0")
                except OSError:
                    pass
                (g / "pids.max").write_text(str(lim.max_processes))
                self.memory_cgroup = str(g)
                procs.append(str(g / "cgroup.procs"))
            elif caps.cgroup == "v1" and caps.memory_cgroup:
                g = self._new_cgroup(caps.memory_cgroup)
                (g / "memory.limit_in_bytes").write_text(str(lim.memory_bytes))
                try:
                    (g / "memory.memsw.limit_in_bytes").write_text(str(lim.memory_bytes))
                except OSError:
                    pass
                self.memory_cgroup = str(g)
                procs.append(str(g / "cgroup.procs"))
                if caps.pids_cgroup:
                    p = self._new_cgroup(caps.pids_cgroup)
                    (p / "pids.max").write_text(str(lim.max_processes))
                    procs.append(str(p / "cgroup.procs"))
        except OSError:
            self._remove_cgroups()
            self.memory_cgroup = None
            return []
        return procs

    def _remove_cgroups(self) -> None:
        for g in reversed(self.cgroups):
            _remove_cgroup(g)
        self.cgroups = []

    def oom_killed(self) -> bool:
        """Did the memory cgroup kill a process of this kernel?"""
        if not self.memory_cgroup:
            return False
        g = Path(self.memory_cgroup)
        try:
            if self.caps.cgroup == "v2":
                text = (g / "memory.events").read_text()
            else:
                text = (g / "memory.oom_control").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key in ("oom_kill", "oom_group_kill") and int(value or 0) > 0:
                return True
        return False

    def _cgroup_peak(self) -> int:
        if not self.memory_cgroup:
            return 0
        g = Path(self.memory_cgroup)
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            try:
                return int((g / name).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return 0

    # the spec --------------------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        caps, lim = self.caps, self.limits
        import bertcourse

        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(bertcourse.__file__)))
        spec: dict[str, Any] = {
            "cwd": self.dir,
            "env": _kernel_env(self.dir, package_parent),
            "rlimits": {
                "DATA": lim.memory_bytes,
                "FSIZE": lim.file_size_bytes,
                "NOFILE": lim.open_files,
                "CORE": 0,
                # one uid for all kernels: the per-kernel cap is the pids cgroup when there is one
                "NPROC": lim.max_processes * max(1, self.workers) + 64,
            },
            "uid": caps.uid,
            "gid": caps.gid,
            "namespaces": caps.namespaces,
        }
        if caps.namespaces:
            jail = layout(self.hide)
            # no /etc/passwd in the jail: getpass.getuser() reads these first
            user = pwd.getpwuid(caps.uid).pw_name if caps.uid is not None else "nobody"
            spec["env"].update({"USER": user, "LOGNAME": user})
            os.makedirs(self.root_dir, mode=0o700, exist_ok=True)  # the new root's mount point
            spec.update(
                {
                    "root": self.root_dir,
                    "read_only": list(jail.read_only),
                    "read_write": [self.dir],
                    "links": jail.links,
                    "hide": list(jail.hide),
                    "devices": list(DEVICES),
                    "tmp_size": "256m",
                }
            )
        return spec

    def command(self, kernel_cmd: list[str], zygote: Zygote | None = None) -> list[str]:
        """The launcher command that runs `kernel_cmd` in the jail (writes the spec file).

        `kernel_cmd` is `python -m ipykernel_launcher ARGS...`; with a zygote only ARGS are used.
        """
        spec = self.spec()
        procs = self._make_cgroups() if self.caps.root else []
        spec["cgroup_procs"] = procs
        spec["pid_file"] = self.pid_file
        spec_path = os.path.join(self.private_dir, "spec.json")
        with open(os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump(spec, f)
        if zygote is not None and zygote.alive():
            args = kernel_cmd[3:]  # after `python -m ipykernel_launcher`
            return [
                sys.executable,
                "-I",
                "-S",
                SANDBOX_SCRIPT,
                "client",
                zygote.socket,
                spec_path,
                "--",
                *args,
            ]
        return [sys.executable, "-I", SANDBOX_SCRIPT, "exec", spec_path, "--", *kernel_cmd]

    # watchdog --------------------------------------------------------------------------------
    def start_watchdog(self) -> None:
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    def _tree(self) -> list[int]:
        if self.launcher_pid is None:
            try:
                with open(self.pid_file) as f:
                    self.launcher_pid = int(f.read())
            except (OSError, ValueError):
                return []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.launcher_pid]
        while todo:
            pid = todo.pop()
            for kid in children.get(pid, []):
                out.append(kid)
                todo.append(kid)
        return out

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return 0

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            if self.memory_cgroup:
                self.peak_memory = max(self.peak_memory, self._cgroup_peak())
                continue  # the cgroup enforces the limit itself
            tree = self._tree()
            rss = sum(self._rss(p) for p in tree)
            self.peak_memory = max(self.peak_memory, rss)
            if rss > self.limits.memory_bytes:
                self.killed_for_memory = True
                self.kill_tree(tree)

    def kill_tree(self, tree: list[int] | None = None) -> None:
        """SIGKILL every process below the supervisor (the kernel and its children)."""
        for pid in tree if tree is not None else self._tree():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=2)
        self.peak_memory = max(self.peak_memory, self._cgroup_peak())
        self.kill_tree()  # anything that survived the kernel's shutdown
        self.oom = self.oom_killed()
        self._remove_cgroups()
        if self.scratch_mounted:
            _umount(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.private_dir, ignore_errors=True)

    def read_log(self, limit: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-limit:]
        except OSError:
            return ""
