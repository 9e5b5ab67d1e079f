"""Talk to upstream MCP servers: the only door to the `mcp` client SDK.

- `base`: the seam (`Transport`, `Upstream`, `Hooks` and the data they carry);
  no `mcp` import. `connection.py` and the test fakes know only this.
- `connect`: `McpTransport`, the real transport (stdio, streamable HTTP, SSE).
- `handshake`: the era agreed and the lists read under one deadline;
  `session`: an initialized session: a client's requests on one route per
  era, pings, loss signals; `rounds`: a 2026-07-28 server's
  `input_required` answers, answered and the request sent again;
  `listening`: a 2026-07-28 session's changes, followed on
  `subscriptions/listen`.
- `eras`: which protocol era each upstream speaks: agreed (`agree`), learned
  once, remembered;
  `side`: a handshake-era session beside a 2026-07-28 one, so that a
  handshake-era client meets a server of both eras in its own era.
- `lists`: a server's lists read page by page; what on-demand servers listed,
  kept between their sessions.
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

The engine imports the seam (`base`), the OAuth facade (`oauth`) and
`mcp_transport` from here, nothing concrete. This file imports nothing at
run time, so `import manager.transport.base` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from ..core.redact import SecretRegistry
    from .base import Transport
    from .connect import ReadSecrets
    from .relay import SendSpan

__all__ = ["mcp_transport"]


def mcp_transport(
    *,
    state_dir: Path,
    secrets: SecretRegistry,
    send_span: SendSpan,
    read_secrets: ReadSecrets,
    start_slots: int | None = None,
    locks_read_only: bool = False,
) -> Transport:
    """The real transport (`connect.McpTransport`: stdio, streamable HTTP and
    legacy SSE), as the engine's `Manager` uses it by default.

    Args:
        state_dir: Where tokens, eras and launch locks are kept.
        secrets: Where resolved secrets are registered (masked everywhere).
        send_span: The span around a request the stdio relay sends itself.
        read_secrets: Reads the secret references a spec names.
        start_slots: Concurrent stdio starts (`stdio.starts`; CPU count if None).
        locks_read_only: Launch locks are read, never made (`pins check`).
    """
    from .connect import McpTransport
    from .stdio.starts import StartSlots

    return McpTransport(
        starts=StartSlots(start_slots),
        secrets=secrets,
        state_dir=state_dir,
        send_span=send_span,
        read_secrets=read_secrets,
        locks_read_only=locks_read_only,
    )
