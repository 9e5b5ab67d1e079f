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
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

__all__ = ["READ_CHUNK", "WRITER_DRAIN_TIMEOUT", "fd_streams", "stdio_streams"]

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


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


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
    read_fd: int, write_fd: int, already_read: bytes = b""
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """MCP messages, one JSON text per line, on non-blocking descriptors (a
    pipe pair, or one Unix socket for both), read and written on the loop.

    Args:
        read_fd: Where messages come from.
        write_fd: Where messages go.
        already_read: Bytes read from `read_fd` before (the socket's
            greeting line had company); they come first.
    """
    read_writer, read_stream = anyio.create_memory_object_stream[
        SessionMessage | Exception
    ](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()

    async def reader() -> None:
        buffer = already_read
        async with read_writer:
            while True:
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        await read_writer.send(_parse(line))
                try:
                    chunk = await _read(read_fd)
                except OSError:  # a reset socket: the client is gone
                    chunk = b""
                if not chunk:
                    break
                buffer += chunk
            if buffer.strip():  # a last line without its newline
                await read_writer.send(_parse(buffer))

    async def writer() -> None:
        try:
            await _write_messages(write_reader, write_fd)
        finally:
            written.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            write_stream.close()
            read_stream.close()
            with anyio.move_on_after(WRITER_DRAIN_TIMEOUT, shield=True):
                await written.wait()
            tg.cancel_scope.cancel()


async def _write_messages(
    messages: MemoryObjectReceiveStream[SessionMessage], fd: int
) -> None:
    """Write each message; those that queued meanwhile go out in one write."""
    async with messages:
        async for item in messages:
            parts = [_encode(item)]
            with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
                while True:
                    parts.append(_encode(messages.receive_nowait()))
            try:
                await _write_all(fd, b"".join(parts))
            except OSError:  # the client is gone: senders see a closed stream
                return
