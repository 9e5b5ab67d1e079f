"""Everything MCP besides tools through the endpoint, seen by the SDK's client.

Two demo servers sit behind the gateway, in memory (what reaches them, not
how, is the point; the stdio route has its tests in `tests/transport` and
`test_eras.py`): `a` with its default prefix and `b` as a bridge
(`prefix = ""`). Both list `demo://readme`, so `b`'s is the one rewritten.
The downstream is a real `ClientSession` over streamable HTTP,
with elicitation, sampling and logging callbacks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from fakes import accepting
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from memory import MemoryServers
from servers import (
    HttpServerFactory,
    HttpServerProcess,
    raw_command,
    stdio_command,
)
from servers.daemon import DaemonProcess, DaemonThread
from servers.process import sharing_children
from support.clients import Client, downstream
from support.gateway import (
    demo_memory,
    demo_stdio,
    raw,
    running_gateway,
    text_of,
    wait_until,
)

from manager.cli import main
from manager.core.spec import parse_spec
from manager.gateway import Gateway
from manager.gateway.catalog import (
    CatalogSource,
    build_resource_table,
    is_rewrite,
    rewrites_line,
)

pytestmark = pytest.mark.usefixtures("no_leaked_children")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One event loop for the module: tests share one gateway."""
    return "asyncio"


@asynccontextmanager
async def busy_with_a_sleep(session: ClientSession, tool: str) -> AsyncIterator[None]:
    """`session` calls the demo's `tool` (`sleep`, a minute) while the body
    runs, which starts once the call is at the server (its first progress);
    the call is cancelled, not waited for, when the body ends."""
    busy = anyio.Event()

    async def progressed(
        progress: float, total: float | None, message: str | None
    ) -> None:
        busy.set()

    async with anyio.create_task_group() as tg:
        sleep = partial(session.call_tool, tool, {"seconds": 60})
        tg.start_soon(partial(sleep, progress_callback=progressed))
        with anyio.fail_after(30):
            await busy.wait()
        yield
        tg.cancel_scope.cancel()


@asynccontextmanager
async def two_demos(**a_opts: object) -> AsyncIterator[Gateway]:
    specs = [demo_memory("a", **a_opts), demo_memory("b", prefix="")]
    async with running_gateway(specs, wait_for=("a", "b"), memory=MemoryServers()) as (
        gateway,
        _,
        _,
    ):
        await wait_until(lambda: len(gateway.features.prompts.tools) >= 6)
        yield gateway


@pytest.fixture(scope="module")
async def demos(
    no_leaked_children_after_module: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    """`two_demos()` for the tests that change nothing in it: two SDK servers
    (in memory) started once per module instead of once per test. (Subscriptions are per
    downstream session; the one test that sets a log level, which upstreams
    keep, is the one that looks at logs.)"""
    with pytest.MonkeyPatch.context() as patch:  # its own state directory
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        async with two_demos() as gateway:
            yield gateway


@pytest.fixture(scope="module")
def web(
    no_leaked_children_after_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServerProcess]:
    """A demo server over streamable HTTP for the tests here that need one
    (each asks its own questions, in its own sessions)."""
    log = tmp_path_factory.mktemp("web") / "server.log"
    with HttpServerProcess("http", log_path=log) as server:
        yield server


@pytest.mark.anyio
async def test_prompts_and_resources_of_every_upstream_are_listed_and_routed(
    demos: Gateway,
) -> None:
    gateway = demos
    assert gateway.url is not None
    async with downstream(gateway.url, Client()) as client:
        caps = client.initialize_result
        assert caps is not None
        assert caps.capabilities.prompts is not None
        assert caps.capabilities.resources is not None
        assert caps.capabilities.completions is not None
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert {"a__greet", "greet", "a__with_image", "with_image"} <= prompts
        got = await client.get_prompt("a__greet", {"name": "Ada"})
        assert got.messages[0].content == types.TextContent(
            type="text", text="Hello, Ada!"
        )
        image = await client.get_prompt("with_image")  # the bridge's own name
        assert isinstance(image.messages[0].content, types.ImageContent)
        with pytest.raises(MCPError, match="needs the argument 'name'"):
            await client.get_prompt("greet", {})  # the upstream's own error

        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        rewritten = "mcp-manager://b/demo%3A%2F%2Freadme"
        assert {"demo://readme", "demo://logo", rewritten} <= listed
        mine = await client.read_resource("demo://readme")
        theirs = await client.read_resource(rewritten)
        assert [str(c.uri) for c in theirs.contents] == [rewritten]
        assert mine.contents[0].text == theirs.contents[0].text  # type: ignore[union-attr]
        item = await client.read_resource("demo://items/7")  # a's template
        assert item.contents[0].text == "item 7"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await client.read_resource("nowhere://x")
        assert missing.value.code == -32002

        templates = (await client.list_resource_templates()).resource_templates
        assert "demo://items/{id}" in {t.uri_template for t in templates}
        done = await client.complete(
            types.PromptReference(type="ref/prompt", name="a__greet"),
            {"name": "name", "value": "al"},
        )
        assert done.completion.values == ["alice", "albert"]
        ids = await client.complete(
            types.ResourceTemplateReference(
                type="ref/resource", uri="demo://items/{id}"
            ),
            {"name": "id", "value": "1"},
        )
        assert ids.completion.values == ["1", "10", "11"]


@pytest.mark.anyio
async def test_a_hidden_tool_is_neither_listed_nor_callable() -> None:
    # Tools only: the hand-written server (echo, pid, crash) will do.
    specs = [raw("a", tools={"deny": ["crash", "p*"]}), raw("b", prefix="")]
    async with running_gateway(specs, wait_for=("a", "b")) as (gateway, _, _):
        assert gateway.url is not None
        async with downstream(gateway.url, Client()) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "a__echo" in names and "echo" in names
            assert "a__crash" not in names and "a__pid" not in names
            assert "crash" in names  # b hides nothing
            with pytest.raises(MCPError, match="unknown tool 'a__crash'"):
                await client.call_tool("a__crash", {"code": 1})
        assert gateway.table.hidden == {"a": 2}


@pytest.mark.anyio
async def test_elicitation_and_sampling_reach_the_client_that_made_the_call(
    demos: Gateway,
) -> None:
    gateway = demos
    assert gateway.url is not None
    client = Client()
    async with downstream(gateway.url, client) as session:
        asked = await session.call_tool("a__ask_user", {"message": "colour?"})
        assert text_of(asked) == 'accept: {"answer": "blue"}'
        assert client.asked == ["colour?"]
        sampled = await session.call_tool("sample", {"prompt": "hi"})
        assert text_of(sampled) == "a sampled reply"


@pytest.mark.anyio
async def test_a_client_without_the_capability_gets_a_clear_error_upstream(
    demos: Gateway,
) -> None:
    gateway = demos
    async with anyio.create_task_group():
        assert gateway.url is not None
        async with (
            httpx2.AsyncClient() as http,
            streamable_http_client(gateway.url, http_client=http) as (read, write),
            ClientSession(read, write) as plain,
        ):
            await plain.initialize()
            result = await plain.call_tool("a__ask_user", {"message": "colour?"})
            assert result.is_error
            assert "did not declare the elicitation capability" in text_of(result)


@pytest.mark.anyio
async def test_a_log_line_during_two_clients_calls_never_reaches_the_other(
    demos: Gateway,
) -> None:
    assert demos.url is not None
    alice, bob = Client(), Client()
    # Clients that cannot be asked: at a server that asked before (this
    # module's elicitation tests), askable clients would take turns there.
    async with (
        downstream(demos.url, alice, askable=False) as a,
        downstream(demos.url, bob, askable=False) as b,
    ):
        async with busy_with_a_sleep(a, "a__sleep"):
            said = await b.call_tool("a__log", {"level": "error", "text": "bob's"})
            assert text_of(said) == "sent error"
        withheld = demos.features.asks.logs_withheld.get("a", 0)
        # Alone at the server (alice's call has ended there), bob gets his own.
        await wait_until(lambda: demos.features.asks.in_flight("a") == 0)
        await b.call_tool("a__log", {"level": "error", "text": "bob alone"})
        await wait_until(lambda: any(log.data == "bob alone" for log in bob.logs))
    assert all(log.data not in ("bob's", "bob alone") for log in alice.logs)
    # Unless bob's line came after alice's call had ended, nobody got it.
    assert withheld == 1 or [log.data for log in bob.logs][:1] == ["bob's"]


@pytest.mark.anyio
async def test_a_log_line_reaches_a_client_once_whatever_it_has_in_flight() -> None:
    """A stdio server's log message names no request: it goes to the one
    client whose calls are in flight there, once, not once per call (found
    by an audit: a client with three calls in flight got every line three
    times)."""
    async with running_gateway([demo_stdio("a")], wait_for=("a",)) as (gw, _, _):
        carol = Client()
        async with downstream(gw.url or "", carol, askable=False) as c:
            async with busy_with_a_sleep(c, "a__sleep"):
                said = await c.call_tool("a__log", {"level": "error", "text": "once"})
                assert text_of(said) == "sent error"
            await c.call_tool("a__log", {"level": "error", "text": "after"})
            await wait_until(lambda: any(log.data == "after" for log in carol.logs))
    assert [log.data for log in carol.logs].count("once") == 1


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_over_streamable_http_a_log_line_reaches_exactly_its_callers_client(
    web: HttpServerProcess, era: str
) -> None:
    """Over streamable HTTP a log line comes on its request's own response
    stream: it reaches that request's client even while another client's
    call is in flight there, and never the other (the daemon speaking either
    era to the server)."""
    options = {"backoff": {"initial": 0.05, "cap": 0.4}, "protocol": era}
    spec = parse_spec("web", web.url, options)
    async with running_gateway([spec], wait_for=("web",)) as (gateway, _, _):
        assert gateway.url is not None
        alice, bob = Client(), Client()
        async with (
            downstream(gateway.url, alice, askable=False) as a,
            downstream(gateway.url, bob, askable=False) as b,
        ):
            async with busy_with_a_sleep(a, "web__sleep"):
                said = await b.call_tool(
                    "web__log", {"level": "error", "text": "bob's"}
                )
                assert text_of(said) == "sent error"
                await wait_until(lambda: any(log.data == "bob's" for log in bob.logs))
        assert gateway.features.asks.logs_withheld.get("web", 0) == 0
    assert all(log.data != "bob's" for log in alice.logs)


@pytest.mark.anyio
async def test_resource_updates_reach_the_subscriber_and_logs_respect_levels(
    demos: Gateway,
) -> None:
    gateway = demos
    assert gateway.url is not None
    client = Client()
    async with downstream(gateway.url, client) as session:
        subscribe = types.SubscribeRequest(
            params=types.SubscribeRequestParams(uri="demo://readme")
        )
        await session.send_request(subscribe, types.EmptyResult)
        touched = await session.call_tool("a__touch_resource", {"uri": "demo://readme"})
        assert text_of(touched) == "1"  # the gateway is a's one subscriber

        def updated() -> list[str]:
            return [
                str(n.params.uri)
                for n in client.notes
                if isinstance(n, types.ResourceUpdatedNotification)
            ]

        await wait_until(lambda: updated() == ["demo://readme"])

        level = types.SetLevelRequest(
            params=types.SetLevelRequestParams(level="warning")
        )
        await session.send_request(level, types.EmptyResult)
        await session.call_tool("a__log", {"level": "info", "text": "quiet"})
        await session.call_tool("a__log", {"level": "error", "text": "loud"})
        await wait_until(lambda: any(log.data == "loud" for log in client.logs))
        assert [log.data for log in client.logs] == ["loud"]
        assert client.logs[0].logger is not None
        assert client.logs[0].logger.startswith("a")


@pytest.mark.anyio
async def test_an_update_of_a_2026_server_reaches_a_handshake_subscriber_once(
    web: HttpServerProcess,
) -> None:
    """The daemon follows a resource on a 2026-07-28 server's listen stream,
    whose events the SDK's session also tees to its message handler: told
    on both paths, a handshake client got every update twice (an audit)."""
    spec = parse_spec("h", web.url, {"ping_interval": 0})
    async with running_gateway([spec], wait_for=("h",)) as (gateway, _, _):
        client = Client()
        async with downstream(gateway.url or "", client) as session:
            subscribe = types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri="demo://readme")
            )
            await session.send_request(subscribe, types.EmptyResult)

            def updated() -> list[str]:
                return [
                    str(n.params.uri)
                    for n in client.notes
                    if isinstance(n, types.ResourceUpdatedNotification)
                ]

            for _ in range(3):  # a twin comes with its update, at once
                await session.call_tool("h__touch_resource", {"uri": "demo://readme"})
            await wait_until(lambda: len(updated()) >= 3)
            await session.send_ping()
        assert updated() == ["demo://readme"] * 3


def _set_level(level: types.LoggingLevel) -> types.SetLevelRequest:
    return types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))


@pytest.mark.anyio
async def test_one_clients_log_level_neither_limits_another_nor_outlives_it() -> None:
    """Straight, each client sets its own server's level. Through the daemon
    one server serves them all: a client that set no level still gets every
    level in its calls whatever another client set, and a level goes with
    the client that set it (before: one client's "error" cut every other
    client's calls' info messages, after it left too)."""
    async with two_demos() as gateway:
        manager = gateway.manager

        async def upstream_says(expected: str) -> None:
            # the daemon's own session at `a`: what a's level lets through
            with anyio.fail_after(10):
                while True:
                    said = await manager.call(
                        "a", "log", {"level": "info", "text": "-"}
                    )
                    if expected in json.dumps(said.data["content"]):
                        return
                    await anyio.sleep(0.02)

        assert gateway.url is not None
        quiet_one = Client()
        async with downstream(gateway.url, quiet_one) as quiet:
            await quiet.send_request(_set_level("error"), types.EmptyResult)
            said = await quiet.call_tool("a__log", {"level": "info", "text": "q"})
            assert text_of(said) == "not sent: info is below error"
            other = Client()
            async with downstream(gateway.url, other) as chatty:  # sets none
                said = await chatty.call_tool("a__log", {"level": "info", "text": "c"})
                assert text_of(said) == "sent info"
                await wait_until(lambda: any(log.data == "c" for log in other.logs))
            await quiet.call_tool("a__log", {"level": "info", "text": "q2"})
        assert [log.data for log in quiet_one.logs] == []  # its own level held
        await upstream_says("sent info")  # set back once both left

        async with downstream(gateway.url, Client()) as alone:
            await alone.send_request(_set_level("warning"), types.EmptyResult)
            await upstream_says("not sent: info is below warning")
        await upstream_says("sent info")  # the level went with its client


# ------------------------------------------------------------------ the CLI


def demo_lua(name: str, options: str = "") -> str:
    command, args = stdio_command()
    arg_list = ", ".join(json.dumps(a) for a in args)
    return (
        f"mcp_add({json.dumps(name)}, {{command = {json.dumps(command)}, "
        f"args = {{{arg_list}}}}}, {{{options}}})\n"
    )


def test_the_cli_reads_gets_prompts_and_lists_what_is_exposed(
    capsys: pytest.CaptureFixture[str], cli_daemon: DaemonProcess
) -> None:
    """`docs` of `cli_daemon`: the demo in the handshake era, prefix `d`, two
    tools hidden."""
    daemon = cli_daemon
    sock = ["--socket", str(daemon.socket)]
    assert main(["read", "docs", "demo://readme", *sock]) == 0
    read = json.loads(capsys.readouterr().out)
    assert read["contents"][0]["uri"] == "demo://readme"
    assert main(["prompt", "docs", "greet", '{"name": "Ada"}', *sock]) == 0
    prompt = json.loads(capsys.readouterr().out)
    assert prompt["messages"][0]["content"]["text"] == "Hello, Ada!"
    assert main(["read", "docs", "nowhere://x", *sock]) == 2
    assert "resource not found" in capsys.readouterr().err
    # By the names the listings show, as a user copies them.
    assert main(["prompt", "d__greet", '{"name": "Ada"}', *sock]) == 0
    assert json.loads(capsys.readouterr().out) == prompt
    assert main(["resources", "docs", "--json", *sock]) == 0
    rows = json.loads(capsys.readouterr().out)
    exposed = {row["uri"]: row["exposed"] for row in rows}["demo://readme"]
    assert main(["read", exposed, *sock]) == 0
    assert json.loads(capsys.readouterr().out)["contents"] == read["contents"]
    assert main(["call", "d__echo", '{"text": "hi"}', *sock]) == 0
    assert json.loads(capsys.readouterr().out)["content"][0]["text"] == "hi"
    assert main(["call", "d__crash", *sock]) == 2  # hidden: not exposed
    assert "no connection or exposed tool named 'd__crash'" in capsys.readouterr().err
    assert main(["tools", "docs", "--json", *sock]) == 0
    tools = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert tools["echo"]["exposed"] == "d__echo"
    assert tools["crash"]["hidden"] is True and tools["crash"]["exposed"] is None
    assert main(["tools", *sock]) == 0
    assert "docs: MCP 2025-11-25 (handshake era)" in capsys.readouterr().out
    assert main(["prompts", *sock]) == 0
    assert "d__greet" in capsys.readouterr().out
    assert main(["resources", *sock]) == 0
    assert "demo://items/{id}" in capsys.readouterr().out
    status = {row.name: row for row in daemon.client.status()}["docs"]
    assert (status.prompts, status.resources, status.hidden) == (3, 3, 2)


def test_check_warns_about_a_shared_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(
        'mcp_add("a", "http://127.0.0.1:9/mcp", {prefix = "x"})\n'
        'mcp_add("x", "http://127.0.0.1:9/mcp")\n'
    )
    assert main(["check", str(script)]) == 0
    err = capsys.readouterr().err
    assert "connections 'a', 'x' share the prefix 'x'" in err


class Answering(Client):
    """A client whose elicitation waits until told, then answers `answer`."""

    def __init__(self, answer: str, go: anyio.Event) -> None:
        super().__init__()
        self.answer = answer
        self.go = go
        self.reached = anyio.Event()

    async def on_elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        self.reached.set()
        await self.go.wait()
        return types.ElicitResult(action="accept", content={"answer": self.answer})


@pytest.mark.anyio
async def test_two_clients_eliciting_at_once_each_get_their_own(
    web: HttpServerProcess,
) -> None:
    spec = parse_spec("web", web.url, {"backoff": {"initial": 0.05, "cap": 0.4}})
    async with running_gateway([spec], wait_for=("web",)) as (gateway, _, _):
        assert gateway.url is not None
        go = anyio.Event()
        one, two = Answering("one", go), Answering("two", go)
        results: dict[str, str] = {}
        async with (
            downstream(gateway.url, one) as first,
            downstream(gateway.url, two) as second,
            anyio.create_task_group() as tg,
        ):

            async def ask(name: str, session: ClientSession) -> None:
                got = await session.call_tool("web__ask_user", {"message": name})
                results[name] = text_of(got)

            tg.start_soon(ask, "first", first)
            tg.start_soon(ask, "second", second)
            with anyio.fail_after(10):
                await one.reached.wait()  # both calls are in flight upstream,
                await two.reached.wait()  # each client is being asked
            go.set()
        assert one.asked == ["first"] and two.asked == ["second"]
        assert results == {
            "first": 'accept: {"answer": "one"}',
            "second": 'accept: {"answer": "two"}',
        }


def roots_of(result: dict[str, object]) -> object:
    content = result["content"]
    assert isinstance(content, list)
    return json.loads(content[0]["text"])


def test_declared_roots_are_answered_and_a_reload_changes_them_live(
    tmp_path: Path,
) -> None:
    script = tmp_path / "startup.lua"
    script.write_text(demo_lua("docs", 'roots = {"/srv/a", "file:///srv/b"}'))
    with DaemonThread(script) as daemon:
        connected = daemon.wait_event("connected", "docs")
        assert roots_of(daemon.client.call("docs", "roots", {})) == [
            "file:///srv/a",
            "file:///srv/b",
        ]
        script.write_text(demo_lua("docs", 'roots = {"/srv/c"}'))
        changed = daemon.wait_event("settings_changed", "docs")
        assert changed["changed"] == ["roots"]
        assert roots_of(daemon.client.call("docs", "roots", {})) == ["file:///srv/c"]
        after = int(str(connected["seq"]))
        reconnects = [
            e
            for e in daemon.events
            if e["kind"] == "connecting" and int(str(e["seq"])) > after
        ]
        assert reconnects == []  # applied without a reconnect


@pytest.mark.anyio
async def test_mcp_manager_stdio_is_a_transparent_bridge_with_prefix_empty(
    tmp_path: Path,
) -> None:
    """A client's config runs `mcp-manager stdio startup.lua` in place of the
    server: it sees the server's own names and everything else it offers."""
    script = tmp_path / "startup.lua"
    script.write_text(demo_lua("demo", 'prefix = ""'))
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "manager",
            "stdio",
            str(script),
            "--log-file",
            str(tmp_path / "log"),
        ],
        env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},  # not the user's
    )
    client = Client()
    with anyio.fail_after(20):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(
                read, write, elicitation_callback=client.on_elicit
            ) as session,
        ):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"echo", "ask_user", "add"} <= names
            echoed = await session.call_tool("echo", {"text": "through"})
            assert text_of(echoed) == "through"
            prompts = {p.name for p in (await session.list_prompts()).prompts}
            assert "greet" in prompts
            read_back = await session.read_resource("demo://readme")
            assert str(read_back.contents[0].uri) == "demo://readme"
            asked = await session.call_tool("ask_user", {"message": "ok?"})
            assert text_of(asked) == 'accept: {"answer": "blue"}'


@pytest.mark.anyio
async def test_the_early_initialize_answer_is_the_one_the_sdk_server_gives() -> None:
    """`mcp-manager stdio` answers `initialize` before loading the SDK; what it
    says must be what the endpoint's own server says at that moment."""
    from mcp.shared.memory import create_client_server_memory_streams

    from manager.engine.bus import EventBus
    from manager.engine.manager import Manager
    from manager.gateway.early import HANDSHAKE_VERSIONS, _answer

    bus = EventBus()
    async with Manager(bus) as manager:
        # On its first attempt for good (it never answers): capabilities unknown.
        command, args = raw_command("--hang-on-initialize")
        manager.add(parse_spec("first", {"command": command, "args": args}))
        gateway = Gateway(manager, bus)
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(
                lambda: gateway.server.run(
                    *server_streams, gateway.server.create_initialization_options()
                )
            )
            async with ClientSession(*client_streams) as session:
                sdk = await session.initialize()
            tg.cancel_scope.cancel()
    for version in HANDSHAKE_VERSIONS:
        early = _answer(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}},
            }
        )
        assert early is not None
        assert early["result"]["protocolVersion"] == version  # type: ignore[index]
    assert early is not None
    mine = types.InitializeResult.model_validate(early["result"], by_name=False)
    assert mine.capabilities == sdk.capabilities
    assert mine.server_info.name == sdk.server_info.name
    assert mine.server_info.version == sdk.server_info.version
    assert mine.instructions == sdk.instructions
    assert sdk.protocol_version == HANDSHAKE_VERSIONS[-1]


def test_early_handshake_versions_are_the_sdks() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from manager.gateway.early import HANDSHAKE_VERSIONS

    assert HANDSHAKE_VERSIONS == tuple(HANDSHAKE_PROTOCOL_VERSIONS)


def test_a_resource_clash_is_said_once_whoever_lists_it_first() -> None:
    """Servers come and go, so which one lists a shared URI first changes; the
    clash of one server's URI (and where it is exposed) does not, and that is
    what a warning is keyed on."""

    def listing(server: str) -> CatalogSource:
        return CatalogSource(server, [{"uri": "x://shared", "name": "shared"}], [])

    every = build_resource_table(listing(s) for s in ("a", "b", "c"))
    a_away = build_resource_table(listing(s) for s in ("b", "c"))
    assert len(every.problems) == 2 and len(a_away.problems) == 1
    (c_line,) = [line for line in every.problems if line.startswith("c:")]
    assert "a lists the same URI" in c_line
    assert "b lists the same URI" in a_away.problems[0]  # a new line, same clash
    assert set(a_away.problem_keys) <= set(every.problem_keys)
    assert len(set(every.problem_keys)) == 2
    # Handled (a rewrite), so said at INFO: two instances of one server do it.
    assert all(is_rewrite(key) for key in every.problem_keys)


def test_the_rewrites_of_one_server_are_said_in_one_line() -> None:
    """Two instances of one server share every URI: the log gets one line per
    server and rebuild, naming a few of them, not one line per URI."""

    def listing(server: str, count: int) -> CatalogSource:
        return CatalogSource(
            server,
            [{"uri": f"x://r{i}", "name": f"r{i}"} for i in range(count)],
            [{"uriTemplate": "x://items/{id}", "name": "items"}],
        )

    one = build_resource_table([listing("a", 0), CatalogSource("b", [], [])])
    assert one.problems == ()
    pair = build_resource_table([listing("a", 1), listing("b", 1)])
    assert len(pair.problems) == 2  # b's resource and b's template
    line = rewrites_line(pair.problem_keys, pair.problems)
    assert line == (
        "b: 2 resource URIs that another server lists too are exposed under "
        "'mcp-manager://b/': 'x://r0', 'template x://items/{id}'"
    )
    assert rewrites_line(pair.problem_keys[:1], pair.problems[:1]) == pair.problems[0]
    many = build_resource_table([listing("a", 7), listing("b", 7)])
    line = rewrites_line(many.problem_keys, many.problems)
    assert line.startswith("b: 8 resource URIs") and line.endswith("and 3 more")
    invalid = build_resource_table(
        [CatalogSource("d", [{"uri": "x://bad", "name": 5}], [])]
    )
    assert invalid.problems and not any(map(is_rewrite, invalid.problem_keys))


CLI_ERAS = {"2026-07-28": "web", "legacy": "old"}
"""The `protocol` of each connection of `cli_daemon` the CLI call test uses,
and its name."""


@pytest.fixture(scope="module")
def cli_daemon(
    no_leaked_children_after_module: None,
    web: HttpServerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DaemonProcess]:
    """One daemon for the CLI tests that change nothing in it, all on the
    HTTP demo: declared once per `protocol` for both eras of the call test
    (each call asks and is answered on its own), and as `docs` (handshake
    era, prefix `d`, `crash` and `spawn_*` hidden) for the reading test."""
    script = tmp_path_factory.mktemp("cli-call") / "startup.lua"
    script.write_text(
        "".join(
            f'mcp_add("{name}", "{web.url}", {{protocol = "{protocol}"}})\n'
            for protocol, name in CLI_ERAS.items()
        )
        + f'mcp_add("docs", "{web.url}", {{protocol = "legacy", prefix = "d", '
        'tools = {deny = {"crash", "spawn_*"}}})\n'
    )
    state = {"XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}
    with DaemonProcess(script, env=state) as daemon:
        for name in (*CLI_ERAS.values(), "docs"):
            daemon.wait_event("connected", name)
        with sharing_children():
            yield daemon


@pytest.mark.parametrize("protocol", list(CLI_ERAS))
def test_a_cli_call_answers_what_the_server_asks_with_its_answer(
    capsys: pytest.CaptureFixture[str],
    cli_daemon: DaemonProcess,
    protocol: str,
) -> None:
    """`mcp-manager call ... --answer JSON`: no client stands behind the
    call, so a question the server asks during it (elicitation) gets that
    answer, in either era; without one the question is refused."""
    answer = '{"action": "accept", "content": {"answer": "blue"}}'
    daemon = cli_daemon
    name = CLI_ERAS[protocol]
    status = {row.name: row for row in daemon.client.status()}[name]
    assert status.protocol == ("2025-11-25" if protocol == "legacy" else protocol)
    sock = ["--socket", str(daemon.socket)]
    asked = ["call", name, "ask_user", '{"message": "colour?"}', *sock]
    assert main([*asked, "--answer", answer]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["content"][0]["text"] == 'accept: {"answer": "blue"}'
    code = main(asked)
    out = capsys.readouterr()
    assert code != 0 and "blue" not in out.out


@pytest.mark.anyio
async def test_an_http_server_asking_on_its_standalone_stream_gets_each_its_own(
    make_http_server: HttpServerFactory,
) -> None:
    """A streamable HTTP server whose questions name no request (sent on the
    session's standalone stream, as `ctx.session.create_message` without a
    related request does) was refused every question while two clients'
    calls were in flight, in words saying such servers name them (found by
    an audit). After its first such question, its askable clients take
    turns, as at a stdio server: each gets its own."""
    server = make_http_server("http", env={"DEMO_UNLINKED_QUESTIONS": "1"})
    spec = parse_spec("a", server.url, {"ping_interval": 0})
    results: dict[str, list[str]] = {}

    async def asker(url: str, name: str) -> None:
        client = Client()
        client.on_elicit = accepting(name)  # type: ignore[method-assign]
        async with downstream(url, client) as session:
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(ask, name, session)

    async def ask(name: str, session: Any) -> None:
        got = await session.call_tool("a__ask_user", {"message": name})
        results.setdefault(name, []).append(text_of(got))

    async def modern(url: str, name: str) -> None:
        # Asked in its call's rounds: it takes no turn (holding one across
        # the rounds, its own retry waited for it until the call timed out).
        async with SdkClient(url, elicitation_callback=accepting(name)) as client:
            for _ in range(5):
                got = await client.call_tool("a__ask_user", {"message": name})
                results.setdefault(name, []).append(text_of(got))

    from mcp import Client as SdkClient

    async with running_gateway([spec], wait_for=("a",)) as (gateway, _, _):
        url = gateway.url or ""
        with anyio.fail_after(60):
            await asker(url, "warm-up")  # the first question: one client only
            async with anyio.create_task_group() as tg:
                tg.start_soon(asker, url, "one")
                tg.start_soon(asker, url, "two")
                tg.start_soon(modern, url, "three")
    for name in ("warm-up", "one", "two", "three"):
        assert results[name] == [f'accept: {{"answer": "{name}"}}'] * 5, name


@pytest.mark.anyio
@pytest.mark.parametrize("clients", [4])  # 8 x 50, through attach too: campaigns
async def test_many_clients_eliciting_at_once_through_one_stdio_server_each_get_theirs(
    demos: Gateway, clients: int
) -> None:
    """A handshake-era stdio server's questions name no request: clients that
    can be asked take turns there, so with `clients` of both eras each making
    20 calls at once, every call is asked of its own client, none is refused
    and none crosses (before turns, most were refused)."""
    from mcp import Client as SdkClient

    gateway = demos
    assert gateway.url is not None
    calls = 20
    results: dict[str, list[str]] = {}

    async def handshake(name: str) -> None:
        client = Client()
        client.on_elicit = accepting(name)  # type: ignore[method-assign]
        async with downstream(gateway.url or "", client) as session:
            async with anyio.create_task_group() as tg:
                for _ in range(calls):
                    tg.start_soon(one_call, name, session.call_tool)

    async def modern(name: str) -> None:
        url = gateway.url or ""
        async with SdkClient(url, elicitation_callback=accepting(name)) as client:
            async with anyio.create_task_group() as tg:
                for _ in range(calls):
                    tg.start_soon(one_call, name, client.call_tool)

    async def one_call(name: str, call: Any) -> None:
        got = await call("a__ask_user", {"message": name})
        results.setdefault(name, []).append(text_of(got))

    with anyio.fail_after(120):
        # Turns begin once the server has asked a question: one ask first.
        async with SdkClient(
            gateway.url, elicitation_callback=accepting("warm-up")
        ) as first:
            await first.call_tool("a__ask_user", {"message": "warm-up"})
        async with anyio.create_task_group() as tg:
            for k in range(clients):
                tg.start_soon(handshake if k % 2 else modern, f"client{k}")
    assert sorted(results) == sorted(f"client{k}" for k in range(clients))
    for name, texts in results.items():
        assert texts == [f'accept: {{"answer": "{name}"}}'] * calls, (name, texts[:3])


@pytest.mark.anyio
async def test_a_log_message_outside_a_call_names_its_logger_as_one_inside_does() -> (
    None
):
    """`PREFIX/logger` (the prefix, not the connection's name), and as the
    server sent it through a bridge (`prefix = ""`), as straight: no logger
    stays no logger, and structured data stays structured (found by the
    endpoint audit: text, and the connection's name)."""
    import warnings

    from mcp import Client as SdkClient
    from mcp.shared.exceptions import MCPDeprecationWarning

    heard: list[tuple[str | None, object]] = []
    got = anyio.Event()

    async def on_log(params: Any) -> None:
        heard.append((params.logger, params.data))
        if len(heard) == 3:
            got.set()

    specs = [demo_memory("a", prefix="p"), demo_memory("bridge", prefix="")]
    async with (
        running_gateway(specs, wait_for=["a", "bridge"], memory=MemoryServers()) as (
            gateway,
            manager,
            _,
        ),
        SdkClient(str(gateway.url), mode="legacy", logging_callback=on_log) as client,
    ):
        with warnings.catch_warnings():  # logging: deprecated in 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.session.set_logging_level("debug")
        # where a connection hands a server's log message (no call in flight)
        hand = manager.requests.on_log
        assert hand is not None
        assert not hand("a", "info", "x", "one")
        assert not hand("bridge", "info", "x", {"step": 2, "of": 3})
        assert not hand("bridge", "info", None, "three")
        with anyio.fail_after(10):
            await got.wait()
    assert heard == [("p/x", "one"), ("x", {"step": 2, "of": 3}), (None, "three")]
