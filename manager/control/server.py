"""The control API's server: serves the wire format of `protocol` inside the daemon.

One task per client connection; every request is dispatched to a
`ControlBackend` (the daemon). Bounds and the protocol are in `protocol`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.errors import (
    ControlError,
    ManagerError,
)
from .paths import prepare_socket_dir
from .protocol import (
    IDLE_TIMEOUT,
    LOGIN_DEFAULT_TIMEOUT,
    MAX_REQUEST_BYTES,
    SEND_TIMEOUT,
    encode,
    error_body,
)

if TYPE_CHECKING:
    from anyio.abc import SocketStream, TaskStatus

    from ..engine.bus import Subscription

__all__ = ["ControlBackend", "serve_control"]

logger = logging.getLogger("manager.control")

_STALE_PROBE_TIMEOUT = 1.0
"""Seconds spent checking whether an existing socket file has a live daemon."""

_STREAM_BATCH = 256
"""Queued events written to a streaming client in one send."""


class ControlBackend(Protocol):
    """What the control server needs from the daemon."""

    def status(self) -> list[dict[str, object]]:
        """A JSON-ready snapshot, one dict per connection."""
        ...

    def subscribe(self, name: str) -> Subscription:
        """A new bus subscription; the server closes it when the client leaves."""
        ...

    def info(self) -> dict[str, object]:
        """Daemon-wide facts: config file, last reload result, drops, exporters."""
        ...

    def reconnect(self, server: str) -> dict[str, object]:
        """Make `server` try to connect now, skipping its backoff wait.

        Raises:
            UnknownServer: No such connection.
        """
        ...

    def details(self, server: str) -> dict[str, object]:
        """`server`'s spec (secrets masked), last stderr lines and tool names.

        Raises:
            UnknownServer: No such connection.
        """
        ...

    async def reload(self) -> dict[str, object]:
        """Run startup.lua again and apply it.

        Raises:
            ConfigError: The script failed; nothing was changed.
        """
        ...

    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109  (the per-call MCP timeout, not ours)
    ) -> dict[str, object]:
        """Call a tool; returns the JSON-ready `CallToolResult` dict.

        Raises:
            CallError: The call could not be made or did not finish.
        """
        ...

    async def request(
        self,
        server: str,
        op: str,
        target: str,
        args: dict[str, object],
        timeout: float | None,  # noqa: ASYNC109  (the per-request MCP timeout)
    ) -> dict[str, object]:
        """`read` a resource or get a `prompt`; returns the JSON-ready result.

        Raises:
            CallError: The request could not be made or did not finish.
        """
        ...

    def catalog(self, kind: str, server: str | None) -> list[dict[str, object]]:
        """What `tools`, `prompts` or `resources` each connection has, with the
        name the endpoint exposes and whether its filter hides it."""
        ...

    async def login(self, server: str, timeout: float) -> dict[str, object]:  # noqa: ASYNC109
        """Begin an OAuth login: the authorization URL once known, or the end."""
        ...

    async def login_wait(self, server: str, timeout: float) -> dict[str, object]:  # noqa: ASYNC109
        """Wait for the login of `server` to end: connected, or why not."""
        ...

    def login_callback(self, server: str, url: str) -> dict[str, object]:
        """Take the redirect URL a user pasted (`login --manual`)."""
        ...

    def logout(self, server: str) -> dict[str, object]:
        """Forget the tokens and client registration of `server`."""
        ...


class _BadRequest(Exception):
    """The request line is not a valid request; answered with ControlError."""


def _parse_request(line: bytes) -> tuple[str, dict[str, object]]:
    try:
        req = json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _BadRequest(f"request is not valid JSON: {exc}") from None
    if not isinstance(req, dict):
        raise _BadRequest(f"request must be a JSON object, got {type(req).__name__}")
    cmd = req.pop("cmd", None)
    if not isinstance(cmd, str):
        raise _BadRequest('request needs "cmd" (a string)')
    allowed = _ARGUMENTS.get(cmd)
    if allowed is None:
        known = ", ".join(sorted(_ARGUMENTS))
        raise _BadRequest(f"unknown command {cmd!r}; known: {known}")
    extra = sorted(set(req) - allowed)
    if extra:
        raise _BadRequest(f"{cmd}: unknown argument(s) {', '.join(extra)}")
    return cmd, req


_ARGUMENTS: dict[str, frozenset[str]] = {
    "ping": frozenset(),
    "status": frozenset(),
    "info": frozenset(),
    "reload": frozenset(),
    "reconnect": frozenset({"server"}),
    "details": frozenset({"server"}),
    "events": frozenset({"json"}),
    "call": frozenset({"server", "tool", "args", "timeout"}),
    "request": frozenset({"server", "op", "target", "args", "timeout"}),
    "catalog": frozenset({"kind", "server"}),
    "login": frozenset({"server", "timeout"}),
    "login_wait": frozenset({"server", "timeout"}),
    "login_callback": frozenset({"server", "url"}),
    "logout": frozenset({"server"}),
}

CATALOG_KINDS = ("tools", "prompts", "resources")
REQUEST_OPS = ("read", "prompt")


def _call_arguments(
    req: Mapping[str, object],
) -> tuple[str, str, dict[str, object], float | None]:
    server, tool = req.get("server"), req.get("tool")
    args = req.get("args", {})
    timeout = req.get("timeout")
    if not isinstance(server, str) or not server:
        raise _BadRequest('call: "server" must be a non-empty string')
    if not isinstance(tool, str) or not tool:
        raise _BadRequest('call: "tool" must be a non-empty string')
    if not isinstance(args, dict):
        raise _BadRequest('call: "args" must be a JSON object')
    if timeout is not None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise _BadRequest('call: "timeout" must be a positive number or null')
        timeout = float(timeout)
    return server, tool, args, timeout


async def _login_command(
    backend: ControlBackend, cmd: str, req: Mapping[str, object]
) -> object:
    server = req.get("server")
    if not isinstance(server, str) or not server:
        raise _BadRequest(f'{cmd}: "server" must be a non-empty string')
    if cmd == "logout":
        return backend.logout(server)
    if cmd == "login_callback":
        url = req.get("url")
        if not isinstance(url, str) or not url:
            raise _BadRequest('login_callback: "url" must be a non-empty string')
        return backend.login_callback(server, url)
    timeout = req.get("timeout", LOGIN_DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise _BadRequest(f'{cmd}: "timeout" must be a positive number')
    if cmd == "login":
        return await backend.login(server, float(timeout))
    return await backend.login_wait(server, float(timeout))


async def _dispatch(
    backend: ControlBackend, cmd: str, req: Mapping[str, object]
) -> object:
    """Run one non-streaming command; returns the response object."""
    try:
        if cmd == "ping":
            result: object = {"pid": os.getpid()}
        elif cmd == "status":
            result = backend.status()
        elif cmd == "info":
            result = backend.info()
        elif cmd == "reload":
            result = await backend.reload()
        elif cmd in ("reconnect", "details"):
            server = req.get("server")
            if not isinstance(server, str) or not server:
                raise _BadRequest(f'{cmd}: "server" must be a non-empty string')
            if cmd == "reconnect":
                result = backend.reconnect(server)
            else:
                result = backend.details(server)
        elif cmd == "catalog":
            kind, server = req.get("kind"), req.get("server")
            if kind not in CATALOG_KINDS:
                raise _BadRequest(f'catalog: "kind" must be one of {CATALOG_KINDS}')
            if server is not None and not isinstance(server, str):
                raise _BadRequest('catalog: "server" must be a string or null')
            result = backend.catalog(str(kind), server)
        elif cmd in ("login", "login_wait", "login_callback", "logout"):
            result = await _login_command(backend, cmd, req)
        elif cmd == "request":
            op = req.get("op")
            if op not in REQUEST_OPS:
                raise _BadRequest(f'request: "op" must be one of {REQUEST_OPS}')
            server, target, args, timeout = _call_arguments(
                {**req, "tool": req.get("target")}
            )
            result = await backend.request(server, str(op), target, args, timeout)
        else:  # call
            server, tool, args, timeout = _call_arguments(req)
            result = await backend.call(server, tool, args, timeout)
    except _BadRequest as exc:
        return {"ok": False, "error": {"type": "ControlError", "message": str(exc)}}
    except ManagerError as exc:
        return {"ok": False, "error": error_body(exc)}
    except Exception as exc:  # boundary: a backend bug must not kill the server
        logger.exception("control: %s failed", cmd)
        message = f"internal error ({type(exc).__name__}); see the daemon's log"
        return {"ok": False, "error": {"type": "InternalError", "message": message}}
    return {"ok": True, "result": result}


class _LineTooLong(_BadRequest):
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


async def _stream_events(backend: ControlBackend, conn: _Conn) -> None:
    """Send every event to the client until it disconnects."""
    import anyio

    from ..core.events import event_to_dict  # server side only: clients stay light

    with backend.subscribe("control") as sub:
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


async def _handle_client(
    backend: ControlBackend, stream: SocketStream, idle_timeout: float
) -> None:
    from anyio.abc import SocketAttribute

    async with stream:
        conn = _Conn(stream.extra(SocketAttribute.raw_socket), idle_timeout)
        try:
            while True:
                try:
                    line = await conn.read_request()
                    if line is None:
                        return
                    if line.strip():
                        cmd, req = _parse_request(line)
                        if cmd == "events":
                            await _stream_events(backend, conn)
                            return
                        await conn.reply(await _dispatch(backend, cmd, req))
                except _BadRequest as exc:
                    error = {"type": "ControlError", "message": str(exc)}
                    await conn.reply({"ok": False, "error": error})
                    if isinstance(exc, _LineTooLong):
                        return  # the next request boundary cannot be found
        except (OSError, TimeoutError):
            logger.debug("control: client went away")
        except Exception:  # boundary: one client must never take the server down
            logger.exception("control: client handler failed")


def _probe_existing(path: Path) -> None:
    """Remove a stale socket file at `path`; refuse a live one or a non-socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(
            f"{path} exists and is not a socket; remove it or choose another --socket"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(_STALE_PROBE_TIMEOUT)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # stale: left behind by a daemon that died
        return
    except OSError as exc:
        raise ControlError(f"cannot check the existing socket {path}: {exc}") from exc
    finally:
        probe.close()
    raise ControlError(f"another mcp-manager is already running on {path}")


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
    task_status: TaskStatus[None] | None = None,
) -> None:
    """Serve the control API on the Unix socket `path` until cancelled.

    Creates the socket directory (0700) if needed and the socket (0600); replaces
    a stale socket file; removes the socket on exit. Each client runs in its own
    task. Use as `await tg.start(serve_control, backend, path)`.

    Args:
        backend: The daemon side of every command.
        path: The socket path (see `socket_path`).
        idle_timeout: Seconds a client may stay silent while a request is due.
        task_status: Set once the socket is listening (anyio `tg.start`).

    Raises:
        ControlError: Another daemon is listening on `path`, or the path or its
            directory cannot be used.
    """
    import anyio

    prepare_socket_dir(path.parent)
    # Blocking, but sub-millisecond on a local socket (bounded by a 1 s timeout);
    # it must run before anyio's listener would silently unlink the file.
    _probe_existing(path)
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except OSError as exc:
        raise ControlError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    inode = os.lstat(path).st_ino
    try:
        async with listener:
            logger.debug("control: listening on %s", path)
            if task_status is not None:
                task_status.started()

            async def handler(stream: SocketStream) -> None:
                await _handle_client(backend, stream, idle_timeout)

            await listener.serve(handler)
    finally:
        _remove_socket(path, inode)
