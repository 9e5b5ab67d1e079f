"""The aggregated MCP endpoint: one MCP server in front of every upstream.

- `server`: `Gateway`, the MCP server in front of every upstream (tool table,
  list_changed, sessions) and `UnionServer`, the capabilities it advertises;
  `tools`: its `tools/list` and `tools/call`. The server class and the
  downstream sessions it shares with the demo server are `mcpserver.peers`.
- `routing`: `Features`, which routes prompts, resources, completion and
  logging through it; `catalog`: who owns a URI; `listing`: what each
  connection offers, by the names the endpoint exposes; `apps`: MCP Apps
  carried (views' `ui://` URIs, app-only tools, a view's own-name calls).
- `requests`: what upstreams ask and tell mid-request, routed to the right
  downstream request; `rounds`: input rounds for 2026-07-28 clients;
  `sessions`: one record per downstream session, kept by one middleware.
- `tasks`: `tasks/get`, `tasks/update`, `tasks/cancel` routed to the task's
  owner (ids named `SERVER/taskId`).
- `freshness`: the lists' `ttlMs`/`cacheScope`, from the servers' own.
- `views`: which profile a request sees (`PROFILE`) and what it shows.
- `errors`: ours as what a client gets (the one translation).
- `attached`: the endpoint on a Unix socket, one session per `mcp-manager
  attach` (editors' stdio servers that are the running daemon).
- `stdio`: the endpoint's own stdin/stdout (`mcp-manager stdio`), on the loop,
  and `fd_streams` under it and `attached`: requests in flight answered when
  the daemon stops, acknowledged for `attach`;
  `early`, `replay`: its `initialize` answered before the SDK loads.
- `names`: exposed tool names (`{server}__{tool}`), valid, unique and stable.
- `discovery`: `search_tools`, `describe_tool`, `call_tool` in place of every
  tool (`discovery = "search"`), and the BM25 `ToolIndex` they search.
- `semantic`: the optional sentence-embedding model (BERT or MPNet in
  numpy) whose ranking `ToolIndex` fuses with the words'.
- `options`: `--listen` and its token and allow flags, checked up front; how
  long an idle HTTP session lives.
- `http`: streamable HTTP under uvicorn, serving anything `Served` (the
  `Gateway`) without importing `server`; `guard`: Host/Origin/token checks;
  `stopping`: what is in flight when the daemon stops, answered in words;
  `exchange`: its hot path, a plain request answered in its own task (JSON, or
  SSE from its first notification); `resumable`: the events kept so that a
  client can resume a broken SSE stream; `compat_mcp_server`: the door to the
  SDK server side's private names.

Nothing is imported here until it is asked for (PEP 562): `stdio` answers
`initialize` through `early` before the SDK loads, and uvicorn loads only with
`--listen`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .names import (
        SEPARATOR,
        UPSTREAM_META_KEY,
        ToolRoute,
        ToolTable,
        build_tool_table,
    )
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

_HOMES = {
    "LIST_CHANGED_DEBOUNCE": "server",
    "Gateway": "server",
    "SEPARATOR": "names",
    "UPSTREAM_META_KEY": "names",
    "ToolRoute": "names",
    "ToolTable": "names",
    "build_tool_table": "names",
    "TOKEN_ENV": "options",
    "EndpointError": "options",
    "EndpointOptions": "options",
    "endpoint_options": "options",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
