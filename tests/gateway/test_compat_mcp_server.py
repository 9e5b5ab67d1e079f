"""`http_session_alive`: the hot path's look at an SDK session, and the push
of its idle countdown."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest
from mcp.server.streamable_http import StreamableHTTPServerTransport

from manager.gateway.compat_mcp_server import IDLE_PUSH_SLACK, http_session_alive

pytestmark = pytest.mark.anyio

IDLE = 60.0


class Sessions:
    """What the door reads of the SDK's session manager: its transports."""

    def __init__(self, transport: StreamableHTTPServerTransport) -> None:
        self._server_instances = {"s": transport}


async def test_the_idle_countdown_moves_once_it_lags_by_the_slack() -> None:
    transport = StreamableHTTPServerTransport(mcp_session_id="s", idle_timeout=IDLE)
    sessions = Sessions(transport)
    now = asyncio.get_running_loop().time()
    with anyio.CancelScope(deadline=now + IDLE) as scope:
        transport.idle_scope = scope
        assert http_session_alive(sessions, "s", IDLE)  # type: ignore[arg-type]
        assert scope.deadline == now + IDLE  # within the slack: left alone
        scope.deadline = now + IDLE - 2 * IDLE_PUSH_SLACK  # two seconds behind
        assert http_session_alive(sessions, "s", IDLE)  # type: ignore[arg-type]
        assert scope.deadline >= now + IDLE  # moved to a full timeout from now
        assert http_session_alive(sessions, "x", IDLE) is False  # type: ignore[arg-type]
        scope.cancel()
        assert http_session_alive(sessions, "s", IDLE) is False  # type: ignore[arg-type]
        await anyio.lowlevel.checkpoint()  # the cancelled scope ends here


async def test_a_short_timeout_lags_by_a_twentieth_of_itself_at_most() -> None:
    transport = StreamableHTTPServerTransport(mcp_session_id="s", idle_timeout=2.0)
    sessions = Sessions(transport)
    now = asyncio.get_running_loop().time()
    with anyio.CancelScope(deadline=now + 2.0 - 0.2) as scope:
        transport.idle_scope = scope
        assert http_session_alive(sessions, "s", 2.0)  # type: ignore[arg-type]
        assert scope.deadline >= now + 2.0  # 0.2 s behind is past 2.0 / 20
        await anyio.lowlevel.checkpoint()
