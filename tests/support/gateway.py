"""A gateway in the test's own event loop in front of real upstreams, and
the SDK client sessions that talk to it (`running_gateway`, `session`).

Where the upstream's transport is not what a test is about, its upstreams run
in memory (`demo_memory` specs and `running_gateway(..., memory=...)`): the
real demo server and our real client session over the SDK's memory streams,
no process (`tests/memory.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import httpx2
import mcp.types as types
from fakes import Recorder
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from memory import MemoryServers, memory_spec
from servers import (
    raw_command,
    stdio_command,
)

from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.gateway import (
    EndpointOptions,
    Gateway,
)
from manager.transport.connect import McpTransport

FAST = {"backoff": {"initial": 0.05, "cap": 0.4}}


LOCAL = EndpointOptions(host="127.0.0.1", port=0)


def raw(name: str, **opts: object) -> ConnectionSpec:
    command, args = raw_command()
    return parse_spec(name, {"command": command, "args": args}, {**FAST, **opts})


def demo_stdio(name: str, **opts: object) -> ConnectionSpec:
    command, args = stdio_command()
    return parse_spec(name, {"command": command, "args": args}, {**FAST, **opts})


def demo_memory(name: str, **opts: object) -> ConnectionSpec:
    """The demo server in memory (`running_gateway(..., memory=...)`)."""
    return memory_spec(name, **{**FAST, **opts})


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def running_gateway(
    specs: Sequence[ConnectionSpec],
    endpoint: EndpointOptions = LOCAL,
    *,
    wait_for: Sequence[str] = (),
    memory: MemoryServers | None = None,
) -> AsyncIterator[tuple[Gateway, Manager, Recorder]]:
    """A manager with `specs` behind a gateway serving HTTP on an ephemeral
    port; with `memory`, every upstream is one of its in-memory demo servers."""
    bus = EventBus()
    rec = Recorder(bus)
    transport = None if memory is None else McpTransport(open_streams=memory.open)
    async with Manager(bus, transport) as manager:
        gateway = Gateway(manager, bus)
        async with anyio.create_task_group() as tg:
            await tg.start(partial(gateway.serve, endpoint))
            manager.reconcile(specs)
            for name in wait_for:
                await rec.wait_for("connected", name)
            await wait_until(
                lambda: (
                    {r.server for r in gateway.table.routes.values()} >= set(wait_for)
                )
            )
            try:
                yield gateway, manager, rec
            finally:
                await gateway.aclose()


@asynccontextmanager
async def session(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    notes: list[object] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session over streamable HTTP."""

    async def on_message(message: object) -> None:
        if notes is not None:
            notes.append(message)

    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(30, read=300)
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on_message) as client,
    ):
        await client.initialize()
        yield client


async def wait_until(predicate: Any, within: float = 10.0) -> None:
    """Wait for a downstream-visible fact (a notification arrived)."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - the SDK handler has no event
            await anyio.sleep(0.01)
