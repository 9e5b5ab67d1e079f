"""The one door to the `mcp` SDK's private names.

Why each is used, and which public API would replace it:

* `ClientSession._stamp` (`speak_for_the_caller`, `stamp_request`): the
  per-request stamp of a 2026-07-28 session writes the session's own client
  capabilities into every request's `_meta`; the daemon serves many clients,
  and a 2026 server judges each request by the capabilities of the client
  that calls. And a `tools/call` the transport's relay sends itself is
  stamped as the session would stamp it (envelope and routing headers).
  Replace with a public per-request capabilities override and a public
  "prepare request" step on `ClientSession` (none in 2.3).
* `mcp.client.session._clamp_inbound_ttl`, `._later_revision_fields`
  (`typed_result`): a client's request goes out by the transport's own sender
  (`relay`), and its answer is judged as `ClientSession.send_request` judges
  it (a negative `ttlMs` floored, the negotiated revision's checks, a later
  revision's fields dropped) before it is typed. Replace with a public
  "validate a raw result" step on `ClientSession` (none in 2.3).
* `OAuthClientProvider._initialize`, `._initialized`, `._refresh_token` and
  `._handle_refresh_response` (`oauth_*`): the daemon drives the SDK's OAuth
  flow itself (one refresh in flight per connection, a refused refresh ends in
  `needs_login` rather than a new authorization, no retry storm after a 401),
  so it loads the stored tokens, builds the refresh request and takes its
  answer through the SDK's own code. Replace with public load/refresh hooks on
  `OAuthClientProvider` (2.3 has `TokenStorage`, used for storage, but no
  public refresh step).
* `OAuthClientProvider._perform_authorization` (`DeviceAwareProvider`): the
  SDK has no device authorization grant (RFC 8628); for a device login the
  step that would send the user's browser to the authorization endpoint
  returns the device authorization request instead, which the daemon's flow
  recognises and carries on with (`transport.oauth.device`), after the SDK's own
  discovery, registration and scope selection, and before its own handling of
  the token response. Replace with a public grant hook on
  `OAuthClientProvider` (or the SDK's own device grant).
* `mcp.shared._request_clock.waiting_on_a_person` (`waiting_on_the_user`):
  the SDK stops the clock of the MCP request a login serves while the
  browser is out; a device login's polling waits on a person too. Replace
  with the public form of that clock (none in 2.3).

* `mcp.shared._httpx_utils.stream_within_origin` (`stream_within_origin`):
  our HTTP relay sends a client's calls itself, and follows redirects as the
  SDK's transport follows them for the handshake and pings (within the
  endpoint's origin: a 307/308 trailing-slash move, say); else a server the
  handshake reached would refuse every call. Replace with a public helper
  (none in 2.3).

`tests/test_compat.py` fails with `WHY` when the installed SDK lacks one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
from mcp.shared._httpx_utils import stream_within_origin
from mcp.shared._request_clock import waiting_on_a_person
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types import methods as _methods
from pydantic import TypeAdapter

__all__ = [
    "PRIVATE_NAMES",
    "WHY",
    "DeviceAwareProvider",
    "oauth_load",
    "oauth_loaded",
    "oauth_refresh_request",
    "oauth_take_refresh",
    "speak_for_the_caller",
    "stamp_request",
    "stream_within_origin",
    "typed_result",
    "waiting_on_the_user",
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
        "_perform_authorization",
    ),
}
"""Each class and the private names of its instances used here."""


def speak_for_the_caller(
    session: ClientSession,
    extensions: frozenset[str] = frozenset(),
    own: frozenset[str] = frozenset(),
) -> None:
    """Let each request of a 2026-07-28 `session` declare the capabilities
    of the client it serves (`io.modelcontextprotocol/clientCapabilities` in
    its `_meta`, put there by the gateway), not ours, apart from `roots`
    where we declare some (the connection's roots answer `roots/list`; else
    the caller is asked) and `extensions`, of which only those in
    `extensions` (the ones routed) pass. Requests without the key (our own)
    keep the session's own capabilities, with only the extensions in `own`."""
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
            # no extension but `own`, so no server answers with what nobody
            # follows.
            mine = {k: v for k, v in ours.items() if k != "extensions"}
            kept = {
                name: settings
                for name, settings in (ours.get("extensions") or {}).items()
                if name in own
            }
            if kept:
                mine["extensions"] = kept
            meta[CLIENT_CAPABILITIES_META_KEY] = mine
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


class DeviceAwareProvider(OAuthClientProvider):
    """The SDK's provider, whose authorization step may be a device login.

    `device_turn` (set by the daemon) is asked first when the flow reaches the
    authorization step: a request it returns (the device authorization
    request) is what the flow sends instead of the authorization code's token
    request; None lets the SDK send the browser as usual.
    """

    device_turn: Callable[[], Awaitable[httpx2.Request | None]] | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        if self.device_turn is not None:
            request = await self.device_turn()
            if request is not None:
                return request
        return await super()._perform_authorization()


@contextmanager
def waiting_on_the_user() -> Iterator[None]:
    """Stop the clock of the MCP request this login serves while the block
    is open (the user is approving a device login)."""
    with waiting_on_a_person():
        yield


def stamp_request(session: ClientSession, data: dict[str, Any]) -> dict[str, str]:
    """Stamp `data` (`{"method", "params"}`) as `session` stamps a request it
    sends (the 2026-07-28 envelope in `params._meta`); the HTTP headers the
    stamp asks for (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, ...)."""
    opts: dict[str, Any] = {}
    session._stamp(data, cast(Any, opts))
    headers: dict[str, str] = opts.get("headers") or {}
    return headers


def typed_result(
    session: ClientSession, method: str, raw: dict[str, Any], result_type: Any
) -> Any:
    """`raw`, the result of `method` as the server sent it, judged and typed
    as `session.send_request` judges and types it (`result_type`: a model or
    a `TypeAdapter`); pydantic's `ValidationError` as there."""
    _clamp_inbound_ttl(raw)
    version = session.protocol_version or "2025-11-25"
    try:
        _methods.validate_server_result(method, version, raw)
    except KeyError:
        pass
    if not (foreign := _later_revision_fields(method, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    if isinstance(result_type, TypeAdapter):
        return result_type.validate_python(raw, by_name=False)
    return result_type.model_validate(raw, by_name=False)
