"""`oauth = {...}` of a connection: how the daemon gets its access tokens.

Headless, for now: `grant = "client_credentials"` with a pre-registered
`client_id` and `client_secret` (use `${env:...}` for the secret: it is
resolved at connect time and masked everywhere). The token is fetched from the
authorization server the MCP server names (its protected resource metadata)
and renewed by itself; no user is involved, ever.

    mcp_add("tracker", "https://mcp.example.com/mcp", {oauth = {
      grant = "client_credentials",
      client_id = "mcp-manager",
      client_secret = "${env:TRACKER_SECRET}",
      issuer = "https://auth.example.com",   -- credentials go to that server only
      scope = "read write",                  -- optional
      auth_method = "client_secret_basic",   -- or client_secret_post
    }})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["AUTH_METHODS", "GRANTS", "OAuthSpec", "parse_oauth"]

GRANTS = ("client_credentials",)
AUTH_METHODS = ("client_secret_basic", "client_secret_post")
_KEYS = frozenset(
    {"grant", "client_id", "client_secret", "issuer", "scope", "auth_method"}
)


@dataclass(frozen=True, slots=True)
class OAuthSpec:
    """A connection's OAuth client settings (the secret may hold `${env:...}`)."""

    grant: str
    client_id: str
    client_secret: str
    issuer: str | None = None
    scope: str | None = None
    auth_method: str = "client_secret_basic"


def _text(label: str, table: Mapping[str, object], key: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{label}: oauth.{key} must be a non-empty string")
    return value


def parse_oauth(label: str, value: object, transport: object) -> OAuthSpec:
    """Validate `oauth = {...}`.

    Raises:
        ConfigError: Naming `label`, the key and the fix.
    """
    if transport == "stdio":
        raise ConfigError(f"{label}: oauth applies to http/sse endpoints only")
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{label}: oauth must be a table like {{grant = "client_credentials", '
            'client_id = "...", client_secret = "${env:SECRET}"}'
        )
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"{label}: unknown oauth key {unknown[0]!r}; "
            f"known: {', '.join(sorted(_KEYS))}"
        )
    grant = _text(label, value, "grant") or "client_credentials"
    if grant not in GRANTS:
        raise ConfigError(
            f"{label}: oauth.grant {grant!r} is not supported yet; use "
            '"client_credentials" (interactive login is not built yet)'
        )
    client_id = _text(label, value, "client_id")
    client_secret = _text(label, value, "client_secret")
    if client_id is None or client_secret is None:
        raise ConfigError(
            f'{label}: oauth with grant = "client_credentials" needs client_id and '
            'client_secret (e.g. client_secret = "${env:SECRET}")'
        )
    issuer = _text(label, value, "issuer")
    if issuer is None or not issuer.startswith(("https://", "http://")):
        raise ConfigError(
            f"{label}: oauth needs issuer = the http(s) URL of the authorization "
            "server these credentials belong to, so they are only ever sent there"
        )
    method = _text(label, value, "auth_method") or "client_secret_basic"
    if method not in AUTH_METHODS:
        raise ConfigError(
            f"{label}: oauth.auth_method must be one of {', '.join(AUTH_METHODS)}"
        )
    return OAuthSpec(
        grant=grant,
        client_id=client_id,
        client_secret=client_secret,
        issuer=issuer,
        scope=_text(label, value, "scope"),
        auth_method=method,
    )
