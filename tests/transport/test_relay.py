"""The lean `tools/call` relay to stdio servers (`transport.relay`), end to end.

The upstream is a real subprocess: a hand-written JSON-RPC server (standard
library only) that writes every line it reads to a log file, so a test can see
what went over the wire: our request ids, progress tokens and the courtesy
`notifications/cancelled`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from fakes import Recorder, eventually
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from manager.core.errors import CallTimeout, ServerUnavailable, UpstreamError
from manager.core.spec import parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.gateway import EndpointOptions, Gateway
from manager.transport.base import LINK_META_KEY, Upstream, unlinked

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

SERVER = r"""
import json, sys
log = open(sys.argv[1], "a", buffering=1)
tools = [{"name": n, "inputSchema": {"type": "object"}}
         for n in ("echo", "progress", "slow", "fail", "die", "odd", "badid", "deaf")]

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}, "prompts": {}},
            "serverInfo": {"name": "relay-test", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "prompts/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"prompts": [{"name": "hi"}]}})
    elif method == "prompts/get":
        send({"jsonrpc": "2.0", "id": rid, "result": {"messages": [
            {"role": "user", "content": {"type": "text", "text": params["name"]}}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "tools/call":
        name, args = params["name"], params.get("arguments") or {}
        text = {"type": "text", "text": json.dumps({"id": rid, "args": args})}
        if name == "echo":  # no isError, and a field of a later revision
            send({"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [text], "x-later": {"kept": True}}})
        elif name == "progress":
            token = params["_meta"]["progressToken"]
            for step in (1, 2):
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step,
                                 "total": 2, "message": f"step {step}"}})
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [text]}})
        elif name == "fail":
            send({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32099, "message": "no such thing", "data": {"why": 1}}})
        elif name == "die":
            sys.exit(5)
        elif name == "deaf":  # stops reading (before it answers): our next write fails
            import os, time
            os.close(0)
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [text]}})
            time.sleep(30)
        elif name == "badid":  # an id no request has (not even hashable) first
            send({"jsonrpc": "2.0", "id": [rid], "result": {}})
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [text]}})
        elif name == "odd":  # not a tool result: the SDK's model judges it
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": "text"}})
        # "slow": never answered
"""


@pytest.fixture
async def upstream(tmp_path: Path) -> AsyncIterator[tuple[Manager, Path]]:
    log = tmp_path / "wire.log"
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    spec = parse_spec(
        "up",
        {"command": sys.executable, "args": [str(script), str(log)]},
        {"ping_interval": 0, "call_timeout": 5},
    )
    bus = EventBus()
    rec = Recorder(bus)
    async with Manager(bus) as manager:
        manager.add(spec)
        await rec.wait_for("connected", "up")
        yield manager, log


def _wire(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _calls(log: Path) -> list[dict[str, object]]:
    return [m for m in _wire(log) if m.get("method") == "tools/call"]


def _seen(result: dict[str, object]) -> dict[str, object]:
    content = result["content"]
    assert isinstance(content, list)
    seen: dict[str, object] = json.loads(content[0]["text"])
    return seen


async def test_a_stdio_tool_call_is_relayed_and_its_result_passed_on_as_sent(
    upstream: tuple[Manager, Path],
) -> None:
    manager, log = upstream
    result = await manager.call("up", "echo", {"text": "hi"}, meta={"k": "v"})
    data = dict(result.data)
    assert data["x-later"] == {"kept": True}  # not sieved by a model
    # As sent: nothing added (the server left isError out, which means false).
    assert "isError" not in data and result.is_error is False
    seen = _seen(data)
    assert seen["args"] == {"text": "hi"}
    # Our own id space: strings, never the SDK session's integers.
    assert isinstance(seen["id"], str) and seen["id"].startswith("mcp-manager:")
    (call,) = _calls(log)
    assert call["params"] == {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {"k": "v"},
    }


async def test_progress_of_a_relayed_call_reaches_the_caller(
    upstream: tuple[Manager, Path],
) -> None:
    manager, log = upstream
    steps: list[tuple[float, float | None, str | None]] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    await manager.call("up", "progress", {}, progress=report)
    await eventually(lambda: len(steps) == 2)
    assert sorted(steps) == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
    (call,) = _calls(log)
    params = call["params"]
    assert isinstance(params, dict)
    assert params["_meta"] == {"progressToken": call["id"]}  # the id is the token


async def test_a_relayed_call_that_times_out_is_cancelled_upstream(
    upstream: tuple[Manager, Path],
) -> None:
    manager, log = upstream
    with pytest.raises(CallTimeout, match="no result within 0.3 s"):
        await manager.call("up", "slow", {}, call_timeout=0.3)
    (call,) = _calls(log)

    def cancelled() -> list[dict[str, object]]:
        return [m for m in _wire(log) if m.get("method") == "notifications/cancelled"]

    await eventually(lambda: len(cancelled()) == 1)
    assert cancelled()[0]["params"] == {
        "requestId": call["id"],
        "reason": "timed out after 0.3s",
    }


async def test_a_relayed_call_cancelled_by_its_caller_is_cancelled_upstream(
    upstream: tuple[Manager, Path],
) -> None:
    manager, log = upstream
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.call, "up", "slow", {})
        await eventually(lambda: len(_calls(log)) == 1)
        tg.cancel_scope.cancel()
    (call,) = _calls(log)
    await eventually(
        lambda: (
            {"requestId": call["id"], "reason": "caller cancelled"}
            in [m.get("params") for m in _wire(log)]
        )
    )
    # The session goes on.
    assert not (await manager.call("up", "echo", {})).is_error


async def test_every_request_of_a_client_goes_by_the_one_sender(
    upstream: tuple[Manager, Path],
) -> None:
    """Not only `tools/call`: a `prompts/get` leaves by the relay too (its
    ids), and comes back typed as the SDK's session types it."""
    manager, log = upstream
    request = types.GetPromptRequest(params=types.GetPromptRequestParams(name="hi"))

    async def send(up: Upstream, limit: float) -> types.GetPromptResult:
        result: types.GetPromptResult = await up.send(
            request, types.GetPromptResult, limit
        )
        return result

    got = await manager.request("up", "prompts/get", "hi", send)
    assert isinstance(got, types.GetPromptResult)
    assert got.messages[0].content == types.TextContent(type="text", text="hi")
    (sent,) = [m for m in _wire(log) if m.get("method") == "prompts/get"]
    assert str(sent["id"]).startswith("mcp-manager:")


async def test_a_relayed_calls_json_rpc_error_keeps_its_code(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    with pytest.raises(UpstreamError, match="no such thing") as caught:
        await manager.call("up", "fail", {})
    assert caught.value.code == -32099


async def test_a_result_that_is_not_plainly_a_tool_result_is_judged_by_the_sdk(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    with pytest.raises(Exception, match="validation error"):
        await manager.call("up", "odd", {})


async def test_arguments_json_cannot_carry_go_by_the_one_route_as_the_sdk_writes_them(
    upstream: tuple[Manager, Path],
) -> None:
    manager, log = upstream
    result = await manager.call("up", "echo", {"x": float("nan")})
    assert not result.is_error
    (call,) = _calls(log)
    assert str(call["id"]).startswith("mcp-manager:")  # the relay's: one route
    assert call["params"] == {"name": "echo", "arguments": {"x": None}}  # as the SDK


async def test_a_server_that_dies_during_a_relayed_call_ends_it_with_its_exit(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    with pytest.raises(ServerUnavailable, match="disconnected during the call"):
        await manager.call("up", "die", {})


async def test_an_answer_with_an_id_no_request_has_is_left_to_the_sdk(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    assert not (await manager.call("up", "badid", {})).is_error
    assert not (await manager.call("up", "echo", {})).is_error  # still connected


async def test_a_server_that_stops_reading_stdin_ends_the_next_call_saying_so(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    assert not (await manager.call("up", "deaf", {})).is_error
    with pytest.raises(ServerUnavailable, match="server stopped reading stdin"):
        await manager.call("up", "echo", {})


async def test_through_the_endpoint_relayed_results_and_errors_reach_the_client(
    upstream: tuple[Manager, Path],
) -> None:
    manager, _ = upstream
    gateway = Gateway(manager, manager.bus)
    async with anyio.create_task_group() as tg:
        await tg.start(partial(gateway.serve, EndpointOptions("127.0.0.1", 0)))
        await eventually(lambda: "up__echo" in gateway.table.routes)
        async with (
            httpx2.AsyncClient() as http,
            streamable_http_client(str(gateway.url), http_client=http) as streams,
            ClientSession(*streams) as client,
        ):
            await client.initialize()
            result = await client.call_tool("up__echo", {"text": "hi"})
            assert _seen(result.model_dump(by_alias=True))["args"] == {"text": "hi"}
            assert result.is_error is False
            with pytest.raises(MCPError) as caught:
                await client.call_tool("up__fail", {})
            # The server's own error, as it sent it (no prefix of ours).
            assert (caught.value.code, caught.value.message) == (
                -32099,
                "no such thing",
            )
            # Params of another shape are the SDK's to judge, as before.
            other = await client.send_request(
                types.CallToolRequest(
                    params=types.CallToolRequestParams(
                        name="up__echo", arguments={"text": "x"}, request_state="s"
                    )
                ),
                types.CallToolResult,
            )
            assert _seen(other.model_dump(by_alias=True))["args"] == {"text": "x"}
        await gateway.aclose()


def test_unlinked_takes_our_token_out_and_leaves_anything_else_as_it_was() -> None:
    def line(message: object) -> bytes:
        return json.dumps(message).encode() + b"\n"

    linked = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    alone = {**linked, "params": {"name": "t", "_meta": {LINK_META_KEY: "x"}}}
    assert json.loads(unlinked(line(alone))) == {**linked, "params": {"name": "t"}}
    assert unlinked(line(alone)).endswith(b"\n")
    beside = {"name": "t", "_meta": {LINK_META_KEY: "x", "traceparent": "00-a"}}
    got = json.loads(unlinked(json.dumps({**linked, "params": beside}).encode()))
    assert got["params"]["_meta"] == {"traceparent": "00-a"}
    # the words in an argument are the caller's: the message is untouched
    words = line({**linked, "params": {"arguments": {"text": LINK_META_KEY}}})
    assert unlinked(words) is words
    assert unlinked(b"not json mcp-manager/request") == b"not json mcp-manager/request"
