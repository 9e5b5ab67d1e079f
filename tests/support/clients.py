"""A downstream client that records what it hears and answers what it is
asked (`Client`), and its session over streamable HTTP (`downstream`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def initialize(name: str, request_id: int = 1) -> dict[str, Any]:
    """A handshake-era `initialize` request of a client named `name`, as a
    client written by hand sends it (a raw HTTP or stdio peer)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        },
    }


class Client:
    """What a downstream client received and how it answers requests."""

    def __init__(self) -> None:
        self.notes: list[object] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.asked: list[str] = []

    async def on_message(self, message: object) -> None:
        self.notes.append(message)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    async def on_sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="a sampled reply"),
            model="test-model",
        )


@asynccontextmanager
async def downstream(
    url: str, client: Client, *, askable: bool = True
) -> AsyncIterator[ClientSession]:
    """A session of `client`'s; `askable=False`: one that declares neither
    elicitation nor sampling (the server cannot ask it anything)."""
    asks: dict[str, Any] = (
        {
            "elicitation_callback": client.on_elicit,
            "sampling_callback": client.on_sample,
        }
        if askable
        else {}
    )
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            message_handler=client.on_message,
            logging_callback=client.on_log,
            **asks,
        ) as session,
    ):
        await session.initialize()
        yield session
