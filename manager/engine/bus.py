"""`EventBus`: broadcast every event to every subscriber, never blocking publishers.

Each subscriber owns a bounded queue. `publish()` is synchronous: it stamps the
event with `seq` and `time` and appends it to every queue. A full queue drops its
*oldest* event and counts it; the subscriber then receives a `Lagged(dropped=n)`
before the next event it does get, so it knows exactly how many it missed. No
other subscriber is affected. Per-subscriber drop totals are kept for metrics.

The last `HISTORY` events are kept, so that a subscriber that comes late (a
control client following `events` from the daemon's start) can be handed
what it missed, in order, before what comes next (`subscribe(since=...)`).

Use from the event-loop thread only.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType

import anyio

from ..core.events import Event, Lagged

__all__ = ["DEFAULT_QUEUE_SIZE", "HISTORY", "EventBus", "Subscription"]

logger = logging.getLogger(__name__)

_set = object.__setattr__
"""Writes a field of a frozen event: only `publish` does this, before delivery."""

DEFAULT_QUEUE_SIZE = 10_000
"""Events a subscriber may fall behind by before it starts losing the oldest."""

HISTORY = 10_000
"""Recent events kept for subscribers that ask for what came before them
(`events --since`): about ten minutes of a busy 50-server fleet, a few MB."""


class Subscription:
    """One subscriber's view of the bus: an async iterator of events.

    Use as `with bus.subscribe("hud") as sub: async for ev in sub: ...`.
    """

    def __init__(self, bus: EventBus, name: str, maxlen: int) -> None:
        self.name = name
        self.maxlen = maxlen
        self.dropped_total = 0
        self._bus = bus
        self._queue: deque[Event] = deque()
        self._pending_lag = 0
        self._notice: Lagged | None = None
        self._wakeup: anyio.Event | None = None
        self._closed = False

    def offer(self, event: Event) -> None:
        """Queue `event` (the bus's `publish`); the oldest goes when full."""
        queue = self._queue
        if len(queue) >= self.maxlen:
            queue.popleft()
            self._pending_lag += 1
            self.dropped_total += 1
        queue.append(event)
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    def notice(self, lagged: Lagged) -> None:
        """A notice for this subscriber alone, received before anything else
        (outside the queue: a full queue never pushes it out)."""
        self._notice = lagged

    def receive_nowait(self) -> Event | None:
        """The next event (or `Lagged` notice), or None if nothing is queued."""
        if self._notice is not None:
            notice, self._notice = self._notice, None
            return notice
        if self._pending_lag:
            n, self._pending_lag = self._pending_lag, 0
            return Lagged(name=self.name, dropped=n, time=self._bus.now())
        if self._queue:
            return self._queue.popleft()
        return None

    async def receive(self) -> Event:
        """Wait for the next event.

        Raises:
            anyio.EndOfStream: The subscription was closed.
        """
        while True:
            event = self.receive_nowait()
            if event is not None:
                return event
            if self._closed:
                raise anyio.EndOfStream
            self._wakeup = anyio.Event()
            await self._wakeup.wait()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop receiving; a waiting `receive()` ends with EndOfStream."""
        if not self._closed:
            self._closed = True
            self._bus.unsubscribe(self)
            if self._wakeup is not None:
                self._wakeup.set()
                self._wakeup = None

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EventBus:
    """Non-blocking fan-out of events to subscribers.

    Args:
        clock: Wall clock for the `time` stamp (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._subscribers: list[Subscription] = []
        self._seq = 0
        self._clock = clock
        self._dropped_closed: dict[str, int] = {}
        self._listeners: list[Callable[[Event], None]] = []
        self._listener_errors: dict[str, int] = {}
        self._history: deque[Event] = deque(maxlen=HISTORY)

    @property
    def last_seq(self) -> int:
        """The `seq` of the most recently published event (0 if none)."""
        return self._seq

    def subscribe(
        self,
        name: str,
        maxlen: int = DEFAULT_QUEUE_SIZE,
        *,
        kind: type[Subscription] | None = None,
        since: int | None = None,
    ) -> Subscription:
        """Open a new subscription that receives every event published from now on.

        Args:
            name: Shown in lag notices and drop metrics.
            maxlen: Queue bound; beyond it the oldest events are dropped.
            kind: A `Subscription` subclass to make (tests watch closing).
            since: Also receive, first, the kept events (the last `HISTORY`)
                whose `seq` is above this one; 0 for all of them.
        """
        if maxlen < 1:
            raise ValueError("maxlen must be >= 1")
        sub = (kind or Subscription)(self, name, maxlen)
        history = self._history
        if since is not None and since > 0 and history and history[0].seq > since + 1:
            gone = history[0].seq - since - 1  # asked for, no longer kept: said
            sub.notice(Lagged(name=name, dropped=gone, expired=gone, time=self.now()))
        if since is not None:
            for event in self._history:
                if event.seq > since:
                    sub.offer(event)
        self._subscribers.append(sub)
        return sub

    def add_listener(self, fn: Callable[[Event], None]) -> Callable[[], None]:
        """Call `fn(event)` synchronously on each publish; returns an unsubscribe.

        For cheap, non-blocking sinks (logs, metrics counters) that must see every
        event in order. A listener that raises is a bug in that sink, not in the
        publisher: the error is logged (once per listener, then counted) and the
        other listeners and subscribers still get the event.
        """
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def publish(self, event: Event) -> Event:
        """Stamp `event` with the next `seq` and the time, and deliver it.

        Never blocks and never awaits.

        Returns:
            The stamped event.
        """
        self._seq += 1
        # Stamp in place: the event is new and unseen until now, and a copy per
        # publish would be the bus's main cost. From here on it is immutable.
        _set(event, "seq", self._seq)
        _set(event, "time", self._clock())
        self._history.append(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # boundary: one sink's bug must not stop a publisher
                self._listener_failed(listener)
        for sub in self._subscribers:
            sub.offer(event)
        return event

    def _listener_failed(self, listener: Callable[[Event], None]) -> None:
        name = getattr(listener, "__qualname__", repr(listener))
        count = self._listener_errors.get(name, 0) + 1
        self._listener_errors[name] = count
        if count == 1 or count % 1000 == 0:
            logger.exception("event listener %s failed (%d times so far)", name, count)

    def now(self) -> float:
        """The bus's clock (events are stamped with it)."""
        return self._clock()

    @property
    def listener_errors(self) -> dict[str, int]:
        """Exceptions raised by each listener so far (they are never propagated)."""
        return dict(self._listener_errors)

    @property
    def subscriber_names(self) -> tuple[str, ...]:
        """The names of the open subscriptions, oldest first."""
        return tuple(sub.name for sub in self._subscribers)

    def dropped(self) -> dict[str, int]:
        """Events dropped so far, per subscriber name (closed ones included)."""
        out = dict(self._dropped_closed)
        for sub in self._subscribers:
            out[sub.name] = out.get(sub.name, 0) + sub.dropped_total
        return out

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget `sub` (its `close`), keeping its dropped count."""
        if sub in self._subscribers:
            self._subscribers.remove(sub)
            if sub.dropped_total:
                self._dropped_closed[sub.name] = (
                    self._dropped_closed.get(sub.name, 0) + sub.dropped_total
                )
