"""The lean `tools/call` relay to streamable HTTP servers (`transport.http.relay`).

The upstream is a hand-written handshake-era streamable HTTP server (starlette
under uvicorn, in the test's loop) that keeps every message it is sent, so a
test sees what went over the wire: our request ids, progress tokens, the
session id, the courtesy `notifications/cancelled` and the answers the SDK
session gave to what the server asked mid-call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import psutil
import pytest
from fakes import Recorder, eventually
from servers import HttpServerFactory
from servers.asgi import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from manager.core.errors import CallTimeout, ServerUnavailable, UpstreamError
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.transport.http.relay import SseEvents
from manager.transport.http.streams import DrainingTransport

pytestmark = pytest.mark.anyio

SESSION = "session-1"
TOOLS = [
    {"name": n, "inputSchema": {"type": "object"}}
    for n in (
        "echo",
        "stream",
        "lines",
        "ask",
        "slow",
        "fail",
        "gone",
        "resume",
        "busy",
        "expired",
    )
]


def frame(message: dict[str, Any], event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: {json.dumps(message)}\n\n".encode()


class Upstream:
    """A streamable HTTP MCP server of the handshake era, written by hand."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.answers: dict[Any, anyio.Event] = {}
        self.answered: dict[Any, dict[str, Any]] = {}
        self.resumed: list[str] = []
        self.too_many = 0  # initialize requests to answer 429, Retry-After 40

    def calls(self) -> list[dict[str, Any]]:
        return [m for _, m in self.posts if m.get("method") == "tools/call"]

    async def post(self, request: Request) -> Response:
        message = json.loads(await request.body())
        self.posts.append((dict(request.headers), message))
        method, rid = message.get("method"), message.get("id")
        if method is None:  # the client's answer to our question
            self.answered[rid] = message
            self.answers.setdefault(rid, anyio.Event()).set()
            return Response(status_code=202)
        if rid is None:
            return Response(status_code=202)
        if method == "initialize" and self.too_many > 0:
            self.too_many -= 1
            return Response("slow down", 429, {"retry-after": "40"}, "text/plain")
        if method == "initialize":
            return JSONResponse(
                _result(
                    rid,
                    {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "http-relay-test", "version": "1"},
                    },
                ),
                headers={"mcp-session-id": SESSION},
            )
        if request.headers.get("mcp-session-id") != SESSION:
            return Response(status_code=400)
        if method == "tools/list":
            return JSONResponse(_result(rid, {"tools": TOOLS}))
        if method == "ping":
            return JSONResponse(_result(rid, {}))
        params = message["params"]
        name, args = params["name"], params.get("arguments") or {}
        text = {"type": "text", "text": json.dumps({"id": rid, "args": args})}
        if name == "echo":
            return JSONResponse(_result(rid, {"content": [text], "x-later": 1}))
        if name == "fail":
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32099, "message": "no"},
                }
            )
        if name == "gone":
            return Response(status_code=404)
        if name == "busy":  # a rate limit, said by status (no JSON-RPC error)
            return Response("slow down", 429, {"retry-after": "7"}, "text/plain")
        if name == "missing":  # a 404 that says something else than the session
            error = {"code": -32601, "message": "Method not found"}
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error}, 404)
        if name == "browser":  # a tool's own error, worded like a lost session
            error = {"code": -32000, "message": "Browser session not found"}
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error})
        if name == "expired":  # the same, in the very words of a lost one
            error = {"code": -32001, "message": "Session not found"}
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error})
        if name == "lines":
            # What the request brought, then its answer, one JSON per line
            # in an `application/json` body (the TypeScript SDK's 2026 way).
            token = (params.get("_meta") or {}).get("progressToken")
            lines = [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1},
                },
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "logger": "t", "data": "lined"},
                },
                _result(rid, {"content": [text]}),
            ]
            body = "\n".join(json.dumps(line) for line in lines)
            return Response(body, media_type="application/json")
        return StreamingResponse(
            self._stream(name, rid, params, text), media_type="text/event-stream"
        )

    async def _stream(
        self, name: str, rid: Any, params: dict[str, Any], text: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        if name == "stream":
            # A priming event, as the SDK's servers open a resumable stream.
            yield b"id: prime-0\nretry: 1000\ndata: \n\n"
            token = (params.get("_meta") or {}).get("progressToken")
            for step in (1, 2) if token is not None else ():
                yield frame(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step},
                    }
                )
            yield frame(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "logger": "t", "data": "working"},
                }
            )
            yield frame(_result(rid, {"content": [text]}))
        elif name == "ask":  # a question of the server's own, mid-call
            yield frame(
                {
                    "jsonrpc": "2.0",
                    "id": "q1",
                    "method": "roots/list",
                }
            )
            event = self.answers.setdefault("q1", anyio.Event())
            with anyio.fail_after(10):
                await event.wait()
            yield frame(_result(rid, {"content": [text]}))
        elif name == "resume":  # the stream ends early; the answer comes on resume
            yield b"retry: 10\n" + frame(
                {"jsonrpc": "2.0", "method": "notifications/ping"}, "e1"
            )
        elif name == "slow":
            await anyio.sleep(30)

    async def get(self, request: Request) -> Response:
        last = request.headers.get("last-event-id")
        if last is None:
            return Response(status_code=405)  # no standalone stream here
        self.resumed.append(last)
        (call,) = [c for c in self.calls() if c["params"]["name"] == "resume"]
        text = {"type": "text", "text": "resumed"}
        body = frame(_result(call["id"], {"content": [text]}), "e2")
        return Response(body, media_type="text/event-stream")

    async def delete(self, request: Request) -> Response:
        return Response(status_code=200)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        app = Starlette(
            routes=[
                Route("/mcp", self.post, methods=["POST"]),
                Route("/mcp", self.get, methods=["GET"]),
                Route("/mcp", self.delete, methods=["DELETE"]),
            ]
        )
        async with serving(app) as base:
            yield base + "/mcp"


def text_of(data: Any) -> str:
    """The text of a tool result's first content block."""
    text: str = data["content"][0]["text"]
    return text


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


@pytest.fixture
async def relayed() -> AsyncIterator[tuple[Manager, Upstream, Recorder]]:
    upstream = Upstream()
    bus = EventBus()
    rec = Recorder(bus)
    async with upstream.serving() as url, Manager(bus) as manager:
        spec = parse_spec(
            "up",
            url,
            {
                "ping_interval": 0,
                "call_timeout": 5,
                "protocol": "legacy",
                "roots": ["/srv/project"],
            },
        )
        manager.add(spec)
        await rec.wait_for("connected", "up")
        yield manager, upstream, rec


async def test_a_call_is_one_post_with_the_sessions_headers_and_its_json_answer(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, upstream, _ = relayed
    result = await manager.call("up", "echo", {"text": "hi"}, meta={"k": "v"})
    assert dict(result.data)["x-later"] == 1  # as sent, not sieved by a model
    ((headers, call),) = [
        (h, m) for h, m in upstream.posts if m.get("method") == "tools/call"
    ]
    assert isinstance(call["id"], str) and call["id"].startswith("mcp-manager:")
    assert call["params"] == {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {"k": "v"},
    }
    assert headers["mcp-session-id"] == SESSION
    assert headers["mcp-protocol-version"] == "2025-06-18"
    assert headers["mcp-name"] == "echo"


async def test_progress_and_log_messages_on_the_calls_stream_reach_their_hooks(
    relayed: tuple[Manager, Upstream, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    manager, upstream, rec = relayed
    steps: list[float] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    result = await manager.call("up", "stream", {}, progress=report)
    assert not result.is_error
    assert steps == [1.0, 2.0]
    log = await rec.wait_for("server_log", "up")
    assert log.data == "working" and log.level == "info"  # type: ignore[attr-defined]
    (call,) = upstream.calls()
    assert call["params"]["_meta"] == {"progressToken": call["id"]}
    # The stream's priming event (empty data) is no fault: nothing is warned.
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


async def test_an_answer_after_json_lines_of_what_the_call_brought_is_read(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, _, rec = relayed
    steps: list[float] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    result = await manager.call("up", "lines", {"n": 1}, progress=report)
    assert json.loads(text_of(result.data))["args"] == {"n": 1}
    assert steps == [1.0]
    log = await rec.wait_for("server_log", "up")
    assert log.data == "lined"  # type: ignore[attr-defined]


async def test_a_question_of_the_server_mid_call_is_answered_by_the_session(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, upstream, _ = relayed
    result = await manager.call("up", "ask", {})
    assert not result.is_error
    answer = upstream.answered["q1"]
    assert answer["result"]["roots"][0]["uri"] == "file:///srv/project"


async def test_errors_keep_their_code_and_a_lost_session_says_so(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, _, _ = relayed
    with pytest.raises(UpstreamError, match="no") as caught:
        await manager.call("up", "fail", {})
    assert caught.value.code == -32099
    with pytest.raises((UpstreamError, ServerUnavailable), match="Session terminated"):
        await manager.call("up", "gone", {})


async def test_a_call_answered_429_says_the_status_and_when_to_try_again(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    """The SDK's client says only "Server returned an error response"; the
    status and the server's Retry-After are what a caller needs to know
    (sent once: a rate limit is no lost session)."""
    manager, upstream, _ = relayed
    before = len(upstream.calls())
    with pytest.raises(UpstreamError) as caught:
        await manager.call("up", "busy", {})
    assert caught.value.reply == (
        "Server returned an error response "
        "(HTTP 429 Too Many Requests; it asks to wait 7 s (Retry-After))"
    )
    assert len(upstream.calls()) == before + 1


async def test_a_connect_answered_429_waits_what_the_server_asks_not_the_backoff() -> (
    None
):
    """A rate-limited service answers `initialize` 429 with Retry-After 40:
    the next try waits 40 s, not the 0.1 s backoff (one try every 3 s where
    the server asked for 30 was seen), and the error names the status; a
    `reconnect` still tries at once."""
    upstream = Upstream()
    upstream.too_many = 1
    bus = EventBus()
    rec = Recorder(bus)
    async with upstream.serving() as url, Manager(bus) as manager:
        manager.add(parse_spec("up", url, {"ping_interval": 0, "protocol": "legacy"}))
        failed = await rec.wait_for("connect_failed", "up")
        assert failed.error == (  # type: ignore[attr-defined]
            "the server answered HTTP 429 Too Many Requests; "
            "it asks to wait 40 s (Retry-After)"
        )
        waiting = await rec.wait_for("reconnecting", "up")
        assert waiting.delay == 40  # type: ignore[attr-defined]
        (status,) = manager.statuses()
        assert status.state == "reconnecting" and "HTTP 429" in (status.error or "")
        assert manager.reconnect("up")
        await rec.wait_for("connected", "up")


@pytest.mark.parametrize(
    ("tool", "code"), [("missing", -32601), ("browser", -32000), ("expired", -32001)]
)
async def test_an_error_that_only_reads_like_a_lost_session_is_not_sent_again(
    relayed: tuple[Manager, Upstream, Recorder], tool: str, code: int
) -> None:
    """Only a 404 that says nothing but "no such session" proves the server
    did not process a call (and it is then sent again in a new session): a
    404 with another error, or a tool's own "Browser session not found" (or,
    answered 200, "Session not found" itself: its own session expired), is
    the server's answer, passed on whole, and the call is sent once."""
    manager, upstream, _ = relayed
    before = len(upstream.calls())
    with pytest.raises(UpstreamError) as caught:
        await manager.call("up", tool, {})
    assert caught.value.code == code
    assert len(upstream.calls()) == before + 1


async def test_a_stream_that_ends_early_is_resumed_with_last_event_id(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, upstream, _ = relayed
    with anyio.fail_after(10):
        result = await manager.call("up", "resume", {})
    assert text_of(result.data) == "resumed"
    assert upstream.resumed == ["e1"]


async def test_a_call_that_times_out_is_cancelled_upstream(
    relayed: tuple[Manager, Upstream, Recorder],
) -> None:
    manager, upstream, _ = relayed
    with pytest.raises(CallTimeout):
        await manager.call("up", "slow", {}, call_timeout=0.3)
    (call,) = upstream.calls()

    def cancels() -> list[dict[str, Any]]:
        return [
            m for _, m in upstream.posts if m.get("method") == "notifications/cancelled"
        ]

    await eventually(lambda: len(cancels()) == 1)
    assert cancels()[0]["params"] == {
        "requestId": call["id"],
        "reason": "timed out after 0.3s",
    }


async def test_calls_answered_on_event_streams_leave_their_connection_reusable(
    make_http_server: HttpServerFactory,
) -> None:
    """Each answer is taken from the middle of its stream (the SDK's server
    answers on one); the connection goes back to the pool only once the rest
    is read, so the next call on it never meets a connection closed under it
    (it did, `ReadError('')`, within a few calls), and calls do not each pay a
    new connection: one dropped after its answer is closed by us first and
    leaves a TIME_WAIT socket towards the server (40 here without the drain)."""
    web = make_http_server("http")
    bus = EventBus()
    rec = Recorder(bus)

    def closed_towards_web() -> set[tuple[int, int]]:
        return {
            (c.laddr.port, c.raddr.port)
            for c in psutil.net_connections(kind="tcp")
            if c.raddr
            and c.raddr.port == web.port
            and c.status == psutil.CONN_TIME_WAIT
        }

    # Another test's server had this port a moment ago: its clients' closed
    # sockets are not this test's.
    before = closed_towards_web()
    async with Manager(bus) as manager:
        manager.add(parse_spec("web", web.url, {"protocol": "legacy"}))
        await rec.wait_for("connected", "web")
        for i in range(40):
            result = await manager.call("web", "echo", {"text": str(i)})
            assert text_of(result.data) == str(i)
        dropped = closed_towards_web() - before
        assert len(dropped) <= 3, dropped  # 1 seen (set-up), 40 without the drain


def test_event_streams_are_parsed_whatever_the_chunks_cut() -> None:
    """CRLF line ends split between two chunks are one line end, not two (an
    empty line would end the event early); ids and retry are kept."""
    stream = b'id: 7\r\nretry: 20\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: 2\n\n'
    for cut in range(len(stream) + 1):
        events = SseEvents()
        seen = events.feed(stream[:cut]) + events.feed(stream[cut:])
        assert seen == ['{"a":\n1}', "2"], cut
        assert events.last_id == "7" and events.retry == 0.02


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


async def test_a_listen_stream_of_json_lines_reads_as_events_whatever_the_cuts() -> (
    None
):
    """A `subscriptions/listen` answer sent as JSON lines (`application/json`,
    the TypeScript SDK's way) reaches the SDK's client as the event stream it
    reads: one event per message, a message printed over several lines kept
    whole, whatever the chunks cut."""
    body = b'{"a": 1}\n{\n  "b": [1,\n 2]\n}\r\n\n{"c": 3}\n'
    for cut in range(len(body) + 1):
        chunks = [body[:cut], body[cut:]]

        def answer(request: httpx2.Request, chunks: list[bytes] = chunks) -> Any:
            return httpx2.Response(
                200,
                headers={"content-type": "application/json"},
                stream=_Chunks(chunks),
            )

        transport = DrainingTransport(httpx2.MockTransport(answer))
        request = httpx2.Request(
            "POST",
            "http://127.0.0.1/mcp",
            headers={"mcp-method": "subscriptions/listen"},
        )
        response = await transport.handle_async_request(request)
        assert response.headers["content-type"] == "text/event-stream"
        events = SseEvents()
        seen: list[str] = []
        async for chunk in response.stream:  # type: ignore[union-attr]
            seen += events.feed(chunk)
        assert [json.loads(data) for data in seen] == [
            {"a": 1},
            {"b": [1, 2]},
            {"c": 3},
        ], cut
