"""Where the HUD's events come from, and what it may ask of the daemon.

The app polls a `HudFeed` once per frame and never waits on it, so a burst of
events costs one bounded batch per frame, and a HUD that cannot keep up loses
events at its own queue (and is told how many), never slowing the daemon:

* `SubscriptionFeed`: inside the daemon, a bus subscription with its own
  bounded queue (a `Lagged` notice reports what it lost).
* `QueueFeed`: the attached HUD's worker thread puts event dicts read from the
  control socket into a bounded queue; when the queue is full the thread stops
  reading, so the daemon's queue for this client fills and reports the loss.

A feed delivers events plus three kinds of notes: `Snapshot` (start over from a
status snapshot), `Unreachable` (the daemon cannot be reached; retrying) and
`Note` (a log record or a stderr line captured while the HUD owns the terminal).

`HudBackend` is what the keys need (reload, reconnect, details) and the
periodic `info`; it is async so the attached HUD can run its blocking socket
calls on a thread.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Protocol

from ..core.events import Event
from ..core.info import DaemonInfo
from ..core.replies import ConnectionDetails, ReconnectReply, ReloadSummary
from ..core.status import ConnectionStatus

__all__ = [
    "EventSource",
    "FeedItem",
    "HudBackend",
    "HudFeed",
    "Note",
    "QueueFeed",
    "Snapshot",
    "SubscriptionFeed",
    "Unreachable",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Start over from a status snapshot (after attaching, or after a lag).

    Attributes:
        rows: One status per connection.
        info: The daemon's `info`, if fetched with it.
        reason: Shown in the log ("" shows nothing).
    """

    rows: list[ConnectionStatus]
    info: DaemonInfo | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Unreachable:
    """The daemon cannot be reached; the feed retries on its own."""

    reason: str


@dataclass(frozen=True, slots=True)
class Note:
    """A line that is not an event: a log record or a captured stderr line."""

    time: float
    level: str
    text: str


FeedItem = Event | Snapshot | Unreachable | Note
"""One thing a feed delivers: an event (object or dict) or a note."""


class HudFeed(Protocol):
    """A source the app polls once per frame."""

    def poll(self, limit: int) -> list[FeedItem]:
        """Up to `limit` items, oldest first, without waiting."""
        ...


class EventSource(Protocol):
    """The part of `manager.engine.bus.Subscription` the HUD uses."""

    def receive_nowait(self) -> Event | None:
        """The next event (or `Lagged` notice), or None if nothing is queued."""
        ...

    def close(self) -> None:
        """Stop receiving."""
        ...


class HudBackend(Protocol):
    """What the HUD asks of the daemon (directly, or over the control socket).

    Each method raises `manager.core.errors.ManagerError` (`ConfigError` for a bad
    reload, `UnknownServer`, `ControlError` when the daemon is unreachable).
    """

    async def snapshot(self) -> Snapshot:
        """A fresh status snapshot with the daemon's info."""
        ...

    async def info(self) -> DaemonInfo:
        """The daemon's info: config, last reload, drops, OTLP status."""
        ...

    async def reload(self) -> ReloadSummary:
        """Run startup.lua again; returns what changed."""
        ...

    async def reconnect(self, server: str) -> ReconnectReply:
        """Skip `server`'s backoff wait; whether it was waiting."""
        ...

    async def details(self, server: str) -> ConnectionDetails:
        """The spec summary, last stderr lines and tool names of `server`."""
        ...

    async def decide(self, approval: str, verdict: str, scope: str) -> None:
        """The user's answer to a call waiting for approval (`allow` or
        `deny`, for `once` or `always`)."""
        ...


class SubscriptionFeed:
    """The in-daemon feed: the HUD's own bus subscription.

    Args:
        source: The subscription (bounded; reports what it drops as `lagged`).
    """

    def __init__(self, source: EventSource) -> None:
        self.source = source

    def poll(self, limit: int) -> list[FeedItem]:
        """Up to `limit` queued events, without waiting."""
        items: list[FeedItem] = []
        receive = self.source.receive_nowait
        for _ in range(limit):
            event = receive()
            if event is None:
                break
            items.append(event)
        return items


class QueueFeed:
    """A bounded queue filled by a worker thread (the attached HUD).

    Args:
        maxsize: Items held before `put` blocks the producer.
    """

    def __init__(self, maxsize: int = 20_000) -> None:
        self.queue: queue.Queue[FeedItem] = queue.Queue(maxsize)

    def poll(self, limit: int) -> list[FeedItem]:
        """Up to `limit` queued items, without waiting."""
        items: list[FeedItem] = []
        get = self.queue.get_nowait
        for _ in range(limit):
            try:
                items.append(get())
            except queue.Empty:
                break
        return items
