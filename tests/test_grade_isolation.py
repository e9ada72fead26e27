"""Issue 36, the runtime side: what one student's kernel leaves, how a call reaches the
referee, how long a submission may hold a worker, and which statuses come from facts.

The whole-pipeline cases (a submission graded by `python -m bertcourse.grade`) are the `iso_`
block of the hostile bank (tests/hostile/bank.py, graded in test_grade_hostile.py); the
tests here need no grading run: a jailed process, a calls' socket, the codec, the pool.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

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


# --- the calls' channel: only the serve loop's connection is served -------------------------


class _Open:
    """A serve loop's execute request that has not ended."""

    @staticmethod
    def done() -> bool:
        return False


def _calls_socket(tmp_path: Path):
    """A `NotebookRun` reduced to its calls' socket (no kernel): the listener in `tmp_path`."""
    from bertcourse.grade.boundary import execute, remote

    run = execute.NotebookRun.__new__(execute.NotebookRun)
    run.jail = SimpleNamespace(dir=str(tmp_path), caps=SimpleNamespace(uid=None, gid=None))
    run.referee = SimpleNamespace(session=remote.Session(send=None, code=None))
    run.jail.beside_kernel = lambda: ""  # no kernel here
    run._listener = run._listen()
    return run, run._listener.getsockname()


def _connect(path: str, hello: bytes | None) -> socket.socket:
    from bertcourse.grade.boundary import codec

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    if hello is not None:
        codec.write_frame(conn, hello)
    return conn


@pytest.mark.parametrize("hello", [b"", b"0" * 32, None], ids=["empty", "wrong", "silent"])
def test_a_connection_without_the_token_is_not_served(tmp_path: Path, hello) -> None:
    """A thread of the notebook connects to the calls' socket before the serve loop: whatever it
    sends first (nothing, a wrong token), the grader serves it no call, and the part fails for
    review; the serve loop's connection, with the request's token, is the one served."""
    from bertcourse.grade.boundary import execute
    from bertcourse.grading.values import GradingError

    run, path = _calls_socket(tmp_path)
    serving = execute._Serving("m", secrets.token_hex(16), None, None, _Open())
    rogue = _connect(path, hello)
    try:
        with pytest.raises(GradingError, match="without its token"):
            run._accept(serving, time.monotonic() + 10)
        assert run.referee.session.review == [
            "a connection to the grader's calls' socket without its token"
        ]
        assert rogue.recv(1) == b""  # closed, nothing served
        genuine = _connect(path, serving.token.encode())
        served = run._accept(serving, time.monotonic() + 10)
        assert served is not None
        served.close()
        genuine.close()
    finally:
        rogue.close()
        run._listener.close()


def test_a_second_connection_fails_the_call(tmp_path: Path) -> None:
    """Once the serve loop is connected, any other connection to the calls' socket is seen at
    the next call: the call fails for review."""
    from bertcourse.grade.boundary import execute
    from bertcourse.grading.values import GradingError

    run, path = _calls_socket(tmp_path)
    serving = execute._Serving("m", secrets.token_hex(16), None, None, _Open())
    genuine = _connect(path, serving.token.encode())
    served = run._accept(serving, time.monotonic() + 10)
    run._vouch()  # the control: nothing else is there
    second = _connect(path, serving.token.encode())  # even with the token
    try:
        with pytest.raises(GradingError, match="second connection"):
            run._vouch()
        assert run.referee.session.review == ["a second connection to the grader's calls' socket"]
    finally:
        for conn in (second, genuine, served):
            conn.close()
        run._listener.close()


# --- the operator trace: its record travels where the notebook cannot rewrite it -------------

FORBID = ["torch.log_softmax"]  # its operators are traced (forbid.FORBIDDEN_OPS)


def _library_softmax(x):
    """The library's log-softmax by a route no name check stubs: only the trace sees it."""
    return torch.ops.aten._log_softmax(x, -1, False)


def _own_softmax(x):
    return x - x.exp().sum(dim=-1, keepdim=True).log()


def _referee(monkeypatch, fn, around=contextlib.nullcontext):
    """A `RemoteFunction` for `fn` whose kernel is this process (`remote.serve`, run inside
    `around()`); no static rule objects to anything (the rules are another test's)."""
    from bertcourse.grade.boundary import remote

    monkeypatch.setattr(remote, "_namespace", lambda: {"softmax": fn})

    def send(request: str) -> str:
        with around():
            return remote.serve(request)

    code = SimpleNamespace(violations=lambda *args, **kwargs: [])
    session = remote.Session(send=send, code=code)
    return remote.RemoteFunction("softmax", session), session


def test_the_trace_record_comes_with_a_call_that_forbids(monkeypatch) -> None:
    """The control: an honest function's reply carries the trace's record, and passes."""
    softmax, session = _referee(monkeypatch, _own_softmax)
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(softmax.call((x,), {}, forbid=FORBID), torch.log_softmax(x, dim=-1))
    assert session.review == []


def test_a_disabled_dispatch_is_a_call_for_review(monkeypatch) -> None:
    """The learner's process leaves the dispatcher's Python key off (the trace then sees no
    operator, the library's softmax included): the call fails for review, never passes."""
    from bertcourse.grading.values import GradingError

    softmax, session = _referee(monkeypatch, _library_softmax, torch._C._DisableTorchDispatch)
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    with pytest.raises(GradingError, match="operator trace was off"):
        softmax.call((x,), {}, forbid=FORBID)
    assert len(session.review) == 1


def test_a_reply_without_its_trace_record_is_a_call_for_review(monkeypatch) -> None:
    """A reply rewritten in transit (the trace's record and the forbidden list taken out): the
    call fails for review."""
    from bertcourse.grade.boundary import codec, remote
    from bertcourse.grading.values import GradingError

    softmax, session = _referee(monkeypatch, _library_softmax)

    def stripped(request: str) -> str:
        reply = codec.decode(remote.serve(request), "kernel")
        reply.pop("trace", None)
        reply["forbidden"] = []
        return codec.encode(reply, side="kernel")

    session.send = stripped
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    with pytest.raises(GradingError, match="operator trace was off"):
        softmax.call((x,), {}, forbid=FORBID)
    assert len(session.review) == 1


def test_a_relay_on_socket_socket_never_sees_the_calls(tmp_path: Path, monkeypatch) -> None:
    """The notebook sets a relay on `socket.socket.sendall` (through `type.__setattr__`) that
    empties the reply's forbidden list: the serve loop's socket is not a `socket.socket`, so
    the referee still reads that the library's softmax ran."""
    from bertcourse.grade.boundary import codec, remote

    monkeypatch.setattr(remote, "_namespace", lambda: {"softmax": _library_softmax})
    relayed: list[int] = []
    original = socket.socket.sendall

    def relay(self, data, *args):
        if b"forbidden" in data:  # a reply of the calls (not the test's own request)
            relayed.append(len(data))
        return original(self, bytes(data).replace(b"::_log_softmax", b"::nothing_at_a"), *args)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "calls.sock")
    listener.bind(path)
    listener.listen(1)
    listener.settimeout(30)
    token = secrets.token_hex(16)
    loop = threading.Thread(target=remote.serve_calls, args=(path, token), daemon=True)
    type.__setattr__(socket.socket, "sendall", relay)
    try:
        loop.start()
        conn, _ = listener.accept()
        assert codec.read_frame(conn, 64, time.monotonic() + 30) == token.encode()
        x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
        call = {"fn": "softmax", "args": (x,), "kwargs": {}, "use_reference": {}, "forbid": FORBID}
        request = codec.encode(call)
        codec.write_frame(conn, request.encode(), time.monotonic() + 30)
        reply = codec.decode(codec.read_frame(conn, 1 << 26, time.monotonic() + 30))
        conn.close()
        loop.join(30)
    finally:
        type.__setattr__(socket.socket, "sendall", original)
        listener.close()
    assert reply["forbidden"] == ["the ATen operator aten::_log_softmax"], reply
    assert relayed == []  # the relay never carried a frame of the calls


# --- time: the codec counts, the decoder watches the clock, the pool ends a worker ------------


def test_a_reply_of_many_tensors_is_refused_before_one_is_built() -> None:
    """20,000 one-byte tensors (far under the byte limit) are refused from the buffer's header,
    and faster than building them would take; the control, 100, decodes."""
    from bertcourse.grade.boundary import codec

    limits = codec.Limits()
    few = codec.encode([torch.zeros(1, dtype=torch.uint8)] * 100, side="kernel")
    assert len(codec.decode(few, limits=limits)) == 100
    many = codec.encode(
        [torch.zeros(1, dtype=torch.uint8) for _ in range(2 * limits.max_tensors)], side="kernel"
    )
    assert len(many) < limits.max_bytes
    with pytest.raises(codec.CodecError, match="tensors"):
        codec.decode(many, limits=limits)


def test_decoding_stops_at_the_calls_time_limit() -> None:
    """A reply whose decoding would outlast the call (30,000 nested items) raises
    `TimeoutError` at the call's limit instead; the same reply with time left decodes."""
    from bertcourse.grade.boundary import codec

    reply = codec.encode([[i, (i,)] for i in range(30_000)], side="kernel")
    assert len(codec.decode(reply)) == 30_000  # the control
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        codec.decode(reply, until=start)
    assert time.monotonic() - start < 1.0


def slow_student(task):
    """A stand-in for `grade_submission`: "stuck" holds its worker past any clock (a decode,
    a transformation in C that no alarm interrupts); everyone else is graded at once."""
    from bertcourse.grade.results import SubmissionResult
    from bertcourse.grade.status import Status

    if task.student == "stuck":
        time.sleep(600)
    return SubmissionResult(task.student, task.spec.name, task.run_id, 1.0, Status.GRADED)


def test_the_pool_ends_a_worker_past_its_submissions_clock(tmp_path: Path, monkeypatch) -> None:
    """The parent holds each submission's one clock: a worker still busy past its task's budget
    (and the grace) is stopped, the submission is `timed_out` in the gradebook, and every
    classmate is graded by the workers left and started anew."""
    from bertcourse.grade import gradebook, runner
    from bertcourse.grade.assignment import AssignmentSpec
    from bertcourse.grade.status import Status
    from bertcourse.grade.worker import Task

    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.5)
    # a worker's imports on a busy machine (10 s was too short once, in CI beside the grid)
    monkeypatch.setattr(runner, "WORKER_START_S", 30.0)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    db = f"sqlite:///{tmp_path}/gradebook.db"
    students = ["alice", "stuck", "bob", "carol"]
    tasks = [
        Task(
            student=s,
            spec=AssignmentSpec("a1", "course", []),
            course_root=str(tmp_path),
            submitted_dir=str(tmp_path / "submitted" / s),
            autograded_dir=str(tmp_path / "autograded" / s),
            feedback_dir=str(tmp_path / "feedback" / s),
            db_url=db,
            run_id="r",
            caps_json="{}",
            limits=Limits(),
            hide=[],
            workers=2,
            cell_timeout=1.0,
            notebook_timeout=1.0,
            budget_s=3.0,
        )
        for s in students
    ]
    gradebook.prepare(db, "course")
    start = time.monotonic()
    results = runner._run_pool(tasks, 2, False, db, "course", grade=slow_student)
    took = time.monotonic() - start
    by_student = {r.student: r for r in results}
    assert sorted(by_student) == sorted(students)
    assert by_student["stuck"].status is Status.TIMED_OUT
    assert "wall-clock limit of 3 s" in by_student["stuck"].detail
    others = {s: (r.status, r.detail) for s, r in by_student.items() if s != "stuck"}
    assert all(status is Status.GRADED for status, _ in others.values()), others
    assert took < 120  # the stuck worker would hold the pool 600 s
    rows = {r.student_id: r.status for r in gradebook.read_results(db, "course", "a1")}
    assert rows["stuck"] == "timed_out"


# --- a timed-out call: the interrupt cannot outlive the request it was for ------------------

BLOCKS_SIGINT = """
import signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # held pending, never handled
print("ready", flush=True)
time.sleep(120)
"""


def _pending_signals(pid: int) -> int:
    """The signals pending on process `pid` (its thread's and the process's), as a bit mask."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)


@linux
def test_the_interrupt_is_pending_on_the_kernel_when_it_returns() -> None:
    """The grader interrupts a kernel past a call's or a cell's limit: when `interrupt_kernel`
    returns, SIGINT is already pending on the kernel's own process, so it ends the request that
    runs now and cannot arrive after the next cell started (through the launcher it was
    forwarded later: issue 36, a re-grade gave another score). The kernel here blocks SIGINT,
    so the signal stays visible as pending."""
    import asyncio
    import signal

    from bertcourse.grade.boundary.execute import JailedKernelManager

    caps = detect()
    base = tempfile.mkdtemp(prefix="bcg-test-")
    os.chmod(base, 0o711)
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), base, [], 1)
    kernel = subprocess.Popen(
        jail.command([sys.executable, "-c", BLOCKS_SIGINT]), stdout=subprocess.PIPE, text=True
    )
    try:
        assert kernel.stdout is not None and kernel.stdout.readline().strip() == "ready"
        pid = jail.kernel_pid()
        assert pid is not None
        sigint = 1 << (signal.SIGINT - 1)
        assert not _pending_signals(pid) & sigint  # the control
        km = JailedKernelManager(kernel_name="python3", transport="ipc")
        km.jail = jail

        async def interrupt() -> int:
            await km.interrupt_kernel()
            return _pending_signals(pid)  # at once: nothing else may run in between

        assert asyncio.run(interrupt()) & sigint
    finally:
        kernel.kill()
        kernel.wait(30)
        jail.close()
        release(caps)
        shutil.rmtree(base, ignore_errors=True)
