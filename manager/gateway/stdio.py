"""The endpoint's own stdin/stdout (`mcp-manager stdio`), without worker threads.

The SDK's `stdio_server` reads and writes through `anyio.wrap_file`: every line
read and every message written (write, then flush) is a hop to a worker thread
and back, three per forwarded call, which capped calls through `mcp-manager
stdio` well below a direct session. Here the pipes are read and written on the
event loop itself (non-blocking descriptors, `anyio.wait_readable` /
`wait_writable`), and messages that queued up while a write was in progress go
out in one `os.write`.

As the SDK does, the descriptors are claimed while serving: fd 0 points at the
null device and fd 1 at stderr, so a stray `print` or a child that inherits
them cannot corrupt the wire; both are restored on exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..core.once import stopped_error
from .stopping import LISTEN_METHOD

__all__ = [
    "READ_CHUNK",
    "WRITER_DRAIN_TIMEOUT",
    "Wires",
    "fd_streams",
    "stdio_streams",
]

READ_CHUNK = 256 * 1024
"""Bytes asked of stdin per read."""

WRITER_DRAIN_TIMEOUT = 2.0
"""Seconds the writer may take to send what is queued once serving ended."""


def _claim(fd: int, diversion: Callable[[], int]) -> tuple[int, int]:
    """Serve the wire from a private duplicate of `fd`; point `fd` elsewhere.

    Returns the private descriptor and its original status flags.
    """
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    flags = fcntl.fcntl(private, fcntl.F_GETFL)
    try:
        divert = diversion()
        try:
            os.dup2(divert, fd)
        finally:
            os.close(divert)
    except OSError:
        pass  # best effort, as the SDK: the wire still works, only unguarded
    fcntl.fcntl(private, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    return private, flags


def _restore(fd: int, private: int, flags: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(private, fcntl.F_SETFL, flags)
        os.dup2(private, fd)
    with contextlib.suppress(OSError):
        os.close(private)


async def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, READ_CHUNK)
        except BlockingIOError:
            await anyio.wait_readable(fd)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # boundary: passed on as the SDK's reader does
        return exc
    return SessionMessage(message)


def _encode(item: SessionMessage) -> bytes:
    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
    return data.encode() + b"\n"


@asynccontextmanager
async def stdio_streams(
    stdin_fd: int = 0, stdout_fd: int = 1
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Serve MCP messages on `stdin_fd` / `stdout_fd` (streams as the SDK's).

    The read stream ends when stdin does; whatever was sent on the write
    stream goes out (bounded by `WRITER_DRAIN_TIMEOUT`) before the exit.
    """
    read_fd, read_flags = _claim(stdin_fd, lambda: os.open(os.devnull, os.O_RDONLY))
    try:
        write_fd, write_flags = _claim(stdout_fd, lambda: os.dup(2))
    except BaseException:
        _restore(stdin_fd, read_fd, read_flags)
        raise
    try:
        async with fd_streams(read_fd, write_fd) as streams:
            yield streams
    finally:
        _restore(stdout_fd, write_fd, write_flags)
        _restore(stdin_fd, read_fd, read_flags)


@asynccontextmanager
async def fd_streams(
    read_fd: int,
    write_fd: int,
    already_read: bytes = b"",
    *,
    acks: bool = False,
    introduced: Callable[[object], bool] | None = None,
    wires: Wires | None = None,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """MCP messages, one JSON text per line, on non-blocking descriptors (a
    pipe pair, or one Unix socket for both), read and written on the loop.

    Every request read is in flight until its answer is written; those still
    in flight when serving ends (the daemon stops) are answered with
    `core.once.stopped_error` before the exit, bounded by
    `WRITER_DRAIN_TIMEOUT`, so no client waits on a request nobody will
    answer, or sends it again.

    Args:
        read_fd: Where messages come from.
        write_fd: Where messages go.
        already_read: Bytes read from `read_fd` before (the socket's
            greeting line had company); they come first.
        acks: Acknowledge each request read (`{"ack": [ids]}` on a line of
            its own) before it goes on to be served: `mcp-manager attach`
            then knows which requests the daemon took (`core.once`).
        introduced: Called with the params of each request read, until it
            returns True (it found who the client says it is: `clientInfo`
            of `initialize`, or of a 2026-07-28 request's envelope).
        wires: Where this one is known while it serves (`Wires.settle`).
    """
    read_writer, read_stream = anyio.create_memory_object_stream[
        SessionMessage | Exception
    ](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    wire = _Wire(write_fd)
    written = anyio.Event()
    introducing = [introduced] if introduced is not None else []

    async def hand_on(lines: list[bytes]) -> None:
        """Parse, note as in flight (acknowledged first, if asked), pass on."""
        parsed = [_parse(line) for line in lines if line.strip()]
        taken = wire.take(parsed)
        if taken and acks:
            await wire.send(_ack_line(taken))
        for message in parsed:
            if (
                introducing
                and isinstance(message, SessionMessage)
                and isinstance(message.message, types.JSONRPCRequest)
                and introducing[0](message.message.params)
            ):
                introducing.clear()
            await read_writer.send(message)

    async def reader() -> None:
        with contextlib.suppress(anyio.BrokenResourceError):  # serving ended
            await read_lines()

    async def read_lines() -> None:
        buffer = already_read
        async with read_writer:
            while True:
                *lines, buffer = buffer.split(b"\n")
                await hand_on(lines)
                try:
                    chunk = await _read(read_fd)
                except OSError:  # a reset socket: the client is gone
                    chunk = b""
                if not chunk:
                    break
                buffer += chunk
            await hand_on([buffer])  # a last line without its newline

    async def writer() -> None:
        try:
            await _write_messages(write_reader, wire)
        finally:
            written.set()

    if wires is not None:
        wires.add(wire)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            if wires is not None:
                wires.discard(wire)
            write_stream.close()
            read_stream.close()
            with anyio.move_on_after(WRITER_DRAIN_TIMEOUT, shield=True):
                await written.wait()
                await wire.answer_in_flight()
            tg.cancel_scope.cancel()


class _Wire:
    """The outgoing side of `fd_streams`: one writer at a time (an
    acknowledgement never lands inside a message), and the requests read
    and not answered yet.

    What a write left unsent stays in `pending`, so the last words at the
    end (`answer_in_flight`) finish the line a cancelled write began.
    """

    __slots__ = ("_fd", "_lock", "broken", "in_flight", "pending", "settled")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = anyio.Lock()
        self.pending = bytearray()
        self.in_flight: dict[types.RequestId, str] = {}
        self.broken = False
        self.settled: anyio.Event | None = None
        """Set once no request is in flight but listen streams (`Wires.settle`)."""

    @property
    def busy(self) -> bool:
        """A request is in flight that will end by itself (not a listen stream)."""
        return any(m != LISTEN_METHOD for m in self.in_flight.values())

    def take(self, messages: list[SessionMessage | Exception]) -> list[types.RequestId]:
        """Note the requests among `messages` as in flight; their ids."""
        taken = []
        for item in messages:
            if isinstance(item, SessionMessage):
                message = item.message
                if isinstance(message, types.JSONRPCRequest):
                    self.in_flight[message.id] = message.method
                    taken.append(message.id)
        return taken

    def answered(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id is not None:
                self.in_flight.pop(message.id, None)
                if self.settled is not None and not self.busy:
                    self.settled.set()

    async def send(self, data: bytes) -> None:
        """Write `data` after whatever is pending, all of it, one writer at a time.

        Raises:
            OSError: The peer is gone.
        """
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            await self._lock.acquire()
        try:
            self.pending += data
            await self._flush()
        finally:
            self._lock.release()

    async def _flush(self) -> None:
        try:
            while self.pending:
                try:
                    del self.pending[: os.write(self._fd, self.pending)]
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
        except OSError:
            self.broken = True
            raise

    async def answer_in_flight(self) -> None:
        """Finish what was being written, then answer every request still in
        flight with `stopped_error` (the daemon stops: nobody else will)."""
        if self.broken:
            return
        lines = [
            json.dumps(stopped_error(request_id, method))
            for request_id, method in self.in_flight.items()
        ]
        self.in_flight.clear()
        if lines:
            self.pending += ("\n".join(lines) + "\n").encode()
        with contextlib.suppress(OSError):
            await self._flush()


class Wires:
    """The `fd_streams` of one server (`mcp-manager attach` clients), for
    a stop that lets their requests in flight end by themselves first."""

    def __init__(self) -> None:
        self._wires: set[_Wire] = set()

    def add(self, wire: _Wire) -> None:
        self._wires.add(wire)

    def discard(self, wire: _Wire) -> None:
        self._wires.discard(wire)

    async def settle(self, grace: float) -> None:
        """Until no request is in flight on any of them (a listen stream
        aside), at most `grace` seconds: a call the stop already ended (one
        that waited for approval: not sent) answers in its own words, not
        with `stopped_error`."""
        with anyio.move_on_after(grace):
            for wire in list(self._wires):
                while wire.busy:
                    wire.settled = anyio.Event()
                    await wire.settled.wait()


def _ack_line(ids: list[types.RequestId]) -> bytes:
    return json.dumps({"ack": ids}).encode() + b"\n"


async def _write_messages(
    messages: MemoryObjectReceiveStream[SessionMessage], wire: _Wire
) -> None:
    """Write each message; those that queued meanwhile go out in one write."""
    async with messages:
        async for item in messages:
            wire.answered(item)
            parts = [_encode(item)]
            with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
                while True:
                    more = messages.receive_nowait()
                    wire.answered(more)
                    parts.append(_encode(more))
            try:
                await wire.send(b"".join(parts))
            except OSError:  # the client is gone: senders see a closed stream
                return
