"""The logging sink: events become log lines, with a noise bound.

`LogSink` listens on the bus (synchronously, in publish order) and logs each event
at the level `_LEVELS` gives its type. Noise bound: a connection logs WARNING
when its outage begins and when its error text changes; every other failed
attempt, and every attempt after the first of an outage, is DEBUG. A connection
that crash-loops (connects, dies before it is stable, again and again) stays in
one outage, so it is quiet as well. While outages go on, `run_summaries` logs
one line per interval naming all failing connections together. 200 dead
upstreams retrying forever therefore cost about 200 WARNING lines at the start,
then one line a minute.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from ..core.describe import describe, duration
from ..core.events import (
    Added,
    ApprovalAsked,
    ApprovalDecided,
    AttemptFailed,
    CallFailed,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    HookFailed,
    Idle,
    Lagged,
    LaunchLock,
    Lost,
    Reconnecting,
    Refused,
    Removed,
    ToolChanged,
    ToolsApproved,
    ToolsChanged,
    Updated,
)
from ..core.text import first_line
from .setup import EVENT_ATTR

__all__ = ["LogSink", "SUMMARY_INTERVAL", "SUMMARY_MAX_NAMES", "run_summaries"]

SUMMARY_INTERVAL = 60.0
"""Seconds between two "still failing" summary lines."""

SUMMARY_MAX_NAMES = 10
"""Failing connections named in one summary line; the rest are counted."""

_ERROR_WIDTH = 80
"""Characters of an error kept in a summary line."""

_WARNED_MEMORY = 8
"""Distinct error texts remembered per outage (alternating errors stay quiet)."""


# ------------------------------------------------------------------------- sink


class _Listenable(Protocol):
    def add_listener(self, fn: Callable[[Event], None]) -> Callable[[], None]: ...


@dataclass(slots=True)
class _Track:
    """What the sink remembers about one connection's current outage."""

    up: bool = False
    in_outage: bool = False
    outage_since: float = 0.0
    attempts: int = 0
    attempt: int = 0
    error: str = ""
    warned: list[str] = field(default_factory=list)
    connected_logged: bool = False

    def begin_outage(self, now: float) -> None:
        self.in_outage = True
        self.outage_since = now
        self.warned.clear()
        self.connected_logged = False

    def should_warn(self, error: str) -> bool:
        """Whether `error` is news in this outage (and remember it)."""
        if error in self.warned:
            return False
        if len(self.warned) >= _WARNED_MEMORY:
            self.warned.clear()
        self.warned.append(error)
        return True


_LEVELS: dict[type[Event], int] = {
    Added: logging.INFO,
    Updated: logging.INFO,
    ToolsChanged: logging.INFO,
    ToolChanged: logging.WARNING,
    LaunchLock: logging.WARNING,
    ToolsApproved: logging.INFO,
    ApprovalAsked: logging.WARNING,
    ApprovalDecided: logging.INFO,
    Idle: logging.INFO,
    Removed: logging.INFO,
    ConfigLoaded: logging.INFO,
    ConfigRejected: logging.ERROR,
    Refused: logging.ERROR,
    CallFailed: logging.WARNING,
    HookFailed: logging.WARNING,
    Lagged: logging.WARNING,
}
"""Log level by event type; anything not listed is DEBUG. Connecting
and Connected are INFO the first time only; failures follow the noise bound."""


class LogSink:
    """Turns every event on the bus into (at most) one log line.

    Args:
        bus: The event bus; the sink registers itself with `add_listener`.
        logger: Where lines go.
    """

    def __init__(self, bus: _Listenable, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("manager")
        self._tracks: dict[str, _Track] = {}
        self._pending: AttemptFailed | Lost | None = None
        self._remove: Callable[[], None] | None = bus.add_listener(self.handle)

    def close(self) -> None:
        """Stop listening; logs a line still held back."""
        self._flush()
        if self._remove is not None:
            self._remove()
            self._remove = None

    # A failure is held back until the `reconnecting` that follows it, so one
    # line says both what failed and when the next try is.
    def handle(self, event: Event) -> None:
        """Log one event (called by the bus on every publish)."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            if isinstance(event, Reconnecting) and event.name == pending.name:
                self._failure(pending, event)
                return
            self._failure(pending, None)
        if isinstance(event, AttemptFailed | Lost):
            self._pending = event
            return
        self._dispatch(event)

    def _flush(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._failure(pending, None)

    def _track(self, name: str) -> _Track:
        track = self._tracks.get(name)
        if track is None:
            track = self._tracks[name] = _Track()
        return track

    def _log(self, level: int, event: Event, message: Callable[[], str]) -> None:
        if self.logger.isEnabledFor(level):
            self.logger.log(level, "%s", message(), extra={EVENT_ATTR: event})

    def _dispatch(self, event: Event) -> None:
        level = _LEVELS.get(type(event), logging.DEBUG)
        n = event.name
        match event:
            case Added() | Updated():
                self._tracks[n] = _Track()
            case LaunchLock(change="locked" | "updated"):
                level = logging.INFO
            case Connecting():
                track = self._track(n)
                track.up = False
                track.attempt = event.attempt
                level = logging.INFO if track.attempts == 0 else logging.DEBUG
                track.attempts += 1
            case Connected():
                track = self._track(n)
                level = logging.DEBUG if track.connected_logged else logging.INFO
                track.up = True
                track.connected_logged = True
            case Removed():
                self._tracks.pop(n, None)
        self._log(level, event, lambda: describe(event))

    def _failure(self, event: AttemptFailed | Lost, retry: Reconnecting | None) -> None:
        track = self._track(event.name)
        track.up = False
        if isinstance(event, AttemptFailed):
            error = first_line(event.error)
            track.attempt = event.attempt
            if not track.in_outage:
                track.begin_outage(event.time)
        else:
            error = first_line(event.reason)
            # The counter restarts only after a stable session: then this is a new
            # outage. Otherwise the server is crash-looping within the old one.
            if not track.in_outage or retry is None or retry.attempt <= 1:
                track.begin_outage(event.time)
                track.attempts = 0  # the next try is the first of this outage
        track.error = error
        level = logging.WARNING if track.should_warn(error) else logging.DEBUG
        self._log(level, event, lambda: describe(event, retry))

    def summary(self, now: float) -> str | None:
        """One line naming every connection still failing, or None if none is.

        Args:
            now: Wall-clock time, for how long each has been failing.
        """
        self._flush()
        failing = sorted(
            (name, t) for name, t in self._tracks.items() if t.in_outage and not t.up
        )
        if not failing:
            return None
        parts = []
        for name, track in failing[:SUMMARY_MAX_NAMES]:
            error = track.error
            if len(error) > _ERROR_WIDTH:
                error = error[: _ERROR_WIDTH - 1] + "…"
            down = duration(max(0.0, now - track.outage_since))
            parts.append(f"{name} (attempt {track.attempt}, {down}, {error})")
        more = len(failing) - SUMMARY_MAX_NAMES
        if more > 0:
            parts.append(f"and {more} more")
        count = len(failing)
        noun = "connection" if count == 1 else "connections"
        return f"{count} {noun} still failing: {', '.join(parts)}"


async def run_summaries(sink: LogSink, interval: float = SUMMARY_INTERVAL) -> None:
    """Log `sink.summary()` at WARNING once per `interval` while anything fails.

    Runs until cancelled.
    """
    import time

    while True:
        await anyio.sleep(interval)
        line = sink.summary(time.time())
        if line is not None:
            sink.logger.warning("%s", line)
