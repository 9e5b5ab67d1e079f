"""A real OAuth 2.1 authorization server in front of the demo server, for tests.

One uvicorn app on 127.0.0.1 (an ephemeral port) plays both parts:

* the resource server: the demo server's streamable HTTP endpoint at `/mcp`,
  refusing requests without a valid, unexpired bearer token (401 with a
  `resource_metadata` challenge);
* the authorization server: protected resource metadata (RFC 9728), RFC 8414
  metadata, dynamic client registration (RFC 7591), an authorization endpoint
  that approves at once and redirects to the registered `redirect_uri` with the
  code and `state` (a test "browser" GETs it without following redirects),
  and a token endpoint for `authorization_code` (PKCE S256 checked),
  `refresh_token` (rotating: a used refresh token is dead) and
  `client_credentials` (`client_secret_basic`);
* with `device` on, the device authorization grant (RFC 8628): a
  `device_authorization_endpoint` in its metadata (absent otherwise), device
  codes, `authorization_pending` until a test decides (`decide`, an HTTP
  endpoint standing in for the user at the verification page), `slow_down`
  for the first `slow_downs` polls, `expired_token` past `device_expires_in`.

It records what a secret audit needs (every token, code, verifier and client
secret it handed out or received) and what a "never hammer" test counts
(requests per endpoint, refreshes in flight at once).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import secrets
import socket
import time
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from manager.demo_server.tools import DemoServer

__all__ = ["CLIENT_ID", "SECRET", "OAuthServer", "oauth_demo"]

CLIENT_ID = "mcp-manager-test"
"""The pre-registered client-credentials client."""

SECRET = "s3cret-oauth-7d2f9a"
"""Its secret."""


@dataclass
class _Client:
    client_id: str
    secret: str | None
    redirect_uris: list[str]
    auth_method: str


@dataclass
class _Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    scope: str


DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@dataclass
class _DeviceCode:
    client_id: str
    user_code: str
    scope: str
    resource: str
    expires_at: float
    decision: str = "pending"  # "approve", "deny"


@dataclass
class OAuthServer:
    """The authorization server's state, inspected by tests.

    Attributes:
        expires_in: Lifetime of access tokens, seconds.
        refresh_delay: Seconds the token endpoint takes to answer a refresh
            (to make concurrent refreshes visible).
        admin_tools: Tools whose calls need scope `admin` too: a token
            without it is refused with 403 `insufficient_scope` (step-up).
        refuse_scope: Every request with a valid token is refused with 403
            `insufficient_scope` asking for `tools admin`, whatever the token's
            scope (a server whose step-up never succeeds).
        refuse_refresh: Every refresh is refused (`invalid_grant`).
        refuse_code: Every authorization code is refused (`invalid_grant`).
        refuse_tokens: The tokens it hands out never work at the resource
            (401 `invalid_token`, as from a resource that trusts another
            authorization server).
        prm_resource: The `resource` its protected resource metadata names
            (None: its own `/mcp`).
        metadata_issuer: The `issuer` its RFC 8414 metadata names (None: its
            own base URL).
        as_path: The authorization server's issuer is the base URL plus this
            path (say `/as`), and its endpoints live under it only: a client
            that sends anything to the resource's own `/token` gets a 404.
        iss: RFC 9207: `omit` (no `iss` in the redirect, none promised),
            `correct`, `wrong` or `missing` (promised in the metadata; the
            redirect carries its issuer, another one, or none).
        device: Offer the device authorization grant (RFC 8628).
        device_interval: The `interval` its device codes name (seconds).
        device_expires_in: The `expires_in` of its device codes (seconds).
        slow_downs: The first this many device polls get `slow_down`.
        device_requests: Each device authorization request's form, without
            client secrets.
        polls: When each device-code token request arrived (monotonic), and
            what it was answered.
    """

    inner: ASGIApp
    expires_in: int = 3600
    refresh_delay: float = 0.0
    admin_tools: frozenset[str] = frozenset()
    refuse_scope: bool = False
    refuse_refresh: bool = False
    refuse_code: bool = False
    refuse_tokens: bool = False
    prm_resource: str | None = None
    metadata_issuer: str | None = None
    iss: str = "omit"
    as_path: str = ""
    device: bool = False
    device_interval: float = 0
    device_expires_in: float = 600
    slow_downs: int = 0
    base: str = ""
    clients: dict[str, _Client] = field(default_factory=dict)
    valid: dict[str, float] = field(default_factory=dict)  # access token -> expiry
    scopes: dict[str, str] = field(default_factory=dict)  # access token -> its scope
    asked_scopes: list[str] = field(default_factory=list)  # per authorization
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # -> its scope
    grants: dict[str, _Grant] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    issued: int = 0
    refreshes_in_flight: int = 0
    max_refreshes_in_flight: int = 0
    refused_refreshes: int = 0
    seen_secrets: set[str] = field(default_factory=set)
    device_codes: dict[str, _DeviceCode] = field(default_factory=dict)
    device_requests: list[dict[str, str]] = field(default_factory=list)
    polls: list[tuple[float, str]] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.clients[CLIENT_ID] = _Client(CLIENT_ID, SECRET, [], "client_secret_basic")

    @property
    def issuer(self) -> str:
        """The authorization server's issuer identifier."""
        return f"{self.base}{self.as_path}"

    # --- what tests do to it ---------------------------------------------------

    def expire_all(self) -> None:
        """Every access token stops working (the server "forgot" them)."""
        self.valid.clear()

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token is refused from now on."""
        self.refresh_tokens.clear()

    async def approve(self, url: str) -> str:
        """Stand in for the browser: GET the authorization URL (no redirects
        followed) and return where it redirects (the login's callback)."""
        import httpx2

        async with httpx2.AsyncClient(follow_redirects=False) as client:
            response = await client.get(url)
        assert response.status_code == 302, response.text
        return response.headers["location"]

    async def decide(self, user_code: str, decision: str = "approve") -> int:
        """Stand in for the user at the verification page: `approve` or
        `deny` the device login of `user_code` (over HTTP, as a browser
        would). Returns the HTTP status."""
        import httpx2

        async with httpx2.AsyncClient() as client:
            response = await client.post(
                f"{self.issuer}/device/verify",
                data={"user_code": user_code, "decision": decision},
            )
        return response.status_code

    # --- ASGI --------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        request = Request(scope, receive)
        path = request.url.path
        self.hits[path] += 1
        if self.as_path and path.startswith(f"{self.as_path}/"):
            path = path.removeprefix(self.as_path)  # the authorization server's
        elif self.as_path and path in (
            "/register",
            "/authorize",
            "/token",
            "/device",
            "/device/verify",
        ):
            path = "/not-here"  # the resource server has no such endpoints
        response: Response
        if path.startswith("/.well-known/oauth-protected-resource"):
            response = JSONResponse(
                {
                    "resource": self.prm_resource or f"{self.base}/mcp",
                    "authorization_servers": [self.issuer],
                    "scopes_supported": ["tools"],
                }
            )
        elif path.startswith("/.well-known/oauth-authorization-server"):
            response = JSONResponse(self._metadata())
        elif path == "/register":
            response = await self._register(request)
        elif path == "/authorize":
            response = self._authorize(request)
        elif path == "/token":
            response = await self._token(request)
        elif path == "/device" and self.device:
            response = await self._device_authorization(request)
        elif path == "/device/verify" and self.device:
            response = await self._verify(request)
        elif path.startswith("/mcp"):
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            if self.valid.get(token, 0.0) <= time.time():
                meta = f"{self.base}/.well-known/oauth-protected-resource/mcp"
                response = Response(
                    "unauthorized",
                    status_code=401,
                    headers={"WWW-Authenticate": f'Bearer resource_metadata="{meta}"'},
                )
            elif self.refuse_scope:
                response = self._insufficient_scope()
            elif not self.admin_tools or request.method != "POST":
                await self.inner(scope, receive, send)
                return
            else:
                body = await request.body()
                if self._needs_admin(body) and "admin" not in self.scopes[token]:
                    response = self._insufficient_scope()
                    await response(scope, receive, send)
                    return
                await self.inner(scope, _replay(body, receive), send)
                return
        else:
            response = Response("not found", status_code=404)
        await response(scope, receive, send)

    def _insufficient_scope(self) -> Response:
        meta = f"{self.base}/.well-known/oauth-protected-resource/mcp"
        challenge = (
            'Bearer error="insufficient_scope", scope="tools admin", '
            f'resource_metadata="{meta}"'
        )
        return Response(
            "insufficient scope",
            status_code=403,
            headers={"WWW-Authenticate": challenge},
        )

    def _needs_admin(self, body: bytes) -> bool:
        if not self.admin_tools or b"tools/call" not in body:
            return False
        try:
            message = json.loads(body)
            return message["params"]["name"] in self.admin_tools
        except (ValueError, KeyError, TypeError):
            return False

    def _metadata(self) -> dict[str, object]:
        extra: dict[str, object] = {}
        grants = ["authorization_code", "refresh_token", "client_credentials"]
        if self.device:
            extra["device_authorization_endpoint"] = f"{self.issuer}/device"
            grants.append(DEVICE_GRANT)
        if self.iss != "omit":
            extra["authorization_response_iss_parameter_supported"] = True
        return extra | {
            "issuer": self.metadata_issuer or self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "grant_types_supported": grants,
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
            ],
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["tools", "admin"],
        }

    async def _register(self, request: Request) -> Response:
        body = json.loads(await request.body())
        client_id = f"client-{next(self._counter)}"
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        secret = None if method == "none" else secrets.token_urlsafe(24)
        if secret:
            self.seen_secrets.add(secret)
        self.clients[client_id] = _Client(
            client_id, secret, list(body.get("redirect_uris") or []), method
        )
        answer = {**body, "client_id": client_id, "token_endpoint_auth_method": method}
        if secret:
            answer["client_secret"] = secret
        return JSONResponse(answer, status_code=201)

    def _authorize(self, request: Request) -> Response:
        query = request.query_params
        client = self.clients.get(query.get("client_id", ""))
        redirect_uri = query.get("redirect_uri", "")
        if client is None or redirect_uri not in client.redirect_uris:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if query.get("code_challenge_method") != "S256":
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(24)
        self.seen_secrets.add(code)
        self.asked_scopes.append(query.get("scope", ""))
        self.grants[code] = _Grant(
            client.client_id,
            redirect_uri,
            query.get("code_challenge", ""),
            query.get("scope", ""),
        )
        answer = {"code": code, "state": query.get("state", "")}
        if self.iss in ("correct", "wrong"):
            answer["iss"] = (
                self.issuer if self.iss == "correct" else "https://evil.test"
            )
        target = redirect_uri + "?" + urllib.parse.urlencode(answer)
        return RedirectResponse(target, status_code=302)

    def _client(self, request: Request, form: dict[str, str]) -> _Client | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            raw = base64.b64decode(header[6:]).decode()
            client_id, _, secret = raw.partition(":")
            client_id = urllib.parse.unquote(client_id)
            secret = urllib.parse.unquote(secret)
        else:
            client_id = form.get("client_id", "")
            secret = form.get("client_secret", "")
        client = self.clients.get(client_id)
        if client is None or (client.secret is not None and secret != client.secret):
            return None
        return client

    async def _device_authorization(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        client = self._client(request, form)
        if client is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        self.device_requests.append(
            {k: v for k, v in form.items() if k != "client_secret"}
        )
        device_code = secrets.token_urlsafe(24)
        self.seen_secrets.add(device_code)
        letters = "BCDFGHJKLMNPQRSTVWXZ"
        raw = "".join(secrets.choice(letters) for _ in range(8))
        user_code = f"{raw[:4]}-{raw[4:]}"
        self.device_codes[device_code] = _DeviceCode(
            client.client_id,
            user_code,
            form.get("scope", ""),
            form.get("resource", ""),
            time.monotonic() + self.device_expires_in,
        )
        verify = f"{self.issuer}/device/verify"
        return JSONResponse(
            {
                "device_code": device_code,
                "user_code": user_code,
                "verification_uri": verify,
                "verification_uri_complete": f"{verify}?user_code={user_code}",
                "expires_in": self.device_expires_in,
                "interval": self.device_interval,
            }
        )

    async def _verify(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        for held in self.device_codes.values():
            if held.user_code == form.get("user_code"):
                held.decision = form.get("decision", "approve")
                return Response("decided")
        return Response("no such code", status_code=404)

    def _poll(self, client: _Client, form: dict[str, str]) -> Response:
        device_code = form.get("device_code", "")
        held = self.device_codes.get(device_code)
        if held is None or held.client_id != client.client_id:
            answer = "invalid_grant"
        elif time.monotonic() >= held.expires_at:
            answer = "expired_token"
        elif self.slow_downs > 0:
            self.slow_downs -= 1
            answer = "slow_down"
        elif held.decision == "pending":
            answer = "authorization_pending"
        elif held.decision == "deny":
            answer = "access_denied"
        else:
            answer = "granted"
        self.polls.append((time.monotonic(), answer))
        if held is None or answer != "granted":
            if answer in ("access_denied", "expired_token"):
                self.device_codes.pop(device_code, None)
            return JSONResponse({"error": answer}, status_code=400)
        del self.device_codes[device_code]  # used once
        self.asked_scopes.append(held.scope)
        return self._tokens(with_refresh=True, scope=held.scope)

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        grant = form.get("grant_type")
        client = self._client(request, form)
        if client is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant == "authorization_code":
            held = self.grants.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            self.seen_secrets.add(verifier)
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
            if (
                held is None
                or self.refuse_code
                or held.client_id != client.client_id
                or held.redirect_uri != form.get("redirect_uri")
                or held.challenge != challenge
            ):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return self._tokens(with_refresh=True, scope=held.scope)
        if grant == "refresh_token":
            self.refreshes_in_flight += 1
            self.max_refreshes_in_flight = max(
                self.max_refreshes_in_flight, self.refreshes_in_flight
            )
            try:
                if self.refresh_delay:
                    await anyio.sleep(self.refresh_delay)
                old = form.get("refresh_token", "")
                if old not in self.refresh_tokens or self.refuse_refresh:
                    self.refused_refreshes += 1
                    return JSONResponse({"error": "invalid_grant"}, status_code=400)
                kept = self.refresh_tokens.pop(old)  # rotating: used once
                return self._tokens(with_refresh=True, scope=kept)
            finally:
                self.refreshes_in_flight -= 1
        if grant == DEVICE_GRANT and self.device:
            return self._poll(client, form)
        if grant == "client_credentials" and client.client_id == CLIENT_ID:
            return self._tokens(with_refresh=False, scope="tools")
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    def _tokens(self, *, with_refresh: bool, scope: str) -> Response:
        n = next(self._counter)
        access = f"tok-{n}-{secrets.token_hex(8)}"
        if not self.refuse_tokens:
            self.valid[access] = time.time() + self.expires_in
        self.scopes[access] = scope or "tools"
        self.seen_secrets.add(access)
        self.issued += 1
        body: dict[str, object] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": scope or "tools",
        }
        if with_refresh:
            refresh = f"ref-{n}-{secrets.token_hex(8)}"
            self.refresh_tokens[refresh] = scope or "tools"
            self.seen_secrets.add(refresh)
            body["refresh_token"] = refresh
        return JSONResponse(body)


def _replay(body: bytes, rest: Receive) -> Receive:
    """An ASGI `receive` that hands the app the body we already read, then
    what the server's own `receive` says (the client's disconnect: a stream
    the client left must end, or uvicorn waits for it forever at exit)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await rest()

    return receive


@asynccontextmanager
async def oauth_demo(
    expires_in: int = 3600,
    refresh_delay: float = 0.0,
    admin_tools: frozenset[str] = frozenset(),
    *,
    refuse_scope: bool = False,
    refuse_refresh: bool = False,
    device: bool = False,
) -> AsyncIterator[OAuthServer]:
    """The demo server behind `OAuthServer`, served on 127.0.0.1 until exit."""
    demo = DemoServer()
    app = demo.server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    auth = OAuthServer(
        app,
        expires_in=expires_in,
        refresh_delay=refresh_delay,
        admin_tools=admin_tools,
        refuse_scope=refuse_scope,
        refuse_refresh=refuse_refresh,
        device=device,
    )
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted
    # sockets that say so, and without it every answer waited ~40 ms (Nagle
    # against the client's delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    auth.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(
        uvicorn.Config(auth, log_config=None, log_level="warning", lifespan="on")
    )
    with sock:  # closed even when uvicorn never started serving it
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:  # noqa: ASYNC110 - uvicorn has no event
                await anyio.sleep(0.01)
            try:
                yield auth
            finally:
                server.should_exit = True
