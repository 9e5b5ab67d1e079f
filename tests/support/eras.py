"""Comparing answers straight and through the daemon across eras: `wire`
(a result minus who answered) and the canned answers a client gives.
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
"""Who answered (stamped on every 2026-07-28 result): differs by design."""


def wire(result: Any) -> dict[str, Any]:
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


async def answer_elicitation(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "blue"})


async def answer_sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="hello from the model"),
        model="test-model",
    )
