"""A TCP blackhole: accepts connections on 127.0.0.1, reads everything, never answers.

It stands in for a hung HTTP or SSE server: the TCP connect succeeds, then
nothing ever comes back. It runs in a thread, so sync and async tests (on any
event loop) can use it alike:

    with Blackhole() as hole:
        url = hole.url("/mcp")
        ...

Closing it closes the listener and every accepted connection, so a client
blocked on a read sees EOF (a connection reset or "server disconnected").
"""

from __future__ import annotations

import selectors
import socket
import threading
from types import TracebackType

__all__ = ["Blackhole"]

JOIN_TIMEOUT = 5.0
"""Seconds `close()` waits for the serving thread to finish."""


class Blackhole:
    """A listener on `127.0.0.1` that accepts and reads but never writes.

    Args:
        host: The interface to bind.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.accepted = 0
        """How many connections have been accepted so far."""
        self._listener = socket.create_server((host, 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(
            target=self._serve, name=f"blackhole:{self.port}", daemon=True
        )
        self._thread.start()

    def url(self, path: str = "/mcp") -> str:
        """The `http://` URL of `path` on this blackhole."""
        return f"http://{self.host}:{self.port}{path}"

    def _serve(self) -> None:
        sel = self._selector
        sel.register(self._listener, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                sock = key.fileobj
                if sock is self._wake_r:
                    return
                if sock is self._listener:
                    conn, _addr = self._listener.accept()
                    conn.setblocking(False)
                    self._connections.append(conn)
                    self.accepted += 1
                    sel.register(conn, selectors.EVENT_READ)
                elif isinstance(sock, socket.socket):
                    self._discard(sock)

    def _discard(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client hung up
            self._selector.unregister(conn)
            self._connections.remove(conn)
            conn.close()

    def close(self) -> None:
        """Stop serving and close the listener and every connection.

        Idempotent.
        """
        if not self._thread.is_alive() and self._listener.fileno() == -1:
            return
        self._wake_w.send(b"x")
        self._thread.join(JOIN_TIMEOUT)
        for conn in self._connections:
            conn.close()
        self._connections.clear()
        self._listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
