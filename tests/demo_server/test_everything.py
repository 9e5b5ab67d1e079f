"""Smoke tests: the official reference server, driven by the SDK client.

`@modelcontextprotocol/server-everything` (pinned in `tests/node`, see
`servers/everything.py` for what it offers) over stdio, legacy SSE and
streamable HTTP. The tests skip when node or the npm package is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
)
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp.types as types
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from servers.everything import (
    EverythingServer,
    live_everything_pids,
    require_everything,
)

Transport = Literal["stdio", "sse", "http"]

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaked_children")]

SERVER_NAME = "mcp-servers/everything"
ALWAYS_TOOLS = {
    "echo",
    "get-sum",
    "get-structured-content",
    "trigger-long-running-operation",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
}
GATED_TOOLS = {"trigger-sampling-request", "trigger-elicitation-request"}
"""Registered only for clients that advertise sampling / elicitation."""
PROMPTS = {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
TEMPLATES = {
    "demo://resource/dynamic/text/{resourceId}",
    "demo://resource/dynamic/blob/{resourceId}",
}
STATIC_RESOURCE = "demo://resource/static/document/features.md"
DEADLINE = 10.0


async def _sampling(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled"),
        model="test",
    )


async def _elicitation(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


@asynccontextmanager
async def _session(
    transport: Transport, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ClientSession]:
    """An uninitialized session to the fixture's server, with sampling/elicitation."""
    client: AbstractAsyncContextManager[Any]
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            command, args = request.getfixturevalue("everything_stdio")
            params = StdioServerParameters(command=command, args=args)
            errlog = stack.enter_context((tmp_path / "stderr.log").open("w"))
            client = stdio_client(params, errlog=errlog)
        elif transport == "sse":
            client = sse_client(request.getfixturevalue("everything_sse"))
        else:
            client = streamable_http_client(request.getfixturevalue("everything_http"))
        read, write = await stack.enter_async_context(client)
        yield await stack.enter_async_context(
            ClientSession(
                read,
                write,
                read_timeout_seconds=DEADLINE,
                sampling_callback=_sampling,
                elicitation_callback=_elicitation,
            )
        )


@pytest.mark.parametrize("transport", ["stdio", "sse", "http"])
async def test_everything_lists_its_features(
    transport: Transport, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with anyio.fail_after(DEADLINE):
        async with _session(transport, request, tmp_path) as session:
            init = await session.initialize()
            assert init.server_info.name == SERVER_NAME
            assert init.capabilities.completions is not None

            tools = await session.list_tools()
            assert tools.next_cursor is None
            names = {tool.name for tool in tools.tools}
            assert ALWAYS_TOOLS | GATED_TOOLS <= names
            assert "get-roots-list" not in names  # no list_roots_callback

            prompts = await session.list_prompts()
            assert PROMPTS <= {prompt.name for prompt in prompts.prompts}

            resources = await session.list_resources()
            assert STATIC_RESOURCE in {str(r.uri) for r in resources.resources}

            templates = await session.list_resource_templates()
            uris = {t.uri_template for t in templates.resource_templates}
            assert TEMPLATES <= uris

            result = await session.call_tool("echo", {"message": "hi"})
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            assert block.text == "Echo: hi"


@pytest.mark.parametrize("transport", ["sse", "http"])
def test_everything_listens_on_loopback_only_and_is_reaped(
    transport: Literal["sse", "http"], tmp_path: Path
) -> None:
    require_everything()
    with EverythingServer(transport, log_path=tmp_path / "server.log") as server:
        pid = server.pid
        assert pid in live_everything_pids()
        listening = [
            conn.laddr
            for conn in psutil.Process(pid).net_connections(kind="inet")
            if conn.status == psutil.CONN_LISTEN
        ]
        assert [(addr.ip, addr.port) for addr in listening] == [
            ("127.0.0.1", server.port)
        ]
    assert not server.running
    assert pid not in live_everything_pids()
    assert not psutil.pid_exists(pid)
