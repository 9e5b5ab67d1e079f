"""The one door to the private names of the `mcp` SDK's server side.

(The client side's door is `transport/compat_mcp.py`; the transport never
imports the SDK's server side, so the endpoint's own door lives here.)

Why each is used, and which public API would replace it:

* `StreamableHTTPSessionManager._server_instances` (`http_session_alive`): the
  endpoint's hot path (`exchange`) answers requests of a handshake-era session
  that the SDK opened, so it must know that the SDK still holds that session
  (else the SDK answers 404) and keep the SDK's idle timer from ending a
  session whose requests it serves. The transport's `is_terminated` and
  `idle_scope` are public; finding a session's transport by its id is not.
  Replace with a public lookup (or a "touch session" call) on the session
  manager (none in 2.3).

`tests/test_compat.py` fails with `WHY` when the installed SDK lacks one.
"""

from __future__ import annotations

import asyncio
import math

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["IDLE_PUSH_SLACK", "PRIVATE_NAMES", "WHY", "http_session_alive"]

WHY = (
    "mcp-manager reaches into the mcp SDK server side's private names (see "
    "manager/gateway/compat_mcp_server.py): this SDK version no longer has "
    "one; move to the public API named there"
)

IDLE_PUSH_SLACK = 1.0
"""Seconds an idle countdown may lag behind the last request before it is
moved (a twentieth of the timeout when that is shorter)."""

PRIVATE_NAMES: dict[type, tuple[str, ...]] = {
    StreamableHTTPSessionManager: ("_server_instances",),
}
"""Each class and the private names of its instances used here."""


def http_session_alive(
    manager: StreamableHTTPSessionManager, key: str, idle_timeout: float | None
) -> bool:
    """Whether the SDK still holds the streamable HTTP session `key`; if so,
    its idle countdown restarts now (unless a request of its own is in
    flight, which suspends it)."""
    transport = manager._server_instances.get(key)
    if transport is None or transport.is_terminated:
        return False
    scope = transport.idle_scope
    if scope is not None and scope.cancel_called:
        return False  # expired: the SDK is ending it
    if scope is not None and idle_timeout is not None and scope.deadline != math.inf:
        # The loop's clock is anyio's on asyncio, without its backend lookup.
        due = asyncio.get_running_loop().time() + idle_timeout
        # Moving the deadline moves a loop timer: at most once per slack, not
        # twice per request of a busy session (it ends at most that much early).
        if due > scope.deadline + min(IDLE_PUSH_SLACK, idle_timeout / 20):
            scope.deadline = due
    return True
