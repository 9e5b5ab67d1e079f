"""Both protocol eras through the endpoint, seen by the SDK's own clients.

The SDK's default `Client` negotiates 2026-07-28 (`server/discover`, `_meta`
per request, `resultType` on every result); `Client(mode="legacy")` is the
handshake era. Each test asks the same of the demo server straight and through
the daemon (prefix "", so names are the server's own) and compares what comes
back, field by field: the daemon must be invisible in both eras, on the HTTP
front and on `mcp-manager stdio`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pydantic
import pytest
from fakes import Recorder
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from servers import (
    HttpServerFactory,
    HttpServerProcess,
    free_port,
    lua_stdio,
    raw_command,
    stdio_command,
)
from servers.daemon import DaemonProcess, DaemonThread
from servers.preload import launch_command
from support.eras import answer_elicitation, answer_sampling, wire
from support.gateway import LOCAL, demo_stdio, running_gateway

from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.gateway import Gateway
from manager.gateway.rounds import HeldCall, HeldCalls
from manager.transport.connect import McpTransport

pytestmark = pytest.mark.usefixtures("no_leaked_children")


async def _exercise(client: Client, heard: list[object]) -> dict[str, Any]:
    """What a client sees of the demo server, one entry per request; `heard`
    fills with the log messages the client gets."""
    seen: dict[str, Any] = {"protocol": client.protocol_version}
    # What a call says before its result must be there when the result is.
    seen["log"] = wire(await client.call_tool("log", {"level": "info", "text": "x"}))
    seen["heard with the log result"] = list(heard)
    reports: list[object] = []

    async def on_progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        reports.append((progress, total, message))

    seen["sleep"] = wire(
        await client.call_tool("sleep", {"seconds": 0}, progress_callback=on_progress)
    )
    seen["progress with the sleep result"] = list(reports)
    seen["echo"] = wire(await client.call_tool("echo", {"text": "hi"}))
    seen["add"] = wire(await client.call_tool("add", {"a": 2, "b": 0.5}))
    seen["fail"] = wire(await client.call_tool("fail", {"message": "boom"}))
    seen["empty arguments"] = wire(await client.call_tool("arguments", {}))
    seen["no arguments"] = wire(await client.call_tool("arguments"))
    seen["falsy arguments"] = wire(
        await client.call_tool(
            "arguments", {"o": {}, "l": [], "s": "", "z": 0, "f": False, "n": None}
        )
    )
    try:
        await client.call_tool(
            "error", {"code": -32042, "message": "nope", "data": '{"why": [0, {}]}'}
        )
    except MCPError as exc:
        seen["upstream error"] = (exc.code, exc.message, exc.data)
    # The codes the SDK also uses for its own "connection closed" and "timed
    # out": a server's answer all the same (they read as a lost session and
    # a call timeout through us).
    for code in (-32000, -32001):
        try:
            await client.call_tool(
                "error", {"code": code, "message": "boom", "data": '{"x": 1}'}
            )
        except MCPError as exc:
            seen[f"upstream error {code}"] = (exc.code, exc.message, exc.data)
    seen["prompt"] = wire(await client.get_prompt("greet", {"name": "Ada"}))
    try:  # the server's own error, which differs by era at an SDK server
        await client.get_prompt("no_such_prompt")
    except MCPError as exc:
        seen["unknown prompt"] = (exc.code, exc.message)
    seen["resource"] = wire(await client.read_resource("demo://readme"))
    seen["template"] = wire(await client.read_resource("demo://items/7"))
    listed = await client.list_tools()
    seen["tools"] = sorted(t.name for t in listed.tools)
    return seen


def _client(
    target: str | StdioServerParameters,
    mode: ConnectMode,
    heard: list[object],
    **extra: Any,
) -> Client:
    """An SDK client that opts in to log messages (2026-07-28 asks per request;
    the handshake era gets what the server sends) and keeps what it hears."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params.model_dump(mode="json", exclude_none=True))

    return Client(
        target, mode=mode, log_level="debug", logging_callback=on_log, **extra
    )


def _heard_something(seen: dict[str, Any]) -> None:
    """The comparison means something: the server did say things mid-call."""
    assert seen["heard with the log result"], seen["log"]
    assert len(seen["progress with the sleep result"]) == 2
    assert seen["upstream error"] == (-32042, "nope", {"why": [0, {}]})


MODES: tuple[ConnectMode, ...] = ("auto", "legacy")
"""The SDK `Client`'s default (2026-07-28) and the handshake era."""


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo over streamable HTTP, once for the module: what a client gets
    straight (it serves both eras), and an upstream some tests declare."""
    log = tmp_path_factory.mktemp("demo") / "demo.log"
    server = HttpServerProcess("http", log_path=log)
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


async def _straight(url: str, mode: ConnectMode) -> dict[str, Any]:
    heard: list[object] = []
    async with _client(url, mode, heard) as client:
        return await _exercise(client, heard)


def _stdio_front(tmp_path: Path, url: str) -> StdioServerParameters:
    script = tmp_path / "startup.lua"
    script.write_text(f"mcp_add('demo', {json.dumps(url)}, {{prefix = ''}})\n")
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "manager", "stdio", str(script), "--no-telemetry"],
        env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},  # not the user's
    )


@pytest.mark.anyio
async def test_both_eras_get_through_the_http_front_what_they_get_straight(
    demo_url: str,
) -> None:
    """Through the HTTP front to the demo over stdio (the relay's path)."""
    async with running_gateway([demo_stdio("demo", prefix="")], wait_for=["demo"]) as (
        gateway,
        manager,
        _,
    ):
        for mode in MODES:
            straight = await _straight(demo_url, mode)
            heard: list[object] = []
            async with _client(str(gateway.url), mode, heard) as client:
                through = await _exercise(client, heard)
            expected = "2026-07-28" if mode == "auto" else "2025-11-25"
            assert straight["protocol"] == through["protocol"] == expected
            _heard_something(straight)
            assert through == straight
        status = manager.status("demo")
        assert status is not None and status.protocol == "2025-11-25"
        assert status.to_dict()["era"] == "handshake"  # the daemon's own session


@pytest.mark.anyio
async def test_both_eras_get_through_the_stdio_front_what_they_get_straight(
    demo_url: str, tmp_path: Path
) -> None:
    """Through `mcp-manager stdio` to the demo over streamable HTTP."""
    for mode in MODES:
        straight = await _straight(demo_url, mode)
        heard: list[object] = []
        with anyio.fail_after(30):
            front = _stdio_front(tmp_path, demo_url)
            async with _client(front, mode, heard) as client:
                through = await _exercise(client, heard)
        _heard_something(straight)
        assert through == straight


async def _asks(client: Client) -> dict[str, Any]:
    return {
        "ask_user": wire(await client.call_tool("ask_user", {"message": "colour?"})),
        "sample": wire(await client.call_tool("sample", {"prompt": "hi"})),
    }


@pytest.mark.anyio
async def test_a_2026_client_answers_in_input_rounds_what_upstreams_ask(
    demo_url: str,
) -> None:
    """The upstream (handshake era, through the daemon's own session) sends
    elicitation/create and sampling/createMessage mid-call; a 2026-07-28
    client takes no requests, so the daemon answers its call input_required
    and hands the answers of its retry upstream. It ends as a handshake-era
    client straight at the server ends. (Over streamable HTTP, where the
    upstream's question names the call it serves.)"""
    callbacks: dict[str, Any] = {
        "elicitation_callback": answer_elicitation,
        "sampling_callback": answer_sampling,
    }
    async with Client(demo_url, mode="legacy", **callbacks) as client:
        straight = await _asks(client)
    spec = parse_spec("demo", demo_url, {"prefix": ""})
    async with (
        running_gateway([spec], wait_for=["demo"]) as (gateway, _, _),
        Client(str(gateway.url), **callbacks) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        through = await _asks(client)
        assert len(gateway.features.held) == 0  # every held call collected
    assert straight["ask_user"]["content"][0]["text"] == 'accept: {"answer": "blue"}'
    assert straight["sample"]["content"][0]["text"] == "hello from the model"
    for result in (*straight.values(), *through.values()):
        result.pop("resultType", None)  # the 2026 era's own field
    assert through == straight


@pytest.mark.anyio
async def test_held_calls_refuse_an_unknown_state_and_never_wait_forever() -> None:
    held_calls = HeldCalls()
    async with anyio.create_task_group() as tg:
        await tg.start(held_calls.run)
        with pytest.raises(MCPError, match="requestState names no call") as info:
            await held_calls.call({"requestState": "forged"}, 1.0, _never)
        assert info.value.code == -32602

        asked: list[object] = []

        async def asks_twice(held: HeldCall) -> str:
            asked.append(await held.ask("elicitation/create", {"m": 1}, _Answer))
            asked.append(await held.ask("elicitation/create", {"m": 2}, _Answer))
            return "done"

        first = await held_calls.call(None, 0.2, asks_twice)
        assert first["resultType"] == "input_required"
        ((key, request),) = first["inputRequests"].items()
        assert request == {"method": "elicitation/create", "params": {"m": 1}}
        answered = {"requestState": first["requestState"], "inputResponses": {}}
        answered["inputResponses"][key] = {"action": "decline"}
        second = await held_calls.call(answered, 0.2, _never)
        assert second["resultType"] == "input_required"  # the next question
        assert second["requestState"] != first["requestState"]
        # Nobody answers the second: the upstream gets an error, not a hang.
        with anyio.fail_after(5):
            while len(asked) < 2:  # noqa: ASYNC110 - the upstream side has no event
                await anyio.sleep(0.01)
        assert isinstance(asked[0], _Answer) and asked[0].action == "decline"
        assert isinstance(asked[1], types.ErrorData) and "did not answer" in str(
            asked[1].message
        )
        last = await held_calls.call(
            {"requestState": second["requestState"]}, 1, _never
        )
        assert last == "done"
        tg.cancel_scope.cancel()


class _Answer(pydantic.BaseModel):
    action: str


async def _never(held: HeldCall) -> object:
    raise AssertionError("no new call was to start")


# ------------------------------------------------------- 2026-07-28 upstreams


def _modern_only(name: str, tmp_path: Path, **opts: object) -> ConnectionSpec:
    command, args = stdio_command("--modern-only")
    return parse_spec(name, {"command": command, "args": args}, {"prefix": "", **opts})


@pytest.mark.anyio
async def test_a_server_that_speaks_only_2026_is_reached_from_both_eras(
    tmp_path: Path,
) -> None:
    """It refuses `initialize` (-32022): the daemon meets it with
    server/discover, remembers that, and serves it to clients of either era,
    input rounds translated for the handshake client."""
    callbacks: dict[str, Any] = {
        "elicitation_callback": answer_elicitation,
        "sampling_callback": answer_sampling,
    }
    bus = EventBus()
    rec = Recorder(bus)
    transport = McpTransport(state_dir=tmp_path)
    async with Manager(bus, transport=transport) as manager:
        gateway = Gateway(manager, bus)
        async with anyio.create_task_group() as tg:
            await tg.start(partial(gateway.serve, LOCAL))
            manager.reconcile([_modern_only("new", tmp_path)])
            up = await rec.wait_for("connected", "new")
            assert up.protocol == "2026-07-28"  # type: ignore[attr-defined]
            assert transport.eras.recall(manager.specs["new"]) == "2026-07-28"
            for mode in MODES:
                heard: list[object] = []
                url = str(gateway.url)
                async with _client(url, mode, heard, **callbacks) as client:
                    through = await _exercise(client, heard)
                    asks = await _asks(client)
                _heard_something(through)
                answer = asks["ask_user"]["content"][0]["text"]
                assert answer == 'accept: {"answer": "blue"}'
                assert asks["sample"]["content"][0]["text"] == "hello from the model"
            await gateway.aclose()


@pytest.mark.anyio
async def test_the_era_learned_is_remembered_across_daemons(
    tmp_path: Path, make_http_server: HttpServerFactory
) -> None:
    """stdio: the first start is refused and started again in 2026-07-28;
    the next daemon (same state directory) goes there at once. HTTP: met
    with server/discover on the same try."""
    web = make_http_server("http", "--modern-only")
    specs = [
        _modern_only("new", tmp_path),
        parse_spec("web", web.url, {"prefix": "w"}),
    ]
    for run in ("first", "second"):
        bus = EventBus()
        rec = Recorder(bus)
        async with Manager(bus, transport=McpTransport(state_dir=tmp_path)) as manager:
            manager.reconcile(specs)
            new = await rec.wait_for("connected", "new")
            web_up = await rec.wait_for("connected", "web")
            assert new.protocol == web_up.protocol == "2026-07-28"  # type: ignore[attr-defined]
            assert web_up.attempt == 1  # type: ignore[attr-defined]
            assert new.attempt == (2 if run == "first" else 1)  # type: ignore[attr-defined]
            result = await manager.call("web", "echo", {"text": "hi"})
            assert result.data["content"] == [{"type": "text", "text": "hi"}]


# ------------------------------------------------------- the 2026 front's edges


@pytest.mark.anyio
async def test_2026_clients_hear_of_changes_and_unknown_resources_as_2026_says(
    demo_url: str,
) -> None:
    """Prompt and resource list changes reach subscriptions/listen streams;
    an unknown resource is -32602 with its URI (SEP-2164) to a 2026 client,
    -32002 to a handshake one; a bridge (prefix "") answers for URIs it does
    not list, with the server's own error, as straight."""
    async with (
        running_gateway(
            [demo_stdio("demo", prefix=""), parse_spec("other", demo_url)],
            wait_for=["demo", "other"],
        ) as (gateway, _, _),
        Client(str(gateway.url)) as client,
        Client(str(gateway.url), mode="legacy") as old,
    ):
        async with client.listen(prompts_list_changed=True) as changes:
            await client.call_tool("add_prompt", {"name": "fresh"})
            with anyio.fail_after(10):
                change = await changes.__anext__()
        assert type(change).__name__ == "PromptsListChanged"
        with pytest.raises(MCPError) as modern:
            await client.read_resource("mcp-manager://nobody/x")
        assert modern.value.code == -32602
        assert modern.value.data == {"uri": "mcp-manager://nobody/x"}
        with pytest.raises(MCPError) as handshake:
            await old.read_resource("mcp-manager://nobody/x")
        assert handshake.value.code == -32002
        with pytest.raises(MCPError) as through:
            await old.read_resource("demo://not-listed")
    async with Client(demo_url, mode="legacy") as straight_client:
        with pytest.raises(MCPError) as straight:
            await straight_client.read_resource("demo://not-listed")
    assert (through.value.code, through.value.message, through.value.data) == (
        straight.value.code,
        straight.value.message,
        straight.value.data,
    )


@pytest.mark.anyio
async def test_a_2026_client_listening_to_a_resource_hears_it_change() -> None:
    """A 2026-07-28 client names the resources it follows in its listen
    stream: the daemon follows them upstream while the stream lasts, in the
    client's era (found by an audit: it never asked the server, so no update
    ever came)."""
    async with (
        running_gateway([demo_stdio("demo", prefix="")], wait_for=["demo"]) as (
            gateway,
            _,
            _,
        ),
        Client(str(gateway.url)) as client,
    ):
        uri = "demo://readme"
        async with client.listen(resource_subscriptions=[uri]) as changes:
            await client.call_tool("touch_resource", {"uri": uri})
            with anyio.fail_after(10):
                change = await changes.__anext__()
        assert isinstance(change, ResourceUpdated) and str(change.uri) == uri


@pytest.mark.anyio
async def test_a_listen_stream_ends_gracefully_when_the_daemon_stops() -> None:
    """2026-07-28 clarification: a server that closes a `subscriptions/listen`
    stream ends it with its result. The daemon stopping under a listening
    client does so (the SDK's client sees a graceful end, not an error)."""
    async with (
        running_gateway([demo_stdio("demo", prefix="")], wait_for=["demo"]) as (
            gateway,
            _,
            _,
        ),
        Client(str(gateway.url)) as client,
        client.listen(tools_list_changed=True) as changes,
    ):
        await gateway.aclose()  # stops the endpoint, as the daemon does
        with anyio.fail_after(10):
            left = [change async for change in changes]
        assert left == []


@pytest.mark.anyio
async def test_a_change_the_server_announces_reaches_clients_as_it_said(
    tmp_path: Path,
) -> None:
    """`notifications/tools/list_changed` from a server whose tool names stay
    the same (a description changed, or nothing we can see) still reaches a
    client's `subscriptions/listen` stream, as it would straight, and the
    client lists the new description."""
    tools = tmp_path / "tools.json"
    echo = {
        "name": "echo",
        "description": "Return it.",
        "inputSchema": {"type": "object"},
    }
    tools.write_text(json.dumps([echo]))
    command, args = raw_command("--tools-file", str(tools))
    spec = parse_spec("s", {"command": command, "args": args}, {"prefix": ""})
    async with (
        running_gateway([spec], wait_for=["s"]) as (gateway, _, _),
        Client(str(gateway.url)) as client,
    ):
        for description in ("Return the text, as sent.", "Return the text, as sent."):
            tools.write_text(json.dumps([{**echo, "description": description}]))
            async with client.listen(tools_list_changed=True) as changes:
                await client.call_tool("relist", {})
                with anyio.fail_after(10):
                    change = await changes.__anext__()
            assert type(change).__name__ == "ToolsListChanged"
            listed = {t.name: t.description for t in (await client.list_tools()).tools}
            assert listed["echo"] == description


@pytest.mark.anyio
async def test_padded_mcp_headers_are_read_as_http_says(demo_url: str) -> None:
    """`Mcp-Name: echo  ` is `echo` (RFC 9110: no surrounding white space)."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": envelope},
    }
    payload = json.dumps(body).encode()
    command, args = raw_command()  # any server with `echo`: the stdlib one
    raw = parse_spec("raw", {"command": command, "args": args}, {"prefix": ""})
    async with running_gateway([raw], wait_for=["raw"]) as (
        gateway,
        _,
        _,
    ):
        url = httpx2.URL(str(gateway.url))
        # By hand: HTTP clients refuse to send a padded value at all.
        request = (
            f"POST {url.path} HTTP/1.1\r\nHost: 127.0.0.1:{url.port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
            f"Mcp-Name: echo  \r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + payload
        answer = b""
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", url.port or 80) as sock:
                await sock.send(request)
                with contextlib.suppress(anyio.EndOfStream):
                    while b'"text":"x"' not in answer:
                        answer += await sock.receive()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


@pytest.mark.anyio
async def test_a_call_parked_on_its_question_is_not_the_one_asking_anew() -> None:
    """Over stdio nothing says which call a server's request serves; a call
    whose own question is still open cannot be asking (its handler awaits the
    answer), so it is not a candidate: an abandoned round does not make every
    later question ambiguous."""
    held = HeldCall(deadline=5.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(held.ask, "elicitation/create", {}, _Answer)
        first = await held.next_round()
        assert first.asks is not None and held.blocked
        (key,) = first.asks
        held.answer({key: {"action": "accept"}})
        await anyio.wait_all_tasks_blocked()
        assert not held.blocked
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_question_parked_on_a_call_that_ended_still_reaches_the_client() -> (
    None
):
    """A stdio upstream's question names no call: it may be parked on another
    call of the same client, which can end first. Its round shows the
    question before the result (else nobody would ever answer it); a
    question whose asker was cancelled is shown to nobody."""
    held = HeldCall(deadline=5.0)
    answers: list[object] = []

    async def foreign_question() -> None:
        answers.append(await held.ask("elicitation/create", {}, _Answer))

    async with anyio.create_task_group() as tg:
        tg.start_soon(foreign_question)
        await anyio.wait_all_tasks_blocked()
        held.finish("its own result", None, anyio.current_time())
        first = await held.next_round()
        assert first.asks is not None and first.result is None
        (key,) = first.asks
        held.answer({key: {"action": "accept"}})
    assert (await held.next_round()).result == "its own result"
    assert isinstance(answers[0], _Answer)

    held = HeldCall(deadline=5.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(held.ask, "elicitation/create", {}, _Answer)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()  # the upstream call that asked is gone
    held.finish("done", None, anyio.current_time())
    assert (await held.next_round()).result == "done"


@pytest.mark.anyio
async def test_a_2026_upstreams_questions_on_a_prompt_reach_clients_of_both_eras(
    tmp_path: Path,
) -> None:
    """`protocol = "2026-07-28"` to a dual-era server on the SDK's own
    `Server`: its prompt answers input_required; a handshake client is asked
    with elicitation/create, a 2026 client in rounds under the server's own
    key, and both get the prompt the answer makes."""
    script = Path(__file__).parent.parent / "servers" / "conformance_everything.py"
    spec = parse_spec(
        "conf",
        {"command": sys.executable, "args": [str(script), "--stdio"]},
        {"prefix": "", "protocol": "2026-07-28"},
    )
    keys: list[object] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        keys.append(context.request_id)
        return types.ElicitResult(action="accept", content={"context": "tea"})

    async with running_gateway([spec], wait_for=["conf"]) as (gateway, manager, _):
        status = manager.status("conf")
        assert status is not None and status.protocol == "2026-07-28"
        for mode in MODES:
            url = str(gateway.url)
            async with Client(url, mode=mode, elicitation_callback=answer) as client:
                got = await client.get_prompt("test_input_required_result_prompt")
            (message,) = got.messages
            assert isinstance(message.content, types.TextContent)
            assert message.content.text == "Use this context: tea"
    assert keys[0] == "user_context"  # the 2026 client saw the server's own key


@pytest.mark.anyio
async def test_answers_sent_before_the_question_are_taken() -> None:
    """A stateless client may send `inputResponses` with its first request;
    the upstream's question under that key is answered at once (extra keys
    ignored), and the call completes in one round."""
    held_calls = HeldCalls()
    async with anyio.create_task_group() as tg:
        await tg.start(held_calls.run)

        async def asks(held: HeldCall) -> object:
            return await held.ask("elicitation/create", {}, _Answer, "user_name")

        given = {"user_name": {"action": "accept"}, "extra": {"action": "x"}}
        done = await held_calls.call({"inputResponses": given}, 1.0, asks)
        assert isinstance(done, _Answer) and done.action == "accept"
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_subscription_through_a_2026_upstream_rides_its_listen_stream(
    demo_url: str,
) -> None:
    """resources/subscribe is gone in 2026-07-28: a handshake client's
    subscription through the daemon becomes the URI on the upstream's
    subscriptions/listen stream, and the update reaches the subscriber."""
    notes: list[object] = []

    async def on_message(message: object) -> None:
        notes.append(message)

    spec = parse_spec("web", demo_url, {"prefix": ""})
    async with (
        running_gateway([spec], wait_for=["web"]) as (gateway, manager, _),
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(str(gateway.url), http_client=http) as streams,
        ClientSession(*streams, message_handler=on_message) as client,
    ):
        status = manager.status("web")
        assert status is not None and status.protocol == "2026-07-28"
        await client.initialize()
        await client.send_request(
            types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri="demo://readme")
            ),
            types.EmptyResult,
        )

        def updated() -> bool:
            return any(
                isinstance(n, types.ResourceUpdatedNotification)
                and str(n.params.uri) == "demo://readme"
                for n in notes
            )

        with anyio.fail_after(10):
            while not updated():
                # The listen stream reopens with the URI; touch until it is in.
                await client.call_tool("touch_resource", {"uri": "demo://readme"})
                await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_a_handshake_client_meets_a_dual_era_http_server_in_its_own_era(
    backchannel_http: HttpServerProcess,
) -> None:
    """Under `auto` the daemon speaks 2026-07-28 to a dual-era HTTP server;
    a handshake-era client's call still reaches it in the handshake era (a
    handshake session opened on first need), so the server's back-channel
    questions reach that client, as straight; and a handshake client that
    cannot be asked gets the handshake era's answers. A 2026 client is refused by
    that server straight and through us alike. Behind the bridge (prefix
    ""), a prompt nobody lists gets the server's own error, as straight."""
    url = backchannel_http.url
    spec = parse_spec("bc", url, {"prefix": ""})
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled"),
            model="test",
        )

    async def outcome(where: str, mode: ConnectMode) -> tuple[object, ...]:
        async with Client(
            where, mode=mode, elicitation_callback=answer, sampling_callback=sample
        ) as client:
            asks = await client.call_tool("ask", {"message": "colour?"})
            samples = await client.call_tool("sample", {"prompt": "hi"})
            prompt = await client.get_prompt("asking")
            # A prompt nobody lists: behind a bridge, the server's own error
            # (an SDK server's wording, not ours).
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("not-listed")
        # A client that cannot be asked meets it in its own era too: the
        # server's error is the handshake era's, as straight.
        async with Client(where, mode=mode) as plain:
            with pytest.raises(MCPError) as plainly:
                await plain.get_prompt("not-listed")
        texts = [c.text for c in [*asks.content, *samples.content]]  # type: ignore[union-attr]
        (message,) = prompt.messages
        assert isinstance(message.content, types.TextContent)
        return (
            asks.is_error or samples.is_error,
            texts[0],
            texts[-1],
            message.content.text,
            (refused.value.code, refused.value.message),
            (plainly.value.code, plainly.value.message),
        )

    straight = await outcome(url, "legacy")
    assert straight[:4] == (False, "accept: blue", "sampled", "Write about blue")
    async with running_gateway([spec], wait_for=["bc"]) as (gateway, manager, _):
        status = manager.status("bc")
        assert status is not None and status.protocol == "2026-07-28"
        through = await outcome(str(gateway.url), "legacy")
    assert through == straight
    assert asked == ["colour?", "topic?", "colour?", "topic?"]


# ------------------------------------------------------------ the era matrix

_KINDS = {
    "handshake-only": ("--legacy-only",),
    "2026-only": ("--modern-only",),
    "dual-era": (),
}
"""The demo server as each kind of server: the flags that make it one."""


async def _matrix_rows(
    where: Any, mode: ConnectMode, prefixes: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """What a client of `mode` that can be asked everything gets from the
    demo's tools that elicit, sample and ask for roots, under each prefix
    (one server each), over one session; a client that cannot connect at
    all gets that, as such."""
    callbacks: dict[str, Any] = {
        "elicitation_callback": answer_elicitation,
        "sampling_callback": answer_sampling,
        "list_roots_callback": _list_roots,
    }
    calls = {
        "ask_user": {"message": "colour?"},
        "sample": {"prompt": "hi"},
        "roots": {},
    }
    try:
        async with Client(where, mode=mode, **callbacks) as client:
            return {
                prefix: {
                    tool: wire(await client.call_tool(prefix + tool, arguments))
                    for tool, arguments in calls.items()
                }
                for prefix in prefixes
            }
    except Exception as exc:  # compared as such
        return dict.fromkeys(prefixes, {"failed": type(exc).__name__})


async def _list_roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])  # type: ignore[arg-type]


def _fronts(daemon: DaemonProcess, url: str, script: Path) -> dict[str, Any]:
    """Where a client meets the daemon: `/mcp`, `attach` and `mcp-manager
    stdio` (its own process, running the same startup.lua); each a factory,
    a transport being used once."""
    state = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}  # not the user's
    attach = ["attach", "--socket", str(daemon.socket)]
    front = launch_command("manager", "stdio", str(script), "--no-telemetry")
    return {
        "/mcp": lambda: url,
        "attach": lambda: StdioServerParameters(
            command=sys.executable, args=["-m", "manager", *attach]
        ),
        "stdio": lambda: StdioServerParameters(
            command=front[0], args=front[1], env=state
        ),
    }


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(_KINDS))
async def test_the_era_matrix_through_every_front_is_what_each_client_gets_straight(
    make_http_server: HttpServerFactory, kind: str, tmp_path: Path
) -> None:
    """Client era (handshake, 2026-07-28) × server kind (handshake-only,
    2026-only, dual-era: one run each) × transport (stdio, streamable HTTP) ×
    front (`/mcp`, `attach`, `mcp-manager stdio`), each server declared with
    nothing but its command or URL: a client whose tool asks it something
    (elicitation, sampling, roots) gets what it gets straight at the server;
    where straight fails (a handshake client at a 2026-only server), the
    daemon translates and the call works. The one difference, written in the
    README ("Protocol eras"): a handshake session of the daemon's carries the
    daemon's capabilities, so `roots` served by one asks the connection's
    declared roots (none here), not the client's."""
    straight: dict[str, Any] = {}
    flags = _KINDS[kind]
    command, args = stdio_command(*flags)
    straight["stdio"] = StdioServerParameters(command=command, args=args)
    straight["http"] = make_http_server("http", *flags).url
    name = kind.replace("-", "_")
    script = tmp_path / "startup.lua"
    script.write_text(
        lua_stdio(f"{name}_s", command, args)
        + f"mcp_add({json.dumps(name + '_h')}, {json.dumps(straight['http'])})\n"
    )
    port = free_port()
    listen = f"127.0.0.1:{port}"
    with DaemonThread(script, "--listen", listen, "--no-token") as daemon:
        for transport in ("s", "h"):
            daemon.wait_event("connected", f"{name}_{transport}")
        fronts = _fronts(daemon, f"http://{listen}/mcp", script)
        prefixes = {transport: f"{name}_{transport[0]}__" for transport in straight}
        with anyio.fail_after(180):
            for mode in ("legacy", "auto"):
                seen = {
                    transport: (await _matrix_rows(at, mode, ("",)))[""]
                    for transport, at in straight.items()
                }
                for front, where in fronts.items():
                    # one session of each front meets both servers
                    through = await _matrix_rows(
                        where(), mode, tuple(prefixes.values())
                    )
                    for transport, prefix in prefixes.items():
                        cell = (kind, transport, mode, front)
                        _same_as_straight(cell, seen[transport], through[prefix])


def _same_as_straight(
    cell: tuple[str, str, str, str], seen: dict[str, Any], through: dict[str, Any]
) -> None:
    """One cell of the era matrix: through the daemon as straight (or, where
    straight fails, working)."""
    kind, _, mode, _ = cell
    assert "failed" not in through, (cell, through)
    assert through["ask_user"]["content"][0]["text"] == (
        'accept: {"answer": "blue"}'
    ), cell
    assert "hello from the model" in json.dumps(through["sample"]), cell
    if "failed" in seen:
        assert (kind, mode) == ("2026-only", "legacy"), cell
        return
    # 2026-07-28 results carry `resultType`; the rest is equal.
    for tool in ("ask_user", "sample"):
        mine = {k: v for k, v in through[tool].items() if k != "resultType"}
        theirs = {k: v for k, v in seen[tool].items() if k != "resultType"}
        assert mine == theirs, (cell, tool)
    # A session of the daemon's in the handshake era serves it.
    by_handshake = kind == "handshake-only" or mode == "legacy"
    if not by_handshake:
        assert through["roots"] == seen["roots"], cell
