"""Streamable HTTP: our HTTP client under the SDK's transport (legacy SSE: `sse`).

A client's request to a streamable HTTP server goes out by `http.relay.HttpRelay` on
the same client; everything else through the SDK's transport.

The proxy the environment names for a server's URL (`HTTP_PROXY`,
`HTTPS_PROXY`, `ALL_PROXY`, less what `NO_PROXY` excludes: the rules of
`urllib` and of every httpx client) is used, as the SDK's own clients (legacy
SSE, OAuth) use it: such a server is reached through httpx2's own transport
(HTTP forwarding, `CONNECT` for https), every other one through our pool.

Connections are kept reusable across calls (a POST body's last chunk is read
before the connection goes back to the pool, never twice), the server's event
stream is watched for its end, and the session id is remembered for spans.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
from mcp.client.streamable_http import streamable_http_client

from ...core.redact import redact_url
from ...core.spec import ConnectionSpec
from ..base import Refusal, RequestLinks, Streams, take_link
from ..relay import NO_SEND_SPAN, SendSpan
from .pool import PoolTransport
from .relay import HttpRelay, JsonLines
from .status import HttpStatus

__all__ = [
    "HTTP_READ_TIMEOUT",
    "DrainingTransport",
    "SessionIdWriter",
    "environment_proxy",
    "forward",
    "open_http_streams",
]

HTTP_READ_TIMEOUT = 300.0
"""httpx read timeout: long, as the SDK's, because a server holds streams open."""


class DrainingTransport(httpx2.AsyncBaseTransport):
    """Keeps HTTP connections reusable across calls, and watches the event stream.

    POST: the SDK closes a POST's SSE response as soon as the JSON-RPC response
    event arrives, a moment before the server's closing chunk; the pool then
    drops the connection, so every call paid a new TCP connection and left a
    socket in TIME_WAIT (thousands a minute under load, measured). Reading that
    last chunk first (for at most `POST_DRAIN_LIMIT`) returns the connection to
    the pool. It runs in the SDK's per-request task after the result was handed
    over, so no caller waits for it. A response on a connection that cannot be
    reused (`Connection: close`, HTTP/1.0) is not drained at all.

    A `subscriptions/listen` answer sent as JSON lines (`application/json`,
    the TypeScript SDK's 2026-07-28 way) is handed to the SDK's client as the
    event stream it reads (`_JsonLinesAsEvents`).

    GET: the standalone event stream stays open while the server lives. When it
    ends, `on_event_stream_end` is called: the connection probes at once rather
    than at the next ping (a killed server is noticed in milliseconds).
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        on_event_stream_end: Callable[[], None] = lambda: None,
        links: RequestLinks | None = None,
        refusals: list[Refusal] | None = None,
        statuses: list[HttpStatus] | None = None,
    ) -> None:
        self._inner = inner
        self._on_event_stream_end = on_event_stream_end
        self._links = links
        self._refusals = refusals
        self._statuses = statuses

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        token = None
        if request.method == "POST":
            token, request = _unlinked(request)  # the token is ours, not the server's
        response = await self._inner.handle_async_request(request)
        if response.status_code in (401, 403) and self._refusals is not None:
            # The SDK turns these into "Server returned an error response":
            # keep what the server said, to tell the user and to wait.
            self._refusals.append(
                Refusal(
                    response.status_code,
                    response.headers.get("www-authenticate", ""),
                    "authorization" in request.headers,
                )
            )
        elif (
            response.status_code >= 400
            and request.method == "POST"
            and self._statuses is not None
        ):
            # The same stand-in, and a Retry-After the next try must honour.
            self._statuses.append(HttpStatus.of(response.status_code, response.headers))
        if request.method == "POST":
            if _reusable(response):
                response.stream = _DrainOnClose(response.stream)
            kind = response.headers.get("content-type", "")
            if (
                kind.startswith("application/json")
                and request.headers.get("mcp-method") == "subscriptions/listen"
            ):
                # A listen stream sent as JSON lines (the TypeScript SDK's
                # 2026-07-28 entry): the events the SDK's client reads.
                response.stream = _JsonLinesAsEvents(response.stream)
                response.headers["content-type"] = kind = "text/event-stream"
            if (
                token is not None
                and self._links is not None
                and kind.startswith("text/event-stream")
            ):
                response.stream = _LinkingStream(response.stream, self._links, token)
        elif request.method == "GET" and response.status_code == 200:
            response.stream = _WatchedStream(response.stream, self._on_event_stream_end)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


HTTP_KEEPALIVE_EXPIRY = 2.0
"""Seconds an idle upstream HTTP connection is kept for reuse."""

logger = logging.getLogger("manager.transport")


def environment_proxy(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy the environment names for `url`, or None.

    `HTTPS_PROXY`/`HTTP_PROXY` by the URL's scheme, else `ALL_PROXY` (lower
    case too); a host `NO_PROXY` lists (or `*`) goes direct. A proxy given
    without a scheme is `http://`.
    """
    if environ is None:
        proxies = urllib.request.getproxies_environment()
    else:
        proxies = {
            key.lower()[: -len("_proxy")]: value
            for key, value in environ.items()
            if key.lower().endswith("_proxy") and value
        }
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not host:
        return None
    if _bypassed(host, parts.port, proxies.get("no", "")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """`NO_PROXY`: `*`, or entries naming the host or a domain above it
    (`example.com` and `.example.com` both cover `api.example.com`), with an
    optional `:port`."""
    host = host.lower().rstrip(".")
    for entry in no_proxy.replace(" ", "").lower().split(","):
        if entry == "*":
            return True
        name, _, only_port = (
            entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        )
        if only_port and only_port != str(port):
            continue
        name = name.strip("[]").lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _base_transport(url: str, proxy: str | None) -> httpx2.AsyncBaseTransport:
    """Our pool, or httpx2's transport through `proxy`."""
    if proxy is None:
        # Idle connections expire before a server's own keep-alive timeout
        # (uvicorn: 5 s), never in a race with it.
        return PoolTransport(keepalive_expiry=HTTP_KEEPALIVE_EXPIRY)
    logger.debug("%s through the proxy %s", redact_url(url), redact_url(proxy))
    return httpx2.AsyncHTTPTransport(
        proxy=proxy, limits=httpx2.Limits(keepalive_expiry=HTTP_KEEPALIVE_EXPIRY)
    )


POST_DRAIN_LIMIT = 0.1
"""Seconds to wait for the rest of a POST response before dropping its connection."""


async def _raise(exc: BaseException) -> None:
    """Fail the transport's task group with `exc`, as the SDK's transport
    fails when its HTTP client's auth flow raises."""
    raise exc


def _reusable(response: httpx2.Response) -> bool:
    """Whether the connection may serve another request after this response."""
    if response.extensions.get("http_version", b"HTTP/1.1") != b"HTTP/1.1":
        return False
    tokens = response.headers.get("connection", "").lower().replace(" ", "")
    return "close" not in tokens.split(",")


class _OnceStream(httpx2.AsyncByteStream):
    """Iterates a response body stream at most once.

    httpcore's body generator (still behind HEAD and upgrades; the pool's
    `PoolTransport` ends a second pass at once) loops without awaiting when
    iterated again after the body ended on a connection the peer closed: h11
    answers `ConnectionClosed` forever and no deadline can fire (it froze the
    daemon at 100 % CPU). So a second pass, or a drain after the end, never
    starts.
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
        # The first pass stopped before the end; the pool continues the same
        # body where it stopped (a body that ended is never read again).
        try:
            async for chunk in self._inner:
                yield chunk
        finally:
            self.ended = True


class _JsonLinesAsEvents(httpx2.AsyncByteStream):
    """A body of JSON lines (`JsonLines`) as the event stream of its
    messages: the SDK's client reads a JSON body whole (an open listen stream
    never ends) and only as one message."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        lines = JsonLines()
        async for chunk in self._inner:
            events = b"".join(_event(text) for text in lines.feed(chunk))
            if events:
                yield events
        rest = lines.rest()
        if rest is not None:
            yield _event(rest)  # what is left, for the SDK to judge

    async def aclose(self) -> None:
        await self._inner.aclose()


def _event(text: bytes) -> bytes:
    """One `message` event whose data is `text`."""
    data = b"".join(b"data: " + line + b"\n" for line in text.split(b"\n"))
    return b"event: message\n" + data + b"\n"


class _WatchedStream(_OnceStream):
    """The GET event stream: reports its end, whatever ended it."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        super().__init__(inner)
        self._callback = on_end

    def _on_end(self) -> None:
        self._callback()


def _unlinked(request: httpx2.Request) -> tuple[str | None, httpx2.Request]:
    """The `LINK_META_KEY` token of a JSON-RPC POST, and the POST without it
    (its length said anew); `request` itself when it carries none."""
    try:
        body = request.content
    except httpx2.RequestNotRead:  # a streamed body: not one of our JSON-RPC posts
        return None, request
    token, sent = take_link(body)
    if sent is body:
        return token, request
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    stripped = httpx2.Request(
        request.method,
        request.url,
        headers=headers,
        content=sent,
        extensions=request.extensions,
    )
    return token, stripped


class _LinkingStream(httpx2.AsyncByteStream):
    """A POST's event stream: notes which server requests arrive on it.

    A server that asks the client something while serving a request sends it
    on that request's response stream; the request's token then names the
    downstream request it is for (`RequestLinks`).
    """

    def __init__(self, inner: Any, links: RequestLinks, token: str) -> None:
        self._inner = inner
        self._links = links
        self._token = token
        self._buffer = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._scan(chunk)
            yield chunk

    def _scan(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if not line.startswith(b"data:") or b'"method"' not in line:
                continue
            try:
                message = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(message, dict) and "id" in message and "method" in message:
                self._links.record(message["id"], self._token)

    async def aclose(self) -> None:
        await self._inner.aclose()


class SessionIdWriter:
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

    async def __aenter__(self) -> SessionIdWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def forward(read: Any, merged: Any) -> None:
    """Pass what the SDK's transport reads on to the session's stream, which
    answers of our own join; its end is the session's (the EOF it sees)."""
    async with merged:
        async for item in read:
            await merged.send(item)


@asynccontextmanager
async def open_http_streams(
    spec: ConnectionSpec,
    on_event_stream_end: Callable[[], None],
    links: RequestLinks | None = None,
    refusals: list[Refusal] | None = None,
    auth: httpx2.Auth | None = None,
    send_span: SendSpan = NO_SEND_SPAN,
    on_log: Callable[[str, str | None, object], None] | None = None,
    proxy: str | None = None,
    statuses: list[HttpStatus] | None = None,
) -> AsyncIterator[Streams]:
    """The SDK's streamable HTTP client streams for `spec`, on our HTTP client
    (through `proxy`, an `environment_proxy` of its URL, when there is one).

    The write stream tells the session id and carries the `HttpRelay` for
    `tools/call` (`relay`, with `send_span` and `on_log`);
    `on_event_stream_end` is called when the server's standalone event stream
    ends; `refusals` and `statuses` collect what a POST was answered with
    (401/403; any other status of 400 or more).
    """
    session_ids: list[str] = []

    async def remember_session(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and not session_ids:
            session_ids.append(sid)

    client = httpx2.AsyncClient(
        headers=dict(spec.headers),
        timeout=httpx2.Timeout(spec.connect_timeout, read=HTTP_READ_TIMEOUT),
        event_hooks={"response": [remember_session]},
        auth=auth,
        transport=DrainingTransport(
            _base_transport(spec.url, proxy),
            on_event_stream_end=on_event_stream_end,
            links=links,
            refusals=refusals,
            statuses=statuses,
        ),
    )
    # The session reads what the SDK's transport passes on, and what the relay
    # hands it from a call's own event stream (a server's request mid-call).
    merged, session_read = anyio.create_memory_object_stream[Any](0)

    async with (
        merged,  # closed however the opening ends (the pump closes it at EOF)
        session_read,
        client,
        streamable_http_client(spec.url, http_client=client) as (read, write),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(forward, read, merged)
        writer = SessionIdWriter(write, session_ids)
        relay = HttpRelay(
            client,
            spec.url,
            lambda: writer.session_id,
            merged.send,
            send_span,
            on_log=on_log,
            fail=lambda exc: tg.start_soon(_raise, exc),
        )
        try:
            yield Streams(
                session_read, writer, relay=relay, session_id=lambda: writer.session_id
            )
        finally:
            relay.close()
            tg.cancel_scope.cancel()
