"""A hand-written streamable HTTP MCP server: `http.server`, standard library only.

The HTTP sibling of `raw_legacy.py`. It starts in tens of milliseconds (no
`import mcp`, no uvicorn), so transport tests can kill and restart it as often
as they like; an SDK demo server costs over a CPU-second per start. It speaks
the handshake era like a third-party 1.x server: `initialize` answers protocol
`2025-06-18`, plus `ping`, `tools/list` and `tools/call`; anything else gets
-32601 (Method not found), including `server/discover`, which is answered with
or without a session (so a client falls back to the handshake).

HTTP at `/mcp` (HTTP/1.1, keep-alive, one thread per connection, a
`Content-Length` on every answer but the event stream), as the SDK's server
answers with JSON responses:

- POST `initialize`: a JSON answer and a new `Mcp-Session-Id`.
- POST a request: a JSON answer (`application/json`). A notification or a
  client's response: 202, no body.
- A session id the server does not know (it was deleted, or this is another
  process on the same port): 404 with the JSON-RPC error "Session not found",
  the SDK's words. No session id on anything but `initialize` and
  `server/discover`: 400 "Bad Request: Missing session ID", as the SDK's.
- GET: the session's standalone event stream (`text/event-stream`, chunked),
  open until the session is deleted or the server stops: a client sees the
  server's death as the end of that stream. One per session (a second: 409).
- DELETE: ends the session (200); its id is unknown from then on.

Tools: `echo(text)` returns `text`; `pid()` returns the process id;
`crash(code)` exits at once with `code`, without a reply.

SIGHUP: every session is forgotten (their event streams end), the
connections stay: a client meets "Session not found" at its next request, as
from a server whose session store was lost while its process lived on.

SIGTERM, as uvicorn answers it: no new connection is accepted, the event
streams end, idle connections are closed at once, requests in flight get
`SHUTDOWN_GRACE` seconds (their connections close after the answer), then the
process ends by SIGTERM itself (status -15).

Run as a script: `python -S tests/servers/raw_http.py --port N [flags]`
(`--transport http --host 127.0.0.1`, as `HttpServerProcess` adds them, are
accepted). Flags:

- `--crash-after-handshake`: exit with code 3, 50 ms after the first
  `tools/list` reply.
- `--hang-on-initialize`: read requests, never answer `initialize` (the
  connection stays open until the server ends).
- `--garbage`: answer every POST with a 200 `application/json` body that is
  not JSON-RPC.
- `--exit-immediately CODE`: exit at once with `CODE`, before listening.
- `--ignore-sigterm`: ignore SIGTERM; only SIGKILL ends it.
- `--slow-start SECONDS`: sleep before listening.
- `--busy-start SECONDS`: burn CPU that long before listening (a heavy
  start, like an SDK server's imports on a loaded machine).
- `--sleep-tool`: also list `sleep(seconds)`, which answers `slept SECONDS`
  after that long (other connections are served meanwhile); the log says
  `SLEEP_STARTED` when it begins.
- `--fail-tool`: also list `fail(message)`, which answers a result with
  `isError: true` and `message` as its text.
- `--tools-file PATH`: list the tools in that JSON file (read at every
  `tools/list`, so a test can change them) plus `relist()`, which sends
  `notifications/tools/list_changed` on the session's event stream (if one is
  open) before its reply.
- `--no-event-stream`: answer GET with 405, as a server without a standalone
  stream does; only the TCP connections themselves then tell of its death.
- `--moved`: serve at `/mcp/` and answer `/mcp` with a 307 to it, as a
  framework that normalises trailing slashes does.
- `--ping-errors N`: answer the first N pings with HTTP 503 and an HTML page,
  as a server behind an overloaded proxy does; the log says `PING_REFUSED`
  for each.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import select
import signal
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import raw_tools
else:  # `servers.raw_tools` when the tests import this file, `raw_tools` when
    # it runs as a script (`python -S tests/servers/<name>.py`): a sibling
    raw_tools = importlib.import_module(
        f"{__package__}.raw_tools" if __package__ else "raw_tools"
    )

__all__ = ["PROTOCOL_VERSION", "SERVER_NAME", "SESSION_NOT_FOUND", "main"]

SERVER_NAME = "raw-http"
SLEEP_STARTED = f"{SERVER_NAME}: sleep started"
"""What the log says (stdout) when a `sleep` call begins: the call is in flight."""
PING_REFUSED = f"{SERVER_NAME}: ping refused"
"""What the log says when a ping is answered 503 (`--ping-errors`)."""
SESSIONS_FORGOTTEN = f"{SERVER_NAME}: sessions forgotten"
"""What the log says once SIGHUP made it forget its sessions."""
PROTOCOL_VERSION = "2025-06-18"
PATH = "/mcp"
SESSION_NOT_FOUND = "Session not found"
"""The error message of a 404 for an unknown session (the SDK server's words)."""
MISSING_SESSION = "Bad Request: Missing session ID"
CRASH_AFTER_HANDSHAKE_CODE = 3
CRASH_AFTER_HANDSHAKE_DELAY = 0.05
"""Seconds between the first `tools/list` reply and the exit."""
SHUTDOWN_GRACE = 1.0
"""Seconds requests in flight get after SIGTERM (the demo server's too)."""
STREAM_CHECK_INTERVAL = 0.5
"""Seconds between checks that an idle event stream's client is still there."""
GARBAGE_BODY = b"this is not JSON-RPC\n"
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
PARSE_ERROR = -32700


class _Options:
    """The flags that shape answers (set once by `main`)."""

    crash_after_handshake = False
    hang_on_initialize = False
    garbage = False
    sleep_tool = False
    fail_tool = False
    tools_file: str | None = None
    event_stream = True
    ping_errors = 0
    moved = False


class _Session:
    """One client session: its event stream's queue and whether it ended."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.pending: list[dict[str, Any]] = []
        self.streaming = False
        self.ended = False

    def notify(self, message: dict[str, Any]) -> None:
        """Send `message` on the event stream, if one is open (else drop it)."""
        with self.changed:
            if self.streaming:
                self.pending.append(message)
                self.changed.notify_all()

    def end(self) -> None:
        with self.changed:
            self.ended = True
            self.changed.notify_all()


_sessions: dict[str, _Session] = {}
_sessions_lock = threading.Lock()
_stopping = threading.Event()


class _Connections:
    """The open client connections and which are answering a request now
    (an event stream counts), for a SIGTERM that closes the idle ones at once
    and gives the others `SHUTDOWN_GRACE` seconds, as uvicorn does."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy: dict[_Handler, bool] = {}

    def opened(self, handler: _Handler) -> None:
        with self._changed:
            self._busy[handler] = False

    def closed(self, handler: _Handler) -> None:
        with self._changed:
            self._busy.pop(handler, None)
            self._changed.notify_all()

    @contextmanager
    def answering(self, handler: _Handler) -> Iterator[None]:
        with self._changed:
            self._busy[handler] = True
        try:
            yield
        finally:
            if _stopping.is_set():
                handler.close_connection = True  # the last answer on it
            with self._changed:
                self._busy[handler] = False
                self._changed.notify_all()

    def close_idle(self) -> None:
        """End the connections that wait for a request (a sentinel's too)."""
        with self._changed:
            idle = [handler for handler, busy in self._busy.items() if not busy]
        for handler in idle:
            with suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)

    def wait_answered(self, within: float) -> None:
        deadline = time.monotonic() + within
        with self._changed:
            while any(self._busy.values()) and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())


_connections = _Connections()


def _call_tool(params: dict[str, Any], session: _Session) -> dict[str, Any]:
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "relist" and _Options.tools_file is not None:
        session.notify({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return raw_tools.text("told")
    if name == "sleep" and _Options.sleep_tool:  # a test's witness: it started
        print(f"{SLEEP_STARTED} {args.get('seconds', 0)}", flush=True)
    return raw_tools.call(
        name, args, sleep_tool=_Options.sleep_tool, fail_tool=_Options.fail_tool
    )


def _result(method: str, params: dict[str, Any], session: _Session) -> Any:
    """The result for a request in a session, or `None` when not served."""
    if method == "ping":
        return {}
    if method == "tools/list":
        listed = raw_tools.listed(
            _Options.tools_file, _Options.sleep_tool, _Options.fail_tool
        )
        return {"tools": listed}
    if method == "tools/call":
        return _call_tool(params, session)
    return None


def _initialize_result() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": SERVER_NAME, "version": "1.0"},
    }


def _event(message: dict[str, Any]) -> bytes:
    return f"event: message\r\ndata: {json.dumps(message)}\r\n\r\n".encode()


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "raw-http/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a line per request is noise in the server's log."""

    # -- answers ----------------------------------------------------------

    def _answer(
        self,
        status: int,
        body: bytes = b"",
        *,
        kind: str = "application/json",
        session_id: str | None = None,
    ) -> None:
        self.send_response(status)
        if body:
            self.send_header("Content-Type", kind)
        if session_id is not None:
            self.send_header("Mcp-Session-Id", session_id)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _json(
        self, status: int, message: dict[str, Any], session_id: str | None = None
    ) -> None:
        self._answer(status, json.dumps(message).encode(), session_id=session_id)

    def _session(self) -> tuple[str, _Session] | None:
        """The request's session, or `None` after answering 400 or 404."""
        sid = self.headers.get("mcp-session-id")
        if not sid:
            self._json(400, _error(None, INVALID_REQUEST, MISSING_SESSION))
            return None
        with _sessions_lock:
            session = _sessions.get(sid)
        if session is None:
            self._json(404, _error(None, INVALID_REQUEST, SESSION_NOT_FOUND))
            return None
        return sid, session

    def _on_path(self) -> bool:
        path = self.path.split("?")[0]
        if _Options.moved and path == PATH:  # a trailing-slash move
            self.send_response(307)
            self.send_header("Location", PATH + "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        if path == (PATH + "/" if _Options.moved else PATH):
            return True
        self._answer(404, b"Not Found", kind="text/plain")
        return False

    # -- methods ----------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        _connections.opened(self)

    def finish(self) -> None:
        _connections.closed(self)
        super().finish()

    def do_POST(self) -> None:
        with _connections.answering(self):
            self._post()

    def _post(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if not self._on_path():
            return
        if _Options.garbage:
            self._answer(200, GARBAGE_BODY)
            return
        try:
            message = json.loads(body)
        except ValueError:
            self._json(400, _error(None, PARSE_ERROR, "Parse error"))
            return
        if not isinstance(message, dict):
            self._json(400, _error(None, INVALID_REQUEST, "Invalid Request"))
            return
        method, rid = message.get("method"), message.get("id")
        if method == "initialize" and rid is not None:
            self._initialize(rid)
            return
        if method == "server/discover" and rid is not None:
            self._json(
                200, _error(rid, METHOD_NOT_FOUND, f"Method not found: {method}")
            )
            return
        found = self._session()
        if found is None:
            return
        sid, session = found
        if method is None or rid is None:  # a notification, or a client's answer
            self._answer(202, session_id=sid)
            return
        if method == "ping" and _Options.ping_errors > 0:
            _Options.ping_errors -= 1
            print(PING_REFUSED, flush=True)
            page = b"<html><body>503 Service Unavailable</body></html>"
            self._answer(503, page, kind="text/html")
            return
        result = _result(str(method), message.get("params") or {}, session)
        if result is None:
            reply = _error(rid, METHOD_NOT_FOUND, f"Method not found: {method}")
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        self._json(200, reply, session_id=sid)
        if method == "tools/list" and _Options.crash_after_handshake:
            time.sleep(CRASH_AFTER_HANDSHAKE_DELAY)
            os._exit(CRASH_AFTER_HANDSHAKE_CODE)

    def _initialize(self, rid: Any) -> None:
        if _Options.hang_on_initialize:
            _stopping.wait()  # never answered; the process ends under it
            return
        sid = uuid.uuid4().hex
        with _sessions_lock:
            _sessions[sid] = _Session()
        reply = {"jsonrpc": "2.0", "id": rid, "result": _initialize_result()}
        self._json(200, reply, session_id=sid)

    def _open_stream(self, sid: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache, no-transform")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Mcp-Session-Id", sid)
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        """One chunk of a chunked body (empty: the last one)."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_GET(self) -> None:
        if not self._on_path():
            return
        if not _Options.event_stream:
            self._answer(405, b"Method Not Allowed", kind="text/plain")
            return
        found = self._session()
        if found is None:
            return
        sid, session = found
        with session.changed:
            taken = session.streaming
            session.streaming = True
        if taken:
            self._answer(
                409, b"Conflict: one event stream per session", kind="text/plain"
            )
            return
        try:
            with _connections.answering(self):
                self._stream(sid, session)
        finally:
            with session.changed:
                session.streaming = False
                session.pending.clear()

    def _stream(self, sid: str, session: _Session) -> None:
        """The standalone event stream: chunked, open until the session or
        the server ends (then its last chunk, so the end is a clean one)."""
        self._open_stream(sid)
        while True:
            with session.changed:
                while not (session.pending or session.ended or _stopping.is_set()):
                    if not session.changed.wait(STREAM_CHECK_INTERVAL):
                        if self._client_gone():
                            self.close_connection = True
                            return
                pending, session.pending = session.pending, []
                ended = session.ended or _stopping.is_set()
            for message in pending:
                self._chunk(_event(message))
            if ended:
                self._chunk(b"")
            self.wfile.flush()
            if ended:
                return

    def _client_gone(self) -> bool:
        """Whether the client closed its end (of the event stream's connection)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
            return peeked == b""
        except OSError:
            return True

    def do_DELETE(self) -> None:
        if not self._on_path():
            return
        found = self._session()
        if found is None:
            return
        sid, session = found
        with _sessions_lock:
            _sessions.pop(sid, None)
        session.end()
        self._answer(200)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that went away (they do, all the time here)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def server_bind(self) -> None:
        # HTTPServer's own asks the resolver for the host's full name.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Stop(BaseException):
    """Raised in the main thread by the SIGTERM handler (not an `Exception`:
    socketserver reports those of a request's set-up and carries on)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Stop


def _forget_sessions(signum: int, frame: object) -> None:
    """SIGHUP: forget every session, as if its store were lost."""
    with _sessions_lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.end()
    print(SESSIONS_FORGOTTEN, flush=True)


def _shut_down(server: _Server) -> None:
    """Stop listening, end the event streams and idle connections, give
    requests in flight `SHUTDOWN_GRACE` seconds."""
    _stopping.set()
    server.server_close()
    with _sessions_lock:
        sessions = list(_sessions.values())
    for session in sessions:
        session.end()
    _connections.close_idle()
    _connections.wait_answered(SHUTDOWN_GRACE)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on `--host`:`--port` until SIGTERM, misbehaving as the flags say.

    Args:
        argv: Arguments without the program name; `sys.argv[1:]` by default.

    Returns:
        The process exit code (after SIGTERM the process ends by the signal).
    """
    parser = argparse.ArgumentParser(description="hand-written MCP HTTP server")
    parser.add_argument("--transport", choices=["http"], default="http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    raw_tools.add_flags(parser)
    parser.add_argument("--no-event-stream", action="store_true")
    parser.add_argument("--ping-errors", type=int, default=0)
    parser.add_argument("--moved", action="store_true")
    args = parser.parse_args(argv)
    if args.exit_immediately is not None:
        return int(args.exit_immediately)
    _Options.crash_after_handshake = args.crash_after_handshake
    _Options.hang_on_initialize = args.hang_on_initialize
    _Options.garbage = args.garbage
    _Options.sleep_tool = args.sleep_tool
    _Options.fail_tool = args.fail_tool
    _Options.tools_file = args.tools_file
    _Options.event_stream = not args.no_event_stream
    _Options.ping_errors = args.ping_errors
    _Options.moved = args.moved
    signal.signal(
        signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else _on_sigterm
    )
    signal.signal(signal.SIGHUP, _forget_sessions)
    time.sleep(args.slow_start)
    busy_until = time.process_time() + args.busy_start
    while time.process_time() < busy_until:
        pass
    try:
        server = _Server((args.host, args.port), _Handler)
    except OSError as exc:
        print(f"{SERVER_NAME}: cannot listen on {args.host}:{args.port}: {exc}")
        return 1
    print(f"{SERVER_NAME} on {args.host}:{args.port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except _Stop:
        _shut_down(server)
        sys.stdout.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
