"""The MCP server side both our servers stand on: the endpoint and the demo server.

- `peers`: `ListChangedServer`, the SDK's low-level server advertising
  `list_changed`; `Peers`, the handshake-era downstream sessions that get it;
  `session_key`, which downstream connection a request came on; and
  `NOTIFY_TIMEOUT`, how long one session may take to accept a notification.

It imports the SDK's server side (and starlette's `Request`) and nothing of the
package, so the demo server takes it without the gateway or the engine.
"""
