"""What the OAuth flow reads in servers' answers (`auth.ConnectionAuth`):
whether a response asks for authorization (`challenged`, `bearer`), which
step of the SDK's flow a request is (`step_of`), and whether an answer is this
server's own: protected resource metadata for this resource (RFC 8707,
`check_resource`) and authorization server metadata from this issuer (RFC
8414, `server_metadata`, `issuer_mismatch`), said in a sentence.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import (
    issuers_match,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from ...core.errors import (
    AuthMismatch,
)

__all__ = [
    "METADATA_NAMES",
    "METADATA_PATHS",
    "bearer",
    "challenged",
    "check_resource",
    "issuer_mismatch",
    "origin",
    "refused_step",
    "scopes",
    "server_metadata",
    "shown",
    "step_of",
]


async def check_resource(server_url: str, resource: str | None) -> None:
    """The SDK's `validate_resource_url`: the protected resource metadata must
    name this server (RFC 8707, RFC 9728 section 3.3), or a parent of it.

    Raises:
        AuthMismatch: It names another resource.
    """
    if not resource:
        return
    expected = resource_url_from_server_url(server_url)
    if not check_resource_allowed(
        requested_resource=expected, configured_resource=resource
    ):
        raise AuthMismatch(
            "the server's protected resource metadata is for another resource "
            f"({shown(resource)}, not {expected}): refused, so no token is asked "
            "for it; check the connection's URL, or tell the server's operator"
        )


def shown(value: object, limit: int = 200) -> str:
    """A value a server sent, quoted and cut for a message."""
    text = repr(str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scopes(value: str | None) -> frozenset[str]:
    return frozenset((value or "").split())


METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid")


METADATA_NAMES = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)
"""What an authorization server metadata URL holds, wherever in its path
(RFC 8414 inserts it before the issuer's path, OpenID discovery after)."""


async def server_metadata(
    request: httpx2.Request, answer: httpx2.Response
) -> dict[str, object] | None:
    """The raw authorization server metadata a discovery step got, if it is
    one (a 200 from a metadata URL, a JSON object)."""
    if answer.status_code != 200 or request.method != "GET":
        return None
    if not any(name in request.url.path for name in METADATA_NAMES):
        return None
    try:
        await answer.aread()  # the SDK reads it too: read once, kept
        body = answer.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def issuer_mismatch(
    exc: Exception,
    last: tuple[str, httpx2.Request, httpx2.Response] | None,
    expected: str,
) -> AuthMismatch | None:
    """The SDK refused the authorization server metadata it was just given
    (RFC 8414 section 3.3: its `issuer` is not `expected`, the server it was
    asked of), as our sentence; None if the flow failed otherwise."""
    if not isinstance(exc, OAuthFlowError) or last is None:
        return None
    step, request, answer = last
    if step != "discovery" or answer.status_code != 200:
        return None
    if not request.url.path.startswith(METADATA_PATHS):
        return None
    try:
        issuer = answer.json().get("issuer")
    except (ValueError, AttributeError):
        return None
    if issuer is None or issuers_match(str(issuer), expected):
        return None
    return AuthMismatch(
        f"the authorization server's metadata names another issuer "
        f"({shown(issuer)}, not {expected}): refused (RFC 8414), nothing is "
        "sent to its endpoints"
    )


def challenged(response: httpx2.Response) -> bool:
    """401, or 403 with `insufficient_scope`: the server wants (more) authorization."""
    if response.status_code == 401:
        return True
    if response.status_code != 403:
        return False
    challenge = response.headers.get("www-authenticate", "")
    return "insufficient_scope" in challenge


def bearer(response: httpx2.Response) -> bool:
    """The 401 challenges with `Bearer` (OAuth), not some other scheme."""
    challenge = response.headers.get("www-authenticate", "")
    return response.status_code != 401 or challenge.lower().startswith("bearer")


_REFUSER = {
    "token": "the token endpoint refused the authorization code",
    "registration": "the authorization server refused to register the client",
    "discovery": "the authorization server's metadata could not be read",
    "refresh": "the token endpoint refused to refresh the token",
}


def refused_step(step: str, answer: httpx2.Response) -> str:
    """A sentence for an OAuth step the server refused: who, the status and
    what its OAuth error said (`invalid_grant: ...`)."""
    said = ""
    try:
        body = answer.json()
    except (ValueError, httpx2.ResponseNotRead):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        said = f": {shown(body['error'], 80)}"
        if isinstance(body.get("error_description"), str):
            said += f" ({shown(body['error_description'])})"
    who = _REFUSER.get(step, f"the authorization server refused the {step} step")
    return f"{who} (HTTP {answer.status_code}){said}"


def step_of(request: httpx2.Request) -> str:
    """Which OAuth step a request of the SDK's flow is."""
    if request.method == "GET":
        return "discovery"
    try:
        body = request.content
    except httpx2.RequestNotRead:
        body = b""
    if b"grant_type=refresh_token" in body:
        return "refresh"
    if b"grant_type=" in body:
        return "token"
    return "registration"
