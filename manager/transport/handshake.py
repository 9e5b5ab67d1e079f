"""The handshake: agree on the protocol and read the lists, under one deadline.

`handshake` runs `initialize` (or `server/discover` with a 2026-07-28 server:
`eras.agree`) and lists all tools and the rest before the connection's
deadline, pacing a stdio server's start; what fails is mapped to a
`ConnectFailed` or `ConnectTimeout` that says why. What it returns is an
`McpSession` (`session`), which makes the calls from then on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import CONNECTION_CLOSED

from ..core.errors import ConnectFailed, ConnectTimeout, TransportError
from ..core.sandbox import starved
from ..core.spec import ConnectionSpec
from .base import EXIT_CODE_WAIT, Hooks, Streams
from .eras import PROBE_TIMEOUT, EraMemory, agree
from .errors import describe_error, flatten
from .http.liveness import TcpSentinel
from .http.probe import address
from .relay import DispatcherRelay
from .session import McpSession
from .signals import LostSignal
from .stdio.starts import BUSY_EXTENSION_FACTOR, Slot, pace_start

__all__ = ["handshake", "message_handler"]

logger = logging.getLogger(__name__)


def message_handler(name: str, hooks: Hooks) -> MessageHandlerFnT:
    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            hooks.on_tools_changed()
        elif isinstance(message, types.PromptListChangedNotification):
            hooks.on_list_changed("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            hooks.on_list_changed("resources")
        elif isinstance(message, types.ResourceUpdatedNotification):
            hooks.on_resource_updated(str(message.params.uri))
        elif isinstance(message, Exception):
            logger.debug("%s: transport reported %s", name, describe_error(message))

    return on_message


async def handshake(
    spec: ConnectionSpec,
    session: ClientSession,
    streams: Streams,
    lost: LostSignal,
    pid: int | None,
    deadline: float,
    slot: Slot | None = None,
    *,
    dispatcher: JSONRPCDispatcher[Any],
    eras: EraMemory | None = None,
    hooks: Hooks | None = None,
    probe_timeout: float | None = PROBE_TIMEOUT,
    lists: bool = True,
) -> McpSession:
    """initialize + list all tools, prompts, resources and templates before
    `deadline` (not with `lists` False: a session beside another, whose lists
    are read only once it says one changed); errors mapped and explained.

    A stdio server's start is paced (`starts.pace_start`): its slot is given back
    once it idles, and the deadline moves out while it is still busy.
    """
    hard_deadline = deadline + (BUSY_EXTENSION_FACTOR - 1) * spec.connect_timeout
    scope = anyio.CancelScope(deadline=deadline)
    try:
        async with _first_error(), anyio.create_task_group() as pacing:
            if pid is not None and slot is not None:
                pacing.start_soon(pace_start, scope, pid, slot, hard_deadline)
            with scope:
                info = await agree(
                    spec, session, streams.session_id, eras, probe_timeout
                )
                sentinel = None
                if spec.transport == "http":  # SSE and stdio see their end already
                    host, port, _ = address(spec.url)
                    sentinel = TcpSentinel(host, port)
                upstream = McpSession(
                    session,
                    info,
                    lost,
                    pid,
                    sentinel,
                    wire=streams.relay or DispatcherRelay(dispatcher),
                    hooks=hooks,
                )
                if lists:
                    await upstream.list_tools()
                    await upstream.list_catalog()
            pacing.cancel_scope.cancel()
        if scope.cancelled_caught:
            raise TimeoutError
        return upstream
    except TimeoutError:
        took = anyio.current_time() - (deadline - spec.connect_timeout)
        message = (
            f"no complete handshake within connect_timeout {spec.connect_timeout:g} s "
            "(initialize + tools/list and the other lists)"
        )
        if took > spec.connect_timeout + 0.5:
            message += f"; given {took:.0f} s in all while the server was busy"
        if lost.is_set:
            message = f"{message}; {lost.report.reason}"
        hungry = starved(spec.command or "", spec.args, spec.sandbox)
        if hungry is not None:
            message = f"{message}; {hungry}"
        raise ConnectTimeout(message, exit_code=lost.report.exit_code) from None
    except (MCPError, TransportError) as exc:
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            # The session saw EOF first; the transport is about to say why
            # (exit code), which is the error worth showing.
            with anyio.move_on_after(EXIT_CODE_WAIT + 0.1):
                await lost.event.wait()
        if lost.is_set:  # the real cause: the server exited or closed the stream
            raise ConnectFailed(
                lost.report.reason, exit_code=lost.report.exit_code
            ) from exc
        if isinstance(exc, TransportError):
            raise
        raise ConnectFailed(f"handshake failed: {describe_error(exc)}") from exc


@asynccontextmanager
async def _first_error() -> AsyncIterator[None]:
    """Unwrap a task group's single error, so callers can catch it by type."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = flatten(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
