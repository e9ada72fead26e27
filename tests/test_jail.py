"""The kernel's jail is an allow-list: what a kernel can see is a list, not the host minus one.

A real kernel, started as the grader starts it (through the launcher, by exec and through
the zygote), lists its own root file system and mounts; the test compares them with an
allow-list computed here from this Python (its prefixes, the bertcourse package, the folders
of the shared libraries it has loaded, the dynamic loader's cache) plus the jail's own `/tmp`,
`/dev/shm`, four devices, `/proc` and the scratch folder. A Unix socket, an abstract socket
and a file that a test creates outside the course, readable by everyone, are not there for
the kernel. A grader worker killed mid-kernel leaves nothing once its parent has cleaned up.
The full grading pipeline under the same attack is in test_grade_hostile.py (`local_service`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hostile.bank import Listener

import bertcourse
from bertcourse.grade.jail import (
    CGROUPS_FILE,
    DEVICES,
    Capabilities,
    KernelJail,
    Limits,
    Zygote,
    clean_after,
    detect,
    launcher,
    release,
    rootfs,
)

ROOT = os.geteuid() == 0
linux = pytest.mark.skipif(sys.platform != "linux", reason="the grading jail is Linux-only")
needs_root = pytest.mark.skipif(
    not ROOT, reason="namespaces, mounts and cgroups need root (without it: see no_root_mode)"
)
DEV = {"null", "zero", "random", "urandom", "shm", "fd", "stdin", "stdout", "stderr"}


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _expected_read_only() -> set[str]:
    """The allow-list, from this Python: prefixes, the package, shared libraries' folders."""
    paths = sysconfig.get_paths()
    python = {
        os.path.realpath(p)
        for p in (
            *([sys.prefix] if sys.prefix != sys.base_prefix else []),  # a virtual environment
            *(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
            *site.getsitepackages(),
            os.path.dirname(bertcourse.__file__),
        )
        if os.path.isdir(p)
    }
    folders = set(python)
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.startswith("/") and ".so" in path:
                if not any(_inside(path, p) for p in python):
                    folders.add(os.path.dirname(path))
    # the interpreter itself (a file), the loader's cache, and the locale the kernel's LANG names
    folders.add(os.path.realpath(sys.executable))
    folders |= {p for p in ("/etc/ld.so.cache", "/usr/lib/locale/C.utf8") if os.path.exists(p)}
    return {p for p in folders if not any(p != q and _inside(p, q) for q in folders)}


PROBE = """
import json, os, socket
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return type(error).__name__
out = {"root": listing("/"), "dev": listing("/dev"), "etc": listing("/etc"), "tmp": listing("/tmp")}
from bertcourse.grade.jail.launcher import mount_points
out["mounts"] = sorted(mount_points())
out["exists"] = {p: os.path.lexists(p) for p in PATHS}
out["reached"] = {}
for name, address in (("socket", SOCKET), ("abstract", "\\0" + ABSTRACT)):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(address)
            out["reached"][name] = s.recv(64).decode()
    except OSError as error:
        out["reached"][name] = type(error).__name__
try:
    out["reached"]["file"] = open(FILE).read()
except OSError as error:
    out["reached"]["file"] = type(error).__name__
print("PROBE" + json.dumps(out))
"""
# host paths a kernel must not find (the course's sockets and files live in places like these)
ABSENT = [
    "/run",
    "/var",
    "/home",
    "/srv",
    "/mnt",
    "/sys",
    "/etc/passwd",
    "/usr/bin/sh",
    "/bin/sh",
    "/usr/share",
]


def _probe_code(listener: Listener, extra: list[str]) -> str:
    values = {
        "PATHS": [*ABSENT, listener.dir, *extra],
        "SOCKET": listener.socket_path,
        "ABSTRACT": listener.abstract,
        "FILE": listener.file_path,
    }
    return "".join(f"{k} = {v!r}\n" for k, v in values.items()) + PROBE


async def _in_kernel(jail: KernelJail, zygote, code: str) -> str:
    """Start a kernel as the grader does (execute.JailedKernelManager), run `code`, its stdout."""
    from bertcourse.grade.boundary.execute import JailedKernelManager

    km = JailedKernelManager(kernel_name="python3", transport="ipc")
    km.connection_file = jail.connection_file
    km.jail, km.zygote = jail, zygote
    with open(jail.log_path, "ab") as log:
        await km.start_kernel(stdout=log, stderr=log, cwd=jail.dir)
    kc = km.client()
    kc.start_channels()
    out: list[str] = []
    try:
        await kc.wait_for_ready(timeout=120)

        def hook(msg) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        await kc.execute_interactive(code, output_hook=hook, timeout=120)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    return "".join(out)


def _probe(caps: Capabilities, listener: Listener, zygote) -> dict:
    base = tempfile.mkdtemp(prefix="bcg-test-")
    os.chmod(base, 0o711)
    course = tempfile.mkdtemp(prefix="course-", dir=base)  # beside the scratch, like a course
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), base, [course], 1)
    try:
        text = asyncio.run(_in_kernel(jail, zygote, _probe_code(listener, [course])))
        assert "PROBE" in text, text + jail.read_log()
        result = json.loads(text.split("PROBE", 1)[1].splitlines()[0])
        result["scratch"], result["course"] = jail.dir, course
        return result
    finally:
        jail.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def probes() -> dict:
    """What a kernel sees, started by exec and through a zygote (one kernel each)."""
    caps = detect()
    listener = Listener()
    zygote = Zygote([])
    try:
        assert listener.reachable_from_here()
        control = listener.connections
        seen = {"exec": _probe(caps, listener, None), "zygote": _probe(caps, listener, zygote)}
        seen["connections"] = listener.connections - control
        return seen
    finally:
        zygote.close()
        listener.close()
        release(caps)


def _top(path: str) -> str:
    return Path(path).parts[1]


@linux
@needs_root
@pytest.mark.parametrize("mode", ["exec", "zygote"])
def test_a_kernel_sees_exactly_the_allow_list(probes: dict, mode: str) -> None:
    seen = probes[mode]
    read_only = _expected_read_only()
    own = {"/", "/proc", "/tmp", "/dev/shm", *DEVICES, seen["scratch"]}
    assert set(seen["mounts"]) == read_only | own
    links = {"lib", "lib64", "bin", "sbin"} & set(seen["root"])  # merged /usr: links to usr/...
    assert all(os.path.islink(f"/{name}") for name in links)
    assert set(seen["root"]) == {_top(p) for p in read_only | own - {"/"}} | links
    assert set(seen["dev"]) == DEV
    assert seen["etc"] == (
        ["ld.so.cache"] if "/etc/ld.so.cache" in read_only else "FileNotFoundError"
    )
    # the kernel's own /tmp holds only the way to what is allowed below it (the scratch folder,
    # and the virtual environment when the course lives under /tmp, as CI's clone does)
    assert set(seen["tmp"]) == {
        Path(p).parts[2] for p in read_only | {seen["scratch"]} if _inside(p, "/tmp")
    }
    assert [p for p, there in seen["exists"].items() if there] == []


@linux
@needs_root
@pytest.mark.parametrize("mode", ["exec", "zygote"])
def test_a_socket_or_file_outside_the_course_is_not_there(probes: dict, mode: str) -> None:
    assert probes[mode]["reached"] == {
        "socket": "FileNotFoundError",
        "abstract": "ConnectionRefusedError",  # the network namespace: no abstract sockets
        "file": "FileNotFoundError",
    }
    assert probes["connections"] == 0  # the listener never heard from a kernel


@linux
@needs_root
def test_both_launch_paths_build_the_same_jail(probes: dict) -> None:
    def same(seen: dict) -> str:
        text = (
            json.dumps(seen).replace(seen["course"], "COURSE").replace(seen["scratch"], "SCRATCH")
        )
        return text.replace(Path(seen["scratch"]).parent.name, "BASE")

    assert same(probes["exec"]) == same(probes["zygote"])


# --- without a kernel -------------------------------------------------------------------------


def _run_jailed(caps: Capabilities, code: str, hide: list[str]) -> tuple[int, str]:
    base = tempfile.mkdtemp(prefix="bcg-test-")
    os.chmod(base, 0o711)
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), base, hide, 1)
    try:
        proc = subprocess.run(
            jail.command([sys.executable, "-c", code]), capture_output=True, text=True, timeout=120
        )
        return proc.returncode, proc.stdout + proc.stderr
    finally:
        jail.close()
        shutil.rmtree(base, ignore_errors=True)


@linux
@needs_root
def test_a_hidden_folder_inside_an_allowed_one_stays_hidden() -> None:
    """`hide` still counts where the allow-list holds the folder (a course kept in a venv)."""
    package = os.path.dirname(os.path.realpath(bertcourse.__file__))
    hidden = os.path.join(package, "grade")
    caps = detect()
    try:
        code = f"import os; print(os.listdir({hidden!r}), os.path.exists({package!r} + '/grading'))"
        rc, out = _run_jailed(caps, code, [hidden])
    finally:
        release(caps)
    assert (rc, out.strip()) == (0, "[] True"), out


@linux
def test_no_root_mode_runs_without_a_jail(tmp_path: Path) -> None:
    """Without root the launcher builds no jail (documented in book/instructors.md): the
    kernel sees the host, runs as this user, with the resource limits and a clean environment."""
    caps = Capabilities(False, False, None, None, None, None, None)
    code = (
        "import json, os, resource; print(json.dumps([os.getuid(), os.path.exists('/etc/passwd'),"
        " sorted(os.environ), resource.getrlimit(resource.RLIMIT_DATA)[0]]))"
    )
    rc, out = _run_jailed(caps, code, [])
    clean = sorted(rootfs.kernel_env(str(tmp_path), str(tmp_path)))
    assert (rc, json.loads(out)) == (0, [os.getuid(), True, clean, 1 << 30]), out


def test_the_loader_named_by_python_is_the_one_it_loaded() -> None:
    interpreter = rootfs._elf_interpreter(os.path.realpath(sys.executable))
    assert interpreter is not None and interpreter.startswith("/")
    mapped = Path("/proc/self/maps").read_text()
    assert os.path.realpath(interpreter) in mapped


def test_links_on_a_path_are_recorded_in_resolution_order(tmp_path: Path) -> None:
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "real.so").write_text("")
    (tmp_path / "lib").symlink_to("usr/lib")
    (tmp_path / "usr" / "lib" / "alias.so").symlink_to(str(tmp_path / "lib" / "real.so"))
    links = rootfs._links_on(str(tmp_path / "lib" / "alias.so"))
    assert links == {
        str(tmp_path / "lib"): "usr/lib",
        str(tmp_path / "usr" / "lib" / "alias.so"): str(tmp_path / "lib" / "real.so"),
    }


# --- a worker killed mid-kernel ---------------------------------------------------------------

WORKER = """
import os, subprocess, sys, time
from bertcourse.grade.jail import Capabilities, KernelJail, Limits, Zygote
caps = Capabilities.from_json(sys.argv[1])
zygote = Zygote([])
print("ZYGOTE", zygote.dir, flush=True)
jail = KernelJail(caps, Limits(memory_bytes=1 << 30), sys.argv[2], [], 1)
kernel = subprocess.Popen(jail.command([sys.executable, "-c",
    "import os, time; print('KERNEL', os.getpid(), flush=True); time.sleep(600)"]),
    stdout=subprocess.PIPE, text=True)
assert kernel.stdout.readline().startswith("KERNEL")
print("READY", flush=True)
time.sleep(600)
"""


def _mounts_under(path: str) -> list[str]:
    return [point for point in launcher.mount_points() if _inside(point, path)]


@linux
@needs_root
def test_the_parent_cleans_up_after_a_killed_worker() -> None:
    """A worker killed while its kernel runs leaves a scratch tmpfs, cgroups and folders;
    `clean_after` (what the pool's parent runs) removes them all. The worker's
    zygote, told of its death, removes its own folder."""
    caps = detect()
    scratch = tempfile.mkdtemp(prefix="bcg-")
    os.chmod(scratch, 0o711)
    worker = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WORKER), caps.to_json(), scratch],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        zygote_dir = worker.stdout.readline().split()[1]
        assert os.path.isdir(zygote_dir)
        assert worker.stdout.readline().strip() == "READY"
        records = list(Path(scratch).glob(f"p-*/{CGROUPS_FILE}"))
        groups = [g for r in records for g in r.read_text().split()]
        assert (len(groups) > 0) == (caps.cgroup is not None)
        assert all(os.path.isdir(g) for g in groups)
        assert _mounts_under(scratch) != []  # the kernel's scratch tmpfs
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        time.sleep(0.5)  # the launcher and the kernel follow their parent (PR_SET_PDEATHSIG)
        clean_after(scratch)
        assert [g for g in groups if os.path.exists(g)] == []
        assert _mounts_under(scratch) == []
        assert not os.path.exists(scratch)
        assert not os.path.exists(zygote_dir)  # the zygote removed its socket's folder itself
    finally:
        if worker.poll() is None:
            worker.kill()
        clean_after(scratch)
        release(caps)


@linux
@needs_root
def test_a_kernel_gets_its_cgroup_after_another_grader_released_the_parent() -> None:
    """The parent cgroup is shared by every grader on the machine, and `release` removes it
    when it is empty: a grader that starts a kernel after that still gets the memory cgroup
    (the race that two graders, or two tests, running side by side hit)."""
    caps = detect()
    if caps.memory_cgroup is None:
        pytest.skip("no memory cgroup on this machine")
    release(caps)  # what a run that just finished does
    scratch = tempfile.mkdtemp(prefix="bcg-")
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), scratch, [], 1)
    try:
        jail.command([sys.executable, "-c", "pass"])
        assert jail.memory_cgroup is not None
        assert os.path.isdir(jail.memory_cgroup)
        assert all(os.path.isdir(g) for g in jail.cgroups)
    finally:
        jail.close()
        shutil.rmtree(scratch, ignore_errors=True)
        release(caps)
