"""The in-memory transport seam: the demo server in this process, over memory streams.

`MemoryServers.open` is a `StreamOpener` for `McpTransport(open_streams=...)`:
each connect attempt runs a fresh `DemoServer` (the real SDK server and our real
client session, handshake and all) over the SDK's memory streams, with no
process and no socket. `kill(name)` ends a server as a crash would; names in
`down` refuse to start. Tests of the session, handshake, paging, list_changed,
hold and error paths use it instead of a subprocess each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.memory import create_client_server_memory_streams

from manager.core.errors import ConnectFailed
from manager.core.spec import ConnectionSpec, parse_spec
from manager.demo_server import DemoServer
from manager.transport.base import Hooks, LossReport, Streams
from manager.transport.signals import LostSignal

__all__ = ["MEMORY_REASON", "MemoryServers", "lowlevel", "memory_spec", "tools_only"]

MEMORY_REASON = "in-memory server stopped"


def memory_spec(name: str, **opts: object) -> ConnectionSpec:
    """A declaration the memory opener serves (stdio-shaped: no TCP probe)."""
    return parse_spec(name, {"command": "in-memory-demo"}, opts)


def lowlevel(server: MCPServer) -> Server[Any]:
    """The low-level server an `MCPServer` runs, to run it over memory streams
    (`MemoryServers(others=...)`). The SDK's own in-memory transport reads the
    same private attribute ("TODO: Make `lowlevel_server` public")."""
    return server._lowlevel_server


def tools_only() -> Server[Any]:
    """A server that offers tools and nothing else (`echo(text)`): no prompts,
    no resources, as a stdio server of the standard library would be."""
    echo = types.Tool(
        name="echo",
        description="Say the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    )

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[echo])

    async def call_tool(
        context: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("tools-only", on_list_tools=list_tools, on_call_tool=call_tool)


class MemoryServers:
    """Demo servers started per attempt, by connection name.

    Args:
        page_size: Tools per `tools/list` page of every server.
        others: Servers that are not the demo, by connection name: each
            attempt runs a new one from its maker.
    """

    def __init__(
        self,
        page_size: int = 100,
        others: Mapping[str, Callable[[], Server[Any]]] | None = None,
    ) -> None:
        self.page_size = page_size
        self.others = dict(others or {})
        self.servers: dict[str, DemoServer] = {}
        self.down: set[str] = set()
        self.starts: dict[str, int] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}

    def kill(self, name: str) -> None:
        """End `name`'s running server at once."""
        self._scopes[name].cancel()

    @asynccontextmanager
    async def open(
        self, spec: ConnectionSpec, hooks: Hooks, lost: LostSignal, deadline: float
    ) -> AsyncIterator[Streams]:
        if spec.name in self.down:
            raise ConnectFailed(f"{spec.name}: in-memory server refused to start")
        self.starts[spec.name] = self.starts.get(spec.name, 0) + 1
        make = self.others.get(spec.name)
        if make is not None:
            server = make()
        else:
            demo = DemoServer(page_size=self.page_size)
            self.servers[spec.name] = demo
            server = demo.server
        scope = anyio.CancelScope()
        self._scopes[spec.name] = scope
        async with (
            create_client_server_memory_streams() as (client, server_end),
            anyio.create_task_group() as tg,
        ):

            async def serve() -> None:
                with scope:
                    options = server.create_initialization_options()
                    await server.run(server_end[0], server_end[1], options)
                lost.set(LossReport(MEMORY_REASON, error_type="Disconnected"))
                await server_end[1].aclose()  # the client's read stream ends

            tg.start_soon(serve)
            try:
                yield Streams(client[0], client[1])
            finally:
                tg.cancel_scope.cancel()
