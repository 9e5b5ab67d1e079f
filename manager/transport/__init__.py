"""Talk to upstream MCP servers: the only door to the `mcp` client SDK.

- `base`: the seam (`Transport`, `Upstream`, `Hooks` and the data they carry);
  no `mcp` import. `connection.py` and the test fakes know only this.
- `connect`: `McpTransport`, the real transport (stdio, streamable HTTP, SSE).
- `session`: an initialized session: handshake, a client's requests on one
  route per era, pings, loss signals; `rounds`: a 2026-07-28 server's
  `input_required` answers, answered and the request sent again;
  `listening`: a 2026-07-28 session's changes, followed on
  `subscriptions/listen`.
- `eras`: which protocol era each upstream speaks: agreed (`agree`), learned
  once, remembered;
  `side`: a handshake-era session beside a 2026-07-28 one, so that a
  handshake-era client meets a server of both eras in its own era.
- `lists`: a server's lists read page by page; what on-demand servers listed,
  kept between their sessions.
- `state_files`: the state directory, and its private JSON files' one writer.
- `relay`: each transport's one sender of a client's requests (`StdioRelay`:
  one JSON line to a process; `DispatcherRelay`; `http/relay`: one POST).
- `requests`: what an upstream asks of us (sampling, elicitation, roots, logs).
- `stdio/` (`process`: spawn, stdout lines, stderr, stop; `children`: the
  process groups of running stdio servers and the guardian that outlives us;
  `starts`: bounded, paced starts) and `http/` (`streams`: streamable HTTP
  and SSE; `pool`: HTTP/1.1 under the HTTP client; `relay`: a request as one
  POST; `probe`: the TCP pre-check; `liveness`: the idle TCP sentinel): the
  two ways bytes reach a server, each a sub-room;
  `waits`: a future awaited with a time limit (the hot paths' waits).
- `ops`: requests besides `tools/call`, for callers without the SDK's types.
- `signals`: how a session's end is noticed.
- `errors`: where SDK, HTTP and OS errors become ours, as sentences
  (`request_error` for a request on a live session, `map_failure` for a try).
- `tasks`: the tasks extension's task result, claimed for `tools/call`.
- `oauth/` (`auth`, `login`, `tokens`: the OAuth client, the login desk,
  stored tokens; `device`: the device authorization grant (RFC 8628), which
  the SDK lacks): a sub-room.
- `compat_mcp`, `compat_anyio`: the only places that use those libraries'
  private names, each saying why and what public API would replace it.

This file imports nothing, so `import manager.transport.base` stays light.
"""
