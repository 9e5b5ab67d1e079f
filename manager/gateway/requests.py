"""What upstreams ask the client, routed to the right downstream session.

Requests from an upstream (`sampling/createMessage`, `elicitation/create`) go
to the downstream session whose request that upstream is serving, related to
that request. Over streamable HTTP upstreams the match is exact: a call from a
client that can be asked carries a token (`LINK_META_KEY`), and the transport
notes which server requests arrive on that call's response stream. Over stdio
or SSE the protocol carries no link on the client side: while requests of two
sessions are in flight to one upstream, its request is refused with a clear
error rather than guessed (never to another client).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INVALID_REQUEST

from ..transport.base import ProgressCallback
from .peers import session_key

__all__ = ["ClientRequests", "progress_forwarder"]


@dataclass(slots=True)
class _Waiting:
    """A downstream request an upstream is serving now; `token` is the link
    sent upstream with it (`LINK_META_KEY`), if any."""

    key: str
    ctx: ServerRequestContext[Any, Any]
    token: str | None = None


def progress_forwarder(ctx: ServerRequestContext[Any, Any]) -> ProgressCallback | None:
    """Relay upstream progress to the downstream caller under its own token, if
    its request asked for progress.

    Sent without `related_request_id`: over HTTP the endpoint answers with plain
    JSON (no per-request stream), so progress travels on the session's
    standalone stream; the token tells the client which request it belongs to.
    """
    token = ctx.meta.get("progress_token") if ctx.meta is not None else None
    if not isinstance(token, str | int):
        return None
    session = ctx.session

    async def forward(
        progress: float, total: float | None, message: str | None
    ) -> None:
        await session.send_progress_notification(token, progress, total, message)

    return forward


class ClientRequests:
    """Which downstream requests each upstream is serving, and the routing of
    that upstream's own requests to them.

    Args:
        deadline: Seconds the client may take to answer a request of that
            upstream (its `call_timeout`: the question cannot outlive the
            call it serves); a client that never answers gets the upstream an
            error then, not a request that waits forever.
    """

    def __init__(self, deadline: Callable[[str], float]) -> None:
        self._waiting: dict[str, list[_Waiting]] = {}
        self._deadline = deadline

    @contextlib.contextmanager
    def waiting(
        self,
        server: str,
        ctx: ServerRequestContext[Any, Any],
        token: str | None = None,
    ) -> Iterator[None]:
        """Record `ctx` as waiting on `server` (a tool call, for upstream requests)."""
        item = _Waiting(session_key(ctx), ctx, token)
        self._waiting.setdefault(server, []).append(item)
        try:
            yield
        finally:
            self._waiting[server].remove(item)

    # --- requests from upstreams ---------------------------------------------------

    async def upstream_request(
        self, server: str, method: str, params: Any, link: str | None = None
    ) -> Any:
        """Route `sampling/createMessage` or `elicitation/create` from `server`
        to the downstream session whose request it is serving: the one its
        link names (streamable HTTP upstreams), else the only session waiting."""
        waiting = self._waiting.get(server, [])
        linked = [w for w in waiting if link is not None and w.token == link]
        if linked:
            waiting = linked
        keys = {w.key for w in waiting}
        if not keys:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: no client request to {server} is in "
                "progress through mcp-manager, so there is nobody to ask",
            )
        if len(keys) > 1:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: requests of {len(keys)} clients are "
                "in progress and this transport does not say which one this is for "
                "(streamable HTTP upstreams do); refused rather than sent to the "
                "wrong client",
            )
        ctx = waiting[0].ctx
        caps = ctx.session.client_capabilities
        wanted = "sampling" if method == "sampling/createMessage" else "elicitation"
        if caps is None or getattr(caps, wanted) is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: the client connected through "
                f"mcp-manager did not declare the {wanted} capability",
            )
        # On the request's own channel where it has one (stdio, SSE, HTTP with
        # streamed responses); else (our HTTP endpoint answers with plain JSON)
        # on the session's standalone stream, where the client takes it too.
        related = (
            ServerMessageMetadata(related_request_id=ctx.request_id)
            if ctx.session.can_send_request
            else None
        )
        request: Any
        if method == "sampling/createMessage":
            request = types.CreateMessageRequest(params=params)
            result_type: Any = types.CreateMessageResult
        else:
            request = types.ElicitRequest(params=params)
            result_type = types.ElicitResult
        try:
            return await ctx.session.send_request(
                request,
                result_type,
                request_read_timeout_seconds=self._deadline(server),
                metadata=related,
            )
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message)
