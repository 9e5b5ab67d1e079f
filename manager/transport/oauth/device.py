"""The device authorization grant (RFC 8628): a login for a daemon with no browser.

The SDK has no device grant, so this module speaks it (`DeviceGrant.run`),
with `httpx2` as the SDK does, in the connection's OAuth flow: the SDK's
discovery, registration and scope selection come first, and the answer that
grants the tokens goes back to the SDK (`auth.ConnectionAuth`). The polls go
out on a client of their own, not as requests of the flow: httpx bounds the
requests one flow may send (its redirect limit, 20), and a user takes minutes.

1. **Device authorization request** (RFC 8628 section 3.1) to the endpoint the
   authorization server metadata names (`device_authorization_endpoint`,
   section 4; `device_endpoint` reads it from the raw metadata, which the SDK's
   model drops): the registered `client_id` (with the client's authentication,
   as for the token endpoint), the scope the normal flow picked and the
   `resource` parameter (RFC 8707) as the normal flow sends it.
2. **The user** opens `verification_uri` anywhere and enters `user_code`
   (`Login.show_device` hands both to `mcp-manager login NAME --device`).
3. **Polling** the token endpoint with `grant_type=DEVICE_GRANT` every
   `interval` seconds (default `DEFAULT_INTERVAL`): `authorization_pending`
   polls on, `slow_down` adds `SLOW_DOWN_STEP` to the interval for good,
   `access_denied` and `expired_token` end the login (the user's doing, not
   counted as a refusal), any other error ends it counted
   (`AuthorizationRefused`, as a refused code exchange is). Every wait ends at
   the device code's `expires_in` or the login's own deadline, whichever comes
   first.

The answer that grants the tokens is handed back to the SDK, which stores them
as it stores a browser login's. The `device_code` is a secret (never in a
message or report); the `user_code` is meant for the user and shown only by
the `login` command.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import httpx2
from mcp.client.auth.oauth2 import OAuthContext

from ...core.errors import AuthorizationRefused, LoginRequired

if TYPE_CHECKING:
    from .login import Login

__all__ = [
    "DEFAULT_INTERVAL",
    "DEVICE_HTTP_TIMEOUT",
    "DEVICE_GRANT",
    "SLOW_DOWN_STEP",
    "DeviceCode",
    "DeviceGrant",
    "DeviceLoginUnsupported",
    "device_endpoint",
    "unsupported",
]

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
"""The token request's `grant_type` for a device code (RFC 8628 section 3.4)."""

DEFAULT_INTERVAL = 5.0
"""Seconds between polls when the server names no `interval` (section 3.2)."""

MIN_INTERVAL = 1.0
"""Seconds between polls at the least, whatever the server names: an
`interval` of 0 would have the token endpoint asked as fast as it answers."""

SLOW_DOWN_STEP = 5.0
"""Seconds added to the interval, for good, on each `slow_down` (section 3.5)."""

DEVICE_HTTP_TIMEOUT = 30.0
"""Seconds each request of a device login (code, poll) may take."""

DEFAULT_EXPIRES_IN = 600.0
"""Seconds a device code lives when the server's answer has no usable
`expires_in` (a required field: this only bounds a broken server's)."""

_FIELD = "device_authorization_endpoint"


class DeviceLoginUnsupported(LoginRequired):
    """`login --device` of a connection whose authorization server offers no
    device authorization endpoint (RFC 8628 section 4): nothing was asked of
    it, and the connection waits for another kind of login."""


@dataclass(frozen=True, slots=True)
class DeviceCode:
    """The device authorization response (RFC 8628 section 3.2).

    Attributes:
        device_code: The secret the polls send (never shown).
        user_code: What the user types at `verification_uri`.
        verification_uri: Where the user goes.
        verification_uri_complete: The same with the code in it, if given.
        expires_in: Seconds the codes live.
        interval: Seconds between polls.
    """

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float

    def __repr__(self) -> str:
        # Never the device code, even in a traceback's locals.
        return f"DeviceCode(user_code={self.user_code!r}, uri={self.verification_uri})"


def device_endpoint(metadata: object) -> str | None:
    """The `device_authorization_endpoint` of raw authorization server
    metadata (a JSON object), if it names one as an http(s) URL."""
    if not isinstance(metadata, dict):
        return None
    value = metadata.get(_FIELD)
    if isinstance(value, str) and value.startswith(("https://", "http://")):
        return value
    return None


def unsupported(name: str, issuer: str) -> DeviceLoginUnsupported:
    """The sentence for an authorization server without device login."""
    return DeviceLoginUnsupported(
        f"the authorization server at {issuer} does not offer device login "
        f"(RFC 8628); use `mcp-manager login {name}` (browser) or `--manual`"
    )


def _error_of(response: httpx2.Response) -> tuple[str, str]:
    """The OAuth `error` and `error_description` of an error answer."""
    try:
        body = response.json()
    except ValueError:
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    error, described = body.get("error"), body.get("error_description")
    return (
        error if isinstance(error, str) else "",
        described[:200] if isinstance(described, str) else "",
    )


def _said(error: str, described: str, status: int) -> str:
    """What the server said, for a message (never a secret: OAuth error codes
    and their descriptions)."""
    what = error or f"HTTP {status}"
    return f"{what} ({described})" if described else what


def read_device_code(response: httpx2.Response) -> DeviceCode:
    """Read the device authorization response.

    Raises:
        AuthorizationRefused: An error answer, or not a usable one.
    """
    if response.status_code != 200:
        error, described = _error_of(response)
        raise AuthorizationRefused(
            "the login failed: the device authorization endpoint said "
            f"{_said(error, described, response.status_code)}"
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise AuthorizationRefused(
            "the login failed: the device authorization endpoint answered "
            "something that is not a JSON object"
        )
    device_code, user_code = body.get("device_code"), body.get("user_code")
    uri = body.get("verification_uri") or body.get("verification_url")  # Google's
    if not (
        isinstance(device_code, str)
        and device_code
        and isinstance(user_code, str)
        and user_code
        and isinstance(uri, str)
        and uri
    ):
        raise AuthorizationRefused(
            "the login failed: the device authorization response lacks "
            "device_code, user_code or verification_uri"
        )
    complete = body.get("verification_uri_complete")
    return DeviceCode(
        device_code=device_code,
        user_code=user_code,
        verification_uri=uri,
        verification_uri_complete=complete if isinstance(complete, str) else None,
        expires_in=_seconds(body.get("expires_in"), DEFAULT_EXPIRES_IN),
        interval=_seconds(body.get("interval"), DEFAULT_INTERVAL, zero=True),
    )


def _seconds(value: object, default: float, *, zero: bool = False) -> float:
    """A number of seconds the server sent, else `default` (negative, not
    finite, or 0 where `zero` is not allowed)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        return default
    return float(value)


StepReport = Callable[[str, str, int, float, str], None]
"""(step, outcome, HTTP status, seconds, error), as `auth.StepReport`."""

Send = Callable[[httpx2.Request], Awaitable[httpx2.Response]]
"""Sends one request and returns its answer, read (`httpx2.AsyncClient.send`)."""


class DeviceGrant:
    """One device login, from the device authorization request to the token
    endpoint's answer that grants the tokens.

    Args:
        context: The SDK's OAuth context (client, metadata, scope, resource).
        endpoint: The device authorization endpoint.
        login: The login under way (shows the code; its deadline and its end
            stop the polling).
        report: Reports the steps (`device`, `authorize`, `token`).
        clock: Event-loop time (anyio's, injectable for tests).
    """

    def __init__(
        self,
        context: OAuthContext,
        endpoint: str,
        login: Login,
        report: StepReport,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self._context = context
        self._endpoint = endpoint
        self._login = login
        self._report = report
        self._clock = clock
        self.polls = 0
        """Token requests sent (tests count them)."""

    def first_request(self) -> httpx2.Request:
        """The device authorization request (section 3.1)."""
        context = self._context
        client = context.client_info
        if client is None:
            raise LoginRequired("no client registration for the device login")
        data: dict[str, str] = {"client_id": client.client_id}
        if context.client_metadata.scope:
            data["scope"] = context.client_metadata.scope
        if context.should_include_resource_param(context.protocol_version):
            data["resource"] = context.get_resource_url()  # RFC 8707
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        data, headers = context.prepare_token_auth(data, headers)
        return httpx2.Request("POST", self._endpoint, data=data, headers=headers)

    def _poll(self, code: DeviceCode) -> httpx2.Request:
        """A token request for the device code (section 3.4)."""
        context = self._context
        client = context.client_info
        assert client is not None  # first_request needed it
        metadata = context.oauth_metadata
        if metadata is None:
            raise LoginRequired("no authorization server metadata for the login")
        data: dict[str, str] = {
            "grant_type": DEVICE_GRANT,
            "device_code": code.device_code,
            "client_id": client.client_id,
        }
        if context.should_include_resource_param(context.protocol_version):
            data["resource"] = context.get_resource_url()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        data, headers = context.prepare_token_auth(data, headers)
        url = str(metadata.token_endpoint)
        return httpx2.Request("POST", url, data=data, headers=headers)

    async def run(self, first: httpx2.Request, send: Send) -> httpx2.Response:
        """Send `first` (the device authorization request), show the code,
        then poll until the tokens are granted.

        Returns:
            The token endpoint's answer that grants them (for the SDK).

        Raises:
            LoginRequired: The user denied it, the code expired, or the login
                ended or reached its deadline (not counted).
            AuthorizationRefused: The server refused the grant otherwise.
        """
        began = self._clock()
        answer = await send(first)
        self._report(
            "device",
            "ok" if answer.status_code == 200 else "failed",
            answer.status_code,
            self._clock() - began,
            "" if answer.status_code == 200 else f"HTTP {answer.status_code}",
        )
        code = read_device_code(answer)
        shown = self._clock()
        expires = shown + code.expires_in
        interval = max(code.interval, MIN_INTERVAL)
        self._login.show_device(
            code.verification_uri, code.user_code, code.verification_uri_complete
        )
        while True:
            remaining = expires - self._clock()
            if remaining > 0 and not await self._login.pause(min(interval, remaining)):
                reason = self._login.error or "the login ended"
                self._failed(shown, reason)
                raise LoginRequired(reason)
            if self._clock() >= expires:
                self._failed(shown, "expired")
                raise LoginRequired(
                    f"the device code expired after {code.expires_in:g} s "
                    "without an approval; run login again"
                )
            began = self._clock()
            self.polls += 1
            answer = await send(self._poll(code))
            if answer.status_code == 200:
                self._report("authorize", "ok", 0, began - shown, "")
                self._report("token", "ok", 200, self._clock() - began, "")
                return answer
            error, described = _error_of(answer)
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += SLOW_DOWN_STEP
                continue
            said = _said(error, described, answer.status_code)
            self._report(
                "token", "failed", answer.status_code, self._clock() - began, said
            )
            if error == "access_denied":
                self._failed(shown, error)
                raise LoginRequired(
                    "the device login was denied at the authorization server"
                )
            if error == "expired_token":
                self._failed(shown, error)
                raise LoginRequired(
                    "the device code expired before it was approved; run login again"
                )
            raise AuthorizationRefused(
                f"the login failed: the token endpoint said {said}"
            )

    def _failed(self, shown: float, why: str) -> None:
        self._report("authorize", "failed", 0, self._clock() - shown, why)
