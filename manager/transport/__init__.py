"""Talk to upstream MCP servers: the only door to the `mcp` client SDK.

- `base`: the seam (`Transport`, `Upstream`, `Hooks` and the data they carry);
  no `mcp` import. `connection.py` and the test fakes know only this.
- `connect`: `McpTransport`, the real transport (stdio, streamable HTTP, SSE).
- `session`: an initialized session: handshake, calls, pings, loss signals.
- `eras`: which protocol era each upstream speaks, learned once, remembered;
  `side`: a handshake-era session beside a 2026-07-28 one, so that a
  handshake-era client meets a server of both eras in its own era.
- `lists`: what on-demand servers listed, kept between their sessions.
- `state_files`: the state directory, and its private JSON files' one writer.
- `relay`: the lean `tools/call` relay of a handshake-era session (one JSON
  line to a process); `http_relay`: the same as one POST to an HTTP server.
- `requests`: what an upstream asks of us (sampling, elicitation, roots, logs).
- `stdio`, `http`: the two ways bytes reach a server; `children`: the process
  groups of running stdio servers and the guardian that outlives us;
  `http_pool`: HTTP/1.1 under the HTTP client (keep-alive, httptools);
  `waits`: a future awaited with a time limit (the hot paths' waits).
- `ops`: requests besides `tools/call`, for callers without the SDK's types.
- `signals`: how a session's end is noticed.
- `errors`: where SDK, HTTP and OS errors become ours, as sentences
  (`request_error` for a request on a live session, `map_failure` for a try).
- `probe`: the cheap TCP pre-check; `liveness`: the idle TCP sentinel.
- `starts`: bounded, paced stdio starts (fleets converge).
- `tasks`: the tasks extension's task result, claimed for `tools/call`.
- `auth`, `login`, `tokens`: the OAuth client, the login desk, stored tokens;
  `device`: the device authorization grant (RFC 8628), which the SDK lacks.
- `compat_mcp`, `compat_anyio`: the only places that use those libraries'
  private names, each saying why and what public API would replace it.

This file imports nothing, so `import manager.transport.base` stays light.
"""
