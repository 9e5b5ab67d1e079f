"""The bundled demo MCP server: a small, honest upstream to point mcp-manager at.

Run it with `python -m manager.demo_server [--transport stdio|http|sse]
[--host 127.0.0.1] [--port 8000]`. It is built on the SDK's low-level `Server`
and serves stdio (the default), streamable HTTP at `/mcp`, or legacy SSE at
`/sse` (messages are POSTed to `/messages/`).

Tools:

- `echo(text)`: returns `text`.
- `add(a, b)`: returns the sum, as text and as structured content
  `{"sum": ...}` matching the tool's `outputSchema`.
- `sleep(seconds)`: sleeps, then says so. Useful for timeouts and cancellation.
  Reports progress (start and end) when the caller asks for it.
- `fail(message)`: returns a result with `isError: true`.
- `pid()`: the server's process id.
- `add_tool(name)` / `remove_tool(name)`: change the tool list at runtime and
  notify every connected client (`notifications/tools/list_changed`, or the
  `subscriptions/listen` stream for 2026-07-28 clients). An added tool echoes
  its arguments back as JSON.
- `meta()`: the request's `_meta` as JSON, e.g. to see the W3C `traceparent`.
- `crash(code)`: exits the process at once with `code`; no reply is sent.
- `spawn_child(seconds)`: starts a grandchild `sleep` and returns its pid.
- `stderr(text)`: writes `text` as one line to stderr.

`tools/list` is paginated; the page size comes from `DEMO_PAGE_SIZE`
(default 100).

Modules: `tools` (the tools and the server), `transports` (stdio, HTTP, SSE),
`faults` (the failure modes: `--crash-after-handshake`, `--hang-on-initialize`,
`--garbage`, ...), `__main__` (the command line).
"""

from __future__ import annotations

from .faults import Faults
from .tools import BUILTIN_TOOLS, SERVER_NAME, DemoServer
from .transports import run

__all__ = ["BUILTIN_TOOLS", "SERVER_NAME", "DemoServer", "Faults", "run"]
