"""The call path: holding for a reconnecting server, deadlines, and the errors a
caller sees. One path for every request that goes upstream (tools/call,
prompts/get, resources/read, completion/complete, subscriptions, ...).

A connected server is used at once; an idle on-demand one is started and
waited for up to `connect_timeout` + `hold`; a reconnecting one up to its
`hold`, unless its outage is already old (`HOLD_FAIL_FAST_FACTOR` holds), then
the request fails at once with what is known (state, attempt, next retry, last
error). A request is never retried: the caller decides.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..core.errors import (
    CallError,
    CallTimeout,
    Disconnected,
    RefusedUnrun,
    ServerUnavailable,
    SessionForgotten,
    TransportError,
    UpstreamError,
)
from ..core.redact import SecretRegistry, redact
from ..core.state import Phase
from ..core.text import login_command
from ..transport.base import Upstream
from ..transport.oauth import NO_LOGIN
from .connection import Connection
from .tracing import HELD, MCP_PROTOCOL_VERSION, MCP_SESSION_ID, Span

__all__ = [
    "CALL_DEADLINE_SLACK",
    "HOLD_FAIL_FAST_FACTOR",
    "call_error",
    "describe_session",
    "ready",
    "unavailable_message",
]

HOLD_FAIL_FAST_FACTOR = 3.0
"""An outage older than this many `hold`s fails calls at once instead of holding."""

CALL_DEADLINE_SLACK = 1.0
"""Seconds added to a call's timeout for our outer deadline (the SDK's fires first)."""


async def ready(
    conn: Connection, clock: Callable[[], float], span: Span | None = None
) -> Upstream:
    """The live upstream, waiting up to `hold` for a young outage; a wait is
    said on `span` (`HELD`: the seconds the call waited for its server).

    Raises:
        ServerUnavailable: Disabled, or not connected within `hold` (or at
            once when the outage is old), with the state in the message.
    """
    upstream = conn.upstream
    if upstream is not None and conn.phase is Phase.CONNECTED:
        return upstream
    if conn.phase is Phase.DISABLED:
        raise ServerUnavailable(
            f"{conn.name} is disabled (enabled = false in the config)"
        )
    if conn.phase in (Phase.NEEDS_LOGIN, Phase.REFUSED):
        raise ServerUnavailable(unavailable_message(conn, clock()))
    state = conn.state
    young = (
        state.outage_since is None
        or clock() - state.outage_since <= HOLD_FAIL_FAST_FACTOR * conn.spec.hold
    )
    wait = conn.spec.hold
    if conn.spec.on_demand and state.outage_since is None:
        wait += conn.spec.connect_timeout  # started by this request: a cold start
    if young and wait > 0:
        started = clock()
        try:
            with anyio.move_on_after(wait):
                await conn.wait_connected()
        finally:
            if span is not None:  # why this call took longer than its server
                span.set_attribute(HELD, round(clock() - started, 3))
        upstream = conn.upstream
        if upstream is not None and conn.phase is Phase.CONNECTED:
            return upstream
    raise ServerUnavailable(unavailable_message(conn, clock()))


def describe_session(span: Span, upstream: Upstream) -> None:
    """Session attributes of a call span (MCP semantic conventions)."""
    info = upstream.info
    if info.protocol:
        span.set_attribute(MCP_PROTOCOL_VERSION, info.protocol)
    if info.session_id:
        span.set_attribute(MCP_SESSION_ID, info.session_id)


def unavailable_message(conn: Connection, now: float) -> str:
    """Why a call cannot be made now: state, attempt, next retry, last error."""
    state = conn.state
    if state.phase is Phase.NEEDS_LOGIN:
        reason = state.error or NO_LOGIN
        return f"{conn.name} needs a login ({reason}); run `{login_command(conn.name)}`"
    if state.phase is Phase.REFUSED:
        return (
            f"{conn.name} is refused ({state.error}); it is not asked again by "
            f"itself: to try again run `{login_command(conn.name)}` or "
            f"`mcp-manager reconnect {conn.name}`"
        )
    parts = [f"attempt {state.attempt}"]
    if state.next_retry_at is not None:
        parts.append(f"next retry in {max(0.0, state.next_retry_at - now):.1f} s")
    if state.outage_since is not None:
        parts.append(f"down for {now - state.outage_since:.1f} s")
    text = f"{conn.name} is {state.phase.value} ({', '.join(parts)})"
    if state.error:
        text += f"; last error: {state.error}"
    return text


def call_error(
    exc: BaseException,
    conn: Connection,
    target: str,
    timeout: float | None,
    secrets: SecretRegistry,
) -> BaseException | None:
    """Map a failure of a request to the error the caller sees (None: re-raise).

    Args:
        exc: What the request raised.
        conn: The connection it went to.
        target: What was asked, for messages (a tool name, `resources/read
            file:///x`).
        timeout: The request's timeout (None: the spec's call_timeout).
        secrets: Masked in the text, which goes to the gateway's client, to
            Lua and to the call span as it is.
    """
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return None
    limit = timeout if timeout is not None else conn.spec.call_timeout
    if isinstance(exc, CallTimeout | TimeoutError):  # the transport's or ours
        return CallTimeout(f"{conn.name}/{target}: no result within {limit:g} s")
    if isinstance(exc, RefusedUnrun):
        return RefusedUnrun(
            f"{conn.name}/{target}: {redact(str(exc), secrets)}; log in with "
            f"mcp-manager login {conn.name}, then call again"
        )
    if isinstance(exc, CallError):
        text = redact(str(exc), secrets)
        if text == str(exc):
            return exc
        if isinstance(exc, UpstreamError):
            return UpstreamError(text, code=exc.code, reply=exc.reply, data=exc.data)
        return type(exc)(text)
    if isinstance(exc, SessionForgotten):  # twice: the new session's too
        return ServerUnavailable(
            f"{conn.name}: {redact(str(exc), secrets)}; it was not sent again"
        )
    if isinstance(exc, Disconnected):
        return ServerUnavailable(
            f"{conn.name} disconnected during the call ({redact(str(exc), secrets)}): "
            "the server may have run it, and it was not sent again"
        )
    if isinstance(exc, TransportError):
        return ServerUnavailable(f"{conn.name}: {redact(str(exc), secrets)}")
    if isinstance(exc, Exception):
        return CallError(
            f"{conn.name}/{target}: {redact(str(exc), secrets) or type(exc).__name__}"
        )
    return None
