"""The control API's client: blocking, stdlib only, one connection per request.

All the CLI imports for its client commands (`status`, `events`, `call`, ...):
no anyio, no mcp, so those commands start in a few tens of milliseconds. Each
command's answer is decoded into its typed reply (`manager.core.replies`),
forgivingly: the daemon may be of another version. `call` and `request` return
the MCP result as the JSON object it is.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..core.errors import ConfigError, ControlError
from .paths import KEY_FIELD, check_socket_dir, read_key
from .protocol import CALL_SLACK, CONNECT_TIMEOUT, ERROR_TYPES, REPLY_TIMEOUT, encode

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:  # loaded where used: dataclasses cost ~1 ms each to make
    from typing import TypeVar

    from ..core.events import ApprovalAsked, Event, ToolChanged
    from ..core.info import DaemonInfo
    from ..core.login import CallbackReply, LoginResult, LoginStart, LogoutReply
    from ..core.replies import (
        ApproveReply,
        CallLogReply,
        CatalogRow,
        ConnectionDetails,
        Pong,
        ReconnectReply,
        ReloadSummary,
        TokenReply,
        UpdateReply,
    )
    from ..core.status import ConnectionStatus

__all__ = ["ControlClient", "EventStream"]

if TYPE_CHECKING:
    E = TypeVar("E", bound="Event")

ALIVE_EVERY = 5.0
"""Seconds between the pings that check the daemon during an unbounded wait."""

ALIVE_TIMEOUT = 10.0
"""Seconds such a ping may take before the daemon counts as stopped."""


def _rows(result: object) -> list[dict[str, str]]:
    """A list of flat string rows, forgivingly (a newer daemon may add keys)."""
    if not isinstance(result, list):
        raise ControlError(f"the daemon sent a malformed answer: {result!r}")
    return [
        {str(k): str(v) for k, v in row.items()}
        for row in result
        if isinstance(row, dict)
    ]


def _raise_error(body: object) -> None:
    if not isinstance(body, dict):
        raise ControlError(f"the daemon sent a malformed error: {body!r}")
    kind = str(body.get("type", ""))
    message = str(body.get("message", "unknown error"))
    cls = ERROR_TYPES.get(kind)
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
        key = read_key(self.path)  # each time: a restarted daemon has a new one
        if key:
            request = {**request, KEY_FIELD: key}
        try:
            sock.sendall(encode(request))
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
            if timeout is None:
                self._await_answer(sock)
                timeout = REPLY_TIMEOUT  # for the rest of the line
            return _unwrap(self._read_line(sock, reader, timeout))

    def _await_answer(self, sock: socket.socket) -> None:
        """Wait for the answer to start, as long as it takes while the daemon
        answers a ping every `ALIVE_EVERY` s (a call may wait for a person's
        approval): a daemon stopped (Ctrl-Z, SIGSTOP) or stuck is an error,
        not a wait forever."""
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        while not poller.poll(int(ALIVE_EVERY * 1000)):
            try:
                self.request({"cmd": "ping"}, ALIVE_TIMEOUT)
            except ControlError:
                raise ControlError(
                    f"the daemon at {self.path} stopped answering while it had "
                    f"the request (no answer to a ping within {ALIVE_TIMEOUT:g} s): "
                    "is it stopped (Ctrl-Z, SIGSTOP) or stuck? A request it has "
                    "not started is dropped when it goes on"
                ) from None

    def ping(self) -> Pong:
        """Check that the daemon answers (and learn its pid)."""
        from ..core.replies import Pong

        return Pong.from_dict(_as_dict(self.request({"cmd": "ping"})))

    def status(self) -> list[ConnectionStatus]:
        """One status per connection, decoded from the wire form."""
        from ..core.status import ConnectionStatus

        return [ConnectionStatus.from_dict(row) for row in self.status_rows()]

    def status_rows(self) -> list[dict[str, object]]:
        """One status per connection in its wire form, as the daemon sent it
        (`status --json` prints it: decoding it into `ConnectionStatus`es
        only to encode them again cost each run the `dataclasses` import,
        a third of what the command costs over a bare interpreter)."""
        result = self.request({"cmd": "status"})
        if not isinstance(result, list):
            raise ControlError("the daemon sent a malformed status (not a list)")
        return [_as_dict(item) for item in result]

    def info(self) -> DaemonInfo:
        """Daemon-wide facts: config file, last reload result, dropped events."""
        from ..core.info import DaemonInfo

        return DaemonInfo.from_dict(_as_dict(self.request({"cmd": "info"})))

    def reconnect(self, server: str) -> ReconnectReply:
        """Ask the daemon to try `server` now instead of after its backoff."""
        result = self.request({"cmd": "reconnect", "server": server})
        from ..core.replies import ReconnectReply

        return ReconnectReply.from_dict(_as_dict(result))

    def details(self, server: str) -> ConnectionDetails:
        """`server`'s spec (secrets masked), last stderr lines and tool names.

        Raises:
            UnknownServer: No such connection.
            ControlError: The daemon is unreachable.
        """
        result = self.request({"cmd": "details", "server": server})
        from ..core.replies import ConnectionDetails

        return ConnectionDetails.from_dict(_as_dict(result))

    def login(self, server: str, timeout: float, device: bool = False) -> LoginStart:
        """Begin an OAuth login of `server`: the authorization URL once the
        daemon has it (`url`), or how it ended (`done`, `connected`, `error`)."""
        request: dict[str, object] = {
            "cmd": "login",
            "server": server,
            "timeout": timeout,
        }
        if device:  # an older daemon refuses the key: no browser login instead
            request["device"] = True
        from ..core.login import LoginStart

        return LoginStart.from_dict(
            _as_dict(self.request(request, timeout + CALL_SLACK))
        )

    def login_wait(self, server: str, timeout: float) -> LoginResult:
        """Wait (at most `timeout`) for the login of `server` to end."""
        request = {"cmd": "login_wait", "server": server, "timeout": timeout}
        from ..core.login import LoginResult

        return LoginResult.from_dict(
            _as_dict(self.request(request, timeout + CALL_SLACK))
        )

    def login_callback(self, server: str, url: str) -> CallbackReply:
        """Hand the daemon the redirect URL a user pasted (`login --manual`)."""
        request = {"cmd": "login_callback", "server": server, "url": url}
        from ..core.login import CallbackReply

        return CallbackReply.from_dict(_as_dict(self.request(request)))

    def changes(self, server: str | None = None) -> list[ToolChanged]:
        """Definitions that differ from their pins, not approved yet.

        Raises:
            UnknownServer: No such connection.
            ControlError: The daemon is unreachable.
        """
        from ..core.events import ToolChanged

        return _events(self.request({"cmd": "changes", "server": server}), ToolChanged)

    def approve(self, server: str, items: list[str]) -> ApproveReply:
        """Pin what `server` lists now (every item, or `items`).

        Raises:
            UnknownServer: No such connection, or no such item.
            ControlError: The daemon is unreachable.
        """
        result = self.request({"cmd": "approve", "server": server, "items": items})
        from ..core.replies import ApproveReply

        return ApproveReply.from_dict(_as_dict(result))

    def update(self, server: str, take: bool = False, version: str = "") -> UpdateReply:
        """The launch lock of `server` and a newer release to take; `take`:
        take `version` (what the last answer showed) and restart on it.

        Raises:
            UnknownServer: No such connection.
            ControlError: Nothing to take, the offer changed, or the daemon
                is unreachable.
        """
        request = {"cmd": "update", "server": server, "take": take, "version": version}
        # Up to two registry answers (the offer, then taking it again checks
        # it), each bounded by the daemon (stdio.locks.RESOLVE_TIMEOUT, 20 s).
        from ..core.replies import UpdateReply

        return UpdateReply.from_dict(_as_dict(self.request(request, timeout=60.0)))

    def pending(self) -> list[ApprovalAsked]:
        """The calls waiting for the user's approval, oldest first."""
        from ..core.events import ApprovalAsked

        return _events(self.request({"cmd": "pending"}), ApprovalAsked)

    def decide(
        self, approval: str, verdict: str, scope: str = "once", by: str = "cli"
    ) -> ApprovalAsked:
        """Answer a waiting call (`mcp-manager allow ID` / `deny ID`).

        Raises:
            ControlError: No call waits under that id, or the daemon is
                unreachable.
        """
        from ..core.events import ApprovalAsked, event_from_dict

        request = {
            "cmd": "decide",
            "id": approval,
            "verdict": verdict,
            "scope": scope,
            "by": by,
        }
        event = event_from_dict(_as_dict(self.request(request)))
        if not isinstance(event, ApprovalAsked):
            raise ControlError("the daemon sent a malformed answer to decide")
        return event

    def grants(self) -> list[dict[str, str]]:
        """The standing approvals: `scope` (always, session), `server`,
        `tool`, `client` (a session's)."""
        return _rows(self.request({"cmd": "grants"}))

    def revoke(self, server: str, tool: str | None = None) -> list[dict[str, str]]:
        """Take back the standing approvals of `server`'s `tool` (all of its
        tools with None); returns those that went."""
        return _rows(self.request({"cmd": "revoke", "server": server, "tool": tool}))

    def logout(self, server: str) -> LogoutReply:
        """Forget the tokens and client registration of `server`."""
        result = self.request({"cmd": "logout", "server": server})
        from ..core.login import LogoutReply

        return LogoutReply.from_dict(_as_dict(result))

    def result(self, result_id: str) -> dict[str, object]:
        """A whole tool result that `max_output` cut (`mcp-manager result`).

        Raises:
            CallError: No such result, or no longer kept.
            ControlError: The daemon is unreachable.
        """
        return _as_dict(self.request({"cmd": "result", "id": result_id}))

    def token(self, rotate: bool = False) -> TokenReply:
        """Where the HTTP endpoint's token is; with `rotate`, replace it.

        Raises:
            ControlError: The daemon is unreachable, serves no HTTP endpoint,
                or does not own its token.
        """
        result = self.request({"cmd": "token", "rotate": rotate})
        from ..core.replies import TokenReply

        return TokenReply.from_dict(_as_dict(result))

    def call_log(self) -> CallLogReply:
        """Have the daemon write the calls it has queued; where its log is.

        Raises:
            ControlError: The daemon is unreachable (or too old to know).
        """
        # a write of a second's rows: a daemon that takes longer is stuck,
        # and `log` reads what is on disk rather than wait on it
        result = self.request({"cmd": "call_log"}, timeout=5.0)
        from ..core.replies import CallLogReply

        return CallLogReply.from_dict(_as_dict(result))

    def reload(self) -> ReloadSummary:
        """Run startup.lua again in the daemon and apply it.

        Raises:
            ConfigError: The script is bad; nothing changed.
            ControlError: The daemon is unreachable.
        """
        from ..core.replies import ReloadSummary

        return ReloadSummary.from_dict(_as_dict(self.request({"cmd": "reload"})))

    def call(
        self,
        server: str,
        tool: str,
        args: Mapping[str, object] | None = None,
        timeout: float | None = None,
        *,
        answer: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        """Call a tool through the daemon; returns the `CallToolResult` dict.

        Args:
            server: Connection name.
            tool: Tool name.
            args: Tool arguments.
            timeout: Seconds for the call; None uses the connection's call_timeout.
            answer: The answer to the server's questions during the call
                (an elicitation result), if it asks; else they are refused.

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
            **({"answer": dict(answer)} if answer is not None else {}),
        }
        wait = None if timeout is None else timeout + CALL_SLACK
        return _as_dict(self.request(request, wait))

    def mcp_request(
        self,
        server: str,
        op: str,
        target: str,
        args: Mapping[str, object] | None = None,
        timeout: float | None = None,
    ) -> dict[str, object]:
        """`read` a resource (target: its URI) or get a `prompt` (target: its
        name, `args` its arguments) through the daemon; the result dict.

        Raises:
            CallError: As `call`.
            ControlError: The daemon is unreachable.
        """
        request = {
            "cmd": "request",
            "server": server,
            "op": op,
            "target": target,
            "args": dict(args or {}),
            "timeout": timeout,
        }
        wait = None if timeout is None else timeout + CALL_SLACK
        return _as_dict(self.request(request, wait))

    def catalog(self, kind: str, server: str | None = None) -> list[CatalogRow]:
        """The `tools`, `prompts` or `resources` of every (or one) connection."""
        result = self.request({"cmd": "catalog", "kind": kind, "server": server})
        if not isinstance(result, list):
            raise ControlError("the daemon sent a malformed catalog (not a list)")
        from ..core.replies import CatalogRow

        return [CatalogRow.from_dict(_as_dict(item), kind) for item in result]

    def events(self, since: int | None = None) -> Iterator[Event]:
        """Follow the event stream, decoded into typed events; ends when the
        daemon closes it. `since`: see `subscribe`.

        Raises:
            ControlError: The daemon is unreachable or the stream broke.
        """
        with self.subscribe(since) as stream:
            yield from stream

    def event_dicts(self, since: int | None = None) -> Iterator[dict[str, object]]:
        """Follow the event stream in its wire form (`events --json`): every
        field the daemon sent, even those this side does not know.

        Raises:
            ControlError: The daemon is unreachable or the stream broke.
        """
        with self.subscribe(since) as stream:
            yield from stream.dicts()

    def subscribe(self, since: int | None = None) -> EventStream:
        """Open the event stream; returns once the daemon has subscribed it.

        Every event published after this returns is delivered, so a snapshot
        (`status`) taken next misses nothing. With `since`, the events the
        daemon kept (its last 1000) whose `seq` is above it come first: 0 for
        everything since the daemon started, if it has not published more.
        Use as a context manager.

        Raises:
            ControlError: The daemon is unreachable or refused.
        """
        sock = self._connect()
        try:
            reader = sock.makefile("rb")
            try:
                request: dict[str, object] = {"cmd": "events"}
                if since is not None:
                    request["since"] = since
                self._send(sock, request)
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
    """An open `events` stream: iterate for events until the daemon closes it.

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

    def __iter__(self) -> Iterator[Event]:
        """Typed events in bus order (`event_from_dict`); ends when the stream
        closes.

        Raises:
            ControlError: The connection broke or the daemon sent garbage.
        """
        from ..core.events import event_from_dict

        for data in self.dicts():
            yield event_from_dict(data)

    def dicts(self) -> Iterator[dict[str, object]]:
        """Events in their wire form, in bus order; ends when the stream closes.

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


def _events(result: object, kind: type[E]) -> list[E]:
    """The events of `kind` in a reply that is a list of event dicts."""
    from ..core.events import event_from_dict

    rows = result if isinstance(result, list) else []
    return [
        event
        for row in rows
        if isinstance(row, dict) and isinstance(event := event_from_dict(row), kind)
    ]
