"""What this machine lets the grader enforce: root, namespaces, cgroups, the grading user.

`detect()` probes once per run (root, namespaces, cgroup v2 or v1 memory and pids
controllers) and returns `Capabilities`, which `kernel.KernelJail` turns into the spec that the
launcher (`launcher.py`) builds each kernel's jail from. Measured on the development machine
(2 cores, Debian 12, kernel 6.18, root, cgroup v1 memory + pids): all of it available.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path

GRADER_USER = "bertcourse-grader"


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
        parts.append(
            "namespaces (mount, network, pid, ipc, uts)" if self.namespaces else "NO namespaces"
        )
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
    """Can this process unshare the namespaces the launcher enters (mount, network, PID, IPC,
    UTS)? (tried in a child)"""
    from bertcourse.grade.jail.launcher import NAMESPACES

    pid = os.fork()
    if pid == 0:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            os._exit(0 if libc.unshare(NAMESPACES) == 0 else 1)
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


def mount_tmpfs(path: str, size: int) -> bool:
    """Mount a tmpfs of `size` bytes on `path` (mode 0700); False where mounting is not allowed."""
    from bertcourse.grade.jail.launcher import MS_NODEV, MS_NOSUID, SandboxError, _mount

    try:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=700")
    except (SandboxError, OSError):
        return False
    return True


def umount(path: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(path.encode(), 2)  # MNT_DETACH
