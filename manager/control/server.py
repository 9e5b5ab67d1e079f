"""The control API's server: serves the wire format of `protocol` inside the daemon.

One task per client connection; every request is handed to `dispatch`, which
calls the `ControlBackend` (the daemon). Bounds and the protocol are in `protocol`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import (
    ControlError,
)
from .dispatch import BadRequest, ControlBackend, dispatch, parse_request
from .keys import matches, peer, remove_key, write_key
from .paths import KEY_FIELD, clear_stale_socket, key_path, prepare_socket_dir
from .protocol import (
    IDLE_TIMEOUT,
    MAX_REQUEST_BYTES,
    SEND_TIMEOUT,
    encode,
)

if TYPE_CHECKING:
    from anyio.abc import SocketStream, TaskStatus


__all__ = ["serve_control"]

logger = logging.getLogger("manager.control")


_RUNS_TOOLS = frozenset({"call", "request"})
"""Commands that make a server do something: not made for a client gone."""

_STREAM_BATCH = 256
"""Queued events written to a streaming client in one send."""


class _LineTooLong(BadRequest):
    """The request line exceeds MAX_REQUEST_BYTES; the connection must end."""


class _Conn:
    """One accepted client: line reads and bounded writes on its raw socket.

    Reads and writes go through `anyio.wait_readable`/`wait_writable` on the
    non-blocking socket rather than anyio's `UNIXSocketStream`: on asyncio (anyio
    4.16) that stream's `receive()`, when cancelled in the same loop iteration as
    data or EOF arrives, makes asyncio log an `InvalidStateError` from
    `Future.set_result`; and cancelling reads (idle timeout, server shutdown,
    end of stream) is routine here.
    """

    def __init__(self, sock: socket.socket, idle_timeout: float) -> None:
        self.sock = sock
        self.idle_timeout = idle_timeout
        self.buffer = bytearray()
        self.eof = False

    async def receive(self) -> bytes:
        """The next chunk; b"" at end of stream."""
        import anyio

        await anyio.lowlevel.checkpoint()
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not data:
                self.eof = True
            return data

    def hung_up(self) -> bool:
        """The client closed its end for good (it was killed, or gave up
        waiting): what it asked for is not wanted. A client that only shut
        its writing half still reads the answer: not hung up."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)  # HUP and ERR come anyway
        return any(
            events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0)
        )

    async def read_request(self) -> bytes | None:
        """The next request line; None at end of stream or after the idle timeout.

        A last line without its newline is returned at end of stream.

        Raises:
            _LineTooLong: The line is longer than MAX_REQUEST_BYTES.
        """
        import anyio

        scanned = 0
        with anyio.move_on_after(self.idle_timeout) as idle:
            while True:
                index = self.buffer.find(b"\n", scanned)
                scanned = len(self.buffer)
                if index >= 0:
                    line = bytes(self.buffer[:index])
                    del self.buffer[: index + 1]
                    return line
                if len(self.buffer) > MAX_REQUEST_BYTES:
                    raise _LineTooLong(
                        f"request line longer than {MAX_REQUEST_BYTES} bytes"
                    )
                if self.eof:
                    rest = bytes(self.buffer)
                    self.buffer.clear()
                    return rest if rest.strip() else None
                self.buffer += await self.receive()
        if idle.cancelled_caught:
            logger.debug(
                "control: dropping a client idle for %.0f s", self.idle_timeout
            )
        return None

    async def send(self, data: bytes) -> None:
        """Write all of `data`, however long the client takes to read it.

        Raises:
            OSError: The client went away.
        """
        import anyio

        await anyio.lowlevel.checkpoint()
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    async def reply(self, response: object) -> None:
        """Write one response line within SEND_TIMEOUT.

        Raises:
            TimeoutError: The client did not read it in time.
            OSError: The client went away.
        """
        import anyio

        with anyio.fail_after(SEND_TIMEOUT):
            await self.send(encode(response))


HANGUP_POLL = 0.5
"""Seconds between two looks for a hang-up of a half-closed client."""


async def _unless_hung_up(
    conn: _Conn, backend: ControlBackend, cmd: str, req: Mapping[str, object]
) -> tuple[object] | None:
    """`dispatch` a request that runs a tool, cancelled if its client hangs up
    meanwhile; (its answer,), or None when the client left first."""
    import anyio

    answer: list[object] = []

    async def watch() -> None:
        await anyio.wait_readable(conn.sock)  # a client sends nothing more
        while not conn.hung_up():  # noqa: ASYNC110 - a socket state, no event
            await anyio.sleep(HANGUP_POLL)
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        answer.append(await dispatch(backend, cmd, req))
        tg.cancel_scope.cancel()
    return (answer[0],) if answer else None


async def _stream_events(
    backend: ControlBackend, conn: _Conn, since: int | None
) -> None:
    """Send every event to the client until it disconnects (`since`: the kept
    events after that `seq` first)."""
    import anyio

    from ..core.events import event_to_dict  # server side only: clients stay light

    with (
        backend.subscribe("control")
        if since is None
        else backend.subscribe("control", since)
    ) as sub:
        await conn.reply({"ok": True, "result": "streaming"})
        async with anyio.create_task_group() as tg:

            async def watch_client() -> None:
                # Whatever the client sends now is ignored; EOF ends the stream.
                with contextlib.suppress(OSError):
                    while await conn.receive():
                        pass
                tg.cancel_scope.cancel()

            tg.start_soon(watch_client)
            try:
                async for event in sub:
                    lines = [encode(event_to_dict(event))]
                    while len(lines) < _STREAM_BATCH:
                        more = sub.receive_nowait()
                        if more is None:
                            break
                        lines.append(encode(event_to_dict(more)))
                    # No send timeout: a paused reader (`events | less`) only fills
                    # its own bounded subscription, which then reports `lagged`.
                    await conn.send(b"".join(lines))
            except OSError:
                logger.debug("control: event stream client went away")
            tg.cancel_scope.cancel()  # the client left, or the subscription closed


def _proves(line: bytes, key: str) -> bool:
    """Whether a request line carries the daemon's key (`control.keys`)."""
    try:
        request = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(request, dict) and matches(key, request.get(KEY_FIELD))


async def _handle_client(
    backend: ControlBackend,
    stream: SocketStream,
    idle_timeout: float,
    key: str,
    where: Path,
) -> None:
    from anyio.abc import SocketAttribute

    async with stream:
        raw = stream.extra(SocketAttribute.raw_socket)
        conn = _Conn(raw, idle_timeout)
        proven = False
        try:
            while True:
                try:
                    line = await conn.read_request()
                    if line is None:
                        return
                    if line.strip():
                        if not proven and not _proves(line, key):
                            await _refuse(conn, raw, where)
                            return
                        proven = True
                        cmd, req = parse_request(line)
                        if cmd == "events":
                            since = req.get("since")
                            if since is not None and (
                                not isinstance(since, int)
                                or isinstance(since, bool)
                                or since < 0
                            ):
                                raise BadRequest(
                                    'events: "since" must be an integer >= 0'
                                )
                            await _stream_events(backend, conn, since)
                            return
                        if cmd in _RUNS_TOOLS and conn.hung_up():
                            # Read late (the daemon was stopped or busy): a
                            # call its client gave up on is not made.
                            logger.info(
                                "control: not made: %s of %s, asked by a client "
                                "that left before it began",
                                cmd,
                                req.get("server"),
                            )
                            return
                        if cmd in _RUNS_TOOLS:
                            # A client that goes while its call waits (for the
                            # user's approval, say) takes the call with it.
                            done = await _unless_hung_up(conn, backend, cmd, req)
                            if done is None:
                                logger.info(
                                    "control: %s of %s cancelled: its client left "
                                    "while it waited",
                                    cmd,
                                    req.get("server"),
                                )
                                return
                            await conn.reply(done[0])
                            continue
                        await conn.reply(await dispatch(backend, cmd, req))
                except BadRequest as exc:
                    error = {"type": "ControlError", "message": str(exc)}
                    await conn.reply({"ok": False, "error": error})
                    if isinstance(exc, _LineTooLong):
                        return  # the next request boundary cannot be found
        except (OSError, TimeoutError):
            logger.debug("control: client went away")
        except Exception:  # boundary: one client must never take the server down
            logger.exception("control: client handler failed")


async def _refuse(conn: _Conn, raw: socket.socket, where: Path) -> None:
    """Turn away a client that did not send the key, and say who it was."""
    logger.warning(
        "control: refused %s: it did not send the daemon's key (clients read "
        "it from %s; a confined server cannot)",
        peer(raw),
        where,
    )
    message = (
        "refused: this request does not carry the daemon's key "
        f"(mcp-manager's clients read it from {where})"
    )
    await conn.reply(
        {"ok": False, "error": {"type": "ControlError", "message": message}}
    )


def _remove_socket(path: Path, inode: int) -> None:
    """Remove the socket file, unless another daemon has replaced it since."""
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


async def serve_control(
    backend: ControlBackend,
    path: Path,
    *,
    idle_timeout: float = IDLE_TIMEOUT,
    task_status: TaskStatus[str] | None = None,
) -> None:
    """Serve the control API on the Unix socket `path` until cancelled.

    Creates the socket directory (0700) if needed and the socket (0600); replaces
    a stale socket file; writes a new key beside it (`control.keys`: a client
    whose first request does not carry it is refused); removes both on exit.
    Each client runs in its own task. Use as `key = await tg.start(serve_control,
    backend, path)`: the key is what the attach socket asks too.

    Args:
        backend: The daemon side of every command.
        path: The socket path (see `socket_path`).
        idle_timeout: Seconds a client may stay silent while a request is due.
        task_status: Set, with the key, once the socket is listening (anyio
            `tg.start`).

    Raises:
        ControlError: Another daemon is listening on `path`, or the path or its
            directory cannot be used.
    """
    import anyio

    prepare_socket_dir(path.parent)
    # Blocking, but sub-millisecond on a local socket (bounded by a 1 s timeout);
    # it must run before anyio's listener would silently unlink the file.
    clear_stale_socket(path)
    # The key before the socket: a client that can connect can read it.
    where = key_path(path)
    try:
        key, key_inode = write_key(path)
    except OSError as exc:
        raise ControlError(
            f"cannot write the daemon's key {where}: {exc.strerror or exc}"
        ) from exc
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except OSError as exc:
        remove_key(path, key_inode)
        raise ControlError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    inode = os.lstat(path).st_ino
    try:
        async with listener:
            logger.debug("control: listening on %s", path)
            if task_status is not None:
                task_status.started(key)

            async def handler(stream: SocketStream) -> None:
                await _handle_client(backend, stream, idle_timeout, key, where)

            await listener.serve(handler)
    finally:
        _remove_socket(path, inode)
        remove_key(path, key_inode)
