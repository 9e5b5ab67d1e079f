"""The OAuth door: an `httpx2.Auth` for a connection that declares `oauth`.

Built on the SDK's providers, which do the discovery (protected resource
metadata, then the authorization server's metadata), the token request and its
renewal. Tokens live in memory per connection and survive its reconnects (a
client-credentials token is fetched again by itself whenever needed).
"""

from __future__ import annotations

import httpx2
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ..core.spec import ConnectionSpec

__all__ = ["MemoryTokens", "oauth_auth"]


class MemoryTokens(TokenStorage):
    """A connection's tokens and client registration, kept in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def oauth_auth(spec: ConnectionSpec, tokens: MemoryTokens) -> httpx2.Auth | None:
    """The `auth` for `spec`'s HTTP client (a resolved spec), or None."""
    oauth = spec.oauth
    if oauth is None:
        return None
    return ClientCredentialsOAuthProvider(
        server_url=spec.url,
        storage=tokens,
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        token_endpoint_auth_method=oauth.auth_method,  # type: ignore[arg-type]
        scope=oauth.scope,
        issuer=oauth.issuer,
    )
