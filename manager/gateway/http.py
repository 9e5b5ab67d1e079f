"""The aggregated endpoint over streamable HTTP: uvicorn inside the daemon's loop.

uvicorn runs on a socket we bind ourselves (so a busy port is a clear
`EndpointError`, not uvicorn's `sys.exit`), without its signal handlers (the
daemon owns signals), and is stopped with `should_exit` and a bounded grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

import anyio
import anyio.abc
import uvicorn
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..control.paths import check_socket_dir, clear_stale_socket
from ..core.errors import ControlError
from .exchange import Exchange
from .guard import Guard
from .options import (
    MAX_REQUEST_BODY,
    SESSION_IDLE_TIMEOUT,
    EndpointError,
    EndpointOptions,
    write_token,
)
from .resumable import RETRY_MS, ResumableEvents
from .sessions import Sessions
from .stopping import STOP_GRACE, AnswerAtStop

__all__ = [
    "HTTP_KEEP_ALIVE",
    "HTTP_PATH",
    "HTTP_SHUTDOWN_GRACE",
    "HTTP_STOP_LIMIT",
    "HttpEndpoint",
    "Served",
]

logger = logging.getLogger("manager.gateway")

HTTP_PATH = "/mcp"
"""Where the streamable HTTP endpoint is served."""


HTTP_SHUTDOWN_GRACE = 1
"""Seconds uvicorn waits for open requests and streams when stopping (an int)."""

HTTP_KEEP_ALIVE = 30
"""Seconds an idle downstream connection stays open: longer than clients keep
theirs (httpx: 5 s), so a client never sends on a connection we are closing."""

HTTP_STOP_LIMIT = 3.0
"""Seconds `HttpEndpoint.aclose` waits for uvicorn before giving up on it."""


def _host_of(url_host: str) -> str:
    return f"[{url_host}]" if ":" in url_host else url_host


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the daemon owns SIGINT/SIGTERM.

    uvicorn's own handlers would re-raise a captured signal after serving,
    which the daemon would see as a second Ctrl-C (a forced stop).
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Coalescing:
    """A connection's transport as uvicorn sees it: what is written in one
    turn of the event loop leaves in one `write`.

    uvicorn writes a response's head when the app starts it and the body when
    the app sends it: two segments for every JSON answer. The first wakes the
    client, which reads the head and sleeps again before the body comes (and
    on a busy machine the woken client can take the CPU from the daemon
    between the two writes). One segment costs the client a single wake:
    same-run A/B, sequential calls, p50 2.85 -> 2.55 ms and 3.49 -> 3.21 ms.

    Writes wait for the end of the loop's turn (`call_soon`), in order;
    `close` sends what waits first, `abort` drops it. Everything else is the
    transport's own.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(
        self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._pending is None:
            self._pending = [bytes(data)]
            self._loop.call_soon(self._flush)
        else:
            self._pending.append(bytes(data))

    def writelines(self, lines: Iterable[bytes | bytearray | memoryview]) -> None:
        for line in lines:
            self.write(line)

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(
                pending[0] if len(pending) == 1 else b"".join(pending)
            )

    def get_write_buffer_size(self) -> int:
        waiting = sum(map(len, self._pending)) if self._pending else 0
        return self._transport.get_write_buffer_size() + waiting

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `_Coalescing` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(
            cast(asyncio.Transport, _Coalescing(transport, self.loop))
        )


class Served(Protocol):
    """What the endpoint serves (the `Gateway`): its SDK server, its
    downstream sessions' records (for the hot path), and who forgets a
    downstream session the client closed (`DELETE`)."""

    @property
    def server(self) -> Server[Any]: ...

    @property
    def downstream(self) -> Sessions: ...

    @property
    def header_schemas(self) -> Mapping[str, Any]: ...

    def forget_session(self, key: str) -> None: ...

    def profile_names(self) -> Collection[str]: ...


class HttpEndpoint:
    """Streamable HTTP at `HTTP_PATH`, served by uvicorn in this event loop.

    Args:
        gateway: The MCP server to serve.
        options: Address, token and allowed hosts/origins.
    """

    def __init__(self, gateway: Served, options: EndpointOptions) -> None:
        self.gateway = gateway
        self.options = options
        self._sock: socket.socket | None = None
        self._server: _Uvicorn | None = None
        self._done = anyio.Event()
        self.port = options.port
        self.exchange: Exchange | None = None
        """The hot path, once serving."""
        self._stopping: AnswerAtStop | None = None
        self._guard: Guard | None = None

    @property
    def url(self) -> str:
        """`http://HOST:PORT/mcp` as bound (`unix:PATH` on a Unix socket: its
        clients send `Host: localhost` and ask for `/mcp`)."""
        if self.options.unix is not None:
            return f"unix:{self.options.unix}"
        return f"http://{_host_of(self.options.host)}:{self.port}{HTTP_PATH}"

    def bind(self) -> None:
        """Bind and listen now, so a bad or busy address fails before startup.

        Raises:
            EndpointError: The address cannot be bound.
        """
        if self.options.unix is not None:
            self._sock = _bind_unix(self.options.unix)
            return
        host, port = self.options.host, self.options.port
        where = f"{_host_of(host)}:{port}"
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise EndpointError(f"cannot listen on {where}: {exc}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(1024)
        except OSError as exc:
            sock.close()
            raise EndpointError(
                f"cannot listen on {where}: {_bind_reason(exc)}"
            ) from None
        self._sock = sock
        self.port = sock.getsockname()[1]

    def _app(self) -> AnswerAtStop:
        options = self.options
        events = ResumableEvents()
        app = self.gateway.server.streamable_http_app(
            streamable_http_path=HTTP_PATH,
            # Host/Origin are checked by `Guard`, with our own rules.
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=False
            ),
            session_idle_timeout=SESSION_IDLE_TIMEOUT,
            max_request_body_size=MAX_REQUEST_BODY,
            # SSE streams a client can resume with Last-Event-ID (SEP-1699).
            event_store=events,
            retry_interval=RETRY_MS,
            # An SSE stream per POST, as the SDK's servers answer: what an
            # upstream says about a request (progress, log messages, its
            # questions) travels on that request's stream, which a
            # 2026-07-28 client (no standalone stream) and many handshake
            # clients read, and plain JSON has none.
            json_response=False,
        )
        names = {"localhost", "127.0.0.1", "[::1]", *options.allowed_hosts}
        wildcard = options.host in ("0.0.0.0", "::")
        if not wildcard and options.host:
            names.add(_host_of(options.host).lower())
        hosts: frozenset[str] | None = frozenset(names)
        if wildcard and not options.allowed_hosts:
            logger.warning(
                "listening on %s: the Host header is not checked (the bearer "
                "token protects the endpoint); pin names with --allow-host",
                options.host,
            )
            hosts = None
        origins = {
            f"http://{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")
        }
        if not options.loopback and not wildcard:
            origins.add(f"http://{_host_of(options.host)}:{self.port}")
        origins.update(options.allowed_origins)
        # The endpoint's own ASGI app, called straight from the guard.
        endpoint = {
            route.path: route.app
            for route in app.routes
            if isinstance(route, Route) and route.path == HTTP_PATH
        }
        server = self.gateway.server
        lean = Exchange(
            server,
            self.gateway.downstream,
            lambda: server.session_manager,
            SESSION_IDLE_TIMEOUT,
            lambda: self.gateway.header_schemas,
            events,
        )
        self.exchange = lean
        self._guard = Guard(
            app,
            hosts=hosts,
            origins=frozenset(origins),
            token=options.token,
            on_delete=self.gateway.forget_session,
            direct=endpoint,
            profiles=self.gateway.profile_names,
            endpoint_path=HTTP_PATH,
            lean=lean,
        )
        self._stopping = AnswerAtStop(self._guard)
        return self._stopping

    def rotate_token(self, register: Callable[[str], None]) -> int:
        """Write a new token to the endpoint's own token file and require it
        from now on; the listening streams opened with the old one end.
        `register` gets the new token first (to mask it in logs). Returns how
        many streams ended.

        Raises:
            EndpointError: The token is not the daemon's to replace (it comes
                from `$MCP_MANAGER_TOKEN` or there is none), or the file
                cannot be written.
        """
        path = self.options.token_path
        if path is None or self.options.token is None:
            raise EndpointError(
                f"the endpoint's token comes from {self.options.token_from}, "
                "not a file the daemon owns: change it there and restart the daemon"
            )
        token = write_token(path)
        register(token)
        return self._guard.set_token(token) if self._guard is not None else 0

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until `aclose()`; reports started once uvicorn accepts requests."""
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        config = uvicorn.Config(
            self._app(),
            log_config=None,
            log_level=None,
            access_log=False,
            lifespan="on",
            server_header=False,
            # No X-Forwarded-* rewriting (one layer less per request): nothing
            # here reads the client address, and the endpoint is no proxy's.
            proxy_headers=False,
            timeout_graceful_shutdown=HTTP_SHUTDOWN_GRACE,
            timeout_keep_alive=HTTP_KEEP_ALIVE,
            http=_HttpProtocol,
        )
        server = self._server = _Uvicorn(config)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [self._sock])
                while not server.started:  # uvicorn has no started event
                    if server.should_exit:
                        raise EndpointError(
                            f"the MCP endpoint at {self.url} failed to start"
                        )
                    await anyio.sleep(0.005)
                logger.info(
                    "MCP endpoint listening at %s (bearer token: %s)",
                    self.url,
                    self.options.token_from or "none",
                )
                if self.options.token is None:
                    logger.warning(
                        "the MCP endpoint takes no token (--no-token): any "
                        "process on this machine can call every tool through it"
                    )
                task_status.started()
        finally:
            self._done.set()
            self._sock.close()
            if self.options.unix is not None:
                with contextlib.suppress(OSError):
                    self.options.unix.unlink()

    async def aclose(self, grace: float = STOP_GRACE) -> None:
        """Answer what is in flight (`AnswerAtStop`, after `grace` for it to
        end by itself), then stop uvicorn gracefully, waiting at most
        `HTTP_STOP_LIMIT` seconds."""
        if self._server is None:
            return
        if self._stopping is not None:
            cut = await self._stopping.stop(grace)
            if cut:
                logger.info("HTTP endpoint: %d request(s) in flight answered", cut)
        self._server.should_exit = True
        with anyio.move_on_after(HTTP_STOP_LIMIT, shield=True):
            await self._done.wait()


def _bind_unix(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, 0600, in a directory only its owner
    can reach (`control.paths`: the control socket's own rules); a stale
    socket is replaced, a live one or a file of another kind refused.

    Raises:
        EndpointError: Any of those, naming `path`.
    """
    try:
        check_socket_dir(path.parent)
        clear_stale_socket(path)
    except (ControlError, OSError) as exc:
        raise EndpointError(f"cannot listen on unix:{path}: {exc}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        why = _bind_reason(exc)
        raise EndpointError(f"cannot listen on unix:{path}: {why}") from None
    return sock


def _bind_reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use (another mcp-manager, or another program?)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "that address does not belong to this machine"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return exc.strerror or str(exc)
