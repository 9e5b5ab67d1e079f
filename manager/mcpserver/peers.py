"""The server side shared by the endpoint and the demo server: one SDK server
class that advertises `list_changed`, and the downstream sessions that get it.

`ListChangedServer` is the SDK's low-level `Server` whose default initialization
options announce `listChanged` for tools, prompts and resources (the streamable
HTTP session manager calls `create_initialization_options()` without
arguments, so the default itself has to change). The SDK only advertises a
feature whose list handler is registered, so a server without prompts or
resources still announces none.

`Peers` remembers the handshake-era sessions (protocol versions before the
2026 subscription stream), keyed by the transport's own id: one `Peer`
record each (the gateway's records carry everything it keeps about a
session: `gateway.sessions`), so a
`notifications/{tools,prompts,resources}/list_changed` can reach each of them
on its standalone channel. Install `Peers.track` as server middleware;
`notify_tools_changed()` (and its prompts and resources siblings) sends to
all, bounded per session, and forgets a session that failed or has been idle
longer than `idle_timeout`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import anyio
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

__all__ = [
    "NOTIFY_TIMEOUT",
    "STREAM_KEY",
    "ListChangedServer",
    "Peer",
    "Peers",
    "session_key",
]

logger = logging.getLogger(__name__)

NOTIFY_TIMEOUT = 1.0
"""Seconds one downstream session may take to accept a notification."""

STREAM_KEY: ContextVar[str] = ContextVar("mcp_manager_stream_key", default="stdio")
"""The name of the stream session a request comes in on, set by whoever
serves several of them in one process (one per `attach` connection); the one
stdio peer is `stdio`."""


class ListChangedServer(Server[dict[str, Any]]):
    """The SDK server, advertising `listChanged` on every transport.

    Tools, prompts and resources alike; each only where the server has the
    matching list handler (the SDK derives the capability from it).
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(
                tools_changed=True, prompts_changed=True, resources_changed=True
            ),
            experimental_capabilities,
            extensions,
        )


def session_key(ctx: ServerRequestContext[Any, Any]) -> str:
    """Name the downstream connection a request came in on.

    `ctx.session` is a new proxy per request, so sessions are keyed by the
    transport's own id: the `mcp-session-id` header (streamable HTTP), the
    `session_id` query parameter (SSE), or the stream it came on
    (`STREAM_KEY`: an `attach` connection, or the single stdio peer).
    """
    request = ctx.request
    if not isinstance(request, Request):
        return STREAM_KEY.get()
    scope = request.scope  # one per HTTP request: asked for 3 times per call
    key = scope.get(_SESSION_KEY)
    if key is None:
        key = request.headers.get("mcp-session-id")
        if not key:  # SSE names it in the query; 2026-07-28 has none
            query = scope.get("query_string")
            key = request.query_params.get("session_id") if query else None
        key = scope[_SESSION_KEY] = key or "unknown"
    return cast(str, key)


def on_its_own_stream(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request came on a stream that is one client's (`attach`,
    the stdio front), not as an HTTP request: there even a 2026-07-28
    request, which names no session, is known to be that client's."""
    return not isinstance(ctx.request, Request)


_SESSION_KEY = "mcp_manager.session_key"
"""Where `session_key` keeps its answer in the request's ASGI scope."""


_Send = Callable[[ServerSession], Awaitable[None]]
"""One notification, sent to one session."""


@dataclass(slots=True)
class Peer:
    """One handshake-era downstream session.

    Attributes:
        key: Its key (`session_key`).
        session: The SDK session it came on (its first request's).
        last_seen: When its last request came (the `Peers` clock).
        notify: Whether it has a channel of its own for notifications.
    """

    key: str
    session: ServerSession
    last_seen: float
    notify: bool = True


class Peers:
    """Handshake-era downstream sessions, for the `list_changed` notifications.

    Args:
        idle_timeout: Seconds without a request after which a session is
            forgotten at the next notification (None: never).
        clock: Monotonic clock (injectable).
    """

    def __init__(
        self,
        idle_timeout: float | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self._peers: dict[str, Peer] = {}
        self._idle_timeout = idle_timeout
        self._clock = clock

    def __len__(self) -> int:
        """Sessions that get notifications."""
        return sum(1 for peer in self._peers.values() if peer.notify)

    def new_peer(self, key: str, ctx: ServerRequestContext[Any, Any]) -> Peer:
        """The record of a session seen for the first time (a subclass keeps
        more in its own)."""
        # Notified on the session's own channel, where it has one.
        return Peer(key, ctx.session, self._clock(), ctx.session.can_send_request)

    def seen(self, peer: Peer, ctx: ServerRequestContext[Any, Any]) -> None:
        """A known session sent another request."""
        peer.last_seen = self._clock()

    def forgotten(self, peer: Peer) -> None:
        """A session was forgotten (closed, failed, idle): nothing by default."""

    async def joined(self, peer: Peer) -> None:
        """A session was seen for the first time, before its request goes
        on: nothing by default."""

    async def track(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware: remember the session a request came on."""
        if (
            ctx.method != "initialize"
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            key = session_key(ctx)
            peer = self._peers.get(key)
            if peer is None:
                peer = self._peers[key] = self.new_peer(key, ctx)
                await self.joined(peer)
            else:
                self.seen(peer, ctx)
        return await call_next(ctx)

    def get(self, key: str) -> Peer | None:
        """The record of session `key`, if it is known."""
        return self._peers.get(key)

    def peers(self) -> list[Peer]:
        """Every known session's record."""
        return list(self._peers.values())

    def forget(self, key: str) -> None:
        """Forget a downstream session (it was closed)."""
        peer = self._peers.pop(key, None)
        if peer is not None:
            self.forgotten(peer)

    async def notify_tools_changed(self) -> None:
        """Send `tools/list_changed` to every session, all at once, each bounded."""
        await self._broadcast(lambda session: session.send_tool_list_changed())

    async def notify_prompts_changed(self) -> None:
        """Send `prompts/list_changed` to every session, all at once, each bounded."""
        await self._broadcast(lambda session: session.send_prompt_list_changed())

    async def notify_resources_changed(self) -> None:
        """Send `resources/list_changed` to every session, all at once, each bounded."""
        await self._broadcast(lambda session: session.send_resource_list_changed())

    async def _broadcast(self, send: _Send) -> None:
        now = self._clock()
        async with anyio.create_task_group() as tg:
            for key, peer in list(self._peers.items()):
                idle = now - peer.last_seen
                if self._idle_timeout is not None and idle > self._idle_timeout:
                    self.forget(key)
                elif peer.notify:
                    tg.start_soon(self._notify, key, peer, send)

    async def _notify(self, key: str, peer: Peer, send: _Send) -> None:
        try:
            with anyio.fail_after(NOTIFY_TIMEOUT):
                await send(peer.session)
        except Exception:  # boundary: a gone client must not stop the others
            logger.debug("dropping downstream session %s (notify failed)", key[:8])
            self.forget(key)
