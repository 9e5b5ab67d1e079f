"""Real MCP servers and server-like things for tests that need processes and sockets.

- `process`: the demo server as a stdio command or an HTTP/SSE child process,
  the hand-written legacy server's command, process-tree helpers.
- `preload`: a per-worker interpreter that has imported the SDK and forks the
  daemons and HTTP demo servers tests start (`popen`), instead of an exec
  that imports it all again.
- `raw_legacy`: a hand-written, fast-starting stdio server with failure flags
  (run as a script; see `process.raw_command`).
- `raw_http`: its streamable HTTP sibling, with a session, an event stream and
  the same tools and flags (run as a script; see `process.raw_http_program`,
  or `make_http_server(..., raw=True)`).
- `closing_http`: a raw-socket streamable HTTP server that closes every
  connection after its answer (or in the middle of it), in several variants.
- `blackhole`: a TCP listener that accepts and never answers.
- `line_client`: bare newline-delimited JSON-RPC to a stdio server process,
  for exit statuses, signals and raw stdout.
- `otlp` (import it from there): OTLP receivers, gRPC and HTTP/protobuf, that
  decode what a collector would get from the daemon.
- `chaos` (import it from there): the chaos campaign, the real daemon under
  random faults while SDK clients call through its endpoint
  (`chaos_clients`), checked afterwards (`chaos_report`); run by
  `tests/campaigns/test_chaos.py` and `bench/chaos.py`.

Fixtures built on these live in `tests/conftest.py`.
"""

from __future__ import annotations

from .blackhole import Blackhole
from .line_client import LineClient, open_line_client
from .process import (
    CLOSING_HTTP_SCRIPT,
    HttpServerFactory,
    HttpServerProcess,
    children_of,
    free_port,
    live_server_pids,
    lua_stdio,
    own_children,
    raw_command,
    raw_http_program,
    stdio_command,
)

__all__ = [
    "CLOSING_HTTP_SCRIPT",
    "Blackhole",
    "HttpServerFactory",
    "HttpServerProcess",
    "LineClient",
    "children_of",
    "free_port",
    "live_server_pids",
    "lua_stdio",
    "open_line_client",
    "own_children",
    "raw_command",
    "raw_http_program",
    "stdio_command",
]
