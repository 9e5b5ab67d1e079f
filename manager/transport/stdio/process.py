"""stdio servers: spawn in their own process group, bridge the pipes, reap.

Implemented here rather than with the SDK's `stdio_client`, because the daemon
needs what that helper hides: the pid, the exit code, stderr captured line by
line (never written to the terminal) and a process-group sweep that leaves no
grandchild behind.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import shutil
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import BinaryIO, cast

import anyio
import anyio.abc
import mcp.types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ...core.errors import (
    ConnectFailed,
)
from ...core.spec import ConnectionSpec
from ..base import EXIT_CODE_WAIT, Hooks, LossReport, Streams, unlinked
from ..compat_anyio import release_process, write_at_once
from ..relay import NO_SEND_SPAN, SendSpan, StdioRelay
from ..signals import LostSignal
from .children import CHILD_GROUPS
from .confinement import confinement

__all__ = ["GARBAGE_SAMPLE", "StdoutLines", "stdio_streams"]

logger = logging.getLogger(__name__)

STDIN_CLOSE_GRACE = 0.5
"""Seconds a stdio server gets to exit by itself after its stdin closes."""

SIGTERM_GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL to the server's process group."""

REAP_TIMEOUT = 0.4
"""Seconds to wait for the event loop to observe a killed server's exit."""

STDERR_DRAIN = 0.2
"""Seconds an exited server's stderr gets to reach its end before the reason
it exited is told (with the last line it wrote there)."""

MAX_LINE = 64 * 1024 * 1024
"""Longest stdout line (one JSON-RPC message) accepted from a stdio server,
bytes: a screenshot or a file read of some megabytes is an ordinary answer
(the SDK's own client takes any length)."""

GARBAGE_SAMPLE = 16 * 1024
"""Bytes of a non-JSON-RPC stdout line quoted in the note about it (the
connection masks secrets in the note, then cuts it to its line limit)."""


@asynccontextmanager
async def stdio_streams(
    spec: ConnectionSpec,
    hooks: Hooks,
    lost: LostSignal,
    send_span: SendSpan = NO_SEND_SPAN,
) -> AsyncIterator[Streams]:
    """Spawn a stdio server in its own process group and bridge its pipes.

    The streams carry the `StdioRelay` for a client's requests (`relay`); the
    server's stdout is read by `StdoutLines`, which hands the relay the lines
    that answer its requests as they arrive. With a `sandbox`, the server is
    started confined (`confinement.confinement`), its private temporary directory
    removed when it stops.
    """
    env = get_default_environment() | dict(spec.env)
    argv, tmpdir = [spec.command, *spec.args], None
    if spec.sandbox.active:
        argv, tmpdir = confinement(spec, env)
    try:
        async with _streams(spec, argv, env, hooks, lost, send_span) as streams:
            yield streams
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


@asynccontextmanager
async def _streams(
    spec: ConnectionSpec,
    argv: list[str],
    env: dict[str, str],
    hooks: Hooks,
    lost: LostSignal,
    send_span: SendSpan,
) -> AsyncIterator[Streams]:
    # stdout is a pipe of our own, read by a protocol rather than anyio's
    # stream and a reader task: an answer reaches its caller a loop turn sooner.
    stdout_read, stdout_write = os.pipe()
    try:
        process = await _spawn(spec, argv, env, stdout_write)
    except BaseException:
        os.close(stdout_read)
        raise
    finally:
        os.close(stdout_write)

    pid = process.pid
    CHILD_GROUPS.add(pid)  # start_new_session: the server leads its own group
    hooks.on_spawn(pid)
    read_writer, read_stream = anyio.create_memory_object_stream[
        SessionMessage | Exception
    ](0)
    garbage = [0]
    broken: list[anyio.Event] = []
    said = _LastWords(confined=spec.sandbox.active)

    async def on_broken() -> None:
        """stdin failed: usually the server died, and its exit code says more
        than the pipe. Reported once (other failed writers wait for it, so
        they too see the loss report); the session's read stream then ends."""
        if broken:
            await broken[0].wait()
            return
        broken.append(anyio.Event())
        try:
            code = await _exit_code(process, EXIT_CODE_WAIT)
            reason = (
                "server stopped reading stdin"
                if code is None
                else await said.after(_exit_text(code), code)
            )
            lost.set(LossReport(reason, exit_code=code, error_type="ProcessExited"))
            relay.close()
            await read_writer.aclose()
        finally:
            broken[0].set()

    assert process.stdin is not None
    write_stream = _StdinWriter(process.stdin, on_broken)
    relay = StdioRelay(
        write_stream.send_line,
        lambda *args: tg.start_soon(*args),
        send_span,
        on_log=hooks.on_log,
    )
    lines = StdoutLines(relay.take, hooks.on_stderr)
    pipe: BinaryIO | None = None
    try:
        pipe = os.fdopen(stdout_read, "rb", buffering=0)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: lines, pipe
        )
    except BaseException:  # cancelled here too (a removal mid-connect)
        if pipe is None:
            os.close(stdout_read)
        else:
            pipe.close()
        with anyio.CancelScope(shield=True):
            await _stop_process(process)
        read_writer.close()
        read_stream.close()
        raise

    async def stdout_reader() -> None:
        """What the relay did not take, to the SDK session, in order."""
        try:
            async with read_writer:
                while (line := await lines.next()) is not None:
                    if relay.take(line):
                        continue
                    message = _parse_stdout_line(line, garbage, hooks)
                    if message is not None:
                        await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            relay.close()  # where the SDK session sees the end too
        stdout_ended.set()
        code = await _exit_code(process, EXIT_CODE_WAIT)
        reason = (
            "server closed stdout"
            if code is None
            else await said.after(_exit_text(code), code)
        )
        lost.set(LossReport(reason, exit_code=code, error_type="ProcessExited"))

    stdout_ended = anyio.Event()

    async def exit_watcher() -> None:
        """The process's own exit (its pidfd, Linux), for a server whose
        stdout stays open after it: a child it started holds a copy of the
        pipe. The end of stdout reports the loss as a rule; where it does not
        come, this does, with the exit code."""
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # not Linux, or an old kernel
            return
        try:
            await anyio.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        with anyio.move_on_after(EXIT_CODE_WAIT):
            await stdout_ended.wait()
        if stdout_ended.is_set():
            return  # told there, as always
        code = await _exit_code(process, EXIT_CODE_WAIT)
        reason = (
            "server exited"
            if code is None
            else await said.after(_exit_text(code), code)
        )
        reason += " (its stdout stays open: a process it started holds it)"
        lost.set(LossReport(reason, exit_code=code, error_type="ProcessExited"))
        relay.close()
        await read_writer.aclose()  # the session sees the end

    async def stderr_reader() -> None:
        assert process.stderr is not None
        buffer = b""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > 64 * 1024:
                    lines.append(buffer)
                    buffer = b""
                for line in lines:
                    text = line.decode("utf-8", "replace").rstrip("\r")
                    said.hear(text)
                    hooks.on_stderr(text)  # cut after masking (Connection)
        if buffer:
            said.hear(buffer.decode("utf-8", "replace"))
            hooks.on_stderr(buffer.decode("utf-8", "replace"))
        said.ended.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stdout_reader)
            tg.start_soon(stderr_reader)
            tg.start_soon(exit_watcher)
            try:
                yield Streams(read_stream, write_stream, pid, relay)
            finally:
                with anyio.CancelScope(shield=True):
                    relay.close()
                    await _stop_process(process)
                    write_stream.close()
                    read_stream.close()
                    tg.cancel_scope.cancel()
    finally:
        transport.close()


async def _spawn(
    spec: ConnectionSpec, argv: list[str], env: dict[str, str], stdout: int
) -> anyio.abc.Process:
    try:
        return await anyio.open_process(
            argv,
            stdin=-1,
            stdout=stdout,
            stderr=-1,
            env=env,
            cwd=spec.cwd,
            start_new_session=True,
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        # a failed start only: one stat, not on any path that runs often
        if spec.cwd is not None and not os.path.isdir(spec.cwd):  # noqa: ASYNC240
            raise ConnectFailed(
                f"cannot start {spec.command!r}: its cwd {spec.cwd!r} is not a "
                "directory (fix cwd in startup.lua, or create it)"
            ) from exc
        raise ConnectFailed(
            f"cannot start {spec.command!r}: not found (check command and PATH)"
        ) from exc
    except PermissionError as exc:
        raise ConnectFailed(
            f"cannot start {spec.command!r}: permission denied"
        ) from exc
    except OSError as exc:
        raise ConnectFailed(
            f"cannot start {spec.command!r}: {exc.strerror or exc}"
        ) from exc


class StdoutLines(asyncio.Protocol):
    """A stdio server's stdout, cut into lines in the event loop's callback.

    A line the relay takes (the answer to one of its calls, its progress, a
    log message) is handed over right there, so the waiting call wakes on
    the next loop turn, not after a reader task's. Every other line queues
    for `next()` (the reader task, which forwards it to the SDK session), and
    once one waits there, the lines after it queue behind it: the relay never
    sees a line before one the server wrote earlier. Reading pauses while more
    than `HIGH_WATER` lines wait (the SDK session sets the pace).

    Args:
        take: The relay's `take` (True: the line was its).
        on_stderr: Where a note about an over-long line goes.
    """

    HIGH_WATER = 64

    def __init__(
        self, take: Callable[[bytes], bool], on_stderr: Callable[[str], None]
    ) -> None:
        self._take = take
        self._on_stderr = on_stderr
        self._parts: list[bytes] = []
        """A line begun, not ended yet: its chunks, joined once it ends (a
        long line costs its length, not its length times its chunks)."""
        self._size = 0
        self._queue: collections.deque[bytes] = collections.deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A read pipe's transport (uvloop's is not an asyncio.ReadTransport
        # subclass, but has its methods).
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        if b"\n" not in data:
            self._size += len(data)
            if self._size > MAX_LINE:
                self._on_stderr(f"[stdout] line longer than {MAX_LINE} bytes dropped")
                self._parts, self._size = [], 0
            else:
                self._parts.append(data)
            return
        if self._parts:
            data = b"".join((*self._parts, data))
        *lines, rest = data.split(b"\n")
        self._parts, self._size = ([rest], len(rest)) if rest else ([], 0)
        queue = self._queue
        for line in lines:
            if not queue and self._take(line):
                continue
            queue.append(line)
        if queue:
            self._wake()
            if len(queue) > self.HIGH_WATER and not self._paused:
                self._paused = True
                assert self._transport is not None
                self._transport.pause_reading()

    def eof_received(self) -> None:
        self._end()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> bytes | None:
        """The next line the relay did not take; None once stdout ended."""
        while not self._queue:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        line = self._queue.popleft()
        if self._paused and len(self._queue) <= self.HIGH_WATER // 2:
            self._paused = False
            assert self._transport is not None
            self._transport.resume_reading()
        return line


class _StdinWriter:
    """The session's write stream: each message goes straight onto the
    server's stdin from the task that sends it (a line is written whole, so
    concurrent senders never interleave), not through a writer task: one hop
    less per request.

    Args:
        stdin: The server's stdin.
        on_broken: Reports the server's end when stdin fails (once).
    """

    def __init__(
        self, stdin: anyio.abc.ByteSendStream, on_broken: Callable[[], Awaitable[None]]
    ) -> None:
        self._stdin = stdin
        self._on_broken = on_broken
        self._closed = False

    async def send(self, item: SessionMessage) -> None:
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.send_line(data.encode() + b"\n")

    async def send_line(self, data: bytes) -> None:
        """Write one JSON-RPC line (the relay's requests come this way too),
        without our link token (`unlinked`): a pipe links nothing."""
        if self._closed:
            raise anyio.ClosedResourceError
        data = unlinked(data)
        try:
            if not write_at_once(self._stdin, data):
                await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            await self._on_broken()
            raise anyio.BrokenResourceError from exc

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> _StdinWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


def _parse_stdout_line(
    line: bytes, garbage: list[int], hooks: Hooks
) -> SessionMessage | None:
    """One JSON-RPC message, or None for a blank or garbage line (reported, dropped)."""
    line = line.rstrip(b"\r")
    if not line.strip():
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        garbage[0] += 1
        if garbage[0] <= 3 or garbage[0] % 100 == 0:
            # Long enough that a secret in it is masked whole before the
            # connection cuts the note to its line limit.
            sample = line[:GARBAGE_SAMPLE].decode("utf-8", "replace")
            hooks.on_stderr(
                f"[stdout] not JSON-RPC (line {garbage[0]} of garbage): {sample!r}"
            )
        return None
    return SessionMessage(message)


async def _exit_code(process: anyio.abc.Process, limit: float) -> int | None:
    """The exit code once the event loop has seen the exit, polling `returncode`.

    Not `process.wait()`: on asyncio it also waits for pipe EOF, and a grandchild
    holding the pipes would make an exited server look alive.
    """
    with anyio.move_on_after(limit):
        while process.returncode is None:  # noqa: ASYNC110 - no event to wait on
            await anyio.sleep(0.005)
    return process.returncode


class _LastWords:
    """A server's last stderr line, for the reason it exited: a server that
    cannot start usually says why there ("missing API key") before exiting
    with a bare code. Masked with the rest of the reason (the supervisor)."""

    def __init__(self, confined: bool = False) -> None:
        self.line = ""
        self._confined = confined
        self.ended = anyio.Event()
        """stderr reached its end (the server and its children closed it)."""

    def hear(self, line: str) -> None:
        if line.strip():
            self.line = line.strip()

    async def after(self, reason: str, code: int) -> str:
        """`reason`, with the last line the server wrote to stderr if it
        exited (not when killed: its last line is then no reason). Waits for
        what is still in the pipe, `STDERR_DRAIN` at most (a grandchild may
        hold it open)."""
        if code < 0:
            return reason
        with anyio.move_on_after(STDERR_DRAIN):
            await self.ended.wait()
        if not self.line:
            return reason
        line = self.line if len(self.line) <= 200 else self.line[:199] + "…"
        reason = f"{reason} (its last stderr line: {line})"
        if self._confined and _REFUSED.search(self.line):
            reason += (
                "; the sandbox may have refused it: give the path in its "
                "sandbox's read (or write) in startup.lua"
            )
        return reason


_REFUSED = re.compile(
    r"permission denied|operation not permitted|\bEACCES\b|\bEPERM\b|"
    r"PermissionError",
    re.IGNORECASE,
)
"""What a server says when the kernel refused it a file (Landlock: EACCES)."""


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"server killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"server killed by signal {-code}"
    return f"server exited with code {code}"


async def _stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, grace, SIGTERM the group, SIGKILL the group; sweep the group.

    Bounded by STDIN_CLOSE_GRACE + SIGTERM_GRACE + 2 * REAP_TIMEOUT (< 2 s). The
    final SIGKILL to the group also ends grandchildren the server left behind.
    """
    pgid = process.pid  # start_new_session: the server leads its own group
    if process.stdin is not None:
        with contextlib.suppress(
            OSError, anyio.BrokenResourceError, anyio.ClosedResourceError
        ):
            await process.stdin.aclose()
    if await _exit_code(process, STDIN_CLOSE_GRACE) is None:
        _killpg(pgid, signal.SIGTERM)
        if await _exit_code(process, SIGTERM_GRACE) is None:
            _killpg(pgid, signal.SIGKILL)
            if await _exit_code(process, REAP_TIMEOUT) is None:
                logger.warning(
                    "server process %d survived SIGKILL; abandoning it", pgid
                )
    _killpg(pgid, signal.SIGKILL)  # sweep grandchildren left in the group
    CHILD_GROUPS.discard(pgid)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(
                OSError, anyio.BrokenResourceError, anyio.ClosedResourceError
            ):
                await stream.aclose()
    release_process(process)  # the asyncio transport now, not at GC


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
