"""`ConnectionStatus`: one connection's status, one typed form from end to end.

The manager makes it; the control socket sends `to_dict()` and the far end
reads it back with `from_dict()` (forgivingly: `wire.Wire`); Lua's
`mcp_status` gets the dict form. The fields are the `mcp_status` table of the
README plus what the HUD and `status` show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .wire import Wire, write_fields

__all__ = ["MODERN_ERA", "ConnectionStatus", "protocol_era"]


@dataclass(frozen=True, slots=True)
class ConnectionStatus(Wire):
    """What a connection is doing right now.

    Attributes:
        name: Connection name.
        transport: `stdio`, `http` or `sse`.
        endpoint: The endpoint as shown (secrets masked).
        state: `connecting`, `connected`, `reconnecting`, `disabled`, ...
        attempt: Tries since the connection was last stable.
        tools: Tool count of the current (or last) session.
        error: The last error, "" or None when there is none.
        next_retry_in: Seconds until the next try while waiting, else None.
        since: Wall time of the last state change.
        pid: The stdio server's process id while it runs.
        exit_code: The stdio server's last exit code.
        enabled: False when declared with `enabled = false`.
        stderr: The last lines the server wrote to stderr (at most 10).
        prompts: Prompt count of the current (or last) session.
        resources: Resources and resource templates of it.
        hidden: Tools, prompts and resources its filters hide from the
            endpoint, or pinning holds back.
        auth: `none`, `oauth` (the connection has or gets its tokens) or
            `needs_login` (it waits for `mcp-manager login NAME`) or `refused`
            (it stopped asking for logins; `login` or `reconnect` try again).
        auth_expires_in: Seconds until its stored access token expires, if known.
        protocol: The MCP revision of the current (or last) session ("" before
            the first); `era` says which era that is.
        beside: The session of the other era open beside it, for clients of
            that era (a dual-era server): its era, and its process if it has
            one (`2026-07-28, pid 4242`); "" when none.
        confinement: How a stdio server runs (`transport.stdio.process.confined_as`):
            `off`, `landlock`, `refused` or `UNCONFINED: WHY`; "" otherwise.
        launch: A registry launch's lock (`transport.stdio.locks`): `PACKAGE
            VERSION locked`, with `; VERSION available` when a newer release
            waits for `mcp-manager update`, or `not locked: WHY`; "" when
            its command fetches nothing (or names one version itself).
        changed: The tools, prompts and templates whose definitions differ
            from their pins (changed, new or suspicious), not approved yet
            (`mcp-manager tools --changed`, `approve`).
        held: Those of `changed` that pinning holds back (`pin = "strict"`).
    """

    name: str
    transport: str = ""
    endpoint: str = ""
    state: str = "connecting"
    attempt: int = 0
    tools: int = 0
    error: str | None = None
    next_retry_in: float | None = None
    since: float = 0.0
    pid: int | None = None
    exit_code: int | None = None
    enabled: bool = True
    stderr: tuple[str, ...] = field(default=())
    prompts: int = 0
    resources: int = 0
    hidden: int = 0
    auth: str = "none"
    auth_expires_in: float | None = None
    protocol: str = ""
    beside: str = ""
    confinement: str = ""
    launch: str = ""
    changed: tuple[str, ...] = field(default=())
    held: tuple[str, ...] = field(default=())

    @property
    def era(self) -> str:
        """`2026-07-28` (stateless), `handshake` (initialize, sessions), or ""."""
        return protocol_era(self.protocol)

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready form (the control socket's and Lua's): every field,
        then `era`."""
        return write_fields(self) | {"era": self.era}


MODERN_ERA = "2026-07-28"
"""The first revision of the stateless era (no handshake, `_meta` per request)."""


def protocol_era(protocol: str) -> str:
    """The era of an MCP revision: `2026-07-28` for that one and later (dates
    compare as strings), `handshake` for the older ones, "" when unknown."""
    if not protocol:
        return ""
    return MODERN_ERA if protocol >= MODERN_ERA else "handshake"
