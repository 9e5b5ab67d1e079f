"""The control API: a Unix socket the CLI and an attached HUD talk to.

Protocol: newline-delimited JSON (UTF-8), one object per line, over a Unix
stream socket that only the daemon's user can reach (the socket is mode 0600 in a
0700 directory owned by that user).

* Request: `{"cmd": NAME, ...arguments}`; one connection may send several
  requests in turn. Commands and their arguments:

  ======== ================================================= ======================
  cmd      arguments                                         result
  ======== ================================================= ======================
  ping     none                                              `{"pid": int}`
  status   none                                              list of dicts, one per
                                                             connection
  info     none                                              dict: version, pid,
                                                             config, last_reload,
                                                             dropped, connections
  reload   none                                              dict (what changed)
  reconnect `server` str                                     `{"server", "retrying"}`
  details  `server` str                                      `{"spec": dict with
                                                             secrets masked,
                                                             "stderr": [str],
                                                             "tools": [str]}`
  call     `server` str, `tool` str, `args` object (default  the MCP
           `{}`), `timeout` number > 0 or null (default:     `CallToolResult` dict
           the connection's `call_timeout`)
  events   `json` bool (accepted, ignored: always JSON)      a stream, see below
  ======== ================================================= ======================

* Response: exactly one line, `{"ok": true, "result": ...}` or
  `{"ok": false, "error": {"type": ERROR_CLASS, "message": str}}`; for
  `ConfigError` the error also carries `file`, `line` and `connection`.
  `type` is the name of a class in `manager.errors` (`ConfigError`,
  `UnknownServer`, `ServerUnavailable`, `CallTimeout`, `CallError`,
  `ControlError` for a malformed request) or `InternalError`.
* Stream: `events` is answered with `{"ok": true, "result": "streaming"}`, then
  one line per event (`manager.events.event_to_dict`, which always has `kind`),
  in bus order, until either side closes. A `lagged` event says how many events
  this client missed because it read too slowly. The connection carries nothing
  else after `events`.

Bounds: a request line is at most `MAX_REQUEST_BYTES`; a connection that sends
nothing for `IDLE_TIMEOUT` seconds while a request is due is dropped (a client
that is streaming events is exempt); a response that cannot be written within
`SEND_TIMEOUT` seconds drops the client. A malformed request gets an error
response and never disturbs the server or other clients; an over-long line also
ends its connection, since the stream cannot be resynchronised.

The client half (`ControlClient`) uses the blocking stdlib `socket` module and
imports no anyio, so CLI commands start fast; the server half (`serve_control`)
imports anyio when it runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import socket
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import (
    CallError,
    CallTimeout,
    ConfigError,
    ControlError,
    ManagerError,
    ServerUnavailable,
    UnknownServer,
)
from .events import event_to_dict

if TYPE_CHECKING:
    from anyio.abc import SocketStream, TaskStatus

    from .bus import Subscription

__all__ = [
    "IDLE_TIMEOUT",
    "MAX_REQUEST_BYTES",
    "SEND_TIMEOUT",
    "ControlBackend",
    "ControlClient",
    "EventStream",
    "check_socket_dir",
    "prepare_socket_dir",
    "serve_control",
    "socket_path",
]

logger = logging.getLogger("manager.control")

MAX_REQUEST_BYTES = 1024 * 1024
"""Longest request line, in bytes, newline excluded."""

IDLE_TIMEOUT = 10.0
"""Seconds a connection may stay silent while the server waits for a request."""

SEND_TIMEOUT = 10.0
"""Seconds a response may take to be written before the client is dropped."""

CONNECT_TIMEOUT = 2.0
"""Seconds the client waits to connect to the daemon."""

REPLY_TIMEOUT = 30.0
"""Seconds the client waits for the answer to `ping`, `status` or `reload`."""

CALL_SLACK = 30.0
"""Seconds the client adds to a call's timeout: `hold` (default 5 s) plus margin."""

_STALE_PROBE_TIMEOUT = 1.0
"""Seconds spent checking whether an existing socket file has a live daemon."""

_STREAM_BATCH = 256
"""Queued events written to a streaming client in one send."""

_ERROR_TYPES: dict[str, type[ManagerError]] = {
    cls.__name__: cls
    for cls in (
        CallError,
        CallTimeout,
        ConfigError,
        ControlError,
        ServerUnavailable,
        UnknownServer,
    )
}


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


# ---------------------------------------------------------------- socket path


def socket_path(explicit: str | None = None) -> Path:
    """Where the control socket lives.

    In order: `explicit` (the `--socket` option), `$MCP_MANAGER_SOCKET`,
    `$XDG_RUNTIME_DIR/mcp-manager/control.sock`, `/tmp/mcp-manager-UID/control.sock`.
    Nothing is created.
    """
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("MCP_MANAGER_SOCKET")
    if env:
        return Path(env).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "mcp-manager" / "control.sock"
    return Path(f"/tmp/mcp-manager-{os.getuid()}") / "control.sock"


def check_socket_dir(directory: Path) -> None:
    """Refuse a socket directory that another user could reach or control.

    Raises:
        ControlError: `directory` is not a directory, is owned by another user, or
            is accessible to its group or to others.
    """
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise ControlError(f"{directory} is not a directory; choose another --socket")
    if st.st_mode & stat.S_ISVTX and st.st_uid in (0, os.getuid()):
        # A sticky shared directory such as /tmp: nobody else can remove or
        # replace our socket, whose own mode (0600) keeps others from connecting,
        # and the client checks that the socket is ours.
        return
    if st.st_uid != os.getuid():
        raise ControlError(
            f"{directory} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); "
            "refusing to use it for the control socket"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ControlError(
            f"{directory} is accessible to other users (mode {mode:04o}); "
            f"run `chmod 700 {directory}` or choose a --socket in a private directory"
        )


def prepare_socket_dir(directory: Path) -> None:
    """Create `directory` with mode 0700 (parents as needed), or check the one there.

    Raises:
        ControlError: It cannot be created, or fails `check_socket_dir`.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ControlError(
            f"cannot create the control socket directory {directory}: "
            f"{exc.strerror or exc}"
        ) from exc
    else:
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    check_socket_dir(directory)


# ----------------------------------------------------------------------- server


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
}


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


def _error_body(exc: ManagerError) -> dict[str, object]:
    if isinstance(exc, ConfigError):
        return {
            "type": "ConfigError",
            "message": exc.message,
            "file": exc.file,
            "line": exc.line,
            "connection": exc.connection,
        }
    return {"type": type(exc).__name__, "message": str(exc)}


def _encode(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, default=str).encode() + b"\n"


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
        else:  # call
            server, tool, args, timeout = _call_arguments(req)
            result = await backend.call(server, tool, args, timeout)
    except _BadRequest as exc:
        return {"ok": False, "error": {"type": "ControlError", "message": str(exc)}}
    except ManagerError as exc:
        return {"ok": False, "error": _error_body(exc)}
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

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
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
        """The next request line; None at end of stream or after IDLE_TIMEOUT.

        A last line without its newline is returned at end of stream.

        Raises:
            _LineTooLong: The line is longer than MAX_REQUEST_BYTES.
        """
        import anyio

        scanned = 0
        with anyio.move_on_after(IDLE_TIMEOUT) as idle:
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
            logger.debug("control: dropping a client idle for %.0f s", IDLE_TIMEOUT)
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
            await self.send(_encode(response))


async def _stream_events(backend: ControlBackend, conn: _Conn) -> None:
    """Send every event to the client until it disconnects."""
    import anyio

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
                    lines = [_encode(event_to_dict(event))]
                    while len(lines) < _STREAM_BATCH:
                        more = sub.receive_nowait()
                        if more is None:
                            break
                        lines.append(_encode(event_to_dict(more)))
                    # No send timeout: a paused reader (`events | less`) only fills
                    # its own bounded subscription, which then reports `lagged`.
                    await conn.send(b"".join(lines))
            except OSError:
                logger.debug("control: event stream client went away")
            tg.cancel_scope.cancel()  # the client left, or the subscription closed


async def _handle_client(backend: ControlBackend, stream: SocketStream) -> None:
    from anyio.abc import SocketAttribute

    async with stream:
        conn = _Conn(stream.extra(SocketAttribute.raw_socket))
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
    task_status: TaskStatus[None] | None = None,
) -> None:
    """Serve the control API on the Unix socket `path` until cancelled.

    Creates the socket directory (0700) if needed and the socket (0600); replaces
    a stale socket file; removes the socket on exit. Each client runs in its own
    task. Use as `await tg.start(serve_control, backend, path)`.

    Args:
        backend: The daemon side of every command.
        path: The socket path (see `socket_path`).
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
                await _handle_client(backend, stream)

            await listener.serve(handler)
    finally:
        _remove_socket(path, inode)


# ----------------------------------------------------------------------- client


def _raise_error(body: object) -> None:
    if not isinstance(body, dict):
        raise ControlError(f"the daemon sent a malformed error: {body!r}")
    kind = str(body.get("type", ""))
    message = str(body.get("message", "unknown error"))
    cls = _ERROR_TYPES.get(kind)
    if cls is ConfigError:
        file, line, conn = body.get("file"), body.get("line"), body.get("connection")
        raise ConfigError(
            message,
            file=file if isinstance(file, str) else None,
            line=line if isinstance(line, int) else None,
            connection=conn if isinstance(conn, str) else None,
        )
    if cls is not None:
        raise cls(message)
    raise ControlError(message)


def _unwrap(line: bytes) -> object:
    try:
        response = json.loads(line)
    except ValueError:
        raise ControlError(
            f"the daemon sent a malformed response: {line[:200]!r}"
        ) from None
    if not isinstance(response, dict) or "ok" not in response:
        raise ControlError(f"the daemon sent a malformed response: {line[:200]!r}")
    if not response["ok"]:
        _raise_error(response.get("error"))
    return response.get("result")


class ControlClient:
    """A blocking client of the control socket; one connection per request.

    Args:
        path: The socket (see `socket_path`).
        connect_timeout: Seconds to wait for the connection.
    """

    def __init__(self, path: Path, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.path = path
        self.connect_timeout = connect_timeout

    def _unreachable(self, reason: str) -> ControlError:
        return ControlError(
            f"cannot reach the mcp-manager daemon at {self.path}: {reason}; "
            "is `mcp-manager run` running?"
        )

    def _connect(self) -> socket.socket:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            check_socket_dir(self.path.parent)  # never talk to someone else's socket
            owner = os.stat(self.path).st_uid
            if owner != os.getuid():
                raise ControlError(
                    f"{self.path} belongs to uid {owner}, not to you; "
                    "refusing to talk to another user's socket"
                )
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.connect_timeout)
        try:
            sock.connect(os.fspath(self.path))
        except TimeoutError:
            sock.close()
            raise self._unreachable("timed out") from None
        except FileNotFoundError:
            sock.close()
            raise self._unreachable("no socket there") from None
        except ConnectionRefusedError:
            sock.close()
            raise self._unreachable("connection refused (stale socket)") from None
        except OSError as exc:
            sock.close()
            raise self._unreachable(str(exc.strerror or exc).lower()) from None
        return sock

    def _send(self, sock: socket.socket, request: Mapping[str, object]) -> None:
        try:
            sock.sendall(_encode(request))
        except OSError as exc:
            raise ControlError(
                f"lost the connection to the daemon at {self.path}: {exc}"
            ) from None

    def _read_line(
        self, sock: socket.socket, reader: io.BufferedReader, timeout: float | None
    ) -> bytes:
        sock.settimeout(timeout)
        try:
            line = reader.readline()
        except TimeoutError:
            raise ControlError(
                f"the daemon at {self.path} did not answer within {timeout} s"
            ) from None
        except OSError as exc:
            raise ControlError(
                f"lost the connection to the daemon at {self.path}: {exc}"
            ) from None
        if not line:
            raise ControlError(
                f"the daemon at {self.path} closed the connection without answering"
            )
        return line

    def request(
        self, request: Mapping[str, object], timeout: float | None = REPLY_TIMEOUT
    ) -> object:
        """Send one request and return its `result`.

        Args:
            request: The request object (with `cmd`).
            timeout: Seconds to wait for the answer; None waits indefinitely.

        Raises:
            ControlError: The daemon is unreachable or refused the request.
            ConfigError: `reload` found a bad script.
            CallError: `call` could not be made (or a subclass).
        """
        with self._connect() as sock, sock.makefile("rb") as reader:
            self._send(sock, request)
            return _unwrap(self._read_line(sock, reader, timeout))

    def ping(self) -> dict[str, object]:
        """Check that the daemon answers; returns `{"pid": ...}`."""
        return _as_dict(self.request({"cmd": "ping"}))

    def status(self) -> list[dict[str, object]]:
        """One dict per connection."""
        result = self.request({"cmd": "status"})
        if not isinstance(result, list):
            raise ControlError("the daemon sent a malformed status (not a list)")
        return [_as_dict(item) for item in result]

    def info(self) -> dict[str, object]:
        """Daemon-wide facts: config file, last reload result, dropped events."""
        return _as_dict(self.request({"cmd": "info"}))

    def reconnect(self, server: str) -> dict[str, object]:
        """Ask the daemon to try `server` now instead of after its backoff."""
        return _as_dict(self.request({"cmd": "reconnect", "server": server}))

    def details(self, server: str) -> dict[str, object]:
        """`server`'s spec (secrets masked), last stderr lines and tool names.

        Raises:
            UnknownServer: No such connection.
            ControlError: The daemon is unreachable.
        """
        return _as_dict(self.request({"cmd": "details", "server": server}))

    def reload(self) -> dict[str, object]:
        """Run startup.lua again in the daemon and apply it.

        Raises:
            ConfigError: The script is bad; nothing changed.
            ControlError: The daemon is unreachable.
        """
        return _as_dict(self.request({"cmd": "reload"}))

    def call(
        self,
        server: str,
        tool: str,
        args: Mapping[str, object] | None = None,
        timeout: float | None = None,
    ) -> dict[str, object]:
        """Call a tool through the daemon; returns the `CallToolResult` dict.

        Args:
            server: Connection name.
            tool: Tool name.
            args: Tool arguments.
            timeout: Seconds for the call; None uses the connection's call_timeout.

        Raises:
            CallError: The call could not be made (UnknownServer,
                ServerUnavailable, CallTimeout).
            ControlError: The daemon is unreachable.
        """
        request = {
            "cmd": "call",
            "server": server,
            "tool": tool,
            "args": dict(args or {}),
            "timeout": timeout,
        }
        wait = None if timeout is None else timeout + CALL_SLACK
        return _as_dict(self.request(request, wait))

    def events(self) -> Iterator[dict[str, object]]:
        """Follow the event stream; ends when the daemon closes it.

        Raises:
            ControlError: The daemon is unreachable or the stream broke.
        """
        with self.subscribe() as stream:
            yield from stream

    def subscribe(self) -> EventStream:
        """Open the event stream; returns once the daemon has subscribed it.

        Every event published after this returns is delivered, so a snapshot
        (`status`) taken next misses nothing. Use as a context manager.

        Raises:
            ControlError: The daemon is unreachable or refused.
        """
        sock = self._connect()
        try:
            reader = sock.makefile("rb")
            try:
                self._send(sock, {"cmd": "events"})
                _unwrap(self._read_line(sock, reader, REPLY_TIMEOUT))
            except BaseException:
                reader.close()
                raise
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        return EventStream(sock, reader, self.path)


class EventStream:
    """An open `events` stream: iterate for event dicts until the daemon closes it.

    `close()` may be called from another thread to end an iteration that is
    waiting for the next event (the attached HUD reads on a worker thread).
    """

    def __init__(
        self, sock: socket.socket, reader: io.BufferedReader, path: Path
    ) -> None:
        self._sock = sock
        self._reader = reader
        self._path = path
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, object]]:
        """Event dicts in bus order; ends when the stream closes.

        Raises:
            ControlError: The connection broke or the daemon sent garbage.
        """
        while True:
            try:
                line = self._reader.readline()
            except (OSError, ValueError) as exc:  # ValueError: closed meanwhile
                if self._closed:
                    return
                raise ControlError(
                    f"lost the connection to the daemon at {self._path}: {exc}"
                ) from None
            if not line:
                return
            try:
                event = json.loads(line)
            except ValueError:
                raise ControlError(
                    f"the daemon sent a malformed event: {line[:200]!r}"
                ) from None
            yield _as_dict(event)

    def close(self) -> None:
        """End the stream (from any thread); a waiting iteration returns.

        Only shuts the socket down: the descriptors are released by the owner's
        `with` block, never under a read running on another thread.
        """
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
        self._reader.close()
        self._sock.close()


def _as_dict(obj: object) -> dict[str, object]:
    if not isinstance(obj, dict):
        raise ControlError(
            f"the daemon sent {type(obj).__name__} where an object was due"
        )
    return obj
