"""The HTTP endpoint's hot path (`gateway.exchange`), seen on the wire.

A plain request of an initialized session is answered in its own task, as one
`application/json` response, or as `text/event-stream` from the first
notification it brings; what the hot path does not serve reaches the SDK as
before. Each answer is compared with the SDK's own answer to the same request
in the same run (a client that declares `roots` is served by the SDK).

The tests share one gateway in front of the demo over stdio (`gateway`): each
talks to it in sessions of its own, and counts what the hot path served from
where it started.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp.server import Server
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    validate_mcp_param_headers,
)
from mcp_types import HEADER_MISMATCH
from memory import MemoryServers
from servers import stdio_command
from servers.process import sharing_children, start_beside
from starlette.datastructures import Headers
from support.gateway import FAST, demo_memory, running_gateway

from manager.core.spec import parse_spec
from manager.gateway import Gateway
from manager.gateway.http import HttpEndpoint

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"


def exchange_of(gateway: Gateway) -> Any:
    http = gateway._http
    assert isinstance(http, HttpEndpoint) and http.exchange is not None
    return http.exchange


@asynccontextmanager
async def demo_gateway() -> AsyncIterator[Gateway]:
    command, args = stdio_command()
    spec = parse_spec("demo", {"command": command, "args": args}, FAST)
    async with running_gateway([spec], wait_for=["demo"]) as (gateway, _, rec):
        gateway.recorder = rec  # type: ignore[attr-defined]
        yield gateway


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One event loop for the module: its tests share one gateway."""
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway(
    no_leaked_children_after_module: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    """`demo_gateway()` once for the module: one SDK server process instead of
    one per test."""
    with pytest.MonkeyPatch.context() as patch:  # its own state directory
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        async with demo_gateway() as running:
            await start_beside(str(running.url), "demo__echo")
            with sharing_children():
                yield running


@pytest.fixture(scope="module")
async def memory_gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Gateway]:
    """In memory behind the endpoint: the demo with a one-second call timeout
    (`slow`), and a server whose tool binds an argument to a header (`hdr`)."""
    with pytest.MonkeyPatch.context() as patch:  # its own state directory
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        specs = [demo_memory("slow", call_timeout=1), demo_memory("hdr")]
        memory = MemoryServers(others={"hdr": _regional})
        async with running_gateway(specs, wait_for=["slow", "hdr"], memory=memory) as (
            running,
            _,
            _,
        ):
            yield running


_REGION_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    "required": ["region"],
}
"""`where(region)`: `region` travels in `Mcp-Param-Region` too (SEP-2243)."""


def _regional() -> Server[Any]:
    where = types.Tool(name="where", input_schema=_REGION_SCHEMA)

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[where])

    async def call_tool(
        context: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        region = str((params.arguments or {}).get("region"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=region)]
        )

    return Server("regional", on_list_tools=list_tools, on_call_tool=call_tool)


class Wire:
    """A raw HTTP client of the endpoint: JSON-RPC as sent and as answered."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.session: str | None = None
        self.version: str | None = HANDSHAKE

    async def post(
        self, message: dict[str, Any], **headers: str
    ) -> tuple[httpx2.Response, list[dict[str, Any]]]:
        sent = {"accept": ACCEPT, **headers}
        if self.version is not None:
            sent["mcp-protocol-version"] = self.version
        if self.session is not None:
            sent["mcp-session-id"] = self.session
        response = await self.http.post(self.url, json=message, headers=sent)
        return response, messages_of(response)

    async def initialize(self, capabilities: dict[str, Any]) -> None:
        response, _ = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "wire", "version": "1"},
                },
            }
        )
        assert response.status_code == 200
        self.session = response.headers["mcp-session-id"]
        done, _ = await self.post(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert done.status_code == 202


def messages_of(response: httpx2.Response) -> list[dict[str, Any]]:
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        return [response.json()] if response.content else []
    return [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line[len("data: ") :].strip()
    ]


def call(rid: int, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


@asynccontextmanager
async def wires(gateway: Gateway) -> AsyncIterator[tuple[Wire, Wire]]:
    """Two handshake sessions: one served by the hot path, one by the SDK's
    transport (its requests carry no `MCP-Protocol-Version`, which the SDK
    reads as its default revision and the hot path leaves to it)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        lean, sdk = Wire(http, str(gateway.url)), Wire(http, str(gateway.url))
        await lean.initialize({})
        await sdk.initialize({})
        sdk.version = None
        yield lean, sdk


async def test_a_plain_call_is_one_json_answer_the_same_as_the_sdks(
    gateway: Gateway,
) -> None:
    async with wires(gateway) as (lean, sdk):
        exchange = exchange_of(gateway)
        requests = [
            call(1, "demo__echo", {"text": "hi"}),
            call(2, "demo__echo", {}),  # empty arguments stay an object
            call(3, "demo__nope", {}),  # unknown tool: a JSON-RPC error
            call(4, "demo__error", {"code": -32042, "message": "m", "data": "[1]"}),
            call(5, "demo__fail", {"message": "boom"}),
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        ]
        for request in requests:
            before = exchange.served
            response, answer = await lean.post(request)
            assert exchange.served == before + 1, request
            assert response.headers["content-type"] == "application/json"
            assert response.headers["mcp-session-id"] == lean.session
            reference, expected = await sdk.post(request)
            assert exchange.served == before + 1  # the SDK served that one
            assert reference.headers["content-type"].startswith("text/event-stream")
            assert answer == expected, request
            assert response.status_code == reference.status_code == 200


@pytest.mark.parametrize(
    ("accept", "streamed"),
    [
        ("text/event-stream, application/json", True),  # the conformance suite's
        ("application/json;q=0.5, text/event-stream", True),
        ("text/event-stream;q=0.5, application/json", False),
        ("application/json, text/event-stream", False),  # the SDK clients'
        ("*/*", False),
    ],
)
async def test_a_client_that_ranks_a_stream_first_gets_one(
    memory_gateway: Gateway, accept: str, streamed: bool
) -> None:
    """A handshake-era answer is a stream, primed and kept to be resumed, as a
    straight server's, when the client's `Accept` ranks the stream above
    JSON; still served here, the same messages as the SDK's answer."""
    async with wires(memory_gateway) as (lean, sdk):
        exchange = exchange_of(memory_gateway)
        request = call(1, "slow__echo", {"text": "hi"})
        before = exchange.served
        response, answer = await lean.post(request, accept=accept)
        assert exchange.served == before + 1
        kind = response.headers["content-type"]
        assert kind == ("text/event-stream" if streamed else "application/json")
        _, expected = await sdk.post(request)
        assert answer == expected and answer[0]["result"]["content"][0]["text"]
        if streamed:
            events = sse_events(response.text)
            assert events[0]["data"] == "" and events[0]["retry"]  # the priming
            assert all(event["id"] for event in events)


async def test_notifications_of_a_call_turn_its_answer_into_a_stream(
    gateway: Gateway,
) -> None:
    async with wires(gateway) as (lean, sdk):
        exchange = exchange_of(gateway)
        before = exchange.served
        request = call(9, "demo__sleep", {"seconds": 0.05}, progressToken="p1")
        response, answer = await lean.post(request)
        assert exchange.served == before + 1
        assert response.headers["content-type"] == "text/event-stream"
        _, expected = await sdk.post(request)
        assert answer == expected
        assert answer[0]["method"] == "notifications/progress"
        assert answer[0]["params"]["progressToken"] == "p1"
        assert answer[-1]["result"]["content"][0]["text"] == "slept 0.05"


async def test_what_the_hot_path_does_not_serve_reaches_the_sdk(
    gateway: Gateway,
) -> None:
    async with wires(gateway) as (lean, _):
        exchange = exchange_of(gateway)
        before = exchange.served
        level = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "logging/setLevel",
            "params": {"level": "info"},
        }
        response, answer = await lean.post(level)
        assert answer == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        response, answer = await lean.post({"jsonrpc": "2.0", "id": 2})  # malformed
        assert response.status_code == 400
        assert exchange.served == before
        # A session the client ended is the SDK's 404, not ours.
        assert lean.session is not None
        await lean.http.delete(
            lean.url,
            headers={"mcp-session-id": lean.session, "mcp-protocol-version": HANDSHAKE},
        )
        response, _ = await lean.post(call(3, "demo__echo", {"text": "x"}))
        assert response.status_code == 404
        assert exchange.served == before


async def test_a_cancelled_call_is_cancelled_upstream_and_never_answered(
    gateway: Gateway,
) -> None:
    async with wires(gateway) as (lean, _):
        answers: list[list[dict[str, Any]]] = []
        seen = gateway.recorder.last_seq  # type: ignore[attr-defined]

        async def slow() -> None:
            answers.append(
                (await lean.post(call(5, "demo__sleep", {"seconds": 30})))[1]
            )

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                await gateway.recorder.wait_for("call_started", "demo", after=seen)  # type: ignore[attr-defined]
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 5, "reason": "changed my mind"},
                }
                response, _ = await lean.post(cancel)
                assert response.status_code == 202
        assert answers == [[]]
        _, answer = await lean.post(call(6, "demo__echo", {"text": "ok"}))
        assert answer[0]["result"]["content"][0]["text"] == "ok"


def envelope(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "1"},
        **extra,
    }


async def test_a_2026_call_is_served_here_and_a_bad_envelope_refused_as_the_sdk_does(
    gateway: Gateway,
) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        exchange = exchange_of(gateway)
        wire = Wire(http, str(gateway.url))
        wire.version = MODERN
        before, refused = exchange.served, exchange.rejected
        request = call(1, "demo__echo", {"text": "hi"}, **envelope())
        headers = {"mcp-method": "tools/call", "mcp-name": "demo__echo"}
        response, answer = await wire.post(request, **headers)
        assert exchange.served == before + 1
        assert response.headers["content-type"] == "application/json"
        result = answer[0]["result"]
        assert result["resultType"] == "complete"
        assert result["content"][0]["text"] == "hi"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        # A header that disagrees with the body: refused as the SDK's entry
        # refuses it (its own ladder's verdict, its status).
        wrong = {**headers, "mcp-name": "demo__other"}
        response, answer = await wire.post(request, **wrong)
        verdict = classify_inbound_request(
            request, headers={**wrong, "mcp-protocol-version": MODERN}
        )
        assert isinstance(verdict, InboundLadderRejection)
        assert verdict.code == HEADER_MISMATCH
        assert response.status_code == ERROR_CODE_HTTP_STATUS[HEADER_MISMATCH] == 400
        assert answer == [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": HEADER_MISMATCH, "message": verdict.message},
            }
        ]
        assert exchange.served == before + 1
        assert exchange.rejected == refused + 1


@pytest.mark.parametrize(
    "capabilities",
    [{}, {"elicitation": {}}],
    ids=["runs-in-the-request", "held-for-input-rounds"],
)
async def test_a_2026_client_that_closes_its_response_cancels_the_call(
    gateway: Gateway, capabilities: dict[str, Any]
) -> None:
    """2026-07-28: a request is cancelled by closing its response stream; the
    call upstream ends as cancelled, and the endpoint serves on. A client
    that may be asked things has its call held (for input rounds) in a task
    of the gateway's own: that one is cancelled too."""
    seen = gateway.recorder.last_seq  # type: ignore[attr-defined]
    caps = {"io.modelcontextprotocol/clientCapabilities": capabilities}
    request = call(7, "demo__sleep", {"seconds": 30}, **envelope(**caps))
    headers = {
        "accept": ACCEPT,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "demo__sleep",
    }
    with anyio.fail_after(20):
        async with httpx2.AsyncClient(timeout=30) as http:
            async with anyio.create_task_group() as tg:

                async def post() -> None:
                    await http.post(str(gateway.url), json=request, headers=headers)

                tg.start_soon(post)
                await gateway.recorder.wait_for("call_started", "demo", after=seen)  # type: ignore[attr-defined]
                tg.cancel_scope.cancel()  # the client hangs up mid-call
        failed = await gateway.recorder.wait_for("call_failed", "demo", after=seen)  # type: ignore[attr-defined]
    assert failed.error == "cancelled"
    async with httpx2.AsyncClient(timeout=30) as http:
        wire = Wire(http, str(gateway.url))
        wire.version = MODERN
        _, answer = await wire.post(
            call(8, "demo__echo", {"text": "still here"}, **envelope()),
            **{"mcp-method": "tools/call", "mcp-name": "demo__echo"},
        )
    assert answer[0]["result"]["content"][0]["text"] == "still here"


# --- resumable streams (SEP-1699) ---------------------------------------------


def sse_events(text: str) -> list[dict[str, str]]:
    """Each SSE event's fields (`id`, `retry`, `data`), in order."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            if name:
                fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            events.append(fields)
    return events


async def test_a_broken_stream_is_resumed_with_last_event_id() -> None:
    """A call's stream opens with a priming event (an id, `retry`); the
    client drops it after the first progress and gets the rest with a GET
    and `Last-Event-ID`; another session cannot. (The SDK's streams, which
    carry what the hot path leaves to it, resume as the SDK does.)"""
    async with demo_gateway() as gateway, wires(gateway) as (lean, sdk):
        wire, other = lean, sdk
        request = call(5, "demo__sleep", {"seconds": 0.3}, progressToken="p")
        headers = {
            "accept": ACCEPT,
            "mcp-protocol-version": HANDSHAKE,
            "mcp-session-id": str(wire.session),
        }
        seen = ""
        async with wire.http.stream(
            "POST", wire.url, json=request, headers=headers
        ) as response:
            async for text in response.aiter_text():
                seen += text
                if '"notifications/progress"' in seen:
                    break  # the connection is dropped here
        first = sse_events(seen)
        assert first[0]["data"] == "" and first[0]["retry"] == "1000"
        last_id = first[1]["id"]
        stranger = await wire.http.get(
            wire.url,
            headers={**headers, "mcp-session-id": str(other.session)}
            | {"last-event-id": last_id},
            timeout=5,
        )
        assert '"id":5' not in stranger.text
        rest = ""
        async with wire.http.stream(
            "GET", wire.url, headers={**headers, "last-event-id": last_id}
        ) as response:
            assert response.status_code == 200
            # The SDK keeps a resumed stream open after the answer (for
            # what else the request might say); the hot path ends it.
            async for text in response.aiter_text():
                rest += text
                if '"id":5' in rest:
                    break
        events = [json.loads(e["data"]) for e in sse_events(rest) if e["data"]]
        assert events[-1]["id"] == 5
        assert events[-1]["result"]["content"][0]["text"] == "slept 0.3"
        assert events[0]["params"]["message"] == "awake"


async def _ask_mid_call(
    wire: Wire, request: dict[str, Any], answer: Any
) -> tuple[list[dict[str, Any]], int | None]:
    """POST `request`, read its stream; on the question it carries, POST
    `answer(question)` (if not None) and note the status of that POST."""
    headers = {
        "accept": ACCEPT,
        "mcp-protocol-version": HANDSHAKE,
        "mcp-session-id": str(wire.session),
    }
    seen: list[dict[str, Any]] = []
    status = None
    with anyio.fail_after(30):
        async with wire.http.stream(
            "POST", wire.url, json=request, headers=headers
        ) as response:
            assert response.headers["content-type"] == "text/event-stream"
            buffer = ""
            async for text in response.aiter_text():
                buffer += text
                *blocks, buffer = buffer.replace("\r\n", "\n").split("\n\n")
                for event in sse_events("\n\n".join(blocks)):
                    if not event.get("data"):
                        continue
                    message = json.loads(event["data"])
                    seen.append(message)
                    reply = answer(message) if "method" in message else None
                    if reply is not None and "id" in message:
                        done, _ = await wire.post(reply)
                        status = done.status_code
    return seen, status


async def test_a_question_mid_call_rides_the_call_s_own_stream(
    gateway: Gateway,
) -> None:
    """A handshake-era client that can be asked is served here too: the
    upstream's question goes on the call's own response stream, with an id of
    ours, as a straight server sends it; the POST with the client's answer is
    taken here (202) and the call ends with what the upstream made of it."""
    async with httpx2.AsyncClient(timeout=30) as http:
        wire = Wire(http, str(gateway.url))
        await wire.initialize({"elicitation": {}})
        exchange = exchange_of(gateway)
        before = exchange.served

        def accept(question: dict[str, Any]) -> dict[str, Any] | None:
            if question["method"] != "elicitation/create":
                return None
            assert question["params"]["message"] == "colour?"
            return {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"answer": "blue"}},
            }

        request = call(11, "demo__ask_user", {"message": "colour?"})
        seen, status = await _ask_mid_call(wire, request, accept)
        assert exchange.served == before + 1  # the call; the answer is no request
        assert status == 202
        (question,) = [m for m in seen if m.get("method") == "elicitation/create"]
        assert isinstance(question["id"], str)  # ours, never the SDK's integers
        assert seen[-1]["id"] == 11
        assert seen[-1]["result"]["content"][0]["text"] == 'accept: {"answer": "blue"}'
        # The client's error answer is the upstream's to judge, as straight.
        declined, _ = await _ask_mid_call(
            wire,
            call(12, "demo__ask_user", {"message": "colour?"}),
            lambda q: {
                "jsonrpc": "2.0",
                "id": q["id"],
                "error": {"code": -32600, "message": "no, thanks"},
            },
        )
        assert declined[-1]["id"] == 12
        assert "no, thanks" in json.dumps(declined[-1])


async def test_a_question_left_unanswered_ends_with_its_deadline(
    memory_gateway: Gateway,
) -> None:
    """Nobody answers: the call ends with an error when the connection's
    timeout ends it, and the question's waiter is gone once its own deadline
    passes (nothing is kept for an answer that never comes); an answer that
    comes after that is not ours and goes to the SDK."""
    async with httpx2.AsyncClient(timeout=30) as http:
        wire = Wire(http, str(memory_gateway.url))
        await wire.initialize({"elicitation": {}})
        request = call(13, "slow__ask_user", {"message": "colour?"})
        seen, status = await _ask_mid_call(wire, request, lambda q: None)
        assert status is None
        (question,) = [m for m in seen if m.get("method") == "elicitation/create"]
        assert seen[-1]["id"] == 13
        assert "no result within 1 s" in json.dumps(seen[-1])
        assert "resultType" not in seen[-1]["result"]  # the handshake era's form
        assert wire.session is not None
        record = memory_gateway.downstream.get(wire.session)
        assert record is not None
        with anyio.fail_after(10):
            while question["id"] in record.questions:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        late = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "cancel"}}
        before = exchange_of(memory_gateway).served
        response, _ = await wire.post(late)
        assert response.status_code == 202  # the SDK's acknowledgement
        assert exchange_of(memory_gateway).served == before


async def test_a_2026_call_s_param_headers_are_checked_here_as_the_sdk_checks_them(
    memory_gateway: Gateway,
) -> None:
    """A tool that binds an argument to `Mcp-Param-Region`: a call whose
    header agrees is served here; one whose header disagrees, or is missing,
    is refused here with the SDK's own verdict (`validate_mcp_param_headers`
    on the exposed schema) and status, and never reaches the server."""
    async with httpx2.AsyncClient(timeout=30) as http:
        exchange = exchange_of(memory_gateway)
        wire = Wire(http, str(memory_gateway.url))
        wire.version = MODERN
        base = {"mcp-method": "tools/call", "mcp-name": "hdr__where"}
        request = call(1, "hdr__where", {"region": "eu"}, **envelope())
        before, refused = exchange.served, exchange.rejected
        response, answer = await wire.post(
            request, **base, **{"mcp-param-region": "eu"}
        )
        assert response.status_code == 200
        assert answer[0]["result"]["content"][0]["text"] == "eu"
        assert (exchange.served, exchange.rejected) == (before + 1, refused)
        for headers in ({**base, "mcp-param-region": "us"}, base):
            response, answer = await wire.post(request, **headers)
            verdict = validate_mcp_param_headers(
                _REGION_SCHEMA, {"region": "eu"}, Headers(headers)
            )
            assert verdict is not None and verdict.code == HEADER_MISMATCH
            assert response.status_code == ERROR_CODE_HTTP_STATUS[HEADER_MISMATCH]
            assert answer[0]["error"] == {
                "code": HEADER_MISMATCH,
                "message": verdict.message,
            }
        assert (exchange.served, exchange.rejected) == (before + 1, refused + 2)
