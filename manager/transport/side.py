"""A session of the other era beside a connection's own: each client meets a
server that speaks both eras in its own era.

Many servers speak both eras (SDK 2.x servers, the conformance project's),
and what a tool does may depend on the era it is called in: asked the
handshake way, it asks on the session's back-channel (sampling, elicitation);
asked in 2026-07-28, it answers `input_required`, and it judges the calling
client's own capabilities (`-32021`). Straight, each client gets its own era.
Through one session of one era, the clients of the other lose those tools.
So beside the connection's session, an `EraSide` keeps a session of the
other era with the same server, opened on the first request that needs it,
kept while the connection lives:

- streamable HTTP under `auto` is spoken to in 2026-07-28; a handshake-era
  client's requests are served by a handshake session beside it, over
  the same pool of connections, its questions linked to the call they belong
  to as on any streamable HTTP session (`http.streams._LinkingStream`);
- stdio under `auto` is spoken to in the handshake era; a 2026-07-28 client
  is served by a second process met in 2026-07-28 (a stdio pipe serves one
  era: the SDK's servers lock it to the era of its first message). It takes
  a start slot like any start, its questions come back as `input_required`
  rounds, and its list changes are followed (`ListSources`). Whether a
  server has that era is remembered (`EraMemory.learn_beside`), so a
  handshake-only server is started twice once, never again.

A server that refuses the other era is not asked again while the connection
lives (and `EraMemory` remembers it); one that did not open it in time is
asked again after `REFUSED_FOR` seconds; meanwhile those requests go through
the connection's own session, translated between the eras as before.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..core.errors import ConnectTimeout
from .base import Hooks
from .errors import describe_error

if TYPE_CHECKING:
    from .session import McpSession

__all__ = ["REFUSED_FOR", "EraSide", "ListSources"]

logger = logging.getLogger(__name__)

REFUSED_FOR = 60.0
"""Seconds a server that did not open the other era in time is not asked for
it again (one that refused it is not asked again at all)."""


class EraSide:
    """The session of era `era` beside a connection's own, opened on first
    need and kept while the connection lives (in the connection's task group).

    Args:
        name: The connection, for the log.
        era: What clients it serves: `base.HANDSHAKE`, or `base.MODERN`.
        opener: Opens a session of that era with the server (the transport's
            own, with the spec pinned to it).
        tg: Where its task runs: the connection's, so it ends with it.
        limit: Seconds an opening may take (`connect_timeout`).
        first_wait: Seconds a request waits for an opening whose outcome is
            not known yet (a server never met in that era); `limit` if None.
        capabilities: What the server offered in that era the last time it
            was opened (`EraMemory`), None if never.
        on_outcome: Told once whether the server opened it (with what it
            offers there) or refused it (None); a try that ran out of time
            tells nothing.
    """

    def __init__(
        self,
        name: str,
        era: str,
        opener: Callable[[], AbstractAsyncContextManager[McpSession]],
        tg: anyio.abc.TaskGroup,
        limit: float,
        *,
        first_wait: float | None = None,
        capabilities: Mapping[str, object] | None = None,
        on_outcome: Callable[[Mapping[str, object] | None], None] = (
            lambda capabilities: None
        ),
    ) -> None:
        self.era = era
        self.pid: int | None = None
        """The process serving it (stdio), while it runs."""
        self.capabilities = capabilities
        """What the server offers in that era: as the session open now (or
        last open) said, or as remembered; None while not known."""
        self._name = name
        self._opener = opener
        self._tg = tg
        self._limit = limit
        self._wait = first_wait if first_wait is not None else limit
        self._on_outcome = on_outcome
        self._current: McpSession | None = None
        self._ready: anyio.Event | None = None  # set once an opening ended
        self._closed: anyio.Event | None = None  # set to close the one open
        self._ended: anyio.Event | None = None  # set once it is closed
        self._refused_until = -1.0

    @property
    def refused(self) -> bool:
        """The server refused that era lately (`REFUSED_FOR`)."""
        return anyio.current_time() < self._refused_until

    @property
    def current(self) -> McpSession | None:
        """The session open now, if any (never opens one)."""
        current = self._current
        return current if current is not None and not current.closed else None

    def hooks(self, hooks: Hooks, sources: ListSources) -> Hooks:
        """The connection's hooks as its session beside should call them: its
        process is not the connection's (`pid`), a list it says changed is
        listed from it (`sources`), and what it asks is said to come from
        beside (it serves other requests than the connection's session)."""

        def spawned(pid: int) -> None:
            self.pid = pid

        def changed(kind: str) -> None:
            sources.beside.add(kind)
            hooks.on_list_changed(kind)

        def tools_changed() -> None:
            sources.beside.add("tools")
            hooks.on_tools_changed()

        async def asks(
            method: str,
            params: Any,
            link: str | None,
            key: str | None = None,
            beside: bool = False,
        ) -> Any:
            return await hooks.on_request(method, params, link, key, beside=True)

        return replace(
            hooks,
            on_spawn=spawned,
            on_list_changed=changed,
            on_tools_changed=tools_changed,
            on_request=asks,
        )

    async def session(self, limit: float) -> McpSession | None:
        """The session, opened if need be (waiting at most `limit` seconds, or
        the opening's own limit); None when the server refused that era
        lately, or none could be opened in time."""
        if self.refused:
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
        with anyio.move_on_after(min(limit, self._wait)):
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
                self._wait = self._limit  # it opens: worth waiting for now
                self.capabilities = upstream.info.capabilities
                self._on_outcome(upstream.info.capabilities)
                try:
                    async with anyio.create_task_group() as tg:

                        async def lost() -> None:
                            # Follows its changes too (2026-07-28), as the
                            # connection's watch does for its own session.
                            await upstream.wait_lost()
                            closed.set()

                        tg.start_soon(lost)
                        # Served once a change a request makes would be
                        # heard (bounded: the listen is answered at once).
                        with anyio.move_on_after(self._limit):
                            await upstream.followed.wait()
                        self._current = upstream
                        ready.set()
                        logger.debug(
                            "%s: a %s session opened beside", self._name, self.era
                        )
                        await closed.wait()
                        tg.cancel_scope.cancel()
                finally:
                    self._current = None
        except Exception as exc:  # boundary: the side's end is not the connection's
            if opened:
                logger.debug("%s: the %s session ended: %r", self._name, self.era, exc)
            else:
                self._refused_until = anyio.current_time() + REFUSED_FOR
                if not isinstance(exc, ConnectTimeout | TimeoutError):
                    # A refusal, not a slow start: not asked again while the
                    # connection lives (and remembered for the next ones).
                    self._refused_until = math.inf
                    self.capabilities = None
                    self._on_outcome(None)  # out of time says nothing
                logger.info(
                    "%s: requests of %s clients go through the connection's own "
                    "session: the server did not open a %s session (%s)",
                    self._name,
                    self.era,
                    self.era,
                    describe_error(exc),
                )
        finally:
            self.pid = None
            self._ready = None
            ready.set()
            ended.set()


class ListSources:
    """Which session each list is taken from, when a session of the other
    era runs beside the connection's own (a stdio server's second process
    does not share the first one's state): the one that last said that list
    changed. Until the one beside says so, the connection's own.

    Attributes:
        beside: The kinds (`tools`, `prompts`, `resources`) to list from the
            session beside; a change the connection's own session tells of
            takes its kind back (`here`).
    """

    def __init__(self) -> None:
        self.beside: set[str] = set()

    def here(self, hooks: Hooks) -> Hooks:
        """The connection's hooks as its own session should call them."""

        def changed(kind: str) -> None:
            self.beside.discard(kind)
            hooks.on_list_changed(kind)

        def tools_changed() -> None:
            self.beside.discard("tools")
            hooks.on_tools_changed()

        return replace(hooks, on_list_changed=changed, on_tools_changed=tools_changed)
