"""`oauth = {...}` of a connection: how the daemon gets its access tokens.

Nothing to declare for the common case: an http/sse server that answers 401
with a `Bearer` challenge starts the interactive flow by itself (the connection
waits in `needs_login` until `mcp-manager login NAME`). Declare `oauth` to
use a pre-registered client, a client ID metadata document, a fixed callback
port, or the headless client-credentials grant; `oauth = false` turns it off.

    -- interactive, pre-registered client (the secret, if any, via ${env:...})
    mcp_add("tracker", "https://mcp.example.com/mcp", {oauth = {
      client_id = "my-app", client_secret = "${env:TRACKER_SECRET}",
      callback_port = 8765,   -- the redirect URI it was registered with
    }})
    -- headless: no login, ever; renews its token by itself
    mcp_add("ci", "https://mcp.example.com/mcp", {oauth = {
      grant = "client_credentials",
      client_id = "mcp-manager", client_secret = "${env:CI_SECRET}",
      issuer = "https://auth.example.com",   -- credentials go to that server only
    }})
    -- headless with a signed JWT (private_key_jwt, RFC 7523) instead of a secret:
    -- the PEM private key itself (say ${env:KEY}) or the path of a PEM file
    mcp_add("ci2", "https://mcp.example.com/mcp", {oauth = {
      grant = "client_credentials", client_id = "mcp-manager",
      private_key = "${env:CI_KEY}", issuer = "https://auth.example.com",
    }})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import ConfigError

__all__ = [
    "AUTH_METHODS",
    "GRANTS",
    "INTERACTIVE",
    "OAUTH_OFF",
    "OAuthSpec",
    "parse_oauth",
]

INTERACTIVE = "authorization_code"
"""The grant a user logs in for (`mcp-manager login NAME`)."""

CLIENT_CREDENTIALS = "client_credentials"

OAUTH_OFF = "off"
"""`oauth = false`: never answer a challenge with a login."""

GRANTS = (INTERACTIVE, CLIENT_CREDENTIALS)
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none", "private_key_jwt")
JWT_ALGORITHMS = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "EdDSA")
_KEYS = frozenset(
    {
        "grant",
        "client_id",
        "client_secret",
        "issuer",
        "scope",
        "auth_method",
        "client_metadata_url",
        "callback_port",
        "private_key",
        "signing_algorithm",
    }
)


@dataclass(frozen=True, slots=True)
class OAuthSpec:
    """A connection's OAuth client settings (the secret may hold `${env:...}`).

    Attributes:
        grant: `authorization_code` (a user logs in once), `client_credentials`
            (headless), or `off`.
        client_id: A pre-registered client; None: a client ID metadata document
            or dynamic registration.
        client_secret: Its secret, if it has one.
        issuer: The authorization server the credentials belong to (required
            for client credentials).
        scope: Scopes client credentials ask for (a login asks for what the
            server names: its challenge, else its `scopes_supported`).
        auth_method: How the client authenticates at the token endpoint.
        client_metadata_url: An HTTPS URL used as the client ID (CIMD).
        callback_port: A fixed loopback port for the login's redirect (for a
            client registered with an exact redirect URI); None: ephemeral.
        private_key: For client credentials with `private_key_jwt`: the PEM
            private key (may hold `${env:...}`) or the path of a PEM file.
        signing_algorithm: The JWT's algorithm; None: from the key (ES256 for
            P-256, RS256 for RSA...).
    """

    grant: str = INTERACTIVE
    client_id: str | None = None
    client_secret: str | None = None
    issuer: str | None = None
    scope: str | None = None
    auth_method: str | None = None
    client_metadata_url: str | None = None
    callback_port: int | None = None
    private_key: str | None = None
    signing_algorithm: str | None = None

    @property
    def interactive(self) -> bool:
        """A user logs in (authorization code)."""
        return self.grant == INTERACTIVE

    @property
    def token_auth_method(self) -> str:
        """The token endpoint auth method: declared, else basic with a secret."""
        if self.auth_method is not None:
            return self.auth_method
        if self.private_key is not None:
            return "private_key_jwt"
        return "client_secret_basic" if self.client_secret else "none"


def _text(label: str, table: Mapping[str, object], key: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{label}: oauth.{key} must be a non-empty string")
    return value


def _http_url(label: str, key: str, value: str | None, *, https: bool) -> None:
    if value is None:
        return
    parts = urlsplit(value)
    schemes = ("https",) if https else ("https", "http")
    if parts.scheme not in schemes or not parts.netloc:
        need = "an https URL" if https else "an http(s) URL"
        raise ConfigError(f"{label}: oauth.{key} must be {need}, got {value!r}")
    if key == "client_metadata_url" and parts.path in ("", "/"):
        raise ConfigError(
            f"{label}: oauth.client_metadata_url needs a path (the metadata "
            "document's URL, e.g. https://example.com/mcp-manager.json)"
        )


def parse_oauth(label: str, value: object, transport: object) -> OAuthSpec:
    """Validate `oauth = {...}` (or `oauth = false`).

    Raises:
        ConfigError: Naming `label`, the key and the fix.
    """
    if transport == "stdio":
        raise ConfigError(f"{label}: oauth applies to http/sse endpoints only")
    if value is False:
        return OAuthSpec(grant=OAUTH_OFF)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{label}: oauth must be a table like {{client_id = "...", '
            'client_secret = "${env:SECRET}"} or false'
        )
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"{label}: unknown oauth key {unknown[0]!r}; "
            f"known: {', '.join(sorted(_KEYS))}"
        )
    grant = _text(label, value, "grant") or INTERACTIVE
    if grant not in GRANTS:
        raise ConfigError(
            f"{label}: oauth.grant must be one of {', '.join(GRANTS)} (got {grant!r})"
        )
    client_id = _text(label, value, "client_id")
    client_secret = _text(label, value, "client_secret")
    issuer = _text(label, value, "issuer")
    metadata_url = _text(label, value, "client_metadata_url")
    _http_url(label, "issuer", issuer, https=False)
    _http_url(label, "client_metadata_url", metadata_url, https=True)
    method = _text(label, value, "auth_method")
    if method is not None and method not in AUTH_METHODS:
        raise ConfigError(
            f"{label}: oauth.auth_method must be one of {', '.join(AUTH_METHODS)}"
        )
    private_key = _text(label, value, "private_key")
    algorithm = _text(label, value, "signing_algorithm")
    if algorithm is not None and algorithm not in JWT_ALGORITHMS:
        raise ConfigError(
            f"{label}: oauth.signing_algorithm must be one of "
            f"{', '.join(JWT_ALGORITHMS)}"
        )
    if algorithm is not None and private_key is None:
        raise ConfigError(f"{label}: oauth.signing_algorithm needs oauth.private_key")
    if client_secret is not None and client_id is None:
        raise ConfigError(f"{label}: oauth.client_secret needs oauth.client_id")
    if private_key is not None:
        if grant != CLIENT_CREDENTIALS or client_id is None:
            raise ConfigError(
                f'{label}: oauth.private_key is for grant = "client_credentials" '
                "with a client_id (private_key_jwt)"
            )
        if client_secret is not None:
            raise ConfigError(
                f"{label}: oauth takes client_secret or private_key, not both"
            )
        if method not in (None, "private_key_jwt"):
            raise ConfigError(
                f"{label}: oauth.private_key signs a JWT: auth_method is "
                "private_key_jwt (or leave it out)"
            )
    elif method == "private_key_jwt":
        raise ConfigError(
            f"{label}: oauth.auth_method private_key_jwt needs oauth.private_key"
        )
    if method in AUTH_METHODS[:2] and client_secret is None:
        raise ConfigError(f"{label}: oauth.auth_method {method} needs client_secret")
    port = value.get("callback_port")
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
    ):
        raise ConfigError(f"{label}: oauth.callback_port must be a port (1-65535)")
    if grant == CLIENT_CREDENTIALS:
        if client_id is None or (client_secret is None and private_key is None):
            raise ConfigError(
                f'{label}: oauth with grant = "client_credentials" needs client_id '
                'and client_secret (e.g. client_secret = "${env:SECRET}") or '
                "private_key (a PEM key or its file, for private_key_jwt)"
            )
        if issuer is None:
            raise ConfigError(
                f"{label}: oauth needs issuer = the http(s) URL of the authorization "
                "server these credentials belong to, so they are only ever sent there"
            )
        if method == "none":
            raise ConfigError(
                f"{label}: client_credentials authenticates the client; "
                "auth_method none is not possible"
            )
        if metadata_url is not None or port is not None:
            key = "client_metadata_url" if metadata_url else "callback_port"
            raise ConfigError(
                f"{label}: oauth.{key} is for the interactive login, not for "
                "client_credentials"
            )
    scope = _text(label, value, "scope")
    if scope is not None and grant == INTERACTIVE:
        raise ConfigError(
            f"{label}: oauth.scope is for client_credentials; a login asks for the "
            "scopes the server names (its challenge, else its metadata)"
        )
    if metadata_url is not None and client_id is not None:
        raise ConfigError(
            f"{label}: oauth.client_metadata_url is the client ID; "
            "do not also set client_id"
        )
    return OAuthSpec(
        grant=grant,
        client_id=client_id,
        client_secret=client_secret,
        issuer=issuer,
        scope=scope,
        auth_method=method,
        client_metadata_url=metadata_url,
        callback_port=port,
        private_key=private_key,
        signing_algorithm=algorithm,
    )
