"""Talk to upstream MCP servers: the only door to the `mcp` client SDK.

- `base`: the seam (`Transport`, `Upstream`, `Hooks` and the data they carry);
  no `mcp` import. `connection.py` and the test fakes know only this.
- `connect`: `McpTransport`, the real transport (stdio, streamable HTTP, SSE).
- `session`: an initialized session: handshake, calls, pings, loss signals.
- `stdio`, `http`: the two ways bytes reach a server.
- `errors`: where SDK, HTTP and OS errors become ours, as sentences.
- `probe`: the cheap TCP pre-check; `liveness`: the idle TCP sentinel.
- `starts`: bounded, paced stdio starts (fleets converge).

This file imports nothing, so `import manager.transport.base` stays light.
"""
