"""MCP Apps (`io.modelcontextprotocol/ui`) through the endpoint, with real
Apps servers (`servers/apps.py`, on the SDK's `MCPServer`, in memory: the
upstream's transport is not the point here) and SDK clients of both eras, one
that hosts views (declares the extension) and one that does not."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from mcp import Client
from mcp.client.client import ConnectMode
from mcp.client.extension import advertise
from memory import MemoryServers, lowlevel
from servers import apps
from support.gateway import demo_memory, running_gateway

from manager.core.profile import parse_profile
from manager.core.spec import ConnectionSpec

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

UI = "io.modelcontextprotocol/ui"
VIEW = "ui://weather/view.html"
MODES: tuple[ConnectMode, ...] = ("legacy", "auto")


def _apps(name: str) -> ConnectionSpec:
    """An Apps server labelled `name`, served by `_memory()`."""
    return demo_memory(name)


def _memory(*labels: str) -> MemoryServers:
    """Upstreams in memory: an Apps server per label, the demo for the rest."""
    return MemoryServers(others={label: partial(_built, label) for label in labels})


def _built(label: str) -> Any:
    return lowlevel(apps.build(label))


def _host(url: str, mode: ConnectMode) -> Client:
    """A client that hosts views: it declares the extension."""
    mime = {"mimeTypes": ["text/html;profile=mcp-app"]}
    return Client(url, mode=mode, extensions=[advertise(UI, mime)])


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_views_keep_a_ui_uri_and_their_tools_follow_it() -> None:
    """Two servers list the same `ui://` view: the second one's is exposed
    as `ui://mcp-manager.b/...` (still `ui://`, which hosts render), reads
    back to that server, and its tools name that URI in `_meta.ui`; the
    endpoint says it offers the extension."""
    async with running_gateway(
        [_apps("a"), _apps("b")], wait_for=["a", "b"], memory=_memory("a", "b")
    ) as (
        gateway,
        _,
        _,
    ):
        for mode in MODES:
            async with _host(str(gateway.url), mode) as client:
                listed = {str(r.uri) for r in (await client.list_resources()).resources}
                assert {VIEW, "ui://mcp-manager.b/weather/view.html"} <= listed
                for uri, label in (
                    (VIEW, "a"),
                    ("ui://mcp-manager.b/weather/view.html", "b"),
                ):
                    read = await client.read_resource(uri)
                    assert f"weather from {label}" in read.contents[0].text  # type: ignore[union-attr]
                tools = {t.name: t for t in (await client.list_tools()).tools}
                a_meta = tools["a__show_weather"].meta or {}
                b_meta = tools["b__show_weather"].meta or {}
                assert a_meta["ui"]["resourceUri"] == VIEW
                assert (
                    b_meta["ui"]["resourceUri"]
                    == "ui://mcp-manager.b/weather/view.html"
                )
                if mode == "auto":
                    caps = client.server_capabilities
                    assert caps is not None and UI in (caps.extensions or {})


async def test_app_only_tools_are_for_hosts_and_a_view_calls_by_its_servers_names() -> (
    None
):
    """`refresh_weather` is for the view (`visibility: ["app"]`): a client
    that hosts views lists it, one that does not never does (its model
    would see it), and both can call it by its exposed name. A view calls
    by the server's own name: that reaches the one Apps server with such a
    tool for a host, and is unknown to any other client. A host's
    declaration of the extension reaches the server. Search (a profile with
    `discovery = "search"`) indexes what the model may call: never the
    view's own tools."""
    demo = demo_memory("demo")
    search = parse_profile("find", {"discovery": "search"}, "x.lua:1")
    async with running_gateway(
        [_apps("weather"), demo],
        wait_for=["weather", "demo"],
        memory=_memory("weather"),
    ) as (
        gateway,
        manager,
        _,
    ):
        url = str(gateway.url)
        for mode in MODES:
            async with _host(url, mode) as host, Client(url, mode=mode) as model:
                hosted = {t.name for t in (await host.list_tools()).tools}
                bare = {t.name for t in (await model.list_tools()).tools}
                assert "weather__refresh_weather" in hosted, mode
                assert "weather__refresh_weather" not in bare, mode
                assert "weather__show_weather" in bare and "demo__echo" in bare
                for client in (host, model):
                    called = await client.call_tool(
                        "weather__refresh_weather", {"city": "Oslo"}
                    )
                    assert _text(called) == "refreshed Oslo from weather"
                own = await host.call_tool("refresh_weather", {"city": "Rome"})
                assert _text(own) == "refreshed Rome from weather", mode
                with pytest.raises(Exception, match="unknown tool"):
                    await model.call_tool("refresh_weather", {"city": "Rome"})
                declared = await host.call_tool("weather__apps_declared", {})
                assert _text(declared) == "yes", mode
        manager.profiles = {"find": search}
        async with Client(f"{url}/find") as client:
            found = await client.call_tool(
                "search_tools", {"query": "refresh the weather view data", "limit": 8}
            )
        assert "weather__show_weather" in _text(found)
        assert "refresh_weather" not in _text(found)
