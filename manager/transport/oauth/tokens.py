"""OAuth tokens that outlive the daemon: one 0600 file per connection.

`$XDG_STATE_HOME/mcp-manager/tokens/NAME.json` (`~/.local/state/...` by
default; the directory is 0700), written atomically. Each holds the token with
its absolute expiry and the issuer it came from: the SDK does not restore a
token's expiry from storage, so a stored token past its expiry
(or within `EXPIRY_MARGIN` of it) is not handed back, and a new one is fetched
instead of sending a dead one. A token from another issuer is not handed back
either. Every token and client secret read or written is registered with the
daemon's `SecretRegistry`, so none can show in a log line, event or span.

A client the server registered for us (dynamic registration) is kept too, with
the redirect URI it was registered for: a login on another loopback port
registers afresh rather than presenting a redirect URI the server would refuse.
A pre-registered client (`oauth.client_id`) comes from the config, never from
the file.

The authorization server the tokens came from is kept with them (its issuer
and metadata, `AuthServer`): a daemon started on stored tokens refreshes them
at that server's token endpoint, not at a guess (the SDK, knowing no metadata
yet, would send the refresh token to the resource server's own `/token`). The
client registration carries its issuer too, so one made with another
authorization server is never presented to a new one (the SDK registers
again).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp.client.auth import TokenStorage
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import ValidationError

from ...core.redact import SecretRegistry
from ...files import write_private_json

__all__ = [
    "EXPIRY_MARGIN",
    "AuthServer",
    "FileTokens",
    "forget_tokens",
    "stored_expiry",
    "token_path",
]

EXPIRY_MARGIN = 30.0
"""Seconds before its expiry a stored token is treated as expired."""


def token_path(state_dir: Path, name: str) -> Path:
    """The file holding connection `name`'s tokens and client registration."""
    return state_dir / "tokens" / f"{name}.json"


def forget_tokens(path: Path) -> bool:
    """Delete a connection's tokens and registration. Returns whether there were any."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def stored_expiry(path: Path) -> float | None:
    """The stored token's absolute expiry in `path`, if any (for `status`)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    value = data.get("expires_at") if isinstance(data, dict) else None
    return float(value) if isinstance(value, int | float) else None


@dataclass(frozen=True, slots=True)
class AuthServer:
    """The authorization server stored tokens came from.

    Attributes:
        issuer: The issuer the protected resource metadata named (None on the
            2025-03-26 path without that metadata).
        metadata: Its RFC 8414 metadata, as discovered (issuer checked).
        resource: The protected resource metadata that named it, if any.
        device_endpoint: Its RFC 8628 `device_authorization_endpoint`, if
            its metadata names one (the SDK's metadata model drops it).
    """

    issuer: str | None
    metadata: OAuthMetadata
    resource: ProtectedResourceMetadata | None = None
    device_endpoint: str | None = None


class FileTokens(TokenStorage):
    """A connection's tokens and client registration in its own file.

    Args:
        path: The file (its directory is created 0700 when first written).
        issuer: The authorization server the connection trusts; tokens stored
            for another one are ignored.
        clock: Wall clock (injectable).
        secrets: Where every token and secret read or written is registered.
        client: A pre-registered client, handed out instead of a stored one.
        redirect_uri: The login's redirect URI, if one is under way; a stored
            registration made for another one is not handed back.
    """

    def __init__(
        self,
        path: Path,
        issuer: str | None,
        clock: Callable[[], float] = time.time,
        *,
        secrets: SecretRegistry | None = None,
        client: OAuthClientInformationFull | None = None,
        redirect_uri: str | None = None,
    ) -> None:
        self.path = path
        self.issuer = issuer
        self._clock = clock
        self._secrets = secrets
        self._client = client
        self.redirect_uri = redirect_uri

    def preregistered(self, client: OAuthClientInformationFull) -> None:
        """Hand out `client` (from the config) instead of a stored registration."""
        self._client = client

    async def drop_tokens(self) -> None:
        """Forget the stored token (a refused refresh), keeping the registration."""
        data = self._read()
        if data.pop("token", None) is not None:
            data.pop("expires_at", None)
            self._write(data)

    def _register(self, *values: str | None) -> None:
        if self._secrets is not None:
            self._secrets.add([v for v in values if v])

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, object]) -> None:
        write_private_json(self.path, data)  # tokens/ and the state dir 0700

    def _now(self) -> float:
        return self._clock()

    async def get_tokens(self) -> OAuthToken | None:
        data = self._read()
        raw = data.get("token")
        if not isinstance(raw, dict) or data.get("issuer") != self.issuer:
            return None
        expires_at = data.get("expires_at")
        token = OAuthToken.model_validate(raw)
        self._register(token.access_token, token.refresh_token)
        if isinstance(expires_at, int | float):
            remaining = expires_at - self._now()
            if remaining <= EXPIRY_MARGIN:
                if not token.refresh_token:
                    return None  # expired, or about to: fetch a new one
                remaining = 0  # never sent as it is: refreshed first
            token.expires_in = int(remaining)
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._register(tokens.access_token, tokens.refresh_token)
        data = self._read()
        data["token"] = tokens.model_dump(mode="json", exclude_none=True)
        data["issuer"] = self.issuer
        data["expires_at"] = (
            self._now() + tokens.expires_in if tokens.expires_in is not None else None
        )
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._client is not None:
            self._register(self._client.client_secret)
            return self._client
        data = self._read()
        raw = data.get("client")
        if not isinstance(raw, dict) or data.get("issuer") != self.issuer:
            return None  # registered with another server: register again
        client = OAuthClientInformationFull.model_validate(raw)
        self._register(client.client_secret)
        uris = [str(u) for u in client.redirect_uris or ()]
        if self.redirect_uri is not None and uris and self.redirect_uri not in uris:
            return None  # registered for another callback port: register again
        return client

    def auth_server(self) -> AuthServer | None:
        """The authorization server the stored tokens came from, if known."""
        data = self._read()
        raw = data.get("auth_server")
        if not isinstance(raw, dict) or data.get("issuer") != self.issuer:
            return None
        try:
            metadata = OAuthMetadata.model_validate(raw.get("metadata"))
            resource = raw.get("resource")
            prm = (
                ProtectedResourceMetadata.model_validate(resource)
                if resource is not None
                else None
            )
        except ValidationError:
            return None
        issuer, device = raw.get("issuer"), raw.get("device_endpoint")
        return AuthServer(
            issuer if isinstance(issuer, str) else None,
            metadata,
            prm,
            device if isinstance(device, str) else None,
        )

    async def set_auth_server(self, server: AuthServer) -> None:
        """Keep the authorization server the tokens just came from."""
        data = self._read()
        data["auth_server"] = {
            "issuer": server.issuer,
            "metadata": server.metadata.model_dump(mode="json", exclude_none=True),
            "resource": server.resource.model_dump(mode="json", exclude_none=True)
            if server.resource is not None
            else None,
            "device_endpoint": server.device_endpoint,
        }
        data["issuer"] = self.issuer
        self._write(data)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._register(client_info.client_secret)
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        data["issuer"] = self.issuer
        self._write(data)
