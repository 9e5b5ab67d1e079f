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
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.client import ConnectMode
from mcp.shared.exceptions import MCPError
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


async def _exercise(client: Client, heard: list[object]) -> dict[str, Any]:
    """What a client sees of the demo server, one entry per request; `heard`
    fills with the log messages the client gets."""
    seen: dict[str, Any] = {"protocol": client.protocol_version}
    # What a call says before its result must be there when the result is.
    seen["log"] = _wire(await client.call_tool("log", {"level": "info", "text": "x"}))
    seen["heard with the log result"] = list(heard)
    reports: list[object] = []

    async def on_progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        reports.append((progress, total, message))

    seen["sleep"] = _wire(
        await client.call_tool("sleep", {"seconds": 0}, progress_callback=on_progress)
    )
    seen["progress with the sleep result"] = list(reports)
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
    try:
        await client.call_tool(
            "error", {"code": -32042, "message": "nope", "data": '{"why": [0, {}]}'}
        )
    except MCPError as exc:
        seen["upstream error"] = (exc.code, exc.message, exc.data)
    seen["prompt"] = _wire(await client.get_prompt("greet", {"name": "Ada"}))
    seen["resource"] = _wire(await client.read_resource("demo://readme"))
    seen["template"] = _wire(await client.read_resource("demo://items/7"))
    listed = await client.list_tools()
    seen["tools"] = sorted(t.name for t in listed.tools)
    return seen


def _client(
    target: str | StdioServerParameters, mode: ConnectMode, heard: list[object]
) -> Client:
    """An SDK client that opts in to log messages (2026-07-28 asks per request;
    the handshake era gets what the server sends) and keeps what it hears."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params.model_dump(mode="json", exclude_none=True))

    return Client(target, mode=mode, log_level="debug", logging_callback=on_log)


def _heard_something(seen: dict[str, Any]) -> None:
    """The comparison means something: the server did say things mid-call."""
    assert seen["heard with the log result"], seen["log"]
    assert len(seen["progress with the sleep result"]) == 2
    assert seen["upstream error"] == (-32042, "nope", {"why": [0, {}]})


@asynccontextmanager
async def _straight(mode: ConnectMode, heard: list[object]) -> AsyncIterator[Client]:
    command, args = stdio_command()
    params = StdioServerParameters(command=command, args=args)
    async with _client(params, mode, heard) as client:
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
    heard: list[object] = []
    async with _straight(mode, heard) as client:
        straight = await _exercise(client, heard)
    heard = []
    async with (
        running_gateway([demo_stdio("demo", prefix="")], wait_for=["demo"]) as (
            gateway,
            manager,
            _,
        ),
        _client(str(gateway.url), mode, heard) as client,
    ):
        through = await _exercise(client, heard)
        status = manager.status("demo")
        assert status is not None and status.protocol == "2025-11-25"
        assert status.to_dict()["era"] == "handshake"  # the daemon's own session
    expected = "2026-07-28" if mode == "auto" else "2025-11-25"
    assert straight["protocol"] == through["protocol"] == expected
    _heard_something(straight)
    assert through == straight


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_eras_get_through_the_stdio_front_what_they_get_straight(
    mode: ConnectMode, tmp_path: Path
) -> None:
    heard: list[object] = []
    async with _straight(mode, heard) as client:
        straight = await _exercise(client, heard)
    heard = []
    with anyio.fail_after(30):
        async with _client(_stdio_front(tmp_path), mode, heard) as client:
            through = await _exercise(client, heard)
    _heard_something(straight)
    assert through == straight
