"""Profiles through the endpoint: `/mcp/NAME` shows the profile's view.

Two demo servers behind one gateway; the profile `one` shows server `a` only,
without its `fail` tool and without the `demo://items/*` template. Each era
(the SDK's default `Client`, 2026-07-28, and `mode="legacy"`, the handshake)
sees the same view; what the view hides is an unknown tool, prompt or
resource, exactly as if it did not exist.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from fakes import Recorder
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from memory import MemoryServers, tools_only
from support.gateway import demo_memory, running_gateway

from manager.core.profile import parse_profile
from manager.engine.manager import Manager
from manager.gateway import Gateway

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("no_leaked_children_after_module"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One event loop for the module: its tests share one gateway."""
    return "asyncio"


@pytest.fixture(scope="module")
async def shared(
    no_leaked_children_after_module: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Gateway, Manager, Recorder]]:
    """Two demo servers `a` and `b` and a server with tools only, `r`, behind
    one gateway, in memory (what a profile shows, not how servers are
    reached, is the point), for every test here; each test declares the
    profiles it needs."""
    with pytest.MonkeyPatch.context() as patch:  # its own state directory
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        specs = [demo_memory("a"), demo_memory("b"), demo_memory("r")]
        async with running_gateway(
            specs,
            wait_for=["a", "b", "r"],
            memory=MemoryServers(others={"r": tools_only}),
        ) as running:
            yield running


ONE = parse_profile(
    "one",
    {
        "servers": ["a"],
        "tools": {"deny": ["*fail*"]},
        "prompts": {"allow": ["a__greet"]},
        "resources": {"deny": ["demo://items/*"]},
    },
    "startup.lua:7",
)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_profile_url_shows_only_its_view_in_both_eras(
    mode: Any, shared: tuple[Gateway, Manager, Recorder]
) -> None:
    gateway, manager, _ = shared
    manager.profiles = {"one": ONE}
    assert gateway.url is not None
    async with Client(gateway.url, mode=mode) as everything:
        all_tools = {t.name for t in (await everything.list_tools()).tools}
    assert {"a__echo", "a__fail", "b__echo"} <= all_tools

    async with Client(f"{gateway.url}/one", mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {n for n in all_tools if n.startswith("a__")} - {"a__fail"}
        echoed = await client.call_tool("a__echo", {"text": "hi"})
        assert not echoed.is_error
        for hidden in ("b__echo", "a__fail"):
            with pytest.raises(MCPError) as caught:
                await client.call_tool(hidden, {"text": "hi"})
            assert "not in profile 'one'" in caught.value.message

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {"a__greet"}
        with pytest.raises(MCPError, match="unknown prompt"):
            await client.get_prompt("b__greet", {"name": "Ada"})

        listed = await client.list_resource_templates()
        assert listed.resource_templates == []
        with pytest.raises(MCPError):
            await client.read_resource("demo://items/7")
        # the readme is a's (both list it: b's is rewritten, and hidden)
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {"demo://readme", "demo://logo"}
        assert (await client.read_resource("demo://readme")).contents


async def test_an_unknown_profile_is_a_404_naming_the_declared_ones(
    shared: tuple[Gateway, Manager, Recorder],
) -> None:
    gateway, manager, _ = shared
    manager.profiles = {"one": ONE}
    async with httpx2.AsyncClient() as http:
        reply = await http.post(
            f"{gateway.url}/nope",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert reply.status_code == 404
    message = reply.json()["error"]["message"]
    assert "no profile named 'nope'" in message and "one" in message


async def test_a_profile_removed_by_a_reload_is_gone_from_its_url(
    shared: tuple[Gateway, Manager, Recorder],
) -> None:
    gateway, manager, _ = shared
    manager.profiles = {"one": ONE}
    async with Client(f"{gateway.url}/one", mode="legacy") as client:
        assert (await client.list_tools()).tools
        manager.profiles = {}
        with pytest.raises(MCPError, match="no profile named 'one'"):
            await client.list_tools()
        with pytest.raises(MCPError, match="no profile named 'one'"):
            await client.call_tool("a__echo", {"text": "hi"})


SEARCH = parse_profile("find", {"servers": ["a"], "discovery": "search"}, "x.lua:3")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_search_profile_lists_three_tools_that_find_and_call_the_rest(
    mode: Any, shared: tuple[Gateway, Manager, Recorder]
) -> None:
    gateway, manager, rec = shared
    manager.profiles = {"find": SEARCH}
    async with Client(f"{gateway.url}/find", mode=mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["search_tools", "describe_tool", "call_tool"]

        found = await client.call_tool(
            "search_tools", {"query": "echo some text back", "limit": 3}
        )
        assert not found.is_error and "a__echo" in _text(found)
        assert "b__" not in _text(found)  # only the profile's view is searched

        described = await client.call_tool("describe_tool", {"name": "a__echo"})
        definition = json.loads(_text(described))
        assert definition["name"] == "a__echo" and "inputSchema" in definition

        calls = len(rec.of("call_finished", "a"))
        called = await client.call_tool(
            "call_tool", {"name": "a__echo", "arguments": {"text": "hi"}}
        )
        assert not called.is_error and "hi" in _text(called)
        assert len(rec.of("call_finished", "a")) == calls + 1  # a real call

        outside = await client.call_tool(
            "call_tool", {"name": "b__echo", "arguments": {"text": "hi"}}
        )
        assert outside.is_error and "b__echo" in _text(outside)
        blank = await client.call_tool("search_tools", {"query": "  "})
        assert blank.is_error
        # Nothing shares a word: the closest tools still come back.
        odd = await client.call_tool("search_tools", {"query": "zyxxyz ekko"})
        assert not odd.is_error and "a__echo (a" in _text(odd)
        assert _text(odd).startswith("No tool shares a word")
        # The server's own name, where only one server in view has it.
        own = await client.call_tool(
            "call_tool", {"name": "echo", "arguments": {"text": "own"}}
        )
        assert not own.is_error and "own" in _text(own)


def test_the_gateway_knows_the_discovery_tools_by_name() -> None:
    from manager.gateway.discovery import DISCOVERY_TOOLS
    from manager.gateway.tools import _DISCOVERY_TOOLS

    assert {t.name for t in DISCOVERY_TOOLS} == _DISCOVERY_TOOLS


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_log_messages_of_a_server_outside_a_profile_stay_outside(
    shared: tuple[Gateway, Manager, Recorder],
) -> None:
    gateway, manager, _ = shared
    manager.profiles = {"one": ONE}
    heard: dict[str, list[str]] = {"one": [], "all": []}
    got_a = {"one": anyio.Event(), "all": anyio.Event()}

    def client(url: str, where: str) -> Client:
        async def on_log(params: Any) -> None:
            heard[where].append(str(params.logger))
            if params.logger == "a/x":
                got_a[where].set()

        return Client(url, mode="legacy", logging_callback=on_log)

    async with (
        client(f"{gateway.url}/one", "one") as viewer,
        client(str(gateway.url), "all") as everyone,
    ):
        with warnings.catch_warnings():  # logging: deprecated in 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await viewer.session.set_logging_level("debug")
            await everyone.session.set_logging_level("debug")
        await gateway.features.log_message("b", "info", "x", "from b")
        await gateway.features.log_message("a", "info", "x", "from a")
        with anyio.fail_after(10):  # in order on each session's stream
            await got_a["one"].wait()
            await got_a["all"].wait()
    assert heard["all"] == ["b/x", "a/x"]
    assert heard["one"] == ["a/x"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_profile_advertises_what_its_own_servers_offer(
    mode: Any, shared: tuple[Gateway, Manager, Recorder]
) -> None:
    gateway, manager, _ = shared
    manager.profiles = {"raw": parse_profile("raw", {"servers": ["r"]})}
    async with Client(f"{gateway.url}/raw", mode=mode) as client:
        caps = client.server_capabilities
        assert caps.tools is not None
        assert caps.prompts is None and caps.resources is None
        assert {t.name for t in (await client.list_tools()).tools} >= {"r__echo"}
    async with Client(str(gateway.url), mode=mode) as everything:
        assert everything.server_capabilities.prompts is not None


async def test_a_search_profile_waits_for_servers_on_their_first_connect() -> None:
    """Right after the daemon started, `call_tool` said "No tool is named
    'demo__pid'" and `search_tools` found nothing, while a direct call waited
    for the server and succeeded (found by an audit)."""
    from servers import raw_command
    from support.gateway import running_gateway

    from manager.core.spec import parse_spec

    command, args = raw_command("--slow-start", "1")
    slow = parse_spec("slow", {"command": command, "args": args})
    find = parse_profile("find", {"servers": ["slow"], "discovery": "search"})
    async with running_gateway([slow]) as (gateway, manager, _):
        manager.profiles = {"find": find}
        async with Client(f"{gateway.url}/find", mode="legacy") as client:
            called = await client.call_tool(
                "call_tool", {"name": "slow__echo", "arguments": {"text": "hi"}}
            )
            assert not called.is_error and "hi" in _text(called), _text(called)
            found = await client.call_tool("search_tools", {"query": "echo text"})
            assert "slow__echo" in _text(found)
        manager.reconcile([])


async def test_editing_a_profile_tells_its_clients_their_lists_changed() -> None:
    """A reload that changed a profile's servers, or removed it, changed
    what its clients see but sent them no list_changed (found by an audit):
    only a change of the whole table did."""
    from mcp import types
    from support.gateway import session, wait_until

    from manager.core.events import ConfigLoaded

    async with running_gateway(
        [demo_memory("a"), demo_memory("b")],
        wait_for=["a", "b"],
        memory=MemoryServers(),
    ) as (gateway, manager, _):
        manager.profiles = {"coding": parse_profile("coding", {"servers": ["a", "b"]})}
        notes: list[object] = []

        def told() -> int:
            return sum(isinstance(n, types.ToolListChangedNotification) for n in notes)

        async with session(f"{gateway.url}/coding", notes=notes) as client:
            assert len((await client.list_tools()).tools) > 0
            before = told()
            manager.profiles = {"coding": parse_profile("coding", {"servers": ["a"]})}
            manager.bus.publish(ConfigLoaded(name="", file="startup.lua"))
            await wait_until(lambda: told() > before)
            names = {t.name for t in (await client.list_tools()).tools}
            assert names and all(name.startswith("a__") for name in names)
