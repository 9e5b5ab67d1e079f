"""The one door to the `mcp` SDK's private names.

Why each is used, and which public API would replace it:

* `ClientSession._stamp` (`speak_for_the_caller`): the per-request stamp of a
  2026-07-28 session writes the session's own client capabilities into every
  request's `_meta`; the daemon serves many clients, and a 2026 server judges
  each request by the capabilities of the client that calls. Replace with a
  public per-request capabilities override on `ClientSession` (none in 2.3).
* `OAuthClientProvider._initialize`, `._initialized`, `._refresh_token` and
  `._handle_refresh_response` (`oauth_*`): the daemon drives the SDK's OAuth
  flow itself (one refresh in flight per connection, a refused refresh ends in
  `needs_login` rather than a new authorization, no retry storm after a 401),
  so it loads the stored tokens, builds the refresh request and takes its
  answer through the SDK's own code. Replace with public load/refresh hooks on
  `OAuthClientProvider` (2.3 has `TokenStorage`, used for storage, but no
  public refresh step).

`tests/test_compat.py` fails with `WHY` when the installed SDK lacks one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp_types import CLIENT_CAPABILITIES_META_KEY

__all__ = [
    "PRIVATE_NAMES",
    "WHY",
    "oauth_load",
    "oauth_loaded",
    "oauth_refresh_request",
    "oauth_take_refresh",
    "speak_for_the_caller",
]

WHY = (
    "mcp-manager reaches into the mcp SDK's private names (see "
    "manager/transport/compat_mcp.py): this SDK version no longer has one; "
    "move to the public API named there"
)

PRIVATE_NAMES: dict[type, tuple[str, ...]] = {
    ClientSession: ("_stamp",),
    OAuthClientProvider: (
        "_initialize",
        "_initialized",
        "_refresh_token",
        "_handle_refresh_response",
    ),
}
"""Each class and the private names of its instances used here."""


def speak_for_the_caller(
    session: ClientSession, extensions: frozenset[str] = frozenset()
) -> None:
    """Let each request of a 2026-07-28 `session` declare the capabilities
    of the client it serves (`io.modelcontextprotocol/clientCapabilities` in
    its `_meta`, put there by the gateway), not ours, apart from `roots`
    where we declare some (the connection's roots answer `roots/list`; else
    the caller is asked) and `extensions`, of which only those in
    `extensions` (the ones routed) pass. Requests without the key (our own)
    keep the session's own capabilities, without extensions."""
    stamp: Callable[[dict[str, Any], Any], None] = session._stamp

    def stamp_for_caller(data: dict[str, Any], opts: Any) -> None:
        given = ((data.get("params") or {}).get("_meta") or {}).get(
            CLIENT_CAPABILITIES_META_KEY
        )
        stamp(data, opts)
        meta = data.get("params", {}).get("_meta")
        if not isinstance(meta, dict):
            return
        ours = meta.get(CLIENT_CAPABILITIES_META_KEY) or {}
        if not isinstance(given, dict):
            # Our own request (a list, a probe, a call from Lua or the CLI):
            # no extension, so no server answers with what nobody follows.
            meta[CLIENT_CAPABILITIES_META_KEY] = {
                k: v for k, v in ours.items() if k != "extensions"
            }
            return
        caller = {k: v for k, v in given.items() if k != "extensions"}
        routed = {
            name: settings
            for name, settings in (given.get("extensions") or {}).items()
            if name in extensions
        }
        if routed:
            caller["extensions"] = routed
        if "roots" in ours:  # declared roots answer, not the caller's
            caller["roots"] = ours["roots"]
        meta[CLIENT_CAPABILITIES_META_KEY] = caller

    session._stamp = stamp_for_caller


def oauth_loaded(provider: OAuthClientProvider) -> bool:
    """Whether the provider has read its stored tokens and client yet."""
    return bool(provider._initialized)


async def oauth_load(provider: OAuthClientProvider) -> None:
    """Read the stored tokens and client (the SDK's own loading)."""
    await provider._initialize()


async def oauth_refresh_request(provider: OAuthClientProvider) -> httpx2.Request:
    """The SDK's refresh-token request for the current tokens."""
    request: httpx2.Request = await provider._refresh_token()
    return request


async def oauth_take_refresh(
    provider: OAuthClientProvider, response: httpx2.Response
) -> bool:
    """Take the answer to a refresh request (stores new tokens). Returns
    whether it gave new tokens."""
    return bool(await provider._handle_refresh_response(response))
