"""The HTTP endpoint's gate: Host (DNS rebinding), Origin and bearer token.

Checked before the SDK sees a request; a refusal is a plain HTTP error.
`Guard.set_token` replaces the token (`mcp-manager token --rotate`): each
listening stream (a GET) opened with the old one ends, and every request that
carries it from then on gets 401. A request already running finishes: it was
let in, and cutting it would leave the client not knowing whether it ran.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import anyio

from .views import PROFILE

__all__ = ["Guard", "Lean"]

Lean = Callable[[Any, Any, Any, Any], Awaitable[None]]
"""`(scope, receive, send, endpoint)`: serves a POST, or passes it to `endpoint`."""


class Guard:
    """ASGI middleware: Host, Origin and bearer-token checks, then the MCP app.

    Args:
        app: The MCP ASGI app.
        hosts: Accepted Host header names (any port); None accepts any.
        origins: Accepted Origin values (exact).
        token: The bearer token, or None.
        on_delete: Called with the session id of a DELETE (the session ends).
        direct: ASGI apps by exact path, called without going through `app`
            (the MCP endpoint itself, past Starlette's routing and error
            middleware: a few layers less per request). Lifespan and every
            other path still go to `app`.
        profiles: The declared profiles' names (`/mcp/NAME`).
        endpoint_path: Where the endpoint is (profiles are below it).
        lean: Gets each POST to the endpoint (and its profiles) first, and
            each GET (which may resume one of its streams), with
            the endpoint to pass it to when it does not serve it itself
            (`exchange.Exchange`).
    """

    def __init__(
        self,
        app: Any,
        *,
        hosts: frozenset[str] | None,
        origins: frozenset[str],
        token: str | None,
        on_delete: Callable[[str], None],
        direct: Mapping[str, Any] | None = None,
        profiles: Callable[[], Collection[str]] = frozenset,
        endpoint_path: str = "/mcp",
        lean: Lean | None = None,
    ) -> None:
        self.app = app
        self._direct = dict(direct or {})
        self._profiles = profiles
        self._profile_prefix = endpoint_path + "/"
        self._endpoint = self._direct.get(endpoint_path, app)
        self.hosts = hosts
        self.origins = origins
        self._token = f"Bearer {token}".encode() if token else None
        self._on_delete = on_delete
        self._lean = lean
        self._listening: set[anyio.CancelScope] = set()
        """The GET streams open now, to end when the token changes."""

    def set_token(self, token: str) -> int:
        """Require `token` from now on; end the listening streams opened with
        the old one. Returns how many were ended."""
        self._token = f"Bearer {token}".encode()
        for scope in self._listening:
            scope.cancel()
        return len(self._listening)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = auth = session = None
        padded = False
        for key, value in scope["headers"]:
            if key.startswith(b"mcp-") and value != value.strip(b" \t"):
                padded = True
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value
            elif key == b"authorization":
                auth = value
            elif key == b"mcp-session-id":
                session = value
        if padded:
            # HTTP says a field value has no leading or trailing white space
            # (RFC 9110 5.5); uvicorn's httptools parser keeps it, and the SDK
            # then finds `Mcp-Name: x ` unequal to the body's `x`.
            scope = {**scope, "headers": _trimmed(scope["headers"])}
        problem = self._check(host, origin, auth)
        if problem is not None:
            status, message, extra = problem
            await _reject(send, status, message, extra)
            return
        path: str = scope["path"]
        name = ""
        if path.startswith(self._profile_prefix):
            name = path[len(self._profile_prefix) :].rstrip("/")
        if name:
            # /mcp/PROFILE: the same endpoint, the profile's view (`views`).
            declared = self._profiles()
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none declared"
                await _reject(
                    send,
                    404,
                    f"no profile named {name!r} (profiles: {known}); declare it "
                    "with mcp_profile in startup.lua",
                    [],
                )
                return
            token = PROFILE.set(name)
            try:
                await self._serve(scope, receive, send, self._endpoint)
            finally:
                PROFILE.reset(token)
        elif path in self._direct:
            await self._serve(scope, receive, send, self._direct[path])
        else:
            await self.app(scope, receive, send)
        if scope["method"] == "DELETE" and session is not None:
            self._on_delete(session.decode("latin-1"))

    async def _serve(self, scope: Any, receive: Any, send: Any, endpoint: Any) -> None:
        method = scope["method"]
        if method == "GET" and self._token is not None:
            await self._listen(scope, receive, send, endpoint)
        elif self._lean is not None and method in ("POST", "GET"):
            await self._lean(scope, receive, send, endpoint)
        else:
            await endpoint(scope, receive, send)

    async def _listen(self, scope: Any, receive: Any, send: Any, endpoint: Any) -> None:
        """A GET stream, ended (cleanly) if the token changes while it is open."""
        started = finished = False

        async def tracked(message: Any) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif not message.get("more_body", False):
                finished = True
            await send(message)

        with anyio.CancelScope() as cancel:
            self._listening.add(cancel)
            try:
                if self._lean is not None:
                    await self._lean(scope, receive, tracked, endpoint)
                else:
                    await endpoint(scope, receive, tracked)
            finally:
                self._listening.discard(cancel)
        if cancel.cancel_called and not finished:
            with contextlib.suppress(Exception):  # boundary: the client may be gone
                if started:
                    await send({"type": "http.response.body", "body": b""})
                else:
                    await _reject(send, 401, "the bearer token was replaced", [])

    def _check(
        self, host: bytes | None, origin: bytes | None, auth: bytes | None
    ) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if self.hosts is not None:
            name = _host_name(host.decode("latin-1")) if host else ""
            if name not in self.hosts:
                return 421, f"Host {name or '(none)'!r} is not accepted here", []
        if origin is not None and origin.decode("latin-1") not in self.origins:
            shown = origin.decode("latin-1")[:100]
            return 403, f"Origin {shown!r} is not allowed (see --allow-origin)", []
        if self._token is not None and (
            auth is None or not hmac.compare_digest(auth, self._token)
        ):
            challenge = [(b"www-authenticate", b'Bearer realm="mcp-manager"')]
            return 401, "missing or wrong bearer token", challenge
        return None


def _trimmed(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [
        (key, value.strip(b" \t") if key.startswith(b"mcp-") else value)
        for key, value in headers
    ]


def _host_name(header: str) -> str:
    """The name part of a Host header, lowercased (`[::1]:80` -> `[::1]`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0] if ":" in header else header


async def _reject(
    send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
