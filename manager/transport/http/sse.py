"""Legacy SSE (the 2024-11-05 transport): the SDK's client, watched.

The SDK's `sse_client` does the work; two of its answers to a server that
misbehaves would cost the user minutes, so this module reads along:

- `_EndpointScan`: an `endpoint` event on another origin is said at once
  (the SDK refuses it, then blocks handing us the error until the connect's
  deadline, and we said the server "said nothing").
- `_refused_post`: a POST answered 400 or more is answered here, with its
  status (the SDK's request waited out its timeout, and its writer ended at
  the first such answer, so the session went deaf while it looked
  connected); a 404 ends the session.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
import mcp.types as types
from mcp.client.sse import sse_client
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR

from ...core.spec import ConnectionSpec
from ..base import Streams
from .relay import SseEvents
from .status import HttpStatus
from .streams import HTTP_READ_TIMEOUT, forward

__all__ = ["open_sse_streams"]

ANSWER_TIMEOUT = 5.0
"""Seconds `_refused_post` waits for the session to take its answer."""


ENDPOINT_SCAN_LIMIT = 65536
"""Bytes of an SSE stream read for its `endpoint` event before giving up."""


class _EndpointScan(httpx2.AsyncByteStream):
    """Passes an SSE stream on, and reads its first `endpoint` event as the
    SDK's client will: one on another origin (another host, port or scheme;
    `localhost` where the URL says `127.0.0.1`) is told to `on_foreign` at
    once. The SDK refuses to post there, and its reader then blocks handing
    us the error (nobody reads before the endpoint is known), so the connect
    would wait out `connect_timeout` and say the server said nothing."""

    def __init__(self, inner: Any, url: str, on_foreign: Callable[[str], None]):
        self._inner = inner
        self._url = url
        self._on_foreign = on_foreign

    async def __aiter__(self) -> AsyncIterator[bytes]:
        events, scanned = SseEvents(), 0
        async for chunk in self._inner:
            if scanned <= ENDPOINT_SCAN_LIMIT:
                events.feed(chunk)
                scanned += len(chunk)
                if events.endpoint is not None:
                    scanned = ENDPOINT_SCAN_LIMIT + 1  # read: done
                    joined = urljoin(self._url, events.endpoint)
                    here, there = urlsplit(self._url), urlsplit(joined)
                    if (here.scheme, here.netloc) != (there.scheme, there.netloc):
                        self._on_foreign(joined)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _refused_post(
    response: httpx2.Response,
    answer: Callable[[SessionMessage], Awaitable[None]],
    on_gone: Callable[[HttpStatus], None],
) -> None:
    """A POST of the SSE client answered 400 or more: its request is answered
    here, at once, as the streamable HTTP client says a status ("Server
    returned an error response", with the status and its Retry-After), and
    the SDK's writer sees 202. Left to it, the request waited out its
    timeout, and the writer ended at the first such answer (its
    `raise_for_status`), so every later request of the session went nowhere
    while status said connected. A 404 says the server lost the session:
    `on_gone`, and the connection opens a new one."""
    status = HttpStatus.of(response.status_code, response.headers)
    if response.status_code == 404:
        on_gone(status)
        return
    try:
        sent = json.loads(response.request.content)
    except ValueError:
        sent = None
    if isinstance(sent, dict) and "method" in sent and sent.get("id") is not None:
        said = f"Server returned an error response ({status.said()})"
        error = types.ErrorData(code=INTERNAL_ERROR, message=said)
        reply = types.JSONRPCError(jsonrpc="2.0", id=sent["id"], error=error)
        with (
            contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError),
            anyio.move_on_after(ANSWER_TIMEOUT),  # a session no longer reading
        ):
            await answer(SessionMessage(reply))
    response.status_code = 202


@asynccontextmanager
async def open_sse_streams(
    spec: ConnectionSpec,
    auth: httpx2.Auth | None = None,
    on_foreign: Callable[[str], None] = lambda endpoint: None,
    on_gone: Callable[[HttpStatus], None] = lambda status: None,
) -> AsyncIterator[Streams]:
    """The SDK's legacy SSE client streams for `spec` (`auth`: its OAuth);
    `on_foreign` hears of an endpoint on another origin (`_EndpointScan`),
    `on_gone` of a POST answered 404 (`_refused_post`)."""
    # The session reads what the SDK's client passes on, and the answers
    # `_refused_post` gives for it.
    merged, session_read = anyio.create_memory_object_stream[Any](0)

    async def scan(response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            response.stream = _EndpointScan(response.stream, spec.url, on_foreign)
        elif response.request.method == "POST" and response.status_code >= 400:
            await _refused_post(response, merged.send, on_gone)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        # A hook, not a transport: the client keeps its own (and with it
        # the proxy the environment names).
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout,
            auth=auth,
            event_hooks={"response": [scan]},
        )

    async with (
        merged,  # closed however the opening ends (the pump closes it at EOF)
        session_read,
        sse_client(
            spec.url,
            headers=dict(spec.headers),
            timeout=spec.connect_timeout,
            sse_read_timeout=HTTP_READ_TIMEOUT,
            httpx_client_factory=factory,
            auth=auth,
        ) as (read, write),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(forward, read, merged)
        try:
            yield Streams(session_read, write)
        finally:
            tg.cancel_scope.cancel()
