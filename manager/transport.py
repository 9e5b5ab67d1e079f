"""Talk to one upstream MCP server: the only door to the `mcp` client SDK.

`McpTransport.open(spec, hooks)` is an async context manager that connects
(spawns a stdio server, or opens streamable HTTP / legacy SSE), runs `initialize`
and lists *all* tool pages, all under `connect_timeout`, and yields an `Upstream`.
Leaving it closes the session and the transport within `TEARDOWN_TIMEOUT`
(shielded), and for stdio reaps the server and sweeps its process group.

Every failure leaves this module as a `TransportError` (`ConnectFailed`,
`ConnectTimeout`, `Disconnected`) with a one-line, redacted message: the mapping
from `mcp`, `httpx2`, `OSError` and anyio exceptions happens here, once.

stdio is implemented here rather than with the SDK's `stdio_client`, because the
daemon needs what that helper hides: the pid, the exit code, stderr captured
line by line (never written to the terminal) and a process-group sweep that
leaves no grandchild behind.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import logging
import math
import os
import select
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from . import __version__
from .errors import (
    CallError,
    ConfigError,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    TransportError,
)
from .liveness import TcpSentinel
from .redact import SECRETS, redact
from .spec import ConnectionSpec, resolve_spec
from .starts import BUSY_EXTENSION_FACTOR, Slot, StartSlots, pace_start
from .watchdog import CHILD_GROUPS

__all__ = [
    "CLIENT_NAME",
    "TEARDOWN_TIMEOUT",
    "CallResult",
    "Hooks",
    "LossReport",
    "McpTransport",
    "ProgressCallback",
    "ServerInfo",
    "ToolInfo",
    "Transport",
    "Upstream",
    "describe_error",
]

logger = logging.getLogger(__name__)

CLIENT_NAME = "mcp-manager"
"""`clientInfo.name` upstreams see, so their logs can tell us apart."""

TEARDOWN_TIMEOUT = 2.0
"""Seconds closing a session and its transport may take, whatever the server does."""

STDIN_CLOSE_GRACE = 0.5
"""Seconds a stdio server gets to exit by itself after its stdin closes."""

SIGTERM_GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL to the server's process group."""

REAP_TIMEOUT = 0.4
"""Seconds to wait for the event loop to observe a killed server's exit."""

EXIT_CODE_WAIT = 0.5
"""Seconds to wait for an exit code after a stdio server closed its stdout."""

MAX_LINE = 4 * 1024 * 1024
"""Longest stdout line (one JSON-RPC message) accepted from a stdio server, bytes."""

STDERR_LINE_LIMIT = 1000
"""Characters of one stderr line kept; the rest is cut."""

MAX_TOOL_PAGES = 1000
"""Pages of tools/list followed before giving up on a cursor that never ends."""

SUSPECT_INTERVAL = 5.0
"""Seconds between two probes caused by an HTTP event stream that ended."""

HTTP_READ_TIMEOUT = 300.0
"""httpx read timeout: long, as the SDK's, because a server holds streams open."""


class ProgressCallback(Protocol):
    """Receives a call's `notifications/progress` from the server."""

    async def __call__(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...


# ----------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One upstream tool as listed.

    Attributes:
        name: The tool's name on its server.
        description: Its description, or "".
        raw: The full tool definition as a JSON-ready dict (camelCase keys).
    """

    name: str
    description: str
    raw: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call's result.

    Attributes:
        is_error: The tool reported an error (`isError`).
        data: The result as a JSON-ready dict (camelCase keys, as on the wire).
        raw: The SDK's result object, for pass-through without re-encoding.
    """

    is_error: bool
    data: Mapping[str, object]
    raw: object = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server told us in `initialize`."""

    name: str
    version: str
    protocol: str
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class LossReport:
    """Why an established session ended."""

    reason: str
    exit_code: int | None = None
    error_type: str = "Disconnected"


@dataclass(slots=True)
class Hooks:
    """Callbacks from the transport to its connection. All synchronous.

    Attributes:
        on_spawn: A stdio server process started (pid).
        on_stderr: A line the server wrote to stderr (or a note about bad stdout).
        on_tools_changed: The server sent `notifications/tools/list_changed`.
    """

    on_spawn: Callable[[int], None] = lambda pid: None
    on_stderr: Callable[[str], None] = lambda line: None
    on_tools_changed: Callable[[], None] = lambda: None


class Upstream(Protocol):
    """A connected, initialized session with all tools listed."""

    @property
    def info(self) -> ServerInfo:
        """Server identity and negotiated protocol."""
        ...

    @property
    def pid(self) -> int | None:
        """The stdio server process id, None for HTTP/SSE."""
        ...

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """All tools, as listed at connect time or by the last `list_tools()`."""
        ...

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        """List all pages again.

        Raises:
            TransportError: The session failed.
        """
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        """Call a tool.

        Args:
            name: The tool's name on this server.
            arguments: Its arguments.
            limit: Seconds to wait for the result.
            meta: `_meta` to send with the request (e.g. W3C `traceparent`).
            progress: Receives the server's progress notifications for the call.

        Raises:
            TransportError: Disconnected (the session died) or ConnectTimeout-like
                failures; `MCPError`s from the server are mapped too.
        """
        ...

    async def ping(self, limit: float) -> None:
        """Check the server answers (ping, or a cheap tools/list if ping is unknown).

        Raises:
            Disconnected: No answer within `timeout`, or the session failed.
        """
        ...

    async def wait_lost(self) -> LossReport:
        """Return when the transport itself reports the end (EOF, exit)."""
        ...

    async def wait_suspect(self) -> None:
        """Return when the server may have gone (its HTTP event stream ended).

        Not a loss by itself (servers end that stream at will): the caller
        probes with a ping at once instead of at the next `ping_interval`.
        """
        ...


class Transport(Protocol):
    """Opens upstream sessions. `connection.py` knows only this protocol."""

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[Upstream]:
        """Connect, initialize and list all tools within `spec.connect_timeout`.

        Raises:
            TransportError: On any failure, already mapped and redacted.
            ConfigError: A `${env:NAME}` in the spec is not set.
        """
        ...


# ----------------------------------------------------------------- errors


def flatten(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of (nested) exception groups, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in flatten(sub)]
    return [exc]


def describe_error(exc: BaseException) -> str:
    """One redacted line describing `exc` for humans (status, events, logs)."""
    leaves = [
        e for e in flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())
    ]
    leaf = _most_informative(leaves) if leaves else exc
    text = _describe_leaf(leaf)
    return redact(text.splitlines()[0] if text else type(leaf).__name__)[:500]


def _most_informative(leaves: list[BaseException]) -> BaseException:
    for kind in (TransportError, OSError, httpx2.HTTPError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def _describe_leaf(exc: BaseException) -> str:
    if isinstance(exc, TransportError | ConfigError):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, httpx2.ConnectError):
        cause = _first_os_error(exc)
        if cause is not None:
            return f"cannot connect: {_os_reason(cause)}"
        return f"cannot connect: {exc}" if str(exc) else "cannot connect"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url}"
    if isinstance(exc, httpx2.TimeoutException):
        return f"HTTP timeout ({type(exc).__name__})"
    if isinstance(exc, httpx2.RemoteProtocolError):
        return _protocol_error_text(str(exc))
    if isinstance(exc, httpx2.ReadError):
        return _with_detail(
            "the connection broke while reading the server's answer", exc
        )
    if isinstance(exc, httpx2.WriteError):
        return _with_detail("the connection broke while sending to the server", exc)
    if isinstance(exc, anyio.EndOfStream | anyio.BrokenResourceError):
        return "the server closed the connection"
    if isinstance(exc, anyio.ClosedResourceError):
        return "the session was already closed"
    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _protocol_error_text(detail: str) -> str:
    """A sentence for httpcore's protocol errors (the peer broke HTTP framing)."""
    lowered = detail.lower()
    if "without sending a response" in lowered:
        return "the server closed the connection without answering"
    if "complete message body" in lowered:
        return (
            f"the server closed the connection in the middle of a response ({detail})"
        )
    return (
        f"the server broke the HTTP protocol: {detail}"
        if detail
        else ("the server broke the HTTP protocol")
    )


def _with_detail(sentence: str, exc: BaseException) -> str:
    detail = str(exc)
    return f"{sentence} ({detail})" if detail else sentence


def _map_failure(exc: BaseException, what: str) -> TransportError:
    """Map an exception escaping connect/session code to a TransportError."""
    leaves = flatten(exc)
    for leaf in leaves:
        if isinstance(leaf, TransportError):
            return leaf
    leaf = _most_informative(leaves)
    message = describe_error(exc)
    if isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT:
        return ConnectTimeout(f"{what}: {message}")
    return ConnectFailed(f"{what}: {message}" if what else message)


def _is_session_lost(exc: MCPError) -> bool:
    """Connection closed, the HTTP session is gone, or the server forgot it."""
    if exc.code == CONNECTION_CLOSED:
        return True
    text = exc.message.lower()
    return "session terminated" in text or "session not found" in text


# ----------------------------------------------------------------- session


class _Session:
    """The `Upstream` implementation over an SDK `ClientSession`."""

    def __init__(
        self,
        session: ClientSession,
        info: ServerInfo,
        lost: _LostSignal,
        pid: int | None,
        sentinel: TcpSentinel | None = None,
    ) -> None:
        self._session = session
        self._info = info
        self._lost = lost
        self._pid = pid
        self._sentinel = sentinel
        self._tools: tuple[ToolInfo, ...] = ()

    @property
    def info(self) -> ServerInfo:
        return self._info

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_TOOL_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await self._session.list_tools(params=params)
                tools.extend(_tool_info(t) for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            else:
                raise ConnectFailed(
                    f"tools/list returned more than {MAX_TOOL_PAGES} pages; "
                    "the server's cursor never ends"
                )
        except MCPError as exc:
            raise self._mapped(exc, "tools/list") from exc
        self._tools = tuple(tools)
        return self._tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        if self._lost.is_set:
            raise Disconnected(f"session closed: {self._lost.report.reason}")
        try:
            result = await self._session.call_tool(
                name,
                dict(arguments) if arguments else None,
                read_timeout_seconds=limit,
                progress_callback=progress,
                meta=dict(meta) if meta else None,  # type: ignore[arg-type]
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ConnectTimeout(
                    f"tools/call {name} timed out after {limit:g} s"
                ) from exc
            if _is_session_lost(exc):
                raise self._mapped(exc, f"tools/call {name}") from exc
            raise CallError(
                f"tools/call {name} rejected by the server: {redact(exc.message)} "
                f"(MCP error {exc.code})"
            ) from exc
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return CallResult(is_error=bool(result.is_error), data=data, raw=result)

    async def ping(self, limit: float) -> None:
        try:
            with anyio.fail_after(limit):
                try:
                    await self._session.send_ping()
                except MCPError as exc:
                    if exc.code != METHOD_NOT_FOUND:
                        raise
                    await self._session.list_tools()  # 2026 sessions have no ping
        except TimeoutError:
            raise Disconnected(f"no answer to ping within {limit:g} s") from None
        except MCPError as exc:
            raise Disconnected(f"ping failed: {describe_error(exc)}") from exc

    async def wait_lost(self) -> LossReport:
        await self._lost.event.wait()
        return self._lost.report

    async def wait_suspect(self) -> None:
        if self._sentinel is None:
            await self._lost.wait_suspect()
            return
        async with anyio.create_task_group() as tg:

            async def first(wait: Callable[[], Awaitable[None]]) -> None:
                await wait()
                tg.cancel_scope.cancel()

            tg.start_soon(first, self._lost.wait_suspect)
            tg.start_soon(first, self._sentinel.wait_closed)

    async def aclose(self) -> None:
        if self._sentinel is not None:
            await self._sentinel.aclose()

    def _mapped(self, exc: MCPError, what: str) -> TransportError:
        if _is_session_lost(exc):
            reason = self._lost.report.reason if self._lost.is_set else exc.message
            return Disconnected(f"{what}: {redact(reason)}")
        return ConnectFailed(f"{what}: {describe_error(exc)}")


def _tool_info(tool: types.Tool) -> ToolInfo:
    raw = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return ToolInfo(name=tool.name, description=tool.description or "", raw=raw)


@dataclass(slots=True)
class _LostSignal:
    """Set once, by whichever part of the transport notices the end first.

    `suspected` is the weaker signal: something that often means the server
    went away (its event stream ended), to be confirmed by a probe.
    """

    event: anyio.Event = field(default_factory=anyio.Event)
    report: LossReport = field(default_factory=lambda: LossReport("transport closed"))
    suspected: anyio.Event = field(default_factory=anyio.Event)
    last_suspected: float = -math.inf

    def suspect(self) -> None:
        # A server that ends its event stream at once, again and again (the
        # SDK reopens it every second), must not cost a ping a second.
        now = anyio.current_time()
        if now - self.last_suspected >= SUSPECT_INTERVAL:
            self.last_suspected = now
            self.suspected.set()

    async def wait_suspect(self) -> None:
        await self.suspected.wait()
        self.suspected = anyio.Event()

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, report: LossReport) -> None:
        if not self.event.is_set():
            self.report = report
            self.event.set()


class _EofSignalingReadStream:
    """Wraps a transport read stream; reports the end when the transport closes it.

    stdio and SSE close their read stream as soon as the server goes away, so this
    detects death without traffic. Other attributes pass through (the SDK's
    dispatcher reads some).
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            self._on_eof()
            raise

    def __aiter__(self) -> _EofSignalingReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _EofSignalingReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# ----------------------------------------------------------------- transport


class McpTransport:
    """The real transport: stdio subprocesses, streamable HTTP and legacy SSE.

    Args:
        getenv: Reads `${env:NAME}` values at connect time.
        starts: Bounds concurrent stdio starts (`starts.StartSlots`); by default
            a bound of its own from the CPU count.
    """

    def __init__(
        self,
        getenv: Callable[[str], str | None] = os.environ.get,
        starts: StartSlots | None = None,
    ) -> None:
        self._getenv = getenv
        self._starts = starts if starts is not None else StartSlots()

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[Upstream]:
        return self._open(spec, hooks)

    @asynccontextmanager
    async def _open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AsyncIterator[Upstream]:
        resolved = resolve_spec(spec, self._getenv, SECRETS)
        # A stdio start waits for a slot first; connect_timeout starts after.
        slot = await self._starts.acquire() if resolved.transport == "stdio" else None
        try:
            async with self._session(resolved, hooks, slot) as upstream:
                yield upstream
        finally:
            if slot is not None:
                slot.release()

    @asynccontextmanager
    async def _session(
        self, resolved: ConnectionSpec, hooks: Hooks, slot: Slot | None
    ) -> AsyncIterator[Upstream]:
        deadline = anyio.current_time() + resolved.connect_timeout
        if resolved.transport != "stdio":
            await _tcp_precheck(resolved.url, deadline)
        lost = _LostSignal()
        upstream: _Session | None = None
        body_error: BaseException | None = None
        # The outer scope bounds teardown: once the body is done, closing the
        # session and the transport may take at most TEARDOWN_TIMEOUT.
        with anyio.CancelScope() as outer:
            try:
                async with self._streams(resolved, hooks, lost, deadline) as (
                    read,
                    write,
                    pid,
                ):

                    def on_eof() -> None:
                        # stdio reports the end itself, with the exit code
                        if resolved.transport != "stdio":
                            lost.set(_EOF)

                    session = ClientSession(
                        _EofSignalingReadStream(read, on_eof),
                        write,
                        message_handler=_message_handler(resolved.name, hooks),
                        client_info=types.Implementation(
                            name=CLIENT_NAME, version=__version__
                        ),
                    )
                    async with session:
                        upstream = await _handshake(
                            resolved, session, write, lost, pid, deadline, slot
                        )
                        if slot is not None:
                            slot.release()  # started: the next server may begin
                        try:
                            yield upstream
                        except BaseException as exc:
                            body_error = exc
                            raise
                        finally:
                            outer.deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                            await upstream.aclose()
            except (TransportError, ConfigError):
                raise
            except Exception as exc:  # boundary: map SDK/httpx/OS failures once
                if body_error is not None and any(
                    leaf is body_error for leaf in flatten(exc)
                ):
                    raise
                for leaf in flatten(exc):
                    if isinstance(leaf, TransportError):
                        raise leaf from exc
                if upstream is None:
                    raise _map_failure(exc, "") from exc
                raise Disconnected(f"lost the server: {describe_error(exc)}") from exc

    @asynccontextmanager
    async def _streams(
        self, spec: ConnectionSpec, hooks: Hooks, lost: _LostSignal, deadline: float
    ) -> AsyncIterator[tuple[Any, Any, int | None]]:
        if spec.transport == "stdio":
            async with _stdio_streams(spec, hooks, lost) as (read, write, pid):
                yield read, write, pid
            return
        headers = dict(spec.headers)
        timeout = httpx2.Timeout(spec.connect_timeout, read=HTTP_READ_TIMEOUT)
        if spec.transport == "sse":

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth)

            async with sse_client(
                spec.url,
                headers=headers,
                timeout=spec.connect_timeout,
                sse_read_timeout=HTTP_READ_TIMEOUT,
                httpx_client_factory=factory,
            ) as (s_read, s_write):
                yield s_read, s_write, None
            return
        session_ids: list[str] = []

        async def remember_session(response: httpx2.Response) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid and not session_ids:
                session_ids.append(sid)

        client = httpx2.AsyncClient(
            headers=headers,
            timeout=timeout,
            event_hooks={"response": [remember_session]},
            transport=_DrainingTransport(
                # Idle connections expire before a server's own keep-alive
                # timeout (uvicorn: 5 s), never in a race with it.
                httpx2.AsyncHTTPTransport(
                    limits=httpx2.Limits(keepalive_expiry=HTTP_KEEPALIVE_EXPIRY)
                ),
                on_event_stream_end=lost.suspect,
            ),
        )
        async with (
            client,
            streamable_http_client(spec.url, http_client=client) as (h_read, h_write),
        ):
            yield h_read, _SessionIdWriter(h_write, session_ids), None


class _DrainingTransport(httpx2.AsyncBaseTransport):
    """Keeps HTTP connections reusable across calls, and watches the event stream.

    POST: the SDK closes a POST's SSE response as soon as the JSON-RPC response
    event arrives, a moment before the server's closing chunk; httpcore then
    drops the connection, so every call paid a new TCP connection and left a
    socket in TIME_WAIT (thousands a minute under load, measured). Reading that
    last chunk first (for at most `POST_DRAIN_LIMIT`) returns the connection to
    the pool. It runs in the SDK's per-request task after the result was handed
    over, so no caller waits for it. A response on a connection that cannot be
    reused (`Connection: close`, HTTP/1.0) is not drained at all.

    GET: the standalone event stream stays open while the server lives. When it
    ends, `on_event_stream_end` is called: the connection probes at once rather
    than at the next ping (a killed server is noticed in milliseconds).
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        on_event_stream_end: Callable[[], None] = lambda: None,
    ) -> None:
        self._inner = inner
        self._on_event_stream_end = on_event_stream_end

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST":
            if _reusable(response):
                response.stream = _DrainOnClose(response.stream)
        elif request.method == "GET" and response.status_code == 200:
            response.stream = _WatchedStream(response.stream, self._on_event_stream_end)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


HTTP_KEEPALIVE_EXPIRY = 2.0
"""Seconds an idle upstream HTTP connection is kept for reuse."""

POST_DRAIN_LIMIT = 0.1
"""Seconds to wait for the rest of a POST response before dropping its connection."""


def _reusable(response: httpx2.Response) -> bool:
    """Whether the connection may serve another request after this response."""
    if response.extensions.get("http_version", b"HTTP/1.1") != b"HTTP/1.1":
        return False
    tokens = response.headers.get("connection", "").lower().replace(" ", "")
    return "close" not in tokens.split(",")


class _OnceStream(httpx2.AsyncByteStream):
    """Iterates an httpcore body stream at most once.

    httpcore's body generator loops without awaiting when iterated again after
    the body ended on a connection the peer closed: h11 answers
    `ConnectionClosed` forever and no deadline can fire (it froze the daemon at
    100 % CPU). So a second pass, or a drain after the end, never starts.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._started = False
        self.ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._started:
            return
        self._started = True
        try:
            async for chunk in self._inner:
                yield chunk
        except GeneratorExit:
            raise  # the reader stopped early: the body has not ended
        except BaseException:
            self._end()
            raise
        self._end()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._on_end()

    def _on_end(self) -> None:
        """Called once when the iteration stops (end, error or close)."""

    async def aclose(self) -> None:
        self.ended = True
        await self._inner.aclose()


class _DrainOnClose(_OnceStream):
    async def aclose(self) -> None:
        if not self._started:
            # Nobody read the body (e.g. 202 Accepted): one bounded pass.
            with anyio.move_on_after(POST_DRAIN_LIMIT):
                async for _ in self:
                    pass
        elif not self.ended:
            # The reader stopped early: finish its pass, bounded.
            with anyio.move_on_after(POST_DRAIN_LIMIT):
                async for _ in self._rest():
                    pass
        await super().aclose()

    async def _rest(self) -> AsyncIterator[bytes]:
        # The first pass stopped before the end; httpcore continues the same
        # body where it stopped (a body that ended is never read again).
        try:
            async for chunk in self._inner:
                yield chunk
        finally:
            self.ended = True


class _WatchedStream(_OnceStream):
    """The GET event stream: reports its end, whatever ended it."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        super().__init__(inner)
        self._callback = on_end

    def _on_end(self) -> None:
        self._callback()


class _SessionIdWriter:
    """Passes the write stream through and exposes the HTTP session id seen so far."""

    def __init__(self, inner: Any, ids: list[str]) -> None:
        self._inner = inner
        self._ids = ids

    @property
    def session_id(self) -> str | None:
        return self._ids[0] if self._ids else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any) -> None:
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _SessionIdWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


_EOF = LossReport("server closed the connection")


def _message_handler(name: str, hooks: Hooks) -> MessageHandlerFnT:
    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            hooks.on_tools_changed()
        elif isinstance(message, Exception):
            logger.debug("%s: transport reported %s", name, describe_error(message))

    return on_message


async def _handshake(
    spec: ConnectionSpec,
    session: ClientSession,
    write: Any,
    lost: _LostSignal,
    pid: int | None,
    deadline: float,
    slot: Slot | None = None,
) -> _Session:
    """initialize + list all tools before `deadline`; errors mapped and explained.

    A stdio server's start is paced (`starts.pace_start`): its slot is given back
    once it idles, and the deadline moves out while it is still busy.
    """
    hard_deadline = deadline + (BUSY_EXTENSION_FACTOR - 1) * spec.connect_timeout
    scope = anyio.CancelScope(deadline=deadline)
    try:
        async with _first_error(), anyio.create_task_group() as pacing:
            if pid is not None and slot is not None:
                pacing.start_soon(pace_start, scope, pid, slot, hard_deadline)
            with scope:
                init = await session.initialize()
                info = ServerInfo(
                    name=init.server_info.name,
                    version=init.server_info.version,
                    protocol=str(init.protocol_version),
                    session_id=getattr(write, "session_id", None),
                )
                sentinel = None
                if spec.transport == "http":  # SSE and stdio see their end already
                    host, port, _ = _address(spec.url)
                    sentinel = TcpSentinel(host, port)
                upstream = _Session(session, info, lost, pid, sentinel)
                await upstream.list_tools()
            pacing.cancel_scope.cancel()
        if scope.cancelled_caught:
            raise TimeoutError
        return upstream
    except TimeoutError:
        took = anyio.current_time() - (deadline - spec.connect_timeout)
        message = (
            f"no complete handshake within connect_timeout {spec.connect_timeout:g} s "
            "(initialize + tools/list)"
        )
        if took > spec.connect_timeout + 0.5:
            message += f"; given {took:.0f} s in all while the server was busy"
        if lost.is_set:
            message = f"{message}; {lost.report.reason}"
        raise ConnectTimeout(message, exit_code=lost.report.exit_code) from None
    except (MCPError, TransportError) as exc:
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            # The session saw EOF first; the transport is about to say why
            # (exit code), which is the error worth showing.
            with anyio.move_on_after(EXIT_CODE_WAIT + 0.1):
                await lost.event.wait()
        if lost.is_set:  # the real cause: the server exited or closed the stream
            raise ConnectFailed(
                lost.report.reason, exit_code=lost.report.exit_code
            ) from exc
        if isinstance(exc, TransportError):
            raise
        raise ConnectFailed(f"handshake failed: {describe_error(exc)}") from exc


@asynccontextmanager
async def _first_error() -> AsyncIterator[None]:
    """Unwrap a task group's single error, so callers can catch it by type."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = flatten(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


async def _tcp_precheck(url: str, deadline: float) -> None:
    """Fail fast and cheaply when nothing listens (most attempts of a dead server).

    Building an SDK session per attempt costs far more than one TCP connect; with
    hundreds of dead upstreams at the backoff cap this keeps the daemon idle.
    """
    host, port, family = _address(url)
    try:
        if family is None:  # a name: anyio resolves it (happy eyeballs)
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                stream = await anyio.connect_tcp(host, port)
            await stream.aclose()
        else:
            await _connect_ip(family, host, port, deadline)
    except TimeoutError:
        raise ConnectTimeout(f"TCP connect to {host}:{port} timed out") from None
    except OSError as exc:
        raise ConnectFailed(f"{_os_reason(exc)} ({host}:{port})") from None


@functools.lru_cache(maxsize=4096)
def _address(url: str) -> tuple[str, int, socket.AddressFamily | None]:
    """Host, port and (for an IP literal) address family of an endpoint URL."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        return host, port, None
    return host, port, socket.AF_INET6 if version == 6 else socket.AF_INET


async def _connect_ip(
    family: socket.AddressFamily, host: str, port: int, deadline: float
) -> None:
    """A bare non-blocking connect to an IP literal: no resolver, no extra task.

    This is the whole cost of most attempts to a dead upstream, so it stays lean:
    anyio's `connect_tcp` spawns a task group per call for happy eyeballs, and a
    refused loopback connect fails synchronously, before any waiting is needed.
    """
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        error = sock.connect_ex((host, port))
        if error == errno.EINPROGRESS:
            # On loopback the handshake (or the refusal) has usually happened
            # inside connect(): look before registering with the event loop.
            _, ready, _ = select.select((), (sock,), (), 0)
            if not ready:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
    finally:
        sock.close()


def _first_os_error(exc: BaseException) -> OSError | None:
    """The first `OSError` with an errno in `exc`'s chain of causes."""
    cause: BaseException | None = exc
    for _ in range(20):  # chains are short; a cycle must not loop
        if cause is None:
            return None
        if isinstance(cause, BaseExceptionGroup):
            cause = flatten(cause)[0]
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _os_reason(exc: OSError) -> str:
    """The root cause of a failed connect, e.g. "connection refused"."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, BaseExceptionGroup):  # anyio's happy eyeballs
            cause = flatten(cause)[0]
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[0].lower() + cause.strerror[1:]
        cause = cause.__cause__ or cause.__context__
    return describe_error(exc)


# ----------------------------------------------------------------- stdio


@asynccontextmanager
async def _stdio_streams(
    spec: ConnectionSpec, hooks: Hooks, lost: _LostSignal
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        int,
    ]
]:
    """Spawn a stdio server in its own process group and bridge its pipes."""
    env = get_default_environment() | dict(spec.env)
    try:
        process = await anyio.open_process(
            [spec.command, *spec.args],
            stdin=-1,
            stdout=-1,
            stderr=-1,
            env=env,
            cwd=spec.cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ConnectFailed(
            f"cannot start {spec.command!r}: not found (check command, PATH and cwd)"
        ) from exc
    except PermissionError as exc:
        raise ConnectFailed(
            f"cannot start {spec.command!r}: permission denied"
        ) from exc
    except OSError as exc:
        raise ConnectFailed(
            f"cannot start {spec.command!r}: {exc.strerror or exc}"
        ) from exc

    pid = process.pid
    CHILD_GROUPS.add(pid)  # start_new_session: the server leads its own group
    hooks.on_spawn(pid)
    read_writer, read_stream = anyio.create_memory_object_stream[
        SessionMessage | Exception
    ](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    garbage = [0]

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    if len(buffer) > MAX_LINE and b"\n" not in buffer:
                        hooks.on_stderr(
                            f"[stdout] line longer than {MAX_LINE} bytes dropped"
                        )
                        buffer = b""
                        continue
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        message = _parse_stdout_line(line, garbage, hooks)
                        if message is not None:
                            await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        code = await _exit_code(process, EXIT_CODE_WAIT)
        reason = "server closed stdout" if code is None else _exit_text(code)
        lost.set(LossReport(reason, exit_code=code, error_type="ProcessExited"))

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
                    hooks.on_stderr(text[:STDERR_LINE_LIMIT])
        if buffer:
            hooks.on_stderr(buffer.decode("utf-8", "replace")[:STDERR_LINE_LIMIT])

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # Usually the server died: its exit code says more than the pipe.
            code = await _exit_code(process, EXIT_CODE_WAIT)
            reason = (
                "server stopped reading stdin" if code is None else _exit_text(code)
            )
            lost.set(LossReport(reason, exit_code=code, error_type="ProcessExited"))
            await read_writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stderr_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream, pid
        finally:
            with anyio.CancelScope(shield=True):
                await _stop_process(process)
                write_stream.close()
                read_stream.close()
                tg.cancel_scope.cancel()


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
            sample = line[:120].decode("utf-8", "replace")
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
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # release the asyncio subprocess transport now, not at GC
        with contextlib.suppress(PermissionError):
            close()


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
