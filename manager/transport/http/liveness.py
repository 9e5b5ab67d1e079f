"""Notice an HTTP server's death without traffic: an idle TCP connection as a sentinel.

A streamable HTTP session carries nothing between calls, so a server that dies
while idle is otherwise noticed only at the next ping. When a server process
dies, the kernel closes its sockets, and every open connection to it sees the
end at once. `TcpSentinel` keeps one idle connection open (it never sends a
byte) and returns from `wait_closed()` when that connection ends or cannot be
made: the caller then pings to find out whether the server is really gone.

A server or proxy that closes idle connections quickly would make the sentinel
cry wolf: a sentinel that lived less than `SHORT_LIFE` is not reopened for
`QUIET_AFTER_SHORT` seconds, so it costs at most one ping per that period.
"""

from __future__ import annotations

import anyio
import anyio.abc

__all__ = ["QUIET_AFTER_SHORT", "SHORT_LIFE", "TcpSentinel"]

CONNECT_LIMIT = 2.0
"""Seconds to open the sentinel connection."""

SHORT_LIFE = 5.0
"""A sentinel closed sooner than this after it opened was closed by policy."""

QUIET_AFTER_SHORT = 30.0
"""Seconds before reopening a sentinel that the peer closed quickly."""


class TcpSentinel:
    """One idle TCP connection to `host:port`, watched for its end.

    Args:
        host: Server host (name or IP literal).
        port: Server port.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._stream: anyio.abc.SocketStream | None = None
        self._opened = 0.0
        self._not_before = 0.0
        self.alarms = 0

    async def wait_closed(self) -> None:
        """Return when the watched connection ended or could not be opened."""
        while True:
            if self._stream is None:
                delay = self._not_before - anyio.current_time()
                if delay > 0:
                    await anyio.sleep(delay)
                try:
                    with anyio.fail_after(CONNECT_LIMIT):
                        self._stream = await anyio.connect_tcp(self.host, self.port)
                except (OSError, TimeoutError):
                    self._not_before = anyio.current_time() + SHORT_LIFE
                    self.alarms += 1
                    return
                self._opened = anyio.current_time()
            try:
                await self._stream.receive()  # data is unexpected; keep watching
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                lived = anyio.current_time() - self._opened
                await self.aclose()
                if lived < SHORT_LIFE:
                    self._not_before = anyio.current_time() + QUIET_AFTER_SHORT
                self.alarms += 1
                return

    async def aclose(self) -> None:
        """Close the connection (the next `wait_closed` opens a new one)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
