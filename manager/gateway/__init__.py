"""The aggregated MCP endpoint: the only package that imports the SDK's server side.

- `server`: `Gateway`, the MCP server in front of every upstream (tools, calls,
  list_changed, sessions).
- `names`: exposed tool names (`{server}__{tool}`), valid, unique and stable.
- `options`: `--listen` and its token and allow flags, checked up front.
- `http`: streamable HTTP under uvicorn; `guard`: Host/Origin/token checks.

uvicorn loads only with `--listen` (`http` is not imported here).
"""

from __future__ import annotations

from .names import SEPARATOR, UPSTREAM_META_KEY, ToolRoute, ToolTable, build_tool_table
from .options import TOKEN_ENV, EndpointError, EndpointOptions, endpoint_options
from .server import LIST_CHANGED_DEBOUNCE, Gateway

__all__ = [
    "LIST_CHANGED_DEBOUNCE",
    "SEPARATOR",
    "TOKEN_ENV",
    "UPSTREAM_META_KEY",
    "EndpointError",
    "EndpointOptions",
    "Gateway",
    "ToolRoute",
    "ToolTable",
    "build_tool_table",
    "endpoint_options",
]
