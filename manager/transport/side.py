"""A handshake-era session beside a 2026-07-28 one: each client meets a server
that speaks both eras in its own era.

Under `protocol = "auto"` the daemon speaks 2026-07-28 to a streamable HTTP
server that answers `server/discover`. Many such servers (SDK 2.x servers,
the conformance project's) speak the handshake era too, and ask their
questions (sampling, elicitation) on the handshake session's back-channel,
which a 2026-07-28 request does not have: straight, a handshake-era client
gets the question; through a 2026-07-28 channel the server's tool fails. So a
call made for a handshake-era client that can be asked goes through a
handshake session of the daemon's own with that server (`HandshakeSide`),
opened on the first such call, over the same pool of connections, its
questions linked to the call they belong to as on any streamable HTTP session
(`http._LinkingStream`). A stdio pipe serves one era; a second process would
not share the first one's state, so stdio has no side session (README).

A server that refuses the handshake (2026-07-28 only) is not asked again for
`REFUSED_FOR` seconds; meanwhile those calls go in 2026-07-28 and its
`input_required` rounds are translated for the client, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .errors import describe_error

if TYPE_CHECKING:
    from .session import McpSession

__all__ = ["REFUSED_FOR", "HandshakeSide"]

logger = logging.getLogger(__name__)

REFUSED_FOR = 60.0
"""Seconds a server that refused the handshake is not asked for it again."""


class HandshakeSide:
    """The handshake-era session of one connection, opened on first need and
    kept while the connection lives (in the connection's task group).

    Args:
        name: The connection, for the log.
        opener: Opens a handshake-era session with the server (the transport's
            own, with the spec pinned to `legacy`).
        tg: Where its task runs: the connection's, so it ends with it.
        limit: Seconds an opening may take (`connect_timeout`).
    """

    def __init__(
        self,
        name: str,
        opener: Callable[[], AbstractAsyncContextManager[McpSession]],
        tg: anyio.abc.TaskGroup,
        limit: float,
    ) -> None:
        self._name = name
        self._opener = opener
        self._tg = tg
        self._limit = limit
        self._current: McpSession | None = None
        self._ready: anyio.Event | None = None  # set once an opening ended
        self._closed: anyio.Event | None = None  # set to close the one open
        self._ended: anyio.Event | None = None  # set once it is closed
        self._refused_until = -1.0

    async def session(self, limit: float) -> McpSession | None:
        """The handshake-era session, opened if need be (waiting at most
        `limit` seconds, or the opening's own limit); None when the server
        refused the handshake lately, or none could be opened in time."""
        if anyio.current_time() < self._refused_until:
            return None
        current = self._current
        if current is not None:
            if not current.closed:
                return current
            # The server ended it: close it, then open another.
            assert self._closed is not None and self._ended is not None
            self._closed.set()
            with anyio.move_on_after(min(limit, self._limit)):
                await self._ended.wait()
        if self._ready is None:
            self._ready = anyio.Event()
            self._tg.start_soon(self._run, self._ready)
        ready = self._ready
        with anyio.move_on_after(min(limit, self._limit)):
            await ready.wait()
        return self._current

    async def _run(self, ready: anyio.Event) -> None:
        closed = self._closed = anyio.Event()
        ended = self._ended = anyio.Event()
        opened = False
        try:
            # The opener bounds its own handshake (connect_timeout) and teardown.
            async with self._opener() as upstream:
                opened = True
                self._current = upstream
                ready.set()
                logger.debug("%s: a handshake-era session opened beside", self._name)
                try:
                    await closed.wait()
                finally:
                    self._current = None
        except Exception as exc:  # boundary: the side's end is not the connection's
            if opened:
                logger.debug("%s: the handshake-era session ended: %r", self._name, exc)
            else:
                self._refused_until = anyio.current_time() + REFUSED_FOR
                logger.info(
                    "%s: calls of handshake-era clients go in 2026-07-28: the "
                    "server did not open a handshake session (%s)",
                    self._name,
                    describe_error(exc),
                )
        finally:
            self._ready = None
            ready.set()
            ended.set()
