"""The jail a student's kernel runs in, and the launcher that builds it.

The grader starts every kernel through this file, run as a script (not as
`python -m bertcourse.grade.sandbox`: that would import bertcourse, and with it torch, in the
launcher too):

    python -I .../bertcourse/grade/sandbox.py SPEC.json -- python -m ipykernel_launcher -f kernel.json

`SPEC.json` (written by the grader, readable by root only) says what the jail looks like. As
root the launcher

1. enters new mount, network and PID namespaces (`unshare(2)`): no network at all, and the
   kernel sees only its own processes, so it cannot signal, trace or read other kernels;
2. forks; the parent stays outside as a small supervisor (it forwards interrupts, waits, and
   reports the exit status); the child becomes PID 1 of the new namespace, so when it dies
   the Linux kernel kills every process it left behind (threads, forks, daemons);
3. the parent puts the child into fresh cgroups (memory limit, process limit) when the
   machine offers them;
4. the child hides the course: private empty `tmpfs` over `/tmp`, `/var/tmp`, `/dev/shm`, the
   course root, the gradebook's folder and every other path listed in `hide`, then binds back,
   read-only, only what Python needs (its prefix, site-packages, the bertcourse package) and,
   read-write, the kernel's own scratch folder; it mounts a `/proc` of the new namespace;
5. sets resource limits (RLIMIT_DATA, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE, no core
   dumps), drops to the unprivileged grading user (no supplementary groups, no new
   privileges, killed if the supervisor dies) and `exec`s the kernel with a clean environment.

Without root none of the namespaces, mounts, cgroups or the user switch are available: the
launcher then only sets the resource limits, the clean environment and the scratch folder,
and acts as a child subreaper so that it can kill every process the kernel left behind. The
instructors' guide (book/instructors.md) spells out what this weaker mode does not cover.

This file imports only the standard library: it runs before anything else in the jail.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

_RLIMITS = {
    "DATA": resource.RLIMIT_DATA,
    "NPROC": resource.RLIMIT_NPROC,
    "FSIZE": resource.RLIMIT_FSIZE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "CORE": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(RuntimeError):
    """The jail could not be built (the kernel is not started)."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source or fstype} on {target}",
    )


def _prctl(option: int, value: int) -> None:
    _check(
        _libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), 0),
        f"prctl({option})",
    )


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _build_filesystem(spec: dict[str, Any]) -> None:
    """Runs as root in the child, inside the new mount namespace (see the module docstring)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Open every path to bind back before anything is hidden: after the tmpfs mounts the
    # originals can no longer be reached by name, but an open O_PATH descriptor still works.
    binds = []
    for path, writable in [(p, False) for p in spec.get("expose_ro", [])] + [
        (p, True) for p in spec.get("expose_rw", [])
    ]:
        if os.path.exists(path):
            fd = os.open(path, os.O_PATH | (os.O_DIRECTORY if os.path.isdir(path) else 0))
            binds.append((path, fd, writable, os.path.isdir(path)))
    tmp_size = spec.get("tmp_size", "256m")
    for path in spec.get("private_tmp", []):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    hidden = sorted({os.path.realpath(p) for p in spec.get("hide", [])}, key=len)
    done: list[str] = []
    for path in hidden:
        if not os.path.isdir(path) or any(_inside(path, d) for d in done):
            continue
        if any(_inside(path, t) for t in spec.get("private_tmp", [])):
            continue  # already replaced by an empty tmpfs
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
        done.append(path)
    for path, fd, writable, is_dir in binds:
        if is_dir:
            os.makedirs(path, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            if not os.path.exists(path):
                with open(path, "w"):
                    pass
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        if not writable:
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
        os.close(fd)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)


def _set_limits(spec: dict[str, Any], as_root: bool) -> None:
    for name, value in spec.get("rlimits", {}).items():
        if value is None or (name == "NPROC" and not as_root):
            continue  # without a dedicated user, NPROC would count the instructor's processes
        resource.setrlimit(_RLIMITS[name], (int(value), int(value)))


def _drop_privileges(spec: dict[str, Any]) -> None:
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is None:
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SandboxError(f"could not switch to uid {uid}")


def _child(spec: dict[str, Any], cmd: list[str], ready_fd: int | None) -> None:
    """The process that becomes the kernel. Never returns."""
    try:
        if ready_fd is not None:  # wait until the supervisor has put us into the cgroups
            os.read(ready_fd, 1)
            os.close(ready_fd)
        as_root = os.geteuid() == 0 and spec.get("uid") is not None
        if spec.get("namespaces"):
            _build_filesystem(spec)
        _set_limits(spec, as_root)
        _drop_privileges(spec)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
        os.umask(0o077)
        os.chdir(spec["cwd"])
        os.execve(cmd[0], cmd, spec["env"])
    except BaseException as error:  # report, then die: the grader sees a dead kernel
        sys.stderr.write(f"bertcourse.grade.sandbox: {error}\n")
        sys.stderr.flush()
        os._exit(71)


def _children_of(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry))
    return kids


def _reap_orphans() -> None:
    """Kill and reap every process re-parented to this subreaper (the no-namespace mode)."""
    me = os.getpid()
    for _ in range(50):
        kids = _children_of(me)
        if not kids:
            return
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.02)


def launch(spec: dict[str, Any], cmd: list[str]) -> int:
    """Build the jail and run `cmd` in it; returns the exit status for the supervisor."""
    use_ns = bool(spec.get("namespaces"))
    if use_ns:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    else:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    cgroup_procs = spec.get("cgroup_procs", [])
    ready_r, ready_w = os.pipe() if cgroup_procs else (None, None)
    pid = os.fork()
    if pid == 0:
        if ready_w is not None:
            os.close(ready_w)
        _child(spec, cmd, ready_r)
    if ready_r is not None:
        os.close(ready_r)
    for procs in cgroup_procs:
        try:
            with open(procs, "w") as f:
                f.write(str(pid))
        except OSError as error:
            sys.stderr.write(f"bertcourse.grade.sandbox: cannot join {procs}: {error}\n")
    if ready_w is not None:
        os.write(ready_w, b"1")
        os.close(ready_w)

    def forward(signum: int, _frame: Any) -> None:
        # PID 1 of a namespace ignores signals it has no handler for, so anything but an
        # interrupt becomes SIGKILL: the grader only ever interrupts or ends a kernel.
        try:
            os.kill(pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGKILL)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = 0
            break
    if not use_ns:
        _reap_orphans()
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: python -I sandbox.py SPEC.json -- COMMAND...\n")
        return 64
    with open(argv[0]) as f:
        spec = json.load(f)
    try:
        os.unlink(argv[0])  # the spec names hidden paths: nobody else needs to read it
    except OSError:
        pass
    return launch(spec, argv[2:])


if __name__ == "__main__":
    sys.exit(main())
