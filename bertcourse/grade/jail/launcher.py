"""The jail a student's kernel runs in, and the launcher that builds it.

The grader starts every kernel through this file, run as a script (not as
`python -m bertcourse.grade.jail.launcher`: that would import bertcourse, and with it torch, in the
launcher too), either by exec:

    python -I .../bertcourse/grade/jail/launcher.py exec SPEC.json -- python -m ipykernel_launcher -f kernel.json

or, faster, by asking a zygote that has already imported ipykernel and torch to fork one
(`serve` and `client` below). The jail is the same.

`SPEC.json` (written by the grader, readable by root only) says what the jail looks like. As
root the launcher

1. enters new mount, network, PID, IPC and UTS namespaces (`unshare(2)`): no network at all,
   the kernel sees only its own processes, so it cannot signal, trace or read other kernels,
   and System V IPC objects and POSIX message queues are its own and go with it (a segment one
   student leaves is not there for the next); the kernel also gets a cgroup namespace rooted
   at its own cgroup;
2. forks; the parent stays outside as a small supervisor (it forwards interrupts, waits, and
   reports the exit status); the child becomes PID 1 of the new namespace, so when it dies
   the Linux kernel kills every process it left behind (threads, forks, daemons);
3. the parent puts the child into fresh cgroups (memory limit, process limit) when the
   machine offers them;
4. the child builds the kernel's root file system from an allow-list, not from the host: a
   new empty `tmpfs` root holding only the spec's `read_only` paths (Python's prefixes and
   site-packages, the bertcourse package, the shared libraries they load and the loader's
   cache; bound read-only under their own names, with the symbolic links on the way to
   them), the kernel's scratch folder (read-write), its own empty `/tmp` and `/dev/shm`,
   `/dev/null`, `/dev/zero`, `/dev/random`, `/dev/urandom` and a `/proc` of the new PID
   namespace; it switches to that root (`pivot_root`) and detaches the old one. Any other
   path of the host, a socket file included, does not exist in the jail (`hide` still
   covers folders that lie inside an allowed one);
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
import errno
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import sys
import time
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWCGROUP = 0x02000000
# what the supervisor unshares before it forks the kernel: its own mounts, no network, its own
# processes, its own System V IPC and POSIX message queues (they go with the namespace, that is
# with the kernel's last process), its own host name
NAMESPACES = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
HOSTNAME = b"bertcourse-kernel"
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
MNT_DETACH = 2
# pivot_root(2) has no libc wrapper: its system call number, by machine
_PIVOT_ROOT = {
    "x86_64": 155,
    "aarch64": 41,
    "arm64": 41,
    "riscv64": 41,
    "ppc64le": 203,
    "s390x": 217,
}

_RLIMITS = {
    "DATA": resource.RLIMIT_DATA,
    "NPROC": resource.RLIMIT_NPROC,
    "FSIZE": resource.RLIMIT_FSIZE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "CORE": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)
_HERE = os.path.dirname(os.path.abspath(__file__))


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


def _bind(source: str, target: str, writable: bool) -> None:
    """Bind `source` (a folder or a file of the host) on `target`, read-only unless `writable`."""
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID
    if not writable:
        flags |= MS_RDONLY | MS_NODEV
    _mount(None, target, None, flags)


def mount_points(mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points of this mount namespace, as paths: the kernel escapes a space, tab,
    newline and backslash in `mountinfo` as octal (`\\040`), which a path with a space (a
    course folder named "bert course") would otherwise keep."""
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
        return [_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in f]


_OCTAL = re.compile(r"\\([0-7]{3})")


def _read_only_below(root: str, folders: list[str], writable: list[str]) -> None:
    """Remount read-only every mount that a recursive bind brought in below `folders` (a bind
    remount covers one mount, not the ones inside it)."""
    for point in mount_points():
        if point in writable:
            continue
        if any(point != root + p and _inside(point, root + p) for p in folders):
            _mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _pivot(root: str) -> None:
    """Make `root` the filesystem root and detach the old one (nothing of it stays reachable)."""
    os.chdir(root)
    number = _PIVOT_ROOT.get(platform.machine())
    if number is not None and _libc.syscall(number, b".", b".") == 0:
        _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")
    else:  # pivot_root refused (a root file system it cannot leave, or an unknown machine)
        _mount(root, "/", None, MS_MOVE)
        _check(_libc.chroot(b"."), "chroot")
    os.chdir("/")


def _build_filesystem(spec: dict[str, Any]) -> None:
    """The kernel's root file system: a new tmpfs holding the allow-list and nothing else.

    Runs as root in the child, inside the new mount namespace, before the switch to the
    grading user (see the module docstring). Every path keeps its host name, so the kernel's
    imports, its connection file and its sockets are where the grader expects them.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = spec["root"]
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    tmp_size = spec.get("tmp_size", "256m")
    for path in ("/tmp", "/dev/shm"):  # its own, empty
        os.makedirs(root + path, mode=0o755)
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    for device in spec["devices"]:
        _bind(device, root + device, writable=True)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    read_only, writable = spec["read_only"], spec["read_write"]
    for path in sorted(read_only + writable):  # a folder comes before the folders inside it
        _bind(path, root + path, writable=path in writable)
    _read_only_below(root, read_only, [root + p for p in writable])
    for path in spec.get("hide", []):  # inside an allowed folder, and still not for the kernel
        _mount("tmpfs", root + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k")
    for link, target in sorted(spec.get("links", {}).items()):
        os.makedirs(os.path.dirname(root + link), mode=0o755, exist_ok=True)
        os.symlink(target, root + link)
    os.makedirs(root + "/proc", mode=0o555)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _pivot(root)
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


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


def _enter_jail(spec: dict[str, Any], ready_fd: int | None) -> None:
    """In the child: wait for the cgroups, build the jail, drop privileges (see the docstring)."""
    if ready_fd is not None:  # wait until the supervisor has put us into the cgroups
        os.read(ready_fd, 1)
        os.close(ready_fd)
    as_root = os.geteuid() == 0 and spec.get("uid") is not None
    if spec.get("namespaces"):
        # in its cgroups now: a cgroup namespace rooted there hides the host's cgroup paths
        # (a kernel older than Linux 4.6 has none: the jail holds without it)
        if _libc.unshare(CLONE_NEWCGROUP) != 0 and ctypes.get_errno() != errno.EINVAL:
            _check(-1, "unshare the cgroup namespace")
        _build_filesystem(spec)
    _set_limits(spec, as_root)
    _drop_privileges(spec)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
    os.umask(0o077)
    os.chdir(spec["cwd"])


def _child(spec: dict[str, Any], cmd: list[str], ready_fd: int | None) -> None:
    """The process that becomes the kernel (exec mode). Never returns."""
    try:
        _enter_jail(spec, ready_fd)
        os.execve(cmd[0], cmd, spec["env"])
    except BaseException as error:  # report, then die: the grader sees a dead kernel
        sys.stderr.write(f"bertcourse.grade.jail.launcher: {error}\n")
        sys.stderr.flush()
        os._exit(71)


def _kernel_in_process(spec: dict[str, Any], argv: list[str], ready_fd: int | None) -> None:
    """The process that becomes the kernel (zygote mode): ipykernel, already imported. Never
    returns."""
    try:
        _enter_jail(spec, ready_fd)
        os.closerange(3, 65536)  # nothing of the zygote's or the supervisor's stays open
        os.environ.clear()
        os.environ.update(spec["env"])
        import tempfile

        tempfile.tempdir = None  # recomputed from the kernel's TMPDIR
        sys.argv = ["ipykernel_launcher", *argv]
        sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        os._exit(0)
    except SystemExit as done:
        os._exit(done.code if isinstance(done.code, int) else 0)
    except BaseException as error:
        sys.stderr.write(f"bertcourse.grade.jail.launcher: {error}\n")
        sys.stderr.flush()
        os._exit(71)


def children_by_parent() -> dict[int, list[int]]:
    """Every process of this PID namespace, by its parent's pid (read from /proc)."""
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
    return children


def _children_of(pid: int) -> list[int]:
    return children_by_parent().get(pid, [])


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


def _start(spec: dict[str, Any], run_child: Any) -> int:
    """unshare, fork, put the child in the cgroups; returns the child's pid (in the parent)."""
    if spec.get("pid_file"):  # the grader's watchdog finds the kernel's process tree from here
        with open(spec["pid_file"], "w") as f:
            f.write(str(os.getpid()))
    if spec.get("namespaces"):
        _check(_libc.unshare(NAMESPACES), "unshare")
        _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
    else:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    cgroup_procs = spec.get("cgroup_procs", [])
    ready_r, ready_w = os.pipe() if cgroup_procs else (None, None)
    pid = os.fork()
    if pid == 0:
        if ready_w is not None:
            os.close(ready_w)
        run_child(ready_r)
    if ready_r is not None:
        os.close(ready_r)
    for procs in cgroup_procs:
        try:
            with open(procs, "w") as f:
                f.write(str(pid))
        except OSError as error:
            sys.stderr.write(f"bertcourse.grade.jail.launcher: cannot join {procs}: {error}\n")
    if ready_w is not None:
        os.write(ready_w, b"1")
        os.close(ready_w)
    return pid


def _exit_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _signal(pid: int, interrupt: bool) -> None:
    # PID 1 of a namespace ignores signals it has no handler for, so anything but an
    # interrupt becomes SIGKILL: the grader only ever interrupts or ends a kernel.
    try:
        os.kill(pid, signal.SIGINT if interrupt else signal.SIGKILL)
    except OSError:
        pass


def launch(spec: dict[str, Any], cmd: list[str]) -> int:
    """Exec mode: build the jail and run `cmd` in it; returns the exit status."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the grader's worker died: so do we
    pid = _start(spec, lambda ready: _child(spec, cmd, ready))

    def forward(signum: int, _frame: Any) -> None:
        _signal(pid, signum == signal.SIGINT)

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
    if not spec.get("namespaces"):
        _reap_orphans()
    return _exit_status(status)


# --- zygote mode ------------------------------------------------------------------------------
#
# Starting a kernel costs a Python start, `import ipykernel` and `import torch, bertcourse`
# (about 2 s of CPU). A zygote, one per grading worker, imports all that once (as root, with the
# kernels' clean environment, having opened nothing but its socket) and forks a supervisor per
# kernel; the supervisor builds the same jail as the exec mode and forks the kernel, which
# starts ipykernel in-process. The kernel manager runs a tiny client instead of the kernel:
# the client hands its stdout/stderr to the zygote, forwards interrupts, and its death (the
# kernel manager kills it at shutdown) makes the supervisor kill the kernel.


def _supervise(conn: socket.socket) -> None:
    """One kernel, in a child of the zygote. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the zygote's `leave` is not ours
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        request = json.loads(data.decode())
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        with open(request["spec"]) as f:
            spec = json.load(f)
        os.unlink(request["spec"])
        pid = _start(spec, lambda ready: _kernel_in_process(spec, request["argv"], ready))
        conn.sendall(f"PID {pid}\n".encode())
        conn.setblocking(False)
        status = None
        while status is None:
            ready, _, _ = select.select([conn], [], [], 0.2)
            if ready:
                try:
                    message = conn.recv(64)
                except BlockingIOError:
                    message = b"x"
                if not message:  # the client is gone: the kernel goes too
                    _signal(pid, interrupt=False)
                elif b"INT" in message:
                    _signal(pid, interrupt=True)
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = _exit_status(raw)
        if not spec.get("namespaces"):
            _reap_orphans()
        try:
            conn.setblocking(True)
            conn.sendall(f"EXIT {status}\n".encode())
        except OSError:
            pass
        os._exit(0)
    except BaseException as error:
        sys.stderr.write(f"bertcourse.grade.jail.launcher supervisor: {error}\n")
        os._exit(70)


def serve(socket_path: str, preload: list[str]) -> int:
    """Zygote mode: import `preload`, then fork a supervisor per connection on `socket_path`."""

    def leave(_signum: int, _frame: Any) -> None:  # the grader's worker died: so do we, and
        shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)  # our folder with us
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # it died before the line above
        leave(signal.SIGTERM, None)
    sys.path[:] = [p for p in sys.path if p != _HERE]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in preload:
            try:
                __import__(name)
            except Exception as error:  # the kernel will report it when it imports it
                sys.stderr.write(f"bertcourse.grade.jail.launcher: preload {name}: {error}\n")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path)
    os.chmod(socket_path, 0o600)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped automatically
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            _supervise(conn)
        conn.close()


def client(socket_path: str, spec_path: str, argv: list[str]) -> int:
    """What the kernel manager runs in zygote mode (see above); returns the kernel's status."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    request = json.dumps({"spec": spec_path, "argv": argv}).encode()
    socket.send_fds(conn, [request], [0, 1, 2])

    def interrupt(_signum: int, _frame: Any) -> None:
        try:
            conn.sendall(b"INT\n")
        except OSError:
            pass

    def leave(_signum: int, _frame: Any) -> None:
        os._exit(1)  # closing the socket makes the supervisor kill the kernel

    signal.signal(signal.SIGINT, interrupt)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, leave)
    buffer = b""
    while True:
        try:
            chunk = conn.recv(256)
        except InterruptedError:
            continue
        if not chunk:
            return 70
        buffer += chunk
        for line in buffer.split(b"\n"):
            if line.startswith(b"EXIT "):
                return int(line.split()[1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mode = argv[0] if argv else ""
    if mode == "serve" and len(argv) >= 2:
        return serve(argv[1], argv[2:])
    if mode == "client" and len(argv) >= 4 and argv[3] == "--":
        return client(argv[1], argv[2], argv[4:])
    if mode == "exec" and len(argv) >= 4 and argv[2] == "--":
        with open(argv[1]) as f:
            spec = json.load(f)
        try:
            os.unlink(argv[1])  # the spec names hidden paths: nobody else needs to read it
        except OSError:
            pass
        return launch(spec, argv[3:])
    sys.stderr.write(
        "usage: python -I launcher.py exec SPEC.json -- COMMAND...\n"
        "       python launcher.py serve SOCKET [MODULE...]\n"
        "       python -I -S launcher.py client SOCKET SPEC.json -- KERNEL-ARGS...\n"
    )
    return 64


if __name__ == "__main__":
    sys.exit(main())
