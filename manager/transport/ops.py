"""Requests besides tools/call, for callers that do not speak the SDK's types
(Lua's `mcp_read`/`mcp_prompt`, the CLI's `read` and `prompt`).

Each function returns a `send(upstream, limit)` for `Manager.request`, whose
result is the JSON-ready result dict (camelCase keys, as on the wire).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as types

from .base import Upstream

__all__ = ["OPS", "get_prompt", "read_resource"]

Send = Callable[[Upstream, float], Awaitable[dict[str, object]]]


def _dumped(result: Any) -> dict[str, object]:
    """What the server sent, in wire form (not the defaults of fields it did
    not send, such as a later protocol revision's cache hints)."""
    data: dict[str, object] = result.model_dump(
        by_alias=True, mode="json", exclude_none=True, exclude_unset=True
    )
    return data


def read_resource(uri: str) -> Send:
    """`resources/read` of `uri`."""
    request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))

    async def send(upstream: Upstream, limit: float) -> dict[str, object]:
        return _dumped(await upstream.send(request, types.ReadResourceResult, limit))

    return send


def get_prompt(name: str, arguments: Mapping[str, object] | None = None) -> Send:
    """`prompts/get` of `name`; argument values are sent as strings (MCP says so)."""
    args = (
        None
        if arguments is None
        else {str(k): v if isinstance(v, str) else str(v) for k, v in arguments.items()}
    )
    request = types.GetPromptRequest(
        params=types.GetPromptRequestParams(name=name, arguments=args)
    )

    async def send(upstream: Upstream, limit: float) -> dict[str, object]:
        return _dumped(await upstream.send(request, types.GetPromptResult, limit))

    return send


OPS: dict[str, tuple[str, Callable[..., Send]]] = {
    "read": ("resources/read", lambda target, args: read_resource(target)),
    "prompt": ("prompts/get", get_prompt),
}
"""Operation name -> (MCP method, `make(target, args) -> send`)."""
