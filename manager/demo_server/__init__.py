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
- `add_prompt(name)` / `remove_prompt(name)`, `add_resource(uri, text)` /
  `remove_resource(uri)`: change the prompt or resource list and notify every
  client (`notifications/prompts/list_changed`, `.../resources/list_changed`,
  or the listen stream).
- `touch_resource(uri)`: sends `notifications/resources/updated` to the
  sessions subscribed to `uri` (and only them); returns how many, as text.
- `log(level, text)`: sends `notifications/message` to the caller if `level`
  is at or above the session's `logging/setLevel` (everything by default).
- `ask_user(message)`, `sample(prompt)`, `roots()`: send `elicitation/create`,
  `sampling/createMessage` or `roots/list` to the calling client, on the
  call's own stream, and return what came back (`accept: {"answer": ...}`,
  the reply's text, the root URIs as a JSON list); an `isError` result if the
  client did not declare the capability.

Prompts: `greet(name, style?)` ("Hello, {name}!"), `with_resource` (embeds
`demo://readme`), `with_image` (a 1x1 PNG). Resources: `demo://readme`
(text/plain), `demo://logo` (image/png), the template `demo://items/{id}`
(reads "item {id}"); an unknown URI is error -32002. Subscriptions,
completion (`greet`'s `name`, the template's `id`) and logging levels are
served too, and every feature is advertised on every transport.

Every list is paginated; the page size comes from `DEMO_PAGE_SIZE`
(default 100). Questions to the client name the call they serve; with
`DEMO_UNLINKED_QUESTIONS=1` they name none, as many servers send them (over
streamable HTTP: on the session's standalone stream).

Modules: `tools` (the tools and the server), `catalog` (prompts, resources,
completion, subscriptions), `client_requests` (elicitation, sampling, roots,
logging), `toolkit` (shared helpers), `transports` (stdio, HTTP, SSE),
`faults` (the failure modes: `--crash-after-handshake`, `--hang-on-initialize`,
`--garbage`, ...), `__main__` (the command line), `compat_starlette` (the
one private starlette name the SSE transport needs). The server class that
advertises `list_changed` and the sessions that get it come from
`manager.mcpserver.peers`, shared with the endpoint; the demo server imports
nothing else of the package (`tests/test_layering.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .faults import Faults
    from .toolkit import SERVER_NAME
    from .tools import BUILTIN_TOOLS, DemoServer
    from .transports import run

__all__ = ["BUILTIN_TOOLS", "SERVER_NAME", "DemoServer", "Faults", "run"]

_HOMES = {
    "BUILTIN_TOOLS": "tools",
    "DemoServer": "tools",
    "Faults": "faults",
    "SERVER_NAME": "toolkit",
    "run": "transports",
}


def __getattr__(name: str) -> object:
    # PEP 562: nothing (the SDK above all) is imported until it is asked for,
    # so `--exit-immediately` and `--garbage` start in a few milliseconds.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
