"""Both protocol eras through the endpoint, seen by the SDK's own clients.

The SDK's default `Client` negotiates 2026-07-28 (`server/discover`, `_meta`
per request, `resultType` on every result); `Client(mode="legacy")` is the
handshake era. Each test asks the same of the demo server straight and through
the daemon (prefix "", so names are the server's own) and compares what comes
back, field by field: the daemon must be invisible in both eras, on the HTTP
front and on `mcp-manager stdio`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.client import ConnectMode
from servers import stdio_command
from test_gateway import demo_stdio, running_gateway

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
"""Who answered (stamped on every 2026-07-28 result): differs by design."""

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def _wire(result: Any) -> dict[str, Any]:
    """A result as the client's model holds it, minus who answered."""
    data: dict[str, Any] = result.model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    meta = data.get("_meta")
    if isinstance(meta, dict):
        meta.pop(SERVER_INFO_KEY, None)
        if not meta:
            data.pop("_meta")
    return data


async def _exercise(client: Client) -> dict[str, Any]:
    """What a client sees of the demo server, one entry per request."""
    seen: dict[str, Any] = {"protocol": client.protocol_version}
    seen["echo"] = _wire(await client.call_tool("echo", {"text": "hi"}))
    seen["add"] = _wire(await client.call_tool("add", {"a": 2, "b": 0.5}))
    seen["fail"] = _wire(await client.call_tool("fail", {"message": "boom"}))
    seen["empty arguments"] = _wire(await client.call_tool("arguments", {}))
    seen["no arguments"] = _wire(await client.call_tool("arguments"))
    seen["falsy arguments"] = _wire(
        await client.call_tool(
            "arguments", {"o": {}, "l": [], "s": "", "z": 0, "f": False, "n": None}
        )
    )
    seen["prompt"] = _wire(await client.get_prompt("greet", {"name": "Ada"}))
    seen["resource"] = _wire(await client.read_resource("demo://readme"))
    seen["template"] = _wire(await client.read_resource("demo://items/7"))
    listed = await client.list_tools()
    seen["tools"] = sorted(t.name for t in listed.tools)
    return seen


@asynccontextmanager
async def _straight(mode: ConnectMode) -> AsyncIterator[Client]:
    command, args = stdio_command()
    params = StdioServerParameters(command=command, args=args)
    async with Client(params, mode=mode) as client:
        yield client


def _stdio_front(tmp_path: Path) -> StdioServerParameters:
    command, args = stdio_command()
    script = tmp_path / "startup.lua"
    script.write_text(
        f"mcp_add('demo', {{command = {json.dumps(command)}, "
        f"args = {{{', '.join(json.dumps(a) for a in args)}}}}}, {{prefix = ''}})\n"
    )
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "manager", "stdio", str(script), "--no-telemetry"],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_eras_get_through_the_http_front_what_they_get_straight(
    mode: ConnectMode,
) -> None:
    async with _straight(mode) as client:
        straight = await _exercise(client)
    async with (
        running_gateway([demo_stdio("demo", prefix="")], wait_for=["demo"]) as (
            gateway,
            _,
            _,
        ),
        Client(str(gateway.url), mode=mode) as client,
    ):
        through = await _exercise(client)
    expected = "2026-07-28" if mode == "auto" else "2025-11-25"
    assert straight["protocol"] == through["protocol"] == expected
    assert through == straight


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_eras_get_through_the_stdio_front_what_they_get_straight(
    mode: ConnectMode, tmp_path: Path
) -> None:
    async with _straight(mode) as client:
        straight = await _exercise(client)
    with anyio.fail_after(30):
        async with Client(_stdio_front(tmp_path), mode=mode) as client:
            through = await _exercise(client)
    assert through == straight
