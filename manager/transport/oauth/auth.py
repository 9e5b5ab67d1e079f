"""The OAuth door: the `httpx2.Auth` of an http/sse connection that may need OAuth.

Built on the SDK's providers (`OAuthClientProvider` for a user's login,
`ClientCredentialsOAuthProvider` for headless connections), which do the
discovery (protected resource metadata, authorization server metadata with the
2025-03-26 fallbacks), registration (pre-registered, client ID metadata
document, or dynamic), PKCE, the `resource` parameter, scope selection and
step-up, and the token requests. `ConnectionAuth` wraps the provider for what a
daemon needs on top:

* **No lock on the hot path.** The SDK's flow holds one lock per provider
  across each request it authenticates; with a fresh token we add the header and
  send, so concurrent calls stay concurrent.
* **One refresh in flight.** A token within `refresh_margin` of its expiry is
  refreshed before it is sent; callers that arrive meanwhile wait for that
  refresh and use its token (none fails). A refused refresh is a `LoginRequired`
  (the stored token is dropped).
* **Never hammer.** A 401 on an interactive connection with no login under way
  raises `LoginRequired` at once: nothing is sent to the authorization server
  until the user runs `mcp-manager login NAME` (`login.LoginDesk`). One login
  authorizes once; when the server refuses what it got (the fresh token, the
  scope it asked for, the token's refresh) the error is `AuthorizationRefused`,
  which the connection counts (`core.state.LOGIN_LIMIT`).
* **Only this server's answers.** Protected resource metadata naming another
  resource (RFC 8707), authorization server metadata naming another issuer
  (RFC 8414) and an authorization response from another issuer, or without the
  `iss` its server promised (RFC 9207), end the flow with `AuthMismatch`: the
  SDK checks them, we say which in a sentence.
* **A login without a browser.** `login --device` (RFC 8628): where the
  authorization server metadata names a `device_authorization_endpoint`, the
  SDK's discovery, registration and scope selection run as for a browser
  login, then `device.DeviceGrant` asks for a device code and polls the token
  endpoint through this same flow, and the SDK takes the tokens as it takes a
  browser login's. Without that endpoint the login ends at the metadata, with
  the sentence to use another kind of login (`DeviceLoginUnsupported`).
* **Observable, never shown.** Each step (discovery, registration, authorize,
  token, refresh) is reported through `Hooks.on_auth` with its status and
  duration; tokens, secrets, codes and verifiers are never part of a report.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable

import anyio
import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import (
    extract_scope_from_www_auth,
    issuers_match,
    validate_authorization_response_iss,
)
from pydantic import AnyUrl

from ...core.errors import (
    AuthMismatch,
    AuthorizationRefused,
    LoginRequired,
)
from ..compat_mcp import (
    oauth_load,
    oauth_loaded,
    oauth_refresh_request,
    oauth_take_refresh,
    waiting_on_the_user,
)
from ..errors import describe_error
from .answers import (
    bearer,
    challenged,
    issuer_mismatch,
    origin,
    refused_step,
    scopes,
    server_metadata,
    shown,
    step_of,
)
from .device import (
    DEVICE_GRANT,
    DEVICE_HTTP_TIMEOUT,
    DeviceGrant,
    device_endpoint,
    unsupported,
)
from .login import NO_LOGIN, Login, LoginDesk
from .tokens import AuthServer, FileTokens

__all__ = ["REFRESH_MARGIN", "ConnectionAuth", "StepReport"]

REFRESH_MARGIN = 30.0
"""Seconds before expiry a token is refreshed (at most a tenth of its lifetime)."""

REFRESH_TIMEOUT = 30.0
"""Seconds a token refresh may take. It is not cut short by the request that
needed it: a rotating authorization server has spent the old refresh token by
the time it answers, so an answer thrown away is a login lost."""

StepReport = Callable[[str, str, int, float, str], None]
"""(step, outcome, HTTP status, seconds, error): `Hooks.on_auth`."""


class ConnectionAuth(httpx2.Auth):
    """A connection's OAuth: the SDK's provider, without its lock on the hot path.

    Args:
        name: The connection (for messages and the login desk).
        provider: The SDK provider doing discovery, registration and tokens.
        tokens: Its storage (the same `FileTokens` the provider holds).
        desk: Where a login under way is found.
        on_step: Reports each OAuth step.
        interactive: A user logs in (else client credentials).
    """

    def __init__(
        self,
        name: str,
        provider: OAuthClientProvider | None,
        tokens: FileTokens,
        desk: LoginDesk,
        on_step: StepReport,
        interactive: bool,
    ) -> None:
        self.name = name
        self.provider: OAuthClientProvider | None = provider
        self.tokens = tokens
        self.interactive = interactive
        self.authorize_began = 0.0
        self._desk = desk
        self._on_step = on_step
        self._expires_at: float | None = None
        self._lifetime: float | None = None
        self._why: LoginRequired | None = None  # a refused refresh, once seen
        # This try's authorization (one per login): its token, whether the
        # server took it once, whether its refusal was told (counted once).
        self._authorized: object | None = None
        self._accepted = False
        self._counted = False
        # RFC 8628: the device endpoint the authorization server metadata
        # names (the SDK's model drops it), and a device login's grant.
        self._device_endpoint: str | None = None
        self._device: DeviceGrant | None = None
        self._device_request: httpx2.Request | None = None

    # --- what the server says ------------------------------------------------------

    def check_issuer(self, result: AuthorizationCodeResult) -> None:
        """The authorization response comes from the server the login went to
        (RFC 9207: its `iss`, compared as a string; absent only where the
        server's metadata does not promise it).

        Raises:
            AuthMismatch: Another issuer, or none where one was promised.
        """
        metadata = self._sdk().context.oauth_metadata
        try:
            validate_authorization_response_iss(result.iss, metadata)
        except OAuthFlowError:
            expected = str(metadata.issuer) if metadata is not None else "none known"
            if result.iss is not None:
                raise AuthMismatch(
                    "the authorization response names another issuer (iss "
                    f"{shown(result.iss)}, not {expected}): refused (RFC 9207), "
                    "the code is not exchanged; a mix-up of authorization "
                    "servers looks like this"
                ) from None
            raise AuthMismatch(
                f"the authorization server {expected} promises an iss in its "
                "answers (authorization_response_iss_parameter_supported) and "
                "sent none: refused (RFC 9207), the code is not exchanged"
            ) from None

    def _refused(self, response: httpx2.Response) -> LoginRequired:
        """The server refuses the token a login got (or its scope)."""
        if response.status_code == 403:
            scope = extract_scope_from_www_auth(response)
            wants = f", it asks for scope {shown(scope, 120)}" if scope else ""
            return self._counts(
                "the server refused the scope it asked for: HTTP 403 "
                f"insufficient_scope{wants}"
            )
        return self._counts(
            f"the server refused the token the login got: HTTP {response.status_code}"
        )

    def _counts(self, why: str) -> LoginRequired:
        """`AuthorizationRefused(why)`, counted by the connection, for the first
        refusal of this try's authorization; a plain `LoginRequired` otherwise
        (no authorization in this try, or its refusal was told already)."""
        if self._authorized is None or self._counted:
            return LoginRequired(why)
        self._counted = True
        return AuthorizationRefused(why)

    def _asked_already(self, response: httpx2.Response) -> bool:
        """A 403 `insufficient_scope` names only scopes the last authorization
        asked for (or the token has): asking again cannot help."""
        wanted = scopes(extract_scope_from_www_auth(response))
        context = self._sdk().context
        token = context.current_tokens
        asked = scopes(context.client_metadata.scope)
        asked |= scopes(token.scope if token is not None else None)
        return bool(wanted) and wanted <= asked

    async def _drop_refused(self) -> None:
        """Forget a token the server refused right after issuing it (keeping
        the registration): the next login asks for a new one."""
        self._sdk().context.clear_tokens()
        self._expires_at = None
        await self.tokens.drop_tokens()

    # --- device login (RFC 8628) ---------------------------------------------------

    async def device_turn(self) -> httpx2.Request | None:
        """The provider's authorization step: for a device login under way,
        the device authorization request (None: the browser's turn).

        Raises:
            DeviceLoginUnsupported: The authorization server names no device
                authorization endpoint.
        """
        login = self._desk.pending(self.name) if self.interactive else None
        if login is None or not login.device:
            return None
        if self._device_endpoint is None:
            raise self._no_device(login, None)
        self.authorize_began = time.monotonic()
        context = self._sdk().context
        self._device = DeviceGrant(context, self._device_endpoint, login, self.report)
        self._device_request = self._device.first_request()
        return self._device_request

    def _no_device(self, login: Login, issuer: object) -> LoginRequired:
        """End `login` (a device login): its server does not offer one."""
        context = self._sdk().context
        where = str(issuer or context.auth_server_url or origin(context.server_url))
        error = unsupported(self.name, where)
        login.cannot(str(error))
        return error

    # --- reports -------------------------------------------------------------------

    def report(
        self, step: str, outcome: str, status: int, elapsed: float, error: str
    ) -> None:
        self._on_step(step, outcome, status, elapsed, error)

    def since_authorize(self) -> float:
        began = self.authorize_began
        return time.monotonic() - began if began else 0.0

    # --- token bookkeeping ---------------------------------------------------------

    def _sdk(self) -> OAuthClientProvider:
        assert self.provider is not None
        return self.provider

    async def _load(self) -> None:
        provider = self._sdk()
        await oauth_load(provider)  # tokens and client from our storage
        context = provider.context
        server = self.tokens.auth_server()
        client = context.client_info
        if server is not None:
            self._device_endpoint = server.device_endpoint
        if (
            server is not None
            and context.oauth_metadata is None
            and (
                client is None
                or client.issuer is None
                or issuers_match(client.issuer, str(server.metadata.issuer))
            )
        ):
            # Where the stored tokens came from: a refresh goes to its token
            # endpoint (else the SDK guesses the resource server's /token).
            context.oauth_metadata = server.metadata
            context.auth_server_url = server.issuer
            context.protected_resource_metadata = server.resource
        self._track()

    def _track(self) -> None:
        """Note the current token's expiry (the SDK does not restore it)."""
        context = self._sdk().context
        token = context.current_tokens
        if token is None or token.expires_in is None:
            self._expires_at = self._lifetime = None
        else:
            self._lifetime = float(token.expires_in)
            self._expires_at = time.time() + token.expires_in
        context.token_expiry_time = self._expires_at

    def _fresh(self) -> bool:
        """The current token may be sent (not within the refresh margin of expiry)."""
        token = self._sdk().context.current_tokens
        if token is None or not token.access_token:
            return False
        if self._expires_at is None:
            return True
        margin = min(REFRESH_MARGIN, (self._lifetime or 0.0) / 10)
        return time.time() < self._expires_at - margin

    # --- the flow ------------------------------------------------------------------

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        provider = self._sdk()
        context = provider.context
        if not oauth_loaded(provider):
            async with context.lock:
                if not oauth_loaded(provider):
                    await self._load()
        challenge = (
            self._desk.take_step_up(self.name, context.server_url)
            if self.interactive
            else None
        )
        if challenge is not None:
            # The user logs in for the scope a request was refused with: the
            # flow starts from that refusal (the old token may still open the
            # session, so waiting for a 401 would never ask for the scope).
            response = httpx2.Response(
                403, headers={"WWW-Authenticate": challenge}, request=request
            )
            basis = context.current_tokens
        else:
            token = context.current_tokens
            if token is not None and not self._fresh() and context.can_refresh_token():
                async with context.lock:  # one refresh in flight; the others wait
                    if context.current_tokens is token:
                        await self._refresh()
            sent = self._fresh()
            if sent:
                self._authorize(request)
            basis = context.current_tokens  # what the answer below refused
            response = yield request
            if not challenged(response) or not bearer(response):
                if sent and basis is self._authorized:
                    self._accepted = True
                return
            token = context.current_tokens
            if sent and response.status_code == 401 and context.can_refresh_token():
                # A token the server no longer takes: one refresh, then one retry.
                async with context.lock:
                    if context.current_tokens is token:
                        self._expires_at = time.time()
                        await self._refresh()
                if self._fresh():
                    self._authorize(request)
                    basis = context.current_tokens
                    response = yield request
                    if not challenged(response):
                        return
            login = self._desk.pending(self.name) if self.interactive else None
            # One authorization per login: a challenge after this login's own
            # (its token refused again) waits for the user, it does not loop.
            if self.interactive and (login is None or login.url is not None):
                if response.status_code == 403:
                    challenge = response.headers.get("www-authenticate", "")
                    self._desk.hold_step_up(self.name, context.server_url, challenge)
                fresh = sent and basis is self._authorized and not self._accepted
                if fresh:  # right after the token exchange: refused
                    refusal = self._refused(response)
                    if response.status_code == 401:
                        await self._drop_refused()
                    raise refusal
                if response.status_code == 403:
                    if self._asked_already(response):
                        raise self._refused(response)
                    raise LoginRequired("the server asks for more scope")
                # A refused refresh seen by another request says more.
                raise LoginRequired(str(self._why) if self._why else NO_LOGIN)
        # The SDK's flow, driven by hand: `async for` would not pass the
        # responses httpx sends back into it.
        flow = self._full_flow(request, response, basis)
        try:
            outgoing = await flow.__anext__()
            while True:
                outgoing = await flow.asend((yield outgoing))
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _authorize(self, request: httpx2.Request) -> None:
        token = self._sdk().context.current_tokens
        assert token is not None
        request.headers["Authorization"] = f"Bearer {token.access_token}"

    async def _refresh(self) -> None:
        """Refresh the token, to the end whatever happens to the request that
        needed it: sent on a client of its own, shielded from the caller's
        cancellation (a ping's deadline), within `REFRESH_TIMEOUT`."""
        request = await oauth_refresh_request(self._sdk())
        began = time.monotonic()
        with anyio.CancelScope(shield=True):
            try:
                with anyio.fail_after(REFRESH_TIMEOUT):
                    async with httpx2.AsyncClient(
                        timeout=REFRESH_TIMEOUT, follow_redirects=False
                    ) as client:
                        answer = await client.send(request)
            except (httpx2.HTTPError, TimeoutError) as exc:
                took = time.monotonic() - began
                self.report("refresh", "failed", 0, took, "no answer")
                if isinstance(exc, httpx2.HTTPError):
                    raise
                raise httpx2.ReadTimeout(
                    f"no answer to the token refresh within {REFRESH_TIMEOUT:g} s",
                    request=request,
                ) from None
            await self._refreshed(answer, time.monotonic() - began)

    async def _refreshed(self, response: httpx2.Response, elapsed: float) -> None:
        """Take the answer to a refresh request (the SDK's handling, then ours)."""
        provider = self._sdk()
        ok = await oauth_take_refresh(provider, response)
        if ok:
            self._track()
            self.report("refresh", "ok", response.status_code, elapsed, "")
            return
        self.report("refresh", "failed", response.status_code, elapsed, "refused")
        self._expires_at = None
        await self.tokens.drop_tokens()
        if self.interactive:
            # Other requests of this session may hit the same wall meanwhile:
            # they give the same reason, not a vaguer one.
            self._why = LoginRequired(
                "the authorization server refused to refresh the token: "
                f"HTTP {response.status_code}"
            )
            raise self._counts(str(self._why))

    async def _full_flow(
        self, request: httpx2.Request, response: httpx2.Response, basis: object
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow for a challenge we already hold the answer to
        (`response`, refusing the token `basis`)."""
        provider = self._sdk()
        context = provider.context
        login = self._desk.pending(self.name) if self.interactive else None
        if login is not None and login.redirect_uri is not None:
            context.client_metadata.redirect_uris = [AnyUrl(login.redirect_uri)]
            self.tokens.redirect_uri = login.redirect_uri
            context.client_info = await self.tokens.get_client_info()
        elif login is not None:  # a device login: any registration will do
            grants = context.client_metadata.grant_types
            if DEVICE_GRANT not in grants:
                context.client_metadata.grant_types = [*grants, DEVICE_GRANT]
            self.tokens.redirect_uri = None
            context.client_info = await self.tokens.get_client_info()
        flow = provider.async_auth_flow(request)
        retried: httpx2.Response | None = None
        exchanged = False  # this flow got a token
        last: tuple[str, httpx2.Request, httpx2.Response] | None = None
        try:
            outgoing = await flow.__anext__()  # under the SDK's lock from here
            if outgoing is request and context.current_tokens is basis:
                # It would send the request to learn what we already know. (If
                # another request's flow got a new token while this one waited
                # for the lock, the request goes out with it instead: one
                # authorization, not two racing for the same login.)
                outgoing = await flow.asend(response)
            while True:
                grant = self._device
                if grant is not None and outgoing is self._device_request:
                    # The SDK's authorization step, as a device login: ask for
                    # a code, show it, poll; the SDK takes the granted tokens.
                    self._device = self._device_request = None
                    async with httpx2.AsyncClient(
                        timeout=DEVICE_HTTP_TIMEOUT, follow_redirects=False
                    ) as client:
                        with waiting_on_the_user():
                            granted = await grant.run(outgoing, client.send)
                    exchanged, last = True, None
                    outgoing = await flow.asend(granted)
                    continue
                step = step_of(outgoing) if outgoing is not request else ""
                began = time.monotonic()
                try:
                    answer = yield outgoing
                except GeneratorExit:
                    if step:
                        took = time.monotonic() - began
                        self.report(step, "failed", 0, took, "no answer")
                    raise
                if step:
                    last = (step, outgoing, answer)
                    exchanged = exchanged or (step == "token" and answer.is_success)
                    ok = answer.status_code < 400
                    # A 404 in discovery is the next fallback URL, not a failure.
                    absent = step == "discovery" and answer.status_code == 404
                    self.report(
                        step,
                        "ok" if ok else "absent" if absent else "failed",
                        answer.status_code,
                        time.monotonic() - began,
                        "" if ok or absent else f"HTTP {answer.status_code}",
                    )
                else:
                    retried = answer
                found = await server_metadata(outgoing, answer) if step else None
                if found is not None:
                    self._device_endpoint = device_endpoint(found)
                    if login is not None and login.device and not self._device_endpoint:
                        # Before registering: nothing more to ask of it.
                        raise self._no_device(login, found.get("issuer"))
                outgoing = await flow.asend(answer)
        except StopAsyncIteration:
            self._track()
            if exchanged:
                self._authorized, self._accepted = context.current_tokens, False
                if context.oauth_metadata is not None:
                    await self.tokens.set_auth_server(
                        AuthServer(
                            context.auth_server_url,
                            context.oauth_metadata,
                            context.protected_resource_metadata,
                            self._device_endpoint,
                        )
                    )
            if retried is None:
                return
            fresh = context.current_tokens is self._authorized
            if not challenged(retried):
                self._accepted = self._accepted or fresh
                return
            if self.interactive:
                # The server refuses even the token this login got: end here
                # (no second authorization in one try) and wait for the user.
                if retried.status_code == 403:
                    challenge = retried.headers.get("www-authenticate", "")
                    self._desk.hold_step_up(self.name, context.server_url, challenge)
                if not fresh or self._accepted:
                    raise LoginRequired(
                        f"the server refused the token (HTTP {retried.status_code})"
                    ) from None
                refusal = self._refused(retried)
                if retried.status_code == 401:
                    await self._drop_refused()
                raise refusal from None
            return
        except (LoginRequired, AuthMismatch):
            raise
        except Exception as exc:
            expected = context.auth_server_url or origin(context.server_url)
            mismatch = issuer_mismatch(exc, last, expected)
            if mismatch is not None:
                raise mismatch from None
            if not self.interactive:
                raise
            # A login's flow that failed (registration, code or token refused,
            # garbage): counted like a refused token, so a script logging in
            # whenever asked cannot loop on it.
            why = describe_error(exc)
            if last is not None and last[2].status_code >= 400:
                why = refused_step(last[0], last[2])  # said plainly, not the SDK's
            raise AuthorizationRefused(f"the login failed: {why}") from exc
        finally:
            await flow.aclose()
