"""Run one repaired notebook in a jailed kernel; the referee runs the test cells outside it.

`NotebookRun` is nbgrader's `Execute` preprocessor (an nbclient `NotebookClient`: the same
kernel start-up, per-cell timeout with interrupt, output handling) with four changes:

- the kernel is started through the jail (`jail.KernelJail`) over Unix-socket (IPC)
  transport, so that it works across the network namespace;
- a graded test cell is not sent to the kernel at all: the referee (`referee.Referee`, in this
  process, outside the jail) runs it; the calls of a learner's functions go to the kernel
  within one execute request per test (`remote.serve_calls`), as data (`codec`), each a frame
  on a Unix socket this process listens on in the kernel's folder, each reply a frame back.
  Only the connection that first sends the token of that request (fresh each time) is served;
  a connection without it, a second connection, or another process beside the kernel at
  call time (read from the host's /proc) fails the call and sends the submission to a person
  (`remote.Session.review`);
- an instructor set-up cell runs in the kernel and in the referee's own namespace;
- output is capped per cell and per notebook while it arrives (a print loop cannot fill the
  grader's memory);
- the whole notebook has a deadline (never past the submission's one clock); a kernel that
  dies, ignores interrupts or runs out of time ends the run, and every cell that did not run
  is recorded as such. An interrupt is SIGINT to the kernel's own process, so it ends the
  request that runs when it is sent, never a later one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.utils import ensure_async
from nbclient.exceptions import CellControlSignal, CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader import utils as nbutils
from nbgrader.preprocessors import Execute

from bertcourse.grade.boundary import codec
from bertcourse.grade.boundary.referee import KernelGone, Referee, TestOutcome
from bertcourse.grade.jail import KernelJail, Zygote
from bertcourse.grading.values import GradingError

MAX_REPLY_BYTES = codec.Limits().max_bytes
CALLS_SOCKET = "calls.sock"  # in the kernel's folder: the one the jail lets it reach
HELLO_S = 2.0  # how long a connection to the calls' socket has to send its token


def serve_calls_code(path: str, token: str) -> str:
    """The expression whose one execute request answers all the calls of a test; `token`
    (fresh for each request) is what its connection must send first."""
    remote = "__import__('bertcourse.grade.boundary.remote', fromlist=['serve_calls'])"
    return f"{remote}.serve_calls({path!r}, {token!r})"


@dataclasses.dataclass
class _Serving:
    """The open serve loop of the current test: its execute request and what waits on it."""

    msg_id: str
    token: str  # what the serve loop's connection sends first (sent in its execute request)
    cell: NotebookNode  # collects the loop's output (the learner's prints)
    output: asyncio.Future[Any]  # IOPub: done when the kernel is idle again
    reply: asyncio.Future[Any]  # shell: the loop's execute reply
    conn: socket.socket | None = None  # the kernel's end of the calls, once it connected


class JailedKernelManager(AsyncKernelManager):
    """An `AsyncKernelManager` whose kernel command goes through the jail's launcher."""

    jail: KernelJail | None = None
    zygote: Zygote | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        assert self.jail is not None
        jail = self.jail
        if jail.caps.uid is not None:  # the kernel, not root, must read its connection file
            os.chown(self.connection_file, jail.caps.uid, jail.caps.gid)
        cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", self.connection_file]
        return jail.command(cmd + list(extra_arguments or []), self.zygote)

    async def _async_interrupt_kernel(self) -> None:
        """SIGINT to the kernel's own process, from the host. When `kill` returns the signal
        is pending there, so the KeyboardInterrupt ends the request that runs now (the late
        call, the cell past its limit); it cannot reach a later cell or test. (Through the
        launcher it travels on, and arrived after the serve loop had seen its socket close
        and the next cell had started: issue 36.) An idle kernel ignores it."""
        pid = self.jail.kernel_pid() if self.jail is not None else None
        if pid is None:
            await super()._async_interrupt_kernel()
            return
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:  # gone already: the caller sees a dead kernel
            pass

    interrupt_kernel = _async_interrupt_kernel


@dataclasses.dataclass
class CellResult:
    """What happened to one graded test cell."""

    grade_id: str
    max_score: float
    score: float = 0.0
    outcome: str = "not_run"  # passed, failed, timed_out, not_run
    message: str = ""


@dataclasses.dataclass
class RunResult:
    """What happened to one notebook."""

    cells: dict[str, CellResult]
    kernel_died: bool = False
    timed_out: bool = False
    deadline_hit: bool = False
    memory_exceeded: bool = False
    started: bool = False
    output_truncated: bool = False
    error: str = ""
    seconds: float = 0.0
    peak_memory: int = 0


def _msg_size(msg: dict[str, Any]) -> int:
    content = msg.get("content", {})
    size = len(content.get("text", "") or "")
    for value in (content.get("data") or {}).values():
        size += len(value) if isinstance(value, str) else len(json.dumps(value))
    for line in content.get("traceback") or []:
        size += len(line)
    for key in ("metadata", "transient", "ename", "evalue"):  # metadata counts too
        value = content.get(key)
        if value:
            size += len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
    return size


class NotebookRun(Execute):
    """Execute one notebook for grading (see the module docstring)."""

    def __init__(
        self,
        nb: NotebookNode,
        jail: KernelJail,
        *,
        cell_timeout: float,
        notebook_timeout: float,
        referee: Referee,
        zygote: Zygote | None = None,
        preload: tuple[str, ...] = (),
        max_cell_output: int = 1 << 20,
        max_total_output: int = 8 << 20,
        startup_timeout: int = 120,
        deadline: float | None = None,
    ) -> None:
        km = JailedKernelManager(kernel_name="python3", transport="ipc")
        km.connection_file = jail.connection_file
        km.jail = jail
        km.zygote = zygote
        super().__init__(
            timeout=int(cell_timeout),
            startup_timeout=startup_timeout,
            interrupt_on_timeout=True,
            raise_on_iopub_timeout=True,
            iopub_timeout=5,
            allow_errors=True,
            record_timing=False,
            shutdown_kernel="immediate",
            kernel_name="python3",
        )
        self.nb = nb
        self.km = km
        self.owns_km = True  # shut the kernel down when the run ends
        self.jail = jail
        self.cell_timeout = cell_timeout
        self.notebook_timeout = notebook_timeout
        self.referee = referee
        self.preload = tuple(preload) if zygote is None else ()  # a zygote imported them
        self.startup_timeout = startup_timeout
        self._kernel_gone = False
        self._scratch_outputs: list[NotebookNode] = []
        self.max_cell_output = max_cell_output
        self.max_total_output = max_total_output
        self._out_bytes: dict[int, int] = {}
        self._total_out = 0
        self._truncated: set[int] = set()
        self._deadline = 0.0
        self._submission_deadline = deadline  # the submission's one clock (`time.monotonic()`)
        self._timed_out_now = False
        self._serving: _Serving | None = None
        self._listener: socket.socket | None = None  # the calls' socket, while a test runs
        self.timeout_func = self._cell_timeout

    # timing ------------------------------------------------------------------------------------
    def _notebook_deadline(self, start: float) -> float:
        """`notebook_timeout` from `start`, never past the submission's own deadline."""
        end = start + self.notebook_timeout
        return end if self._submission_deadline is None else min(end, self._submission_deadline)

    def _remaining(self) -> float:
        return self._deadline - time.monotonic()

    def _cell_timeout(self, cell: NotebookNode) -> int:
        return max(1, int(min(self.cell_timeout, self._remaining()) + 0.999))

    async def _async_handle_timeout(
        self, timeout: int, cell: NotebookNode | None = None
    ) -> None | dict[str, Any]:
        self._timed_out_now = True
        return await super()._async_handle_timeout(timeout, cell)

    # output ------------------------------------------------------------------------------------
    def output(
        self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str | None, cell_index: int
    ) -> NotebookNode | None:
        size = _msg_size(msg)
        self._out_bytes[cell_index] = self._out_bytes.get(cell_index, 0) + size
        self._total_out += size
        if (
            self._out_bytes[cell_index] > self.max_cell_output
            or self._total_out > self.max_total_output
        ):
            if cell_index not in self._truncated:
                self._truncated.add(cell_index)
                outs.append(
                    NotebookNode(
                        output_type="stream",
                        name="stdout",
                        text="\n... output truncated by the grader (too much output) ...\n",
                    )
                )
            return None
        return super().output(outs, msg, display_id, cell_index)

    # one request -------------------------------------------------------------------------------
    async def _request(
        self, cell: NotebookNode, cell_index: int, code: str, **execute_kwargs: Any
    ) -> dict[str, Any] | None:
        """Send one execute request, collect its output into `cell`, return the reply.

        The body of nbclient's `async_execute_cell` for a request that is not a cell's source.
        """
        assert self.kc is not None
        msg_id = await ensure_async(self.kc.execute(code, stop_on_error=False, **execute_kwargs))
        timeout = self._get_timeout(cell)  # the call's budget (`timeout_func`), as nbclient
        cell.outputs = []
        self.clear_before_next_output = False
        task_alive = asyncio.ensure_future(self._async_poll_kernel_alive())
        task_output = asyncio.ensure_future(self._async_poll_output_msg(msg_id, cell, cell_index))
        self.task_poll_for_reply = asyncio.ensure_future(
            self._async_poll_for_reply(msg_id, cell, timeout, task_output, task_alive)
        )
        try:
            return await self.task_poll_for_reply
        except asyncio.CancelledError:
            task_output.cancel()
            raise DeadKernelError("Kernel died") from None
        except Exception as error:
            if not isinstance(error, CellControlSignal):
                task_output.cancel()
            raise

    # calls of the learner's functions -----------------------------------------------------------
    def _call(self, request: str, until: float, on_loop: Callable[[Coroutine], Any]) -> bytes:
        """One call of a learner's function in the kernel, from the referee's thread: the
        reply (codec text, data only).

        The calls of one test go through one execute request (`remote.serve_calls`, opened by
        the first call, on the event loop) and one connection to the calls' socket; the
        frames are written and read here, in the referee's thread, which waits at most until
        `until`: at that time the kernel is interrupted (`TimeoutError`)."""
        budget = until - time.monotonic()
        if self._serving is None:
            self._serving = on_loop(self._open_serving())
        serving = self._serving
        reply = None
        try:
            if serving.conn is None:
                serving.conn = self._accept(serving, until)
            if serving.conn is not None:
                self._vouch()
                codec.write_frame(serving.conn, request.encode(), until)
                reply = codec.read_frame(serving.conn, MAX_REPLY_BYTES, until)
                self._vouch()
        except TimeoutError:
            on_loop(self._stop_serving(interrupt=True, timed_out=True))
            raise TimeoutError(f"the call did not finish within {int(budget)} s") from None
        except (OSError, codec.CodecError):  # the kernel reset the socket; a reply over the limit
            reply = None
        if reply is None:  # the serve loop ended (the learner's code stopped it) or the kernel died
            on_loop(self._calls_ended())
            raise GradingError("the kernel did not answer the grader's call (0 points)")
        return reply

    def _accept(self, serving: _Serving, until: float) -> socket.socket | None:
        """The serve loop's connection; None if its request ended without one. A connection
        whose first frame is not the request's token is not the serve loop's: it is closed
        and the call fails for review (`GradingError`)."""
        assert self._listener is not None
        while not serving.reply.done():
            remaining = until - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the kernel did not connect")
            self._listener.settimeout(min(remaining, 0.2))
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:  # one slice of the wait: is the request still running?
                continue
            try:
                hello = codec.read_frame(conn, 256, min(until, time.monotonic() + HELLO_S))
            except (OSError, codec.CodecError):  # TimeoutError included: it sent nothing
                hello = None
            if hello is not None and hmac.compare_digest(bytes(hello), serving.token.encode()):
                return conn
            conn.close()
            raise self._unverifiable("a connection to the grader's calls' socket without its token")
        return None

    def _pending_connection(self) -> bool:
        """Is another connection waiting on the calls' socket? (it is closed)"""
        if self._listener is None:
            return False
        self._listener.setblocking(False)
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, OSError):
            return False
        conn.close()
        return True

    def _unverifiable(self, finding: str) -> GradingError:
        return self.referee.session.unverifiable(finding)

    def _vouch(self) -> None:
        """Fail the call for review when something besides the serve loop could have answered
        it or changed what it reports: a second connection to the calls' socket, another
        process in the jail (read from the host)."""
        if self._pending_connection():
            raise self._unverifiable("a second connection to the grader's calls' socket")
        beside = self.jail.beside_kernel()
        if beside:
            raise self._unverifiable(f"{beside} ran in the kernel during a call")

    def _listen(self) -> socket.socket:
        """A fresh calls' socket in the kernel's folder, which only the kernel's user reaches.

        The learner's code may run in a thread of the kernel meanwhile and swap the path for a
        link at any moment: nothing here follows a link (`unlink`, `bind` and `lchown` act on
        the path itself), so the grader, as root, never changes a file the link points to.
        The folder is the kernel's own (mode 0700), so the socket needs no mode of its own."""
        path = os.path.join(self.jail.dir, CALLS_SOCKET)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.path.lexists(path):  # an earlier test's, or anything the learner left there
                os.unlink(path)
            listener.bind(path)
            if self.jail.caps.uid is not None:  # the kernel's user may connect
                os.chown(path, self.jail.caps.uid, self.jail.caps.gid, follow_symlinks=False)
            listener.listen(8)  # a connection besides the serve loop's waits to be seen
        except OSError as error:
            listener.close()
            raise GradingError(
                f"the grader could not open the calls' socket in the kernel's folder ({error}); "
                "did the notebook change that folder?"
            ) from None
        return listener

    async def _open_serving(self) -> _Serving:
        assert self.kc is not None
        self._listener = self._listen()  # one per test: the learner's cells may have moved it
        path = self._listener.getsockname()
        token = secrets.token_hex(16)  # fresh: only this request carries it
        cell = NotebookNode(cell_type="code", source="", outputs=[], metadata={})
        msg_id = await ensure_async(
            self.kc.execute(
                "",
                silent=True,
                store_history=False,
                allow_stdin=False,
                stop_on_error=False,
                user_expressions={"served": serve_calls_code(path, token)},
            )
        )
        output = asyncio.ensure_future(self._async_poll_output_msg(msg_id, cell, -1))
        reply = asyncio.ensure_future(self._shell_reply(msg_id))
        return _Serving(msg_id, token, cell, output, reply)

    async def _shell_reply(self, msg_id: str) -> dict[str, Any]:
        assert self.kc is not None
        while True:
            msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=None))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    async def _calls_ended(self) -> None:
        """The kernel closed the calls' socket: its serve loop ended, or it died."""
        assert self._serving is not None and self.km is not None
        if self._serving.conn is not None:  # a kernel still writing a refused reply stops
            self._serving.conn.close()
        until = time.monotonic() + self.iopub_timeout
        while not self._serving.reply.done() and time.monotonic() < until:
            if not await ensure_async(self.km.is_alive()):
                self._kernel_gone = True
                raise KernelGone("the kernel died during a call")
            await asyncio.sleep(0.05)
        await self._stop_serving(interrupt=False, timed_out=False)

    async def _stop_serving(self, interrupt: bool, timed_out: bool) -> None:
        """End the serve loop: close its socket (the loop returns), or interrupt the kernel
        when a call is still running. A kernel that does not come back within `iopub_timeout`
        is gone (`timed_out`: stopped for time, the parts graded before keep their points)."""
        serving, self._serving = self._serving, None
        if serving is None:
            return
        assert self.kc is not None and self.km is not None
        if interrupt:
            await ensure_async(self.km.interrupt_kernel())
        if serving.conn is not None:  # the serve loop reads the end of the stream and returns
            serving.conn.close()
        if self._pending_connection():  # counted against the test that ran (see _run_test)
            self.referee.session.review.append("a second connection to the grader's calls' socket")
        if self._listener is not None:  # a connection not accepted yet is refused with it
            self._listener.close()
            self._listener = None
        done, _ = await asyncio.wait({serving.reply}, timeout=self.iopub_timeout)
        if done:
            try:
                await asyncio.wait_for(serving.output, self.iopub_timeout)
            except asyncio.TimeoutError:
                done = set()
        self._scratch_outputs.extend(serving.cell.outputs[:20])
        if not done:
            serving.reply.cancel()
            serving.output.cancel()
            self._kernel_gone = True
            raise KernelGone("the kernel stopped answering the grader", timed_out or interrupt)

    async def _preload(self) -> None:
        """Without a zygote, import the modules a zygote imports before it forks (torch,
        bertcourse: the instructor's cells' imports), before the notebook's clock starts: a
        cold `import torch` takes seconds (over 10 s on a busy machine), which would otherwise
        count against the first cell's limit, so both modes time the same work. A failed
        import is left for the cell that needs it to report."""
        if not self.preload:
            return
        code = preload_code(self.preload)
        scratch = NotebookNode(cell_type="code", source="", outputs=[], metadata={})
        self.timeout_func = lambda cell: self.startup_timeout
        try:
            await self._request(scratch, -1, code, silent=True, store_history=False)
        finally:
            self.timeout_func = self._cell_timeout

    async def _run_test(self, cell: NotebookNode, cell_index: int, result: CellResult) -> None:
        """The referee runs the test cell here; each call of a learner's function goes to the
        kernel through `_call`, from the referee's thread."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + min(self.cell_timeout, max(self._remaining(), 0.0))
        self._scratch_outputs = []

        def on_loop(coroutine: Coroutine) -> Any:
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

        def send(request: str) -> bytes:
            budget = max(1.0, min(deadline - time.monotonic(), self._remaining()))
            until = self.referee.session.until = time.monotonic() + budget  # decoding included
            return self._call(request, until, on_loop)

        self.referee.session.send = send
        flagged = len(self.referee.session.review)
        gone: KernelGone | None = None
        try:
            outcome = await loop.run_in_executor(
                None, self.referee.run_test, result.grade_id, deadline
            )
        except KernelGone as error:
            outcome, gone = None, error
        if gone is None:
            try:
                await self._stop_serving(interrupt=False, timed_out=False)
            except KernelGone as error:
                gone = error
        cell.outputs = [o for o in self._scratch_outputs if o.get("output_type") == "stream"][:20]
        review = self.referee.session.review[flagged:]
        if outcome is not None and outcome.passed and review:  # seen only as the test ended
            outcome = TestOutcome(False, f"{review[0]}: 0 points until reviewed", outcome.output)
        if outcome is not None:
            self._record(cell, result, outcome)
        elif gone is not None and gone.timed_out:  # earlier parts keep their points
            result.outcome = "timed_out"
            result.message = "the call ran past its time limit and the kernel was stopped"
        else:
            result.outcome = "not_run"
            result.message = "the kernel stopped during this test"
        if gone is not None and gone.timed_out:
            raise CellTimeoutError("the kernel ignored the interrupt at its time limit")
        if gone is not None:
            raise DeadKernelError("Kernel died")

    @staticmethod
    def _record(cell: NotebookNode, result: CellResult, outcome: TestOutcome) -> None:
        if outcome.output:
            cell.outputs.append(
                NotebookNode(output_type="stream", name="stdout", text=outcome.output)
            )
        if outcome.passed:
            result.outcome, result.score = "passed", result.max_score
        else:
            result.outcome = "timed_out" if outcome.timed_out else "failed"
            result.message = outcome.message[:2000]
            cell.outputs.append(_error_output("GradingError", result.message, []))

    # the whole notebook ------------------------------------------------------------------------
    async def run(self, results: dict[str, CellResult], outcome: RunResult) -> None:
        self.reset_execution_trackers()
        start = time.monotonic()
        self._deadline = self._notebook_deadline(start)
        log = open(self.jail.log_path, "ab")  # noqa: SIM115 (closed in finally)
        try:
            async with self.async_setup_kernel(stdout=log, stderr=log, cwd=self.jail.dir):
                assert self.km is not None
                self.jail.start_watchdog()
                msg_id = await ensure_async(self.kc.kernel_info())
                await self.async_wait_for_reply(msg_id)
                await self._preload()
                # the notebook's time counts from a ready kernel, zygote or not
                self._deadline = self._notebook_deadline(time.monotonic())
                outcome.started = True
                for index, cell in enumerate(self.nb.cells):
                    if cell.cell_type != "code":
                        continue
                    if self._remaining() <= 0:
                        outcome.deadline_hit = outcome.timed_out = True
                        break
                    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                    if grade_id in results and _is_test(cell):
                        await self._run_test(cell, index, results[grade_id])
                        if results[grade_id].outcome == "timed_out":
                            outcome.timed_out = True
                    else:
                        if grade_id and _is_setup(cell):
                            self.referee.run_setup(grade_id)
                        self._timed_out_now = False
                        await self.async_execute_cell(
                            cell, index, execution_count=self.code_cells_executed + 1
                        )
                        if self._timed_out_now:
                            outcome.timed_out = True
        except DeadKernelError:
            outcome.kernel_died = True
        except CellTimeoutError:  # the kernel ignored the interrupt: it is killed below
            outcome.timed_out = True
        except RuntimeError as error:
            text = str(error)
            if "Kernel died" in text or "Kernel didn't respond" in text:
                outcome.kernel_died = True
            outcome.error = text[:2000]
        finally:
            log.close()
            if self._listener is not None:
                self._listener.close()
            outcome.seconds = time.monotonic() - start
            if self._remaining() <= 0 and not outcome.kernel_died:
                outcome.deadline_hit = outcome.timed_out = True
        outcome.output_truncated = bool(self._truncated)


def preload_code(modules: tuple[str, ...]) -> str:
    """Kernel code that imports `modules`, skips those that fail, and binds no name."""
    loop = "for m in %r:\n    try:\n        __import__(m)\n    except Exception:\n        pass\n"
    return f"exec({loop % (list(modules),)!r}, {{}})"


def _is_setup(cell: NotebookNode) -> bool:
    """An instructor's locked code cell that is neither a test nor an answer."""
    md = cell.metadata.get("nbgrader", {})
    return (
        cell.cell_type == "code"
        and md.get("locked")
        and not md.get("grade")
        and not md.get("solution")
    )


def _is_test(cell: NotebookNode) -> bool:
    return cell.cell_type == "code" and nbutils.is_grade(cell) and not nbutils.is_solution(cell)


def _error_output(ename: str, evalue: str, traceback: list[str]) -> NotebookNode:
    return NotebookNode(
        output_type="error",
        ename=ename,
        evalue=evalue,
        traceback=traceback or [f"{ename}: {evalue}"],
    )


__all__ = [
    "CellResult",
    "JailedKernelManager",
    "NotebookRun",
    "RunResult",
]
