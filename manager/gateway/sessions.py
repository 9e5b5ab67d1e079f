"""One record per downstream session: everything the endpoint keeps about it.

A handshake-era client has a session (an HTTP `Mcp-Session-Id`, an `attach`
connection, the stdio peer); a 2026-07-28 request has none and leaves no
record. `Sessions.track` (server middleware, the one tracker) makes a
`Downstream` record on a session's first request after `initialize` and
keeps it fresh; what the endpoint learns of the session later lands in the
same record (its log level and the profile whose logs it sees, the resources
it subscribed to, the HTTP hot path's pipeline and requests in flight), and
`Sessions.forget` (or the notification that finds it gone or idle) drops it
all at once, telling `on_forget` what to let go upstream.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner

from ..mcpserver.peers import Peer, Peers
from .rounds import can_be_asked

__all__ = ["Downstream", "Sessions"]


@dataclass(slots=True)
class Downstream(Peer):
    """Everything the endpoint keeps about one handshake-era session.

    Attributes:
        protocol_version: The revision it speaks.
        client_info: Its `clientInfo`, as JSON (None before `initialize` ends).
        capabilities: Its declared capabilities, as JSON (likewise).
        askable: It can be asked things mid-call (sampling, elicitation, roots).
        log_level: The level it set (`logging/setLevel`), if any.
        log_view: The profile whose servers' logs it sees (None: all).
        uris: The resources it subscribed to (exposed URIs).
        in_flight: Its requests the HTTP hot path serves, by id.
        questions: What those requests asked it and wait for, by question id
            (each settled with the client's answer).
        runner: The SDK's request pipeline for it (`pipeline`).
    """

    protocol_version: str = ""
    client_info: Any = None
    capabilities: Any = None
    askable: bool = False
    log_level: str | None = None
    log_view: str | None = None
    uris: set[str] = field(default_factory=set)
    in_flight: dict[Any, anyio.CancelScope] = field(default_factory=dict)
    questions: dict[str, Callable[[dict[str, Any]], None]] = field(default_factory=dict)
    runner: ServerRunner[Any] | None = None

    @property
    def ready(self) -> bool:
        """Its `initialize` is done: who it is and what it declared are known."""
        return self.client_info is not None

    def pipeline(
        self, server: Server[Any], lifespan: dict[str, Any]
    ) -> ServerRunner[Any]:
        """The session's runner: a connection born ready, with the session's
        version and client (made with its first request on the hot path)."""
        if self.runner is None:
            connection = Connection.from_envelope(
                self.protocol_version, self.client_info, self.capabilities
            )
            self.runner = ServerRunner(server, connection, lifespan)
        return self.runner

    def learn(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Take who the client is from `ctx`, once its `initialize` is done."""
        params = ctx.session.client_params
        if self.client_info is not None or params is None:
            return
        caps = params.capabilities
        self.protocol_version = ctx.protocol_version
        self.capabilities = caps.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        self.askable = can_be_asked(caps)
        self.client_info = params.client_info.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )


class Sessions(Peers):
    """The endpoint's downstream sessions, one `Downstream` record each.

    Args:
        idle_timeout: Seconds without a request after which a session is
            forgotten at the next notification (None: never).
        on_forget: Told of each record dropped, whatever dropped it.
        on_join: Awaited with each new record, before its first request
            goes on.
        clock: Monotonic clock (injectable).
    """

    def __init__(
        self,
        idle_timeout: float | None = None,
        on_forget: Callable[[Downstream], None] = lambda record: None,
        clock: Any = time.monotonic,
        on_join: Callable[[Downstream], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(idle_timeout, clock)
        self._on_forget = on_forget
        self._on_join = on_join

    def new_peer(self, key: str, ctx: ServerRequestContext[Any, Any]) -> Downstream:
        record = Downstream(
            key, ctx.session, self._clock(), ctx.session.can_send_request
        )
        record.learn(ctx)
        return record

    def seen(self, peer: Peer, ctx: ServerRequestContext[Any, Any]) -> None:
        super().seen(peer, ctx)
        if isinstance(peer, Downstream):
            peer.learn(ctx)

    def forgotten(self, peer: Peer) -> None:
        if isinstance(peer, Downstream):
            self._on_forget(peer)

    async def joined(self, peer: Peer) -> None:
        if self._on_join is not None and isinstance(peer, Downstream):
            await self._on_join(peer)

    def get(self, key: str) -> Downstream | None:
        peer = super().get(key)
        return peer if isinstance(peer, Downstream) else None

    def records(self) -> list[Downstream]:
        """Every known session's record."""
        return [peer for peer in self.peers() if isinstance(peer, Downstream)]
