"""The OAuth door: an `httpx2.Auth` for a connection that declares `oauth`.

Built on the SDK's providers, which do the discovery (protected resource
metadata, then the authorization server's metadata), the token request and its
renewal. Tokens are kept per connection in a 0600 file (`tokens.FileTokens`),
so reconnects and daemon restarts reuse them until they expire.
"""

from __future__ import annotations

import httpx2
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
)

from ..core.spec import ConnectionSpec

__all__ = ["oauth_auth"]


def oauth_auth(spec: ConnectionSpec, tokens: TokenStorage) -> httpx2.Auth | None:
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
