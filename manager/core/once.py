"""At most once: which requests may be sent again, and what a client whose
request may have run is told.

A request that may have reached a server is never sent again by anyone
(`mcp-manager attach`, the endpoint, the relays, a reconnect, a reload): a
payment, a commit or a message must not happen twice because the daemon
restarted. Two cases are safe to send again:

* a request the daemon provably never took: `attach` sent it, and the daemon
  went away before acknowledging it (`gateway.attached`: the daemon writes
  the acknowledgement before the request goes anywhere);
* a request that only reads (`REPEATABLE`): lists, reads, `ping`,
  `server/discover`, completion; sending one twice changes nothing.

Everything else in flight when the daemon stops or dies is answered with
`stopped_error`: a JSON-RPC error saying the daemon stopped, that the request
may have run, and that it was not sent again.

This module imports nothing from the package.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as `typing` says; importing it costs a CLI command ~4 ms
if TYPE_CHECKING:
    from typing import Any

__all__ = ["REPEATABLE", "STOPPED_CODE", "may_repeat", "stopped_error"]

STOPPED_CODE = -32603
"""The JSON-RPC code of `stopped_error` (internal error: the request was
neither refused nor answered by the server)."""

REPEATABLE = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "completion/complete",
        "logging/setLevel",
        "tasks/get",
        "tasks/list",
        "tasks/result",
    }
)
"""Methods that only read (or set a state to the same value again): sending
one a second time has no effect a client could see twice."""


def may_repeat(method: object) -> bool:
    """Whether a request of `method` may be sent again after it may have run."""
    return isinstance(method, str) and method in REPEATABLE


def stopped_error(
    request_id: Any, method: object, *, where: str = "mcp-manager stopped"
) -> dict[str, Any]:
    """The answer to a request in flight when the daemon stopped (or died).

    Args:
        request_id: The request's id, as the client sent it.
        method: Its method (named in the message).
        where: Who saw it end, as a clause: the daemon, answering before it
            closes (the default), or "the mcp-manager daemon went away"
            (`attach`, after a crash).
    """
    what = f"this {method} request" if isinstance(method, str) else "this request"
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": STOPPED_CODE,
            "message": (
                f"{where} while {what} was in flight: the server may have run it, "
                "and it was not sent again (mcp-manager never repeats a call); "
                "check its effect before calling again"
            ),
        },
    }
