"""Every error mcp-manager raises on purpose, in one tree.

```
ManagerError
├── ConfigError            startup.lua or an option is wrong (file, line, connection)
├── TransportError         talking to an upstream failed; the reconnect loop retries
│   ├── ConnectFailed      refused, missing executable, handshake rejected, garbage
│   │   ├── AuthRefused    the server said 401/403: retried rarely, never hammered
│   │   ├── LoginRequired  OAuth wants the user: waits in needs_login for `login`
│   │   │   └── AuthorizationRefused  ... because it refused what a login got it
│   │   └── AuthMismatch   OAuth metadata or answer not for this server: refused
│   ├── ConnectTimeout     connect + initialize + tool listing ran out of time
│   └── Disconnected       an established session died (exit, EOF, ping, lost session)
├── CallError              a request could not be made or finished (never retried)
│   ├── UnknownServer
│   │   └── UnknownTool    the server lists no tool of that name
│   ├── ServerUnavailable  not connected (state, attempt, next retry, last error)
│   ├── CallTimeout
│   └── UpstreamError      the server answered with a JSON-RPC error (code kept)
└── ControlError           the CLI could not talk to the daemon
```

This module imports nothing from the package.
"""

from __future__ import annotations

__all__ = [
    "AuthMismatch",
    "AuthRefused",
    "AuthorizationRefused",
    "CallError",
    "CallTimeout",
    "ConfigError",
    "ConnectFailed",
    "ConnectTimeout",
    "ControlError",
    "Disconnected",
    "LoginRequired",
    "ManagerError",
    "RefusedUnrun",
    "SessionForgotten",
    "ServerUnavailable",
    "TransportError",
    "PolicyDenied",
    "ToolHeld",
    "UnknownServer",
    "UnknownTool",
    "UpstreamError",
]


class ManagerError(Exception):
    """Base class of every error mcp-manager raises on purpose."""


class ConfigError(ManagerError):
    """The configuration (startup.lua or an option in it) is invalid.

    Args:
        message: What is wrong and how to fix it.
        file: The script the error is in, if known.
        line: The line in `file`, if known.
        connection: The connection being declared, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        connection: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.connection = connection

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"


class TransportError(ManagerError):
    """Talking to an upstream failed. Always retried by the reconnect loop.

    Args:
        message: A one-line, redacted description.
        exit_code: The stdio server's exit code, when it exited.
        retry_after: Seconds the server asked us to wait before trying again
            (an HTTP `Retry-After`), when it did.
    """

    def __init__(
        self,
        message: str,
        *,
        exit_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.retry_after = retry_after


class ConnectFailed(TransportError):
    """The connection could not be established."""


class AuthRefused(ConnectFailed):
    """The server refused our credentials (HTTP 401 or 403).

    Not an outage: retrying at the normal pace would hammer a server that said
    no (vendors suspend accounts for that). The connection waits
    `AUTH_RETRY_DELAY` instead, or for a reload or `reconnect`.
    """


class LoginRequired(ConnectFailed):
    """An OAuth server needs the user to log in (again): no token, a refused
    refresh, or a challenge for more scope.

    Never retried on its own: the connection waits in `needs_login` until
    `mcp-manager login NAME`, a reload that changes it, or `reconnect`.
    """


class AuthorizationRefused(LoginRequired):
    """The server refused what the last authorization got us: its token right
    after the token exchange, the scope it asked for (a 403
    `insufficient_scope` naming only scopes the login asked for), or the
    refresh of its token.

    Counted by the connection: after `LOGIN_LIMIT` of these in a row it stops
    asking for logins (`refused`). The message reads `what: detail`.
    """


class AuthMismatch(ConnectFailed):
    """The OAuth metadata or the authorization response is not for this server
    (RFC 8707 resource, RFC 8414 issuer, RFC 9207 `iss`): nothing is sent on.

    No login can fix it: the connection goes to `refused` at once and is tried
    again only on `login`, `reconnect` or a changed config.
    """


class ConnectTimeout(TransportError):
    """Connect, initialize and tool listing did not finish within connect_timeout."""


class Disconnected(TransportError):
    """An established session died."""


class SessionForgotten(Disconnected):
    """The server forgot the session (HTTP 404 to its id): it did not process
    the request, which may be sent again in a new session (MCP, streamable
    HTTP: "the client MUST start a new session")."""


class CallError(ManagerError):
    """A tool call could not be made or did not finish."""


class UnknownServer(CallError):
    """No connection of that name is declared."""


class UnknownTool(UnknownServer):
    """The server lists no tool of that name (`mcp-manager call`)."""


class ServerUnavailable(CallError):
    """The server is declared but not connected, and `hold` ran out."""


class RefusedUnrun(ServerUnavailable):
    """The server refused the request for want of authorization (HTTP 401,
    or 403 for more scope) and so did not run it; the connection waits for
    a login."""


class ToolHeld(CallError):
    """The tool changed since it was approved and is held back (`pin =
    "strict"`) until `mcp-manager approve`."""


class PolicyDenied(CallError):
    """The call policy (`mcp_policy`) denied the call, or its user did not
    allow it in time (`engine.policy`)."""


class CallTimeout(CallError):
    """The call did not finish within its timeout."""


class UpstreamError(CallError):
    """The server answered the request with a JSON-RPC error.

    The exception's text says what happened for logs and the CLI; `reply` and
    `data` are what the server itself said, which the gateway hands to its
    client unchanged.

    Attributes:
        code: The JSON-RPC error code it sent (e.g. -32602 invalid params,
            -32002 resource not found).
        reply: The server's own error message (the text itself if not given).
        data: The error's `data`, if it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reply: str | None = None,
        data: object = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reply = message if reply is None else reply
        self.data = data


class ControlError(ManagerError):
    """The CLI could not reach the daemon or the daemon refused the request."""
