"""The one place where SDK, HTTP and OS errors become ours, as sentences.

`describe_error` gives one redacted line for humans; `map_failure` turns what
escaped connect code into a `TransportError`; `request_error` turns what a
request on a live session raised into ours (a call timeout is a `CallTimeout`,
a lost session `Disconnected`, the server's own error an `UpstreamError` with
its code, message and data).
"""

from __future__ import annotations

import errno
import os

import anyio
import anyio.abc
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from ..core.errors import (
    AuthRefused,
    CallTimeout,
    ConfigError,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    ManagerError,
    TransportError,
    UpstreamError,
)
from ..core.spec import ConnectionSpec
from .base import Refusal
from .http.status import STAND_INS, HttpStatus

__all__ = [
    "describe_error",
    "first_os_error",
    "flatten",
    "forgot_session",
    "http_refusal",
    "is_session_lost",
    "map_failure",
    "os_reason",
    "refused",
    "request_error",
    "status_failure",
    "SessionTerminated",
]


def flatten(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of (nested) exception groups, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in flatten(sub)]
    return [exc]


def describe_error(exc: BaseException) -> str:
    """One line describing `exc` for humans (status, events, logs).

    Not redacted: the engine masks secrets where text leaves it (events, status,
    call errors), with the registry it was given.
    """
    leaves = [
        e for e in flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())
    ]
    leaf = _most_informative(leaves) if leaves else exc
    text = _describe_leaf(leaf)
    return (text.splitlines()[0] if text else type(leaf).__name__)[:500]


def _most_informative(leaves: list[BaseException]) -> BaseException:
    for kind in (TransportError, OSError, httpx2.HTTPError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def _describe_leaf(exc: BaseException) -> str:
    if isinstance(exc, TransportError | ConfigError):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, httpx2.ConnectError):
        cause = first_os_error(exc)
        if cause is not None:
            return f"cannot connect: {os_reason(cause)}"
        return f"cannot connect: {exc}" if str(exc) else "cannot connect"
    if isinstance(exc, httpx2.HTTPStatusError):
        said = HttpStatus.of(exc.response.status_code, exc.response.headers).said()
        return f"{said} from {exc.request.url}"
    if isinstance(exc, httpx2.TimeoutException):
        return f"HTTP timeout ({type(exc).__name__})"
    if isinstance(exc, httpx2.RemoteProtocolError):
        return _protocol_error_text(str(exc))
    if isinstance(exc, httpx2.ReadError):
        return _with_detail(
            "the connection broke while reading the server's answer", exc
        )
    if isinstance(exc, httpx2.WriteError):
        return _with_detail("the connection broke while sending to the server", exc)
    if isinstance(exc, anyio.EndOfStream | anyio.BrokenResourceError):
        return "the server closed the connection"
    if isinstance(exc, anyio.ClosedResourceError):
        return "the session was already closed"
    if isinstance(exc, MCPError):
        if "stream ended without a response" in exc.message.lower():
            # The SDK's word for a response stream cut short: say it plainly.
            return f"the server closed the connection before answering ({exc.message})"
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _protocol_error_text(detail: str) -> str:
    """A sentence for httpcore's protocol errors (the peer broke HTTP framing)."""
    lowered = detail.lower()
    if "without sending a response" in lowered:
        return "the server closed the connection without answering"
    if "complete message body" in lowered:
        return (
            f"the server closed the connection in the middle of a response ({detail})"
        )
    return (
        f"the server broke the HTTP protocol: {detail}"
        if detail
        else ("the server broke the HTTP protocol")
    )


def _with_detail(sentence: str, exc: BaseException) -> str:
    detail = str(exc)
    return f"{sentence} ({detail})" if detail else sentence


def http_refusal(exc: BaseException) -> Refusal | None:
    """A 401/403 `HTTPStatusError` among `exc`'s leaves (the SSE client raises
    them), as a `Refusal`."""
    for leaf in flatten(exc):
        if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code in (
            401,
            403,
        ):
            return Refusal(
                leaf.response.status_code,
                leaf.response.headers.get("www-authenticate", ""),
                "authorization" in leaf.request.headers,
            )
    return None


def refused(spec: ConnectionSpec, refusal: Refusal) -> AuthRefused:
    """The error for a server that answered 401/403: what it refused and what
    to do, naming the header we sent (never its value)."""
    status = f"HTTP {refusal.status}"
    challenge = refusal.challenge.split(",", 1)[0].strip()
    wants = f" (it asks for: {challenge[:120]})" if challenge else ""
    if spec.oauth is not None and spec.oauth.interactive:
        return AuthRefused(
            f"{status}: the server refused the account we logged in as{wants}; "
            f"to log in as someone else run `mcp-manager logout {spec.name}` and "
            f"`mcp-manager login {spec.name}`; until then it is tried every 5 minutes"
        )
    if spec.oauth is not None:
        return AuthRefused(
            f"{status}: no access token was accepted for OAuth client "
            f"{spec.oauth.client_id!r} of {spec.oauth.issuer}{wants}; check "
            "client_id, client_secret, issuer and scope and reload; until then "
            "it is tried every 5 minutes"
        )
    sent = [name for name, _ in spec.headers if name.lower() == "authorization"]
    if sent or refusal.had_authorization:
        header = sent[0] if sent else "Authorization"
        return AuthRefused(
            f"{status}: the server refused the credentials in header {header}"
            f"{wants}; fix them (say the value behind ${{env:...}}) and reload, "
            "then it is tried at once; until then it is tried every 5 minutes"
        )
    others = ", ".join(name for name, _ in spec.headers)
    with_headers = f" with headers {others}" if others else " without credentials"
    return AuthRefused(
        f"{status}: the server wants authorization{wants}; we connected"
        f"{with_headers}. Add the credentials it needs (e.g. headers = "
        '{Authorization = "Bearer ${env:TOKEN}"}) and reload; until then it is '
        "tried every 5 minutes"
    )


def map_failure(exc: BaseException, what: str) -> TransportError:
    """Map an exception escaping connect/session code to a TransportError."""
    leaves = flatten(exc)
    for leaf in leaves:
        if isinstance(leaf, TransportError):
            return leaf
    leaf = _most_informative(leaves)
    message = describe_error(exc)
    if isinstance(leaf, MCPError) and _timed_out_here(leaf):
        return ConnectTimeout(f"{what}: {message}")
    wait = None
    if isinstance(leaf, httpx2.HTTPStatusError):  # the SSE client raises these
        wait = HttpStatus.of(leaf.response.status_code, leaf.response.headers)
    return ConnectFailed(
        f"{what}: {message}" if what else message,
        retry_after=None if wait is None else wait.retry_after,
    )


def status_failure(
    exc: BaseException, statuses: list[HttpStatus]
) -> ConnectFailed | None:
    """A connect that failed on the SDK's stand-in for an HTTP status ("Server
    returned an error response"), said with the status the server answered
    last, and its Retry-After for the next try; None for any other failure."""
    if not statuses:
        return None
    for leaf in flatten(exc):
        cause: BaseException | None = leaf
        while cause is not None:  # `handshake` raises ours from the SDK's
            if isinstance(cause, MCPError) and cause.message in STAND_INS:
                status = statuses[-1]
                return ConnectFailed(
                    f"the server answered {status.said()}",
                    retry_after=status.retry_after,
                )
            cause = cause.__cause__
    return None


def request_error(
    exc: BaseException,
    what: str,
    *,
    limit: float | None = None,
    lost: str | None = None,
    answered: bool = True,
) -> ManagerError | None:
    """What a request on a live session raised, as ours (None: not ours to
    translate, re-raise it).

    Args:
        exc: What the SDK (or our relay) raised.
        what: The request, for messages (`tools/call echo`).
        limit: The request's timeout in seconds, if it had one.
        lost: Why the session ended, if the transport knows.
        answered: The server's error answers a request the caller made (an
            `UpstreamError`, passed on as it is); False for our own
            requests (ping, notifications): a `ConnectFailed`.
    """
    if isinstance(exc, TimeoutError) or (
        isinstance(exc, MCPError) and _timed_out_here(exc)
    ):
        within = f" within {limit:g} s" if limit is not None else ""
        return CallTimeout(f"{what}: no result{within}")
    if not isinstance(exc, MCPError):
        return None
    # A caller's request went by the transport's one sender (a relay), which
    # says a lost session itself: a closed connection in its own words, a
    # 404 as `SessionTerminated` (`forgot_session`, read before this). There
    # "Session not found" is the server's own answer (a browser tool whose
    # session expired), passed on; only our own requests, sent by the SDK's
    # transport, read those words as the session's end.
    if _closed_here(exc) if answered else is_session_lost(exc):
        return Disconnected(f"{what}: {lost or exc.message}")
    if not answered:
        return ConnectFailed(f"{what}: {describe_error(exc)}")
    said = (
        f"{what}: the server's answer could not be read ({exc.message}); the "
        "server may have run it"
        if exc.message.startswith(_UNREADABLE_ANSWER)
        else f"{what} rejected by the server: {exc.message}"
    )
    return UpstreamError(
        f"{said} (MCP error {exc.code})",
        code=exc.code,
        reply=exc.message,
        data=exc.data,
    )


def is_session_lost(exc: MCPError) -> bool:
    """Connection closed, the HTTP session is gone, or the server forgot it.

    The SDK and our relays say a connection closed with `CONNECTION_CLOSED`
    (-32000) and their own words; a server may answer a request with -32000
    too (the JSON-RPC range for implementation errors), and that is its
    answer, passed on (`UpstreamError`), not a lost session."""
    if _closed_here(exc):
        return True
    # The SDK's transport's words for a 404, and its servers' body then: the
    # whole message, as a tool's own error may mention a session of its own
    # ("Browser session not found").
    return exc.message.lower() in ("session terminated", "session not found")


def _closed_here(exc: MCPError) -> bool:
    """A connection closed, in the words of the SDK or our relays."""
    return exc.code == CONNECTION_CLOSED and exc.message.startswith(_CLOSED_HERE)


class SessionTerminated(MCPError):
    """Our HTTP relay's word for a 404 to the session's id whose body says
    nothing else (`relay._refuse`): the server forgot the session and did not
    process the request. Only the relay, which sees the status, says it: a
    server's own error worded alike is no proof (`forgot_session`)."""


def forgot_session(exc: MCPError) -> bool:
    """The server answered 404 to the session's id and so did not process
    the request (only what our relay saw: `SessionTerminated`)."""
    return isinstance(exc, SessionTerminated)


_CLOSED_HERE = (
    "Connection closed",  # the SDK's dispatcher and session, our relays
    "SSE stream failed: ",  # the SDK's streamable HTTP transport
    "SSE stream ended without a response",
)
"""How the SDK and our relays word a `CONNECTION_CLOSED` they make."""


_UNREADABLE_ANSWER = (
    "Unexpected content type: ",  # the SDK's streamable HTTP transport
    "Failed to parse the server's answer",  # our HTTP relay
    "the server's answer has no result",
)
"""How the SDK and our relay word an answer that came and could not be read:
not a refusal (the server may well have run the request)."""


def _timed_out_here(exc: MCPError) -> bool:
    """A `REQUEST_TIMEOUT` the SDK or our relays made (`Request 'M' timed
    out`), not a server's own -32001 answer."""
    return (
        exc.code == REQUEST_TIMEOUT
        and exc.message.startswith("Request ")
        and exc.message.endswith(" timed out")
    )


def first_os_error(exc: BaseException) -> OSError | None:
    """The first `OSError` with an errno in `exc`'s chain of causes."""
    cause: BaseException | None = exc
    for _ in range(20):  # chains are short; a cycle must not loop
        if cause is None:
            return None
        if isinstance(cause, BaseExceptionGroup):
            cause = flatten(cause)[0]
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def os_reason(exc: OSError) -> str:
    """The root cause of a failed connect, e.g. "connection refused"."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, BaseExceptionGroup):  # anyio's happy eyeballs
            cause = flatten(cause)[0]
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(cause, OSError) and cause.errno:
            # The errno's own words: asyncio's strerror is "Connect call
            # failed (host, port)", which says less.
            text = os.strerror(cause.errno)
            return text[0].lower() + text[1:]
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[0].lower() + cause.strerror[1:]
        cause = cause.__cause__ or cause.__context__
    return describe_error(exc)
