"""Issue 36, the runtime side: what one student's kernel leaves, how a call reaches the
referee, how long a submission may hold a worker, and which statuses come from facts.

The whole-pipeline cases (a submission graded by `python -m bertcourse.grade`) are the `iso_`
block of the hostile bank (tests/hostile/bank.py, graded in test_grade_hostile.py); the
tests here need no grading run: a jailed process, a calls' socket, the codec, the pool.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

from bertcourse.grade.jail import Capabilities, KernelJail, Limits, detect, release

ROOT = os.geteuid() == 0
linux = pytest.mark.skipif(sys.platform != "linux", reason="the grading jail is Linux-only")
needs_root = pytest.mark.skipif(not ROOT, reason="namespaces and the grading user need root")

# --- System V and POSIX IPC between two students' kernels -----------------------------------

IPC_CREAT = 0o1000
IPC_RMID = 0
IPC = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
KEY, NAME, CREATE = {key}, {name!r}, {create}
flags = 0o1666 if CREATE else 0
found = {{
    "shm": libc.shmget(KEY, 1 << 20 if CREATE else 0, flags),
    "msg": libc.msgget(KEY, flags),
    "sem": libc.semget(KEY, 1 if CREATE else 0, flags),
    "mq": libc.mq_open(NAME, (os.O_CREAT | os.O_RDWR) if CREATE else os.O_RDONLY, 0o666, None),
}}
print(json.dumps({{kind: ident >= 0 for kind, ident in found.items()}}))
"""


def _jailed(caps: Capabilities, code: str) -> tuple[int, str]:
    """Run `code` in a kernel's jail (the launcher's exec mode), its exit code and output."""
    base = tempfile.mkdtemp(prefix="bcg-test-")
    os.chmod(base, 0o711)
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), base, [], 1)
    try:
        proc = subprocess.run(
            jail.command([sys.executable, "-c", code]), capture_output=True, text=True, timeout=120
        )
        return proc.returncode, proc.stdout + proc.stderr
    finally:
        jail.close()
        shutil.rmtree(base, ignore_errors=True)


def _on_host(key: int, name: bytes) -> dict[str, bool]:
    """Which of the IPC objects exist in the grader's own namespace; each one found is removed
    (a failing run must not leave them for the next)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.mq_unlink.argtypes = [ctypes.c_char_p]
    shm, msg, sem = libc.shmget(key, 0, 0), libc.msgget(key, 0), libc.semget(key, 0, 0)
    mq = libc.mq_open(name, os.O_RDONLY)
    if shm >= 0:
        libc.shmctl(shm, IPC_RMID, None)
    if msg >= 0:
        libc.msgctl(msg, IPC_RMID, None)
    if sem >= 0:
        libc.semctl(sem, 0, IPC_RMID)
    if mq >= 0:
        os.close(mq)
        libc.mq_unlink(name)
    return {"shm": shm >= 0, "msg": msg >= 0, "sem": sem >= 0, "mq": mq >= 0}


@linux
@needs_root
def test_ipc_objects_one_kernel_leaves_are_gone_for_the_next() -> None:
    """One student's kernel creates a shared-memory segment, a message queue, a semaphore set
    and a POSIX message queue and exits; the next kernel (another student) looks for them by
    their key and name, and so does the grader's host: nothing is there."""
    caps = detect()
    key = int.from_bytes(os.urandom(3), "big") + 1  # a fresh key: no object of an earlier run
    name = f"/bertcourse-test-{uuid.uuid4().hex[:8]}"
    try:
        rc, out = _jailed(caps, IPC.format(key=key, name=name.encode(), create=True))
        assert rc == 0, out
        created = json.loads(out.strip().splitlines()[-1])
        assert created == {"shm": True, "msg": True, "sem": True, "mq": True}, out  # the control
        rc, out = _jailed(caps, IPC.format(key=key, name=name.encode(), create=False))
        assert rc == 0, out
        seen = json.loads(out.strip().splitlines()[-1])
    finally:
        release(caps)
        left = _on_host(key, name.encode())
    assert seen == {"shm": False, "msg": False, "sem": False, "mq": False}
    assert left == {"shm": False, "msg": False, "sem": False, "mq": False}
