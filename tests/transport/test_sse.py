"""Legacy SSE servers written by hand, in the test's loop (`servers.asgi`):
what the SDK's SSE client refuses is said at once, in words that say why."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fakes import Recorder
from servers.asgi import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from manager.core.errors import UpstreamError
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.http.relay import SseEvents

pytestmark = pytest.mark.anyio


class SseServer:
    """A handshake-era SSE server whose `endpoint` event says `announce`
    (`{base}` is filled with the origin it is served on)."""

    def __init__(self, announce: str) -> None:
        self.announce = announce
        self.base = ""
        self.queues: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.calls = 0

    async def sse(self, request: Request) -> Response:
        sid = str(len(self.queues))
        queue = self.queues[sid] = asyncio.Queue()
        endpoint = self.announce.format(base=self.base, sid=sid)

        async def events() -> AsyncIterator[bytes]:
            # Cut mid-event, as a proxy's chunks may be.
            head = f"event: endpoint\r\ndata: {endpoint}\r\n\r\n".encode()
            yield head[:9]
            yield head[9:]
            while True:
                message = await queue.get()
                yield f"event: message\ndata: {json.dumps(message)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    async def post(self, request: Request) -> Response:
        queue = self.queues[request.query_params["sid"]]
        message = json.loads(await request.body())
        method, rid = message.get("method"), message.get("id")
        results = {
            "initialize": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hand-sse", "version": "1"},
            },
            "tools/list": {
                "tools": [{"name": "echo", "inputSchema": {"type": "object"}}]
            },
        }
        if method == "tools/call" and message["params"]["name"] == "busy":
            return Response("slow down", 429, {"retry-after": "7"})
        if method == "tools/call":
            self.calls += 1
            results[method] = {"content": [{"type": "text", "text": "echoed"}]}
        if rid is not None:
            result = results.get(method, {})
            await queue.put({"jsonrpc": "2.0", "id": rid, "result": result})
        return Response("Accepted", 202)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        app = Starlette(
            routes=[
                Route("/sse", self.sse),
                Route("/messages", self.post, methods=["POST"]),
            ]
        )
        async with serving(app) as base:
            self.base = base
            yield base + "/sse"


@pytest.mark.parametrize(
    "announce",
    ["/messages?sid={sid}", "messages?sid={sid}", "{base}/messages?sid={sid}"],
)
async def test_an_sse_server_on_its_own_origin_is_connected(announce: str) -> None:
    server = SseServer(announce)
    bus = EventBus()
    rec = Recorder(bus)
    async with server.serving() as url, Manager(bus) as manager:
        manager.add(parse_spec("old", {"url": url, "transport": "sse"}, {}))
        await rec.wait_for("connected", "old")


async def test_an_endpoint_on_another_origin_is_refused_at_once_and_said() -> None:
    """The server announces `localhost` where the URL says `127.0.0.1` (a
    server that prints its own name): the SDK will not post there. It waited
    the whole connect_timeout and said the server 'said nothing'."""
    server = SseServer("http://localhost:{port}/messages?sid={sid}")
    bus = EventBus()
    rec = Recorder(bus)
    async with server.serving() as url, Manager(bus) as manager:
        port = url.split(":")[2].split("/")[0]
        server.announce = server.announce.replace("{port}", port)
        opts = {"connect_timeout": 60}
        manager.add(parse_spec("old", {"url": url, "transport": "sse"}, opts))
        with anyio.fail_after(20):  # far below connect_timeout
            failed = await rec.wait_for("connect_failed", "old", within=20)
    error: str = failed.error  # type: ignore[attr-defined]
    assert error.startswith(
        "the server's SSE stream names its message endpoint on another origin "
        f"(http://localhost:{port}/messages?sid="
    )
    assert f"declare url = 'http://localhost:{port}/sse'" in error


async def test_a_call_answered_429_fails_at_once_and_the_session_goes_on() -> None:
    """The SDK's SSE client left such a request to its timeout (60 s by
    default) and stopped sending at all after it, so the next calls failed
    'disconnected ... may have run it' while status said connected."""
    server = SseServer("/messages?sid={sid}")
    bus = EventBus()
    rec = Recorder(bus)
    async with server.serving() as url, Manager(bus) as manager:
        opts = {"call_timeout": 60, "ping_interval": 0}
        manager.add(parse_spec("old", {"url": url, "transport": "sse"}, opts))
        connected = await rec.wait_for("connected", "old")
        with anyio.fail_after(20):
            with pytest.raises(UpstreamError) as caught:
                await manager.call("old", "busy", {})
            assert caught.value.reply == (
                "Server returned an error response "
                "(HTTP 429 Too Many Requests; it asks to wait 7 s (Retry-After))"
            )
            for _ in range(2):  # the same session, still sending
                result = await manager.call("old", "echo", {})
                assert result.is_error is False
    assert server.calls == 2
    assert len(server.queues) == 1
    assert rec.of("connected") == [connected] and rec.of("disconnected") == []


@pytest.mark.parametrize(
    ("stream", "endpoint"),
    [
        (b"event: endpoint\ndata: /m\n\n", "/m"),
        (b"event: endpoint\r\ndata:/m\r\n\r\n", "/m"),
        (b": hi\n\nevent: endpoint\ndata: /m\n\n", "/m"),
        (b"event: endpoint\ndata: /m\n", None),  # not complete yet
        (b"data: {}\n\n", None),
    ],
)
def test_the_first_endpoint_is_read_whatever_the_line_ends(
    stream: bytes, endpoint: str | None
) -> None:
    events = SseEvents()
    events.feed(stream)
    assert events.endpoint == endpoint
