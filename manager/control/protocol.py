"""The control API's wire format, shared by the server and the client.

Protocol: newline-delimited JSON (UTF-8), one object per line, over a Unix
stream socket that only the daemon's user can reach (the socket is mode 0600 in a
0700 directory owned by that user).

* Request: `{"cmd": NAME, ...arguments}`; one connection may send several
  requests in turn. Commands and their arguments:

  ======== ================================================= ======================
  cmd      arguments                                         result
  ======== ================================================= ======================
  ping     none                                              `{"pid": int}`
  status   none                                              list of dicts, one per
                                                             connection
  info     none                                              dict: version, pid,
                                                             config, last_reload,
                                                             dropped, connections
  reload   none                                              dict (what changed)
  reconnect `server` str                                     `{"server", "retrying"}`
  details  `server` str                                      `{"spec": dict with
                                                             secrets masked,
                                                             "stderr": [str],
                                                             "tools": [str]}`
  call     `server` str, `tool` str, `args` object (default  the MCP
           `{}`), `timeout` number > 0 or null (default:     `CallToolResult` dict
           the connection's `call_timeout`), `answer`
           object (optional: the answer to the server's
           questions during the call)
  request  `server` str, `op` `read` or `prompt`, `target`   the MCP result dict
           str (URI or prompt name), `args` object,
           `timeout` as `call`
  catalog  `kind` `tools`, `prompts` or `resources`,         list of dicts, one per
           `server` str or null (every connection)           item: `server`,
                                                             `name` (`uri`),
                                                             `exposed`, `hidden`,
                                                             ...
  events   `json` bool (accepted, ignored: always JSON),     a stream, see below
           `since` int >= 0 (optional: first the kept
           events, the last 1000, whose `seq` is above it)
  login    `server` str, `timeout` number > 0 (the login's   `{"server", "done",
           deadline; default 300), `device` bool (default    "connected", "state",
           false: RFC 8628, an address and a user code       "error", "unsupported",
           instead of a browser's redirect)                  "url": str or null,
                                                             "redirect_uri",
                                                             "user_code",
                                                             "url_complete"}` once
                                                             the URL (and code) is
                                                             known or it ended
  login_wait `server` str, `timeout` number > 0              as `login` but no `url`,
                                                             `redirect_uri`,
                                                             `user_code`,
                                                             `url_complete`, once
                                                             the login ended (or
                                                             timeout)
  login_callback `server` str, `url` str (the pasted         `{"server", "message":
           redirect URL)                                     str}`
  logout   `server` str                                      `{"server", "forgot":
                                                             bool}`
  result   `id` str (of a `mcp-manager://results/ID`  the whole `CallToolResult`
           link a cut result carries)                      dict
  token    `rotate` bool (default false: a new token         `{"source", "path",
           replaces the HTTP endpoint's own first)           "rotated",
                                                             "streams_ended"}`
                                                             (never the token)
  call_log none: the daemon writes the calls it has queued   `{"path", "dropped"}`
           (its call log is written once a second)
  ======== ================================================= ======================

  Each result but `call`'s and `request`'s is the `to_dict()` of a typed reply
  (`manager.core.replies`; `ConnectionStatus` for `status`), and the client
  reads it back with its `from_dict()`, which forgives a daemon of another
  version: a missing or wrong-typed field takes its default, an unknown one is
  ignored.

* Response: exactly one line, `{"ok": true, "result": ...}` or
  `{"ok": false, "error": {"type": ERROR_CLASS, "message": str}}`; for
  `ConfigError` the error also carries `file`, `line` and `connection`.
  `type` is the name of a class in `manager.core.errors` (`ConfigError`,
  `UnknownServer`, `UnknownTool`, `ServerUnavailable`, `CallTimeout`, `CallError`,
  `ControlError` for a malformed request) or `InternalError`.
* Stream: `events` is answered with `{"ok": true, "result": "streaming"}`, then
  one line per event (`manager.core.events.event_to_dict`, which always has `kind`),
  in bus order, until either side closes. A `lagged` event says how many events
  this client missed because it read too slowly. The connection carries nothing
  else after `events`.

Bounds: a request line is at most `MAX_REQUEST_BYTES`; a connection that sends
nothing for `IDLE_TIMEOUT` seconds while a request is due is dropped (a client
that is streaming events is exempt); a response that cannot be written within
`SEND_TIMEOUT` seconds drops the client. A malformed request gets an error
response and never disturbs the server or other clients; an over-long line also
ends its connection, since the stream cannot be resynchronised.

`client.py` speaks it with the blocking stdlib `socket` module and imports no
anyio, so CLI commands start fast; `server.py` serves it inside the daemon.
"""

from __future__ import annotations

import json

from ..core.errors import (
    CallError,
    CallTimeout,
    ConfigError,
    ControlError,
    ManagerError,
    PolicyDenied,
    ServerUnavailable,
    ToolHeld,
    UnknownServer,
    UnknownTool,
)

__all__ = [
    "CALL_SLACK",
    "CONNECT_TIMEOUT",
    "ERROR_TYPES",
    "IDLE_TIMEOUT",
    "LOGIN_DEFAULT_TIMEOUT",
    "MAX_REQUEST_BYTES",
    "REPLY_TIMEOUT",
    "SEND_TIMEOUT",
    "encode",
    "error_body",
]

MAX_REQUEST_BYTES = 1024 * 1024
"""Longest request line, in bytes, newline excluded."""

IDLE_TIMEOUT = 10.0
"""Seconds a connection may stay silent while the server waits for a request."""

SEND_TIMEOUT = 10.0
"""Seconds a response may take to be written before the client is dropped."""

CONNECT_TIMEOUT = 2.0
"""Seconds the client waits to connect to the daemon."""

REPLY_TIMEOUT = 30.0
"""Seconds the client waits for the answer to `ping`, `status` or `reload`."""

LOGIN_DEFAULT_TIMEOUT = 300.0
"""Seconds a login waits for the browser unless `timeout` says otherwise."""

CALL_SLACK = 30.0
"""Seconds the client adds to a call's timeout: `hold` (default 5 s) plus margin."""

ERROR_TYPES: dict[str, type[ManagerError]] = {
    cls.__name__: cls
    for cls in (
        CallError,
        CallTimeout,
        ConfigError,
        ControlError,
        PolicyDenied,
        ServerUnavailable,
        ToolHeld,
        UnknownServer,
        UnknownTool,
    )
}


def error_body(exc: ManagerError) -> dict[str, object]:
    """The wire form of an error: its class name and message (and, for a
    `ConfigError`, file, line and connection)."""
    if isinstance(exc, ConfigError):
        return {
            "type": "ConfigError",
            "message": exc.message,
            "file": exc.file,
            "line": exc.line,
            "connection": exc.connection,
        }
    # A kind the client knows: the class, or the nearest ancestor it knows
    # (a `RefusedUnrun` is a `ServerUnavailable` to a client of any version).
    kind = next(
        (c.__name__ for c in type(exc).__mro__ if c.__name__ in ERROR_TYPES),
        type(exc).__name__,
    )
    return {"type": kind, "message": str(exc)}


def encode(obj: object) -> bytes:
    """One JSON line."""
    return json.dumps(obj, ensure_ascii=False, default=str).encode() + b"\n"
