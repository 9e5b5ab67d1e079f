"""HTTP/1.1 for the upstream client: a keep-alive pool on asyncio and httptools.

httpx2's own transport (httpcore2 on anyio sockets, h11 for the framing) costs
about 600 µs of CPU per request on a 2-core machine, more than everything else
the daemon does for a call forwarded to a streamable HTTP server (measured:
an `httpx2.AsyncClient` POST to a local server takes 760-930 µs of CPU, its
client layer alone 226 µs, an asyncio protocol with httptools 40-70 µs).
`PoolTransport` is that lower layer, kept under httpx2's client, so that
everything the client does is kept: headers, auth flows (OAuth), event hooks,
timeouts. It speaks to servers directly: a server the environment's proxy
covers is reached through httpx2's own transport instead (`http.py`).

What it does, as httpcore does for HTTP/1.1:

* one request at a time per connection; connections are kept for
  `keepalive_expiry` seconds after use (LIFO, at most `max_keepalive` idle),
  at most `max_connections` in all (a request waits for one, up to the pool
  timeout); an idle connection the server closed is never used again;
* a response's head is returned as soon as it is read; its body streams as
  it arrives (event streams), with the read timeout on each wait, and reading
  is paused while more than `READ_HIGH_WATER` bytes wait for the reader;
* the connection goes back to the pool when its response was read to the end
  and both sides keep it alive; a response closed before its end, cancelled,
  or broken closes the connection;
* its errors are httpx2's, with httpcore's wording where the daemon reads
  it (`errors.describe`): `ConnectError` (with the `OSError` as its cause),
  `ConnectTimeout`, `ReadTimeout`, `WriteTimeout`, `PoolTimeout`, `ReadError`,
  `WriteError`, `RemoteProtocolError` ("Server disconnected without sending a
  response.", "peer closed connection without sending complete message
  body: ...").

What it leaves to httpx2's own transport (`fallback`): HEAD (the parser
cannot know a HEAD response has no body) and protocol upgrades.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import httptools
import httpx2

from ..waits import settled, wake

__all__ = ["READ_HIGH_WATER", "PoolTransport"]

READ_HIGH_WATER = 256 * 1024
"""Bytes of a response body buffered before reading from the socket pauses."""

_WRITE_CHUNK = 64 * 1024


class PoolTransport(httpx2.AsyncBaseTransport):
    """An `httpx2` transport: HTTP/1.1 over pooled keep-alive connections.

    Args:
        keepalive_expiry: Seconds an idle connection is kept for reuse.
        max_connections: Connections open at once, busy or idle.
        max_keepalive: Idle connections kept.
        ssl_context: For https (default: `httpx2.create_ssl_context()`, made
            on the first https request).
        fallback: Serves what this transport does not (HEAD, upgrades);
            default: an `httpx2.AsyncHTTPTransport`, made when first needed.
    """

    def __init__(
        self,
        *,
        keepalive_expiry: float = 5.0,
        max_connections: int = 100,
        max_keepalive: int = 20,
        ssl_context: ssl.SSLContext | None = None,
        fallback: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._expiry = keepalive_expiry
        self._max_connections = max_connections
        self._max_keepalive = max_keepalive
        self._ssl_context = ssl_context
        self._fallback = fallback
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._connecting = 0
        self._slot_waiters: list[asyncio.Future[None]] = []
        self._closed = False

    @property
    def connections(self) -> int:
        """Connections open now, busy or idle."""
        return len(self._all)

    @property
    def idle(self) -> int:
        """Connections waiting to be reused (and not closed by the server)."""
        return sum(not c.closed for conns in self._idle.values() for c in conns)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "HEAD" or "upgrade" in request.headers:
            if self._fallback is None:
                self._fallback = httpx2.AsyncHTTPTransport()
            return await self._fallback.handle_async_request(request)
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts = request.extensions.get("timeout", {})
        conn = await self._acquire(request, timeouts)
        try:
            await conn.send(request, timeouts.get("write"))
            await conn.read_head(request, timeouts.get("read"))
        except BaseException:
            self.release(conn, reuse=False)
            raise
        return httpx2.Response(
            conn.status,
            headers=conn.headers,
            stream=_Body(self, conn, timeouts.get("read"), request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": conn.reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        for conn in list(self._all):  # busy ones too: their readers see the close
            self._drop(conn)
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()

    # --- the pool -----------------------------------------------------------------

    async def _acquire(
        self, request: httpx2.Request, timeouts: dict[str, float | None]
    ) -> _Connection:
        url = request.url
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, url.host, port)
        while True:
            idle = self._idle.get(key)
            while idle:
                conn = idle.pop()
                if conn.reusable(self._expiry):
                    conn.checkout()
                    return conn
                self._drop(conn)
            if len(self._all) + self._connecting < self._max_connections:
                break
            if not self._evict_idle():
                await self._wait_for_slot(request, timeouts.get("pool"))
        self._connecting += 1
        try:
            conn = await self._connect(request, key, timeouts.get("connect"))
        except BaseException:
            self._wake_slot()
            raise
        finally:
            self._connecting -= 1
        if self._closed:  # closed while it connected
            conn.close()
            raise RuntimeError("the transport is closed")
        self._all.add(conn)
        return conn

    async def _connect(
        self, request: httpx2.Request, key: tuple[str, str, int], limit: float | None
    ) -> _Connection:
        scheme, host, port = key
        context: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl_context is None:
                self._ssl_context = httpx2.create_ssl_context()
            context = self._ssl_context
        loop = asyncio.get_running_loop()
        conn = _Connection(loop, key)
        try:
            with anyio.fail_after(limit):
                await loop.create_connection(
                    lambda: conn,
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None else None,
                )
        except TimeoutError:
            conn.close()
            raise httpx2.ConnectTimeout(
                "timed out while connecting", request=request
            ) from None
        except OSError as exc:
            conn.close()
            raise httpx2.ConnectError(str(exc), request=request) from exc
        conn.checkout()
        return conn

    async def _wait_for_slot(
        self, request: httpx2.Request, limit: float | None
    ) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            with anyio.fail_after(limit):
                await waiter
        except TimeoutError:
            raise httpx2.PoolTimeout(
                "timed out waiting for a connection", request=request
            ) from None
        finally:
            if waiter in self._slot_waiters:
                self._slot_waiters.remove(waiter)

    def _wake_slot(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    def _evict_idle(self) -> bool:
        """Close the longest idle connection; False if none is idle."""
        oldest: _Connection | None = None
        for conns in self._idle.values():
            if conns and (oldest is None or conns[0].idle_since < oldest.idle_since):
                oldest = conns[0]
        if oldest is None:
            return False
        self._idle[oldest.key].remove(oldest)
        self._drop(oldest)
        return True

    def release(self, conn: _Connection, *, reuse: bool) -> None:
        """A response is done with `conn`: back to the pool, or closed (its
        body's `aclose`)."""
        if conn.released:
            return
        conn.released = True
        if not reuse or self._closed or not conn.reusable(self._expiry):
            self._drop(conn)
            return
        idle = self._idle.setdefault(conn.key, [])
        idle.append(conn)
        conn.park(self._expiry, self._expire)
        if sum(map(len, self._idle.values())) > self._max_keepalive:
            self._evict_idle()
        self._wake_slot()

    def _expire(self, conn: _Connection) -> None:
        """`conn` stayed idle for `keepalive_expiry`: close it."""
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)
            self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        if conn in self._all:
            self._all.discard(conn)
            self._wake_slot()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: the socket's protocol and the response parser's
    callbacks, with what was read of the current response."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, key: tuple[str, str, int]
    ) -> None:
        self.key = key
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[bool] | None = None
        self._drained: asyncio.Future[bool] | None = None
        self._write_paused = False
        self._read_paused = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self.idle_since = 0.0
        self.closed = False
        """The socket is closed, or closing (by either side)."""
        self.lost: BaseException | None = None
        """The error the socket ended with, if any."""
        self.released = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.received = 0
        self._informational = False
        self._protocol_error: str | None = None

    # --- use ----------------------------------------------------------------------

    def checkout(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self.released = False
        self.idle_since = 0.0
        self._reset()

    def park(self, expiry: float, expire: Any) -> None:
        self._parser = None
        self.idle_since = time.monotonic()
        self._idle_timer = self._loop.call_later(expiry, expire, self)

    def reusable(self, expiry: float) -> bool:
        if self.closed or self._transport is None or self._transport.is_closing():
            return False
        if self.idle_since and time.monotonic() - self.idle_since >= expiry:
            return False
        return True

    def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self.closed = True
        if self._transport is not None:
            self._transport.close()
        self._wake()

    async def send(self, request: httpx2.Request, limit: float | None) -> None:
        """Write the request: its head, then its body as httpx2 framed it."""
        self._parser = httptools.HttpResponseParser(self)
        start = b"%s %s HTTP/1.1\r\n" % (request.method.encode(), request.url.raw_path)
        lines = [start]
        for name, value in request.headers.raw:
            lines.append(b"%s: %s\r\n" % (name, value))
        lines.append(b"\r\n")
        head = b"".join(lines)
        try:
            body = request.content
        except httpx2.RequestNotRead:
            await self._write(head, request, limit)
            chunked = "chunked" in request.headers.get("transfer-encoding", "").lower()
            async for chunk in request.stream:  # type: ignore[union-attr]
                if chunked and chunk:
                    chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
                if chunk:
                    await self._write(chunk, request, limit)
            if chunked:
                await self._write(b"0\r\n\r\n", request, limit)
            return
        if len(body) <= _WRITE_CHUNK:
            await self._write(head + body, request, limit)
        else:
            await self._write(head, request, limit)
            await self._write(body, request, limit)

    async def _write(
        self, data: bytes, request: httpx2.Request, limit: float | None
    ) -> None:
        if self.closed or self._transport is None:
            raise httpx2.WriteError(_lost_text(self.lost), request=request)
        self._transport.write(data)
        if not self._write_paused:
            return
        drained = self._loop.create_future()
        self._drained = drained
        try:
            timed_out = await settled(drained, limit)
        finally:
            self._drained = None
        if timed_out:
            raise httpx2.WriteTimeout("timed out while sending", request=request)
        if self.closed and self._write_paused:
            raise httpx2.WriteError(_lost_text(self.lost), request=request)

    async def read_head(self, request: httpx2.Request, limit: float | None) -> None:
        """Wait for the response's status line and headers."""
        while not self.head_done:
            self.raise_if_broken(request, before_head=True)
            await self.wait(request, limit)

    async def wait(self, request: httpx2.Request, limit: float | None) -> None:
        """Until something is read or the socket ends; `ReadTimeout` after `limit` s."""
        waiter = self._loop.create_future()
        self._waiter = waiter
        try:
            timed_out = await settled(waiter, limit)
        finally:
            self._waiter = None
        if timed_out:
            raise httpx2.ReadTimeout("timed out while reading", request=request)

    def take(self) -> bytes:
        """The body bytes read so far and not yet taken."""
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks = []
        self.buffered = 0
        if self._read_paused and self._transport is not None:
            self._read_paused = False
            self._transport.resume_reading()
        return data

    def body_ended_by_close(self) -> bool:
        """The socket closed cleanly where the body had no other end."""
        if self.lost is not None or not self.head_done or self.complete:
            return False
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def raise_if_broken(self, request: httpx2.Request, *, before_head: bool) -> None:
        """Raise what ended the response, if something did."""
        if self._protocol_error is not None:
            raise httpx2.RemoteProtocolError(self._protocol_error, request=request)
        if not self.closed:
            return
        if isinstance(self.lost, OSError):
            error = httpx2.ReadError(str(self.lost), request=request)
            raise error from self.lost
        if before_head:
            raise httpx2.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        raise httpx2.RemoteProtocolError(self._incomplete(), request=request)

    def _incomplete(self) -> str:
        for name, value in self.headers:
            if name.lower() == b"content-length":
                expected = value.decode("latin-1")
                return (
                    "peer closed connection without sending complete message body: "
                    f"received {self.received} bytes, expected {expected}"
                )
        return (
            "peer closed connection without sending complete message body: "
            "incomplete chunked read"
        )

    def _wake(self) -> None:
        if self._waiter is not None:
            wake(self._waiter)

    # --- asyncio.Protocol ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not `asyncio.Transport` instances, but have
        # its methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self.complete:
            # Bytes nobody asked for (on an idle connection, or after the
            # response): the connection cannot be trusted with another.
            self.close()
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._protocol_error = "the server upgraded the connection unasked"
            self.close()
        except httptools.HttpParserError as exc:
            self._protocol_error = f"malformed HTTP response: {exc}"
            self.close()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        self._wake()
        if self._drained is not None:
            wake(self._drained)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None:
            wake(self._drained)

    # --- httptools callbacks ------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            # An interim response (100 Continue, 103 Early Hints): the real
            # one follows on the same connection.
            self._informational = True
            self.reason = b""
            self.headers = []
            return
        self.status = status
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        self.received += len(body)
        if (
            self.buffered > READ_HIGH_WATER
            and not self._read_paused
            and self._transport is not None
        ):
            self._read_paused = True
            self._transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        assert self._parser is not None
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()


def _lost_text(lost: BaseException | None) -> str:
    return str(lost) if lost is not None else "the connection is closed"


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives; the connection goes back on close."""

    def __init__(
        self,
        pool: PoolTransport,
        conn: _Connection,
        timeout: float | None,
        request: httpx2.Request,
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._timeout = timeout
        self._request = request
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # Iterated again after a stop, it goes on where it stopped (the
        # unread bytes stay with the connection); after the end, nothing.
        conn = self._conn
        while not self._ended:
            if conn.chunks:
                yield conn.take()
                continue
            if conn.complete:
                self._ended = True
                break
            if conn.closed:
                if conn.body_ended_by_close():
                    self._ended = True
                    break
                self._ended = True
                self._pool.release(conn, reuse=False)
                conn.raise_if_broken(self._request, before_head=False)
            await conn.wait(self._request, self._timeout)

    async def aclose(self) -> None:
        conn = self._conn
        reuse = self._ended and conn.complete and conn.keep_alive and not conn.chunks
        self._ended = True
        self._pool.release(conn, reuse=reuse)
