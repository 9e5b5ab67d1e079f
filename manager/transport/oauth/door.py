"""Which connections use OAuth (`uses_oauth`) and the `httpx2.Auth` each
gets (`oauth_auth`): the SDK's provider for its grant (a user's login, client
credentials, a signed JWT), wrapped in `auth.ConnectionAuth`.
"""

from __future__ import annotations

import time

from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from ...core.errors import (
    AuthMismatch,
    LoginRequired,
)
from ...core.oauth import OAUTH_OFF, OAuthSpec
from ...core.spec import ConnectionSpec
from ..compat_mcp import (
    DeviceAwareProvider,
)
from .answers import (
    check_resource,
)
from .auth import ConnectionAuth, StepReport
from .login import CALLBACK_PATH, LoginDesk
from .tokens import FileTokens

__all__ = ["PLACEHOLDER_REDIRECT", "oauth_auth", "uses_oauth"]

PLACEHOLDER_REDIRECT = f"http://127.0.0.1{CALLBACK_PATH}"
"""The redirect URI before a login names its port (never registered: no login,
no flow)."""


def uses_oauth(spec: ConnectionSpec) -> bool:
    """Whether `spec` answers a 401 with OAuth: http/sse, not `oauth = false`,
    and no static `Authorization` header (that one is refused plainly)."""
    if spec.transport not in ("http", "sse"):
        return False
    if spec.oauth is not None:
        return spec.oauth.grant != OAUTH_OFF
    return not any(name.lower() == "authorization" for name, _ in spec.headers)


def oauth_auth(
    spec: ConnectionSpec,
    tokens: FileTokens,
    desk: LoginDesk,
    on_step: StepReport,
) -> ConnectionAuth | None:
    """The `auth` for `spec`'s HTTP client (a resolved spec), or None."""
    if not uses_oauth(spec):
        return None
    oauth = spec.oauth or OAuthSpec()
    provider: OAuthClientProvider
    if not oauth.interactive:
        return _headless(spec, oauth, tokens, desk, on_step)
    name = spec.name
    if oauth.client_id is not None:
        tokens.preregistered(
            OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                token_endpoint_auth_method=oauth.token_auth_method,
                redirect_uris=None,
                issuer=oauth.issuer,
            )
        )
    metadata = OAuthClientMetadata(
        client_name="mcp-manager",
        redirect_uris=[AnyUrl(PLACEHOLDER_REDIRECT)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=oauth.token_auth_method,  # type: ignore[arg-type]
    )
    auth = ConnectionAuth(name, None, tokens, desk, on_step, True)

    async def redirect(url: str) -> None:
        auth.authorize_began = time.monotonic()
        await desk.redirect(name, url)

    async def callback() -> AuthorizationCodeResult:
        try:
            result = await desk.callback(name)
            auth.check_issuer(result)
        except (LoginRequired, AuthMismatch) as exc:
            auth.report("authorize", "failed", 0, auth.since_authorize(), str(exc))
            raise
        auth.report("authorize", "ok", 0, auth.since_authorize(), "")
        return result

    provider = DeviceAwareProvider(
        server_url=spec.url,
        client_metadata=metadata,
        storage=tokens,
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=oauth.client_metadata_url,
        validate_resource_url=check_resource,
    )
    provider.device_turn = auth.device_turn
    auth.provider = provider
    return auth


def _headless(
    spec: ConnectionSpec,
    oauth: OAuthSpec,
    tokens: FileTokens,
    desk: LoginDesk,
    on_step: StepReport,
) -> ConnectionAuth:
    """Client credentials, with a secret or a signed JWT: no user, no login.
    Their modules (PyJWT, cryptography) load here, not with the daemon: about
    40 ms of a start that declares no such connection."""
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )

    from .keys import signing_key

    provider: OAuthClientProvider
    if oauth.private_key is not None:
        assert oauth.client_id is not None
        key, algorithm = signing_key(spec.name, oauth)
        provider = PrivateKeyJWTOAuthProvider(
            server_url=spec.url,
            storage=tokens,
            client_id=oauth.client_id,
            assertion_provider=SignedJWTParameters(
                issuer=oauth.client_id,
                subject=oauth.client_id,
                signing_key=key,
                signing_algorithm=algorithm,
            ).create_assertion_provider(),
            scope=oauth.scope,
            issuer=oauth.issuer,
        )
        return ConnectionAuth(spec.name, provider, tokens, desk, on_step, False)
    assert oauth.client_id is not None and oauth.client_secret is not None
    provider = ClientCredentialsOAuthProvider(
        server_url=spec.url,
        storage=tokens,
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        token_endpoint_auth_method=oauth.token_auth_method,  # type: ignore[arg-type]
        scope=oauth.scope,
        issuer=oauth.issuer,
    )
    return ConnectionAuth(spec.name, provider, tokens, desk, on_step, False)
