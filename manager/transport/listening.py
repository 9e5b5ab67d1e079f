"""A 2026-07-28 session's changes, followed on `subscriptions/listen`.

A 2026-07-28 server tells of changes on a `subscriptions/listen` stream, not
on the connection: `Listener.follow` opens one once connected (every session
opens its own; what it says reaches the hooks by the session's message
handler, to which the SDK tees it). A stream that breaks is
the loss of the session (it also ends a request in flight on it). A stream
the server closes (its result: a graceful end) is opened again after
`RELISTEN_PAUSE`, unless the server keeps closing it at once
(`RELISTEN_TRIES` times): then changes are seen at the next connect.
`resources/subscribe` is gone in 2026-07-28: the URIs clients follow are part
of the stream (`watch`), and a change of them opens it again.
"""

from __future__ import annotations

import logging

import anyio
from mcp import ClientSession
from mcp.client.subscriptions import SubscriptionLost, listen
from mcp.shared.exceptions import MCPError

from .base import LossReport
from .errors import describe_error, is_session_lost
from .signals import LostSignal

__all__ = ["RELISTEN_PAUSE", "RELISTEN_TRIES", "Listener"]

logger = logging.getLogger(__name__)

RELISTEN_PAUSE = 1.0
"""Seconds before a `subscriptions/listen` stream the server closed is opened
again (and how soon a close counts as at once)."""

RELISTEN_TRIES = 3
"""Streams closed at once in a row after which they are not opened again."""


class Listener:
    """The changes of one 2026-07-28 session (`McpSession` owns one).

    Args:
        session: The SDK session the stream is opened on.
        lost: Set when the stream breaks (the session is lost).
        name: The server's name, for the log.
    """

    def __init__(self, session: ClientSession, lost: LostSignal, name: str) -> None:
        self._session = session
        self._lost = lost
        self._name = name
        self._watched: set[str] = set()  # URIs clients follow
        self._relisten = anyio.Event()
        self._reopened = anyio.Event()
        self._done = False
        self.followed = anyio.Event()
        """Set once the first stream is open (or refused, or lost)."""

    def watch(self, uri: str, follow: bool) -> anyio.Event:
        """Follow `uri` (a client subscribed) or stop; the stream reopens.
        Returns what is set once the stream that says so is open (or was
        refused, or lost): a change the server makes after that is heard,
        where one made right after the subscribe was lost to the reopening."""
        (self._watched.add if follow else self._watched.discard)(uri)
        self._reopened = anyio.Event()
        if self._done:  # no stream follows any more: nothing to wait for
            self._reopened.set()
        self._relisten.set()
        return self._reopened

    async def follow(self) -> None:
        """Follow the session's changes until it is lost (see the module)."""
        try:
            await self._follow()
        finally:
            self._done = True
            self._reopened.set()

    async def _follow(self) -> None:
        quick = 0
        while not self._lost.is_set:
            self._relisten = anyio.Event()
            began = anyio.current_time()
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:

                    async def reopen() -> None:
                        await self._relisten.wait()
                        scope.cancel()

                    tg.start_soon(reopen)
                    closed = await self._listen()
                    tg.cancel_scope.cancel()
            if scope.cancelled_caught:
                continue  # the URIs followed changed: open it again now
            if not closed:
                return  # refused: nothing to follow
            quick = quick + 1 if anyio.current_time() - began < RELISTEN_PAUSE else 0
            if quick >= RELISTEN_TRIES:
                logger.info(
                    "%s: the server closes every subscriptions/listen stream at "
                    "once; its changes are seen at the next connect",
                    self._name,
                )
                return
            await anyio.sleep(RELISTEN_PAUSE)

    async def _listen(self) -> bool:
        """One stream, for list changes and the URIs clients follow. Returns
        whether the server closed it (its result), not refused or broke it."""
        opened = self._reopened  # what a `watch` before this waits on
        try:
            async with listen(
                self._session,
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted(self._watched),
            ) as changes:
                self.followed.set()
                opened.set()
                # The SDK's session tees every event of the stream to its
                # message handler too (`message_handler`, which tells the
                # hooks): told here as well, each came twice (every client
                # got a resource's update twice, every list was read twice).
                async for _ in changes:
                    pass
            return True
        except SubscriptionLost as exc:
            self._lost.set(
                LossReport(
                    "the server's subscriptions/listen stream broke: the "
                    f"connection ended without the server closing it ({exc})",
                    error_type="SubscriptionLost",
                )
            )
        except MCPError as exc:
            if is_session_lost(exc):
                self._lost.set(LossReport(f"lost the server: {describe_error(exc)}"))
            else:  # not offered: changes are seen at the next connect
                logger.debug("subscriptions/listen refused: %s", exc.message)
        finally:
            self.followed.set()
            opened.set()
        return False
