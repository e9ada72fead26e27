"""One kernel's jail on the host side: scratch folder, spec, cgroups, watchdog; and the
clean-up of what the kernels of a worker that died left behind.

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
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bertcourse.grade.jail.host import Capabilities, mount_tmpfs, umount
from bertcourse.grade.jail.launcher import children_by_parent, mount_points
from bertcourse.grade.jail.rootfs import DEVICES, inside, kernel_env, layout
from bertcourse.grade.jail.zygote import LAUNCHER, Zygote

_PAGE = os.sysconf("SC_PAGE_SIZE")


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
        mounts = mount_points()
    except OSError:
        mounts = []
    for mount in sorted(mounts, key=len, reverse=True):
        if inside(mount, scratch_dir):
            umount(mount)
    shutil.rmtree(scratch_dir, ignore_errors=True)


def _children(pid: int, tid: int | None = None) -> list[int]:
    """The child processes of one thread of `pid` (of its main thread by default), from
    /proc's `children` file; from a scan of /proc where the kernel has no such file."""
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/children") as f:
            return [int(kid) for kid in f.read().split()]
    except FileNotFoundError:
        if tid not in (None, pid) or not os.path.exists(f"/proc/{pid}"):
            return []
        return children_by_parent().get(pid, [])
    except (OSError, ValueError):
        return []


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
        self.scratch_mounted = caps.root and mount_tmpfs(self.dir, limits.scratch_bytes)
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
        self._kernel_pid: int | None = None

    # cgroups ---------------------------------------------------------------------------------
    def _new_cgroup(self, parent: str) -> Path:
        """A cgroup for this kernel under `parent`, written down in the private folder first:
        if this worker dies, the parent process finds and removes it (`clean_after`)."""
        group = Path(parent) / f"k-{self.id}"
        with open(os.path.join(self.private_dir, CGROUPS_FILE), "a") as f:
            f.write(f"{group}\n")
        for attempt in range(3):
            try:
                # the parent is shared: another grader's `release` removes it when it is empty
                os.makedirs(parent, exist_ok=True)
                group.mkdir()
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
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
            "env": kernel_env(self.dir, package_parent),
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
                LAUNCHER,
                "client",
                zygote.socket,
                spec_path,
                "--",
                *args,
            ]
        return [sys.executable, "-I", LAUNCHER, "exec", spec_path, "--", *kernel_cmd]

    # watchdog --------------------------------------------------------------------------------
    def start_watchdog(self) -> None:
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    def _supervisor(self) -> int | None:
        if self.launcher_pid is None:
            try:
                with open(self.pid_file) as f:
                    self.launcher_pid = int(f.read())
            except (OSError, ValueError):
                return None
        return self.launcher_pid

    def _tree(self) -> list[int]:
        if self._supervisor() is None:
            return []
        children = children_by_parent()
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

    # what runs in the jail, read from the host ---------------------------------------------
    def kernel_pid(self) -> int | None:
        """The kernel's process (the supervisor's only child), as the host numbers it."""
        if self._kernel_pid is None:
            supervisor = self._supervisor()
            kids = _children(supervisor) if supervisor is not None else []
            self._kernel_pid = kids[0] if len(kids) == 1 else None
        return self._kernel_pid

    def threads(self) -> frozenset[int]:
        """The kernel's threads now (empty when it is gone)."""
        pid = self.kernel_pid()
        try:
            return (
                frozenset(int(t) for t in os.listdir(f"/proc/{pid}/task")) if pid else frozenset()
            )
        except OSError:
            return frozenset()

    def beside_kernel(self) -> str:
        """What runs in the jail besides the kernel's process, in words; "" when nothing does.
        Read from the host's /proc: nothing in the kernel can hide it or rewrite it.

        Threads are not counted: the kernel starts native threads of its own while it runs (a
        flood of output made ipykernel 7 start three), which the host cannot tell from a
        learner's; starting a thread is for the static rules (`rules.py`)."""
        pid = self.kernel_pid()
        if pid is None:
            return ""
        processes = [kid for tid in self.threads() for kid in _children(pid, tid)]
        supervisor = self._supervisor()
        if supervisor is not None:  # without a PID namespace an orphan goes to the supervisor
            processes += [kid for kid in _children(supervisor) if kid != pid]
        return f"{len(processes)} other process(es)" if processes else ""

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
            umount(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.private_dir, ignore_errors=True)

    def read_log(self, limit: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-limit:]
        except OSError:
            return ""
