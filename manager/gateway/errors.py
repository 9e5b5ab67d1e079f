"""Ours, as what a client of the endpoint gets: the one translation.

* An upstream's own JSON-RPC error (`UpstreamError`) reaches the client with
  the code, message and data the server sent, as if it stood there alone.
* Anything else that kept a request from being served (the server is down
  beyond `hold`, the call timed out, the server is unknown) is our sentence:
  an `isError` tool result for `tools/call` (the model reads it; `tools.py`
  adds the server's status in `_meta`), `-32600` invalid request for every
  other method, the sentence naming the server and what to do.
"""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from ..core.errors import CallError, UpstreamError

__all__ = ["client_error"]


def client_error(exc: CallError) -> MCPError:
    """The MCP error a client gets for `exc`."""
    if isinstance(exc, UpstreamError):
        return MCPError(exc.code, exc.reply, exc.data)
    return MCPError(INVALID_REQUEST, str(exc))
