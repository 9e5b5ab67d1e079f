"""The connection lifecycle as spans, built from events.

`LifecycleSpans` listens on the bus (synchronously, in publish order) and turns
each connection's events into this tree:

```
mcp.add / mcp.update           (instant; child of mcp.reload when a reload declared it)
  └── mcp.connect_loop         one episode of trying; ends when connected or removed
       ├── mcp.connect_attempt (`current.CurrentSpans`: current while the SDK connects)
       ├── mcp.backoff_wait    (mcp.backoff.delay)
       └── mcp.connect_attempt …
mcp.connection_lost            (a new trace, linked to the episode that connected)
  └── mcp.connect_loop         the next episode …
```

`mcp.auth` (one per OAuth step: discovery, registration, authorize, token,
refresh; `mcp.auth.step`, `mcp.outcome`, `http.response.status_code`) is a
child of the span current where the step ran: the connect attempt, or the
call whose request needed a fresh token.

An episode longer than `EPISODE_SPAN_LIMIT` is cut: the open `mcp.connect_loop`
ends (`mcp.outcome = continued`) and the episode goes on in a new trace whose
root `mcp.connect_loop` links back to it, so every span ends (and is exported)
within a minute and no trace grows without bound while a server stays down.

Every string attribute passes through `redact()` on its way in. The spans that
must be current while the SDK works (connect attempts, tool calls) are made in
`current.py`; an attempt finds its episode through `LifecycleSpans.episode()`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Tracer
from opentelemetry.util.types import AttributeValue as OtelAttributeValue

from ..core.events import (
    Added,
    AuthStep,
    Connected,
    Connecting,
    Event,
    Idle,
    Lost,
    Reconnecting,
    Removed,
    Updated,
)
from ..core.redact import SecretRegistry, redact
from ..engine.tracing import (
    ATTEMPT,
    ENDPOINT,
    ERROR_TYPE,
    EXIT_CODE,
    MCP_PROTOCOL_VERSION,
    OUTCOME,
    PID,
    SERVER,
    TRANSPORT,
    AttributeValue,
)
from .metrics import AUTH_STEP, Metrics

__all__ = [
    "ADD",
    "ATTEMPT_SPAN",
    "BACKOFF",
    "EPISODE_SPAN_LIMIT",
    "LOOP",
    "LOST",
    "UPDATE",
    "LifecycleSpans",
    "clean",
]

logger = logging.getLogger("manager.telemetry")

ADD: Final = "mcp.add"
UPDATE: Final = "mcp.update"
LOOP: Final = "mcp.connect_loop"
ATTEMPT_SPAN: Final = "mcp.connect_attempt"
BACKOFF: Final = "mcp.backoff_wait"
LOST: Final = "mcp.connection_lost"
AUTH: Final = "mcp.auth"
HTTP_STATUS: Final = "http.response.status_code"

EPISODE_SPAN_LIMIT = 60.0
"""Seconds an `mcp.connect_loop` (or `mcp.backoff_wait`) span may stay open."""

ROTATE_MARGIN = 1.0
"""Seconds before the limit at which the sweep cuts a span (the sweep's period)."""

_ROOT: Final = Context()
"""An empty context: a span started in it is the root of a new trace."""


def clean(
    attributes: Mapping[str, AttributeValue], secrets: SecretRegistry
) -> dict[str, AttributeValue]:
    """`attributes` with every string redacted."""
    return {
        k: redact(v, secrets) if isinstance(v, str) else v
        for k, v in attributes.items()
    }


@dataclass(slots=True)
class _Track:
    """What is open for one connection."""

    attributes: dict[str, AttributeValue]
    parent: Context = field(default_factory=Context)
    cause: str = "added"
    loop: trace.Span | None = None
    loop_started: float = 0.0
    segment: int = 0
    attempts: int = 0
    attempt: int = 0
    backoff: trace.Span | None = None
    backoff_ends: float = 0.0
    connected: trace.SpanContext | None = None
    connected_at: float | None = None
    protocol: str = ""
    after_loss: bool = False


class LifecycleSpans:
    """Builds the lifecycle spans of every connection from its events.

    Args:
        tracer: Where spans are made (None: metrics only).
        metrics: Reconnect and session metrics (None: spans only).
        clock: Monotonic clock for episode cutting (injectable).
        secrets: The values masked in every string attribute.
    """

    def __init__(
        self,
        tracer: Tracer | None,
        metrics: Metrics | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        quiet: Callable[[], bool] = lambda: False,
        secrets: SecretRegistry | None = None,
    ) -> None:
        self.secrets = secrets if secrets is not None else SecretRegistry()
        self._tracer = tracer
        self._metrics = metrics
        self._clock = clock
        self._quiet = quiet
        self._tracks: dict[str, _Track] = {}

    def _clean(
        self, attributes: Mapping[str, AttributeValue]
    ) -> dict[str, AttributeValue]:
        return clean(attributes, self.secrets)

    # --- reading ------------------------------------------------------------------

    def episode(self, server: str) -> Context | None:
        """The context of `server`'s open `mcp.connect_loop`, if one is open."""
        track = self._tracks.get(server)
        if track is None or track.loop is None:
            return None
        return trace.set_span_in_context(track.loop, _ROOT)

    @property
    def open_spans(self) -> int:
        """Lifecycle spans open right now (loops and waits)."""
        return sum(
            (t.loop is not None) + (t.backoff is not None)
            for t in self._tracks.values()
        )

    # --- events ---------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """Bus listener: update the spans of the event's connection."""
        match event:
            case Connecting():
                self._on_connecting(event)
            case Reconnecting():
                self._on_reconnecting(event)
            case Connected():
                self._on_connected(event)
            case Lost():
                self._on_lost(event)
            case Idle():
                self._on_idle(event)
            case Added():
                self._on_added(event)
            case Updated():
                self._on_updated(event)
            case Removed():
                self._on_removed(event)
            case AuthStep():
                self._on_auth(event)

    def _start(
        self,
        name: str,
        parent: Context | None,
        attributes: Mapping[str, OtelAttributeValue],
        links: list[Link] | None = None,
    ) -> trace.Span | None:
        if self._tracer is None or self._quiet():
            return None
        return self._tracer.start_span(
            name, context=parent, attributes=attributes, links=links
        )

    def _instant(
        self,
        name: str,
        parent: Context | None,
        attributes: Mapping[str, OtelAttributeValue],
        links: list[Link] | None = None,
    ) -> Context:
        """Start and end a span at once; its context (for children)."""
        span = self._start(name, parent, attributes, links)
        if span is None:
            return _ROOT
        span.end()
        return trace.set_span_in_context(span, _ROOT)

    def _on_auth(self, event: AuthStep) -> None:
        """`mcp.auth`: one OAuth step, a child of whatever span is current where
        the step ran (the connect attempt, or the call that needed a token)."""
        if self._metrics is not None:
            self._metrics.count_auth_step(event.name, event.step, event.outcome)
        if self._tracer is None or self._quiet():
            return
        end = time.time_ns()
        attributes: dict[str, AttributeValue] = {
            SERVER: event.name,
            AUTH_STEP: event.step,
            OUTCOME: event.outcome,
        }
        if event.status:
            attributes[HTTP_STATUS] = event.status
        if event.outcome == "failed":
            attributes[ERROR_TYPE] = event.error or "failed"
        span = self._tracer.start_span(
            AUTH,
            attributes=self._clean(attributes),
            start_time=end - int(event.elapsed * 1e9),
        )
        if event.outcome == "failed":
            span.set_status(trace.StatusCode.ERROR, event.error or None)
        span.end(end_time=end)

    def _on_added(self, event: Added) -> None:
        old = self._tracks.pop(event.name, None)
        if old is not None:
            self._close(old, "removed")
        track = _Track(
            attributes=self._clean(
                {
                    SERVER: event.name,
                    TRANSPORT: event.transport,
                    ENDPOINT: event.endpoint,
                }
            )
        )
        self._tracks[event.name] = track
        track.parent = self._instant(ADD, None, track.attributes)  # current: a reload
        track.cause = "added"

    def _on_updated(self, event: Updated) -> None:
        track = self._tracks.get(event.name)
        if track is None:
            track = self._tracks[event.name] = _Track(attributes={SERVER: event.name})
        self._close(track, "updated")
        if event.endpoint:
            track.attributes[ENDPOINT] = redact(event.endpoint, self.secrets)
        track.parent = self._instant(
            UPDATE, None, {**track.attributes, "mcp.changed": list(event.changed)}
        )
        track.cause = "updated"
        track.connected = None
        if track.connected_at is not None:  # the old session ends with the restart
            self._record_session(track, self._clock() - track.connected_at)

    def _on_connecting(self, event: Connecting) -> None:
        track = self._track(event.name)
        self._end_backoff(track)
        self._ensure_loop(track)
        track.attempts += 1
        track.attempt = event.attempt

    def _on_reconnecting(self, event: Reconnecting) -> None:
        track = self._track(event.name)
        self._end_backoff(track)
        self._ensure_loop(track)
        track.backoff = self._start(
            BACKOFF,
            trace.set_span_in_context(track.loop, _ROOT) if track.loop else None,
            {
                SERVER: event.name,
                ATTEMPT: event.attempt,
                "mcp.backoff.delay": event.delay,
            },
        )
        track.backoff_ends = self._clock() + event.delay
        if self._metrics is not None:
            cause = "connection_lost" if track.after_loss else "attempt_failed"
            self._metrics.count_reconnect(event.name, cause)
        track.after_loss = False

    def _on_connected(self, event: Connected) -> None:
        track = self._track(event.name)
        self._end_backoff(track)
        loop = track.loop
        if loop is not None:
            attributes: dict[str, OtelAttributeValue] = {
                OUTCOME: "connected",
                ATTEMPT: event.attempt,
                "mcp.connect_loop.attempts": track.attempts,
                "mcp.tools.count": event.tools,
                "mcp.upstream.name": redact(event.server_name, self.secrets),
                "mcp.upstream.version": redact(event.server_version, self.secrets),
                MCP_PROTOCOL_VERSION: event.protocol,
                "mcp.connect.elapsed": event.elapsed,
            }
            if event.pid is not None:
                attributes[PID] = event.pid
            loop.set_attributes(attributes)
            loop.end()
            track.connected = loop.get_span_context()
            track.loop = None
        track.connected_at = self._clock()
        track.protocol = event.protocol

    def _on_lost(self, event: Lost) -> None:
        track = self._track(event.name)
        self._close(track, "lost")
        attributes: dict[str, OtelAttributeValue] = {
            **track.attributes,
            "mcp.lost.reason": redact(event.reason, self.secrets),
            "mcp.session.uptime": event.uptime,
        }
        if event.exit_code is not None:
            attributes[EXIT_CODE] = event.exit_code
        links = [Link(track.connected)] if track.connected is not None else None
        track.parent = self._instant(LOST, _ROOT, attributes, links)
        track.cause = "connection_lost"
        track.after_loss = True
        track.connected = None
        self._record_session(track, event.uptime, error="connection_lost")
        self._ensure_loop(track)  # the episode of trying starts now

    def _on_idle(self, event: Idle) -> None:
        """An on-demand connection stopped (or starts) with no session: the
        episode ends, and a session it had ends as a normal one."""
        track = self._track(event.name)
        self._close(track, "idle")
        if track.connected_at is not None:
            self._record_session(track, event.uptime)
        track.connected = None
        track.connected_at = None
        track.after_loss = False

    def _on_removed(self, event: Removed) -> None:
        track = self._tracks.pop(event.name, None)
        if track is None:
            return
        self._close(track, "removed")
        if track.connected_at is not None:
            self._record_session(track, self._clock() - track.connected_at)

    def _record_session(
        self, track: _Track, uptime: float, error: str | None = None
    ) -> None:
        if self._metrics is None or track.connected_at is None:
            return
        attributes: dict[str, AttributeValue] = {
            SERVER: str(track.attributes.get(SERVER, "")),
            MCP_PROTOCOL_VERSION: track.protocol,
        }
        if error:
            attributes[ERROR_TYPE] = error
        self._metrics.session_duration.record(uptime, attributes)
        track.connected_at = None

    # --- episodes -------------------------------------------------------------------

    def _track(self, name: str) -> _Track:
        track = self._tracks.get(name)
        if track is None:  # events of a connection declared before we listened
            track = self._tracks[name] = _Track(attributes={SERVER: name})
        elif track.loop is not None:
            self._rotate(track, self._clock())
        return track

    def _ensure_loop(self, track: _Track) -> None:
        if track.loop is not None:
            return
        track.segment = 1
        track.attempts = 0
        track.loop_started = self._clock()
        track.loop = self._start(
            LOOP,
            track.parent,
            {
                **track.attributes,
                "mcp.connect_loop.cause": track.cause,
                "mcp.connect_loop.segment": 1,
            },
        )
        if track.loop is None:  # tracing off: still count the episode
            track.loop = trace.INVALID_SPAN

    def _end_backoff(self, track: _Track, outcome: str | None = None) -> None:
        if track.backoff is not None:
            if outcome:
                track.backoff.set_attribute(OUTCOME, outcome)
            track.backoff.end()
            track.backoff = None

    def _close(self, track: _Track, outcome: str) -> None:
        """End whatever is open for `track`, saying why."""
        self._end_backoff(track, "cancelled")
        if track.loop is not None:
            track.loop.set_attributes(
                {
                    OUTCOME: outcome,
                    ATTEMPT: track.attempt,
                    "mcp.connect_loop.attempts": track.attempts,
                }
            )
            track.loop.end()
            track.loop = None

    def rotate(self) -> None:
        """Cut every episode span about to outlive `EPISODE_SPAN_LIMIT`."""
        now = self._clock()
        for track in self._tracks.values():
            if track.loop is not None:
                self._rotate(track, now)

    def _rotate(self, track: _Track, now: float) -> None:
        if now - track.loop_started < EPISODE_SPAN_LIMIT - ROTATE_MARGIN:
            return
        old = track.loop
        assert old is not None
        waiting = track.backoff is not None
        self._end_backoff(track, "continued")
        old.set_attributes(
            {
                OUTCOME: "continued",
                ATTEMPT: track.attempt,
                "mcp.connect_loop.attempts": track.attempts,
            }
        )
        old.end()
        track.segment += 1
        track.attempts = 0
        track.loop_started = now
        context = old.get_span_context()
        links = [Link(context, {"mcp.link": "continues"})] if context.is_valid else None
        track.loop = (
            self._start(
                LOOP,
                _ROOT,
                {
                    **track.attributes,
                    "mcp.connect_loop.cause": "continued",
                    "mcp.connect_loop.segment": track.segment,
                },
                links,
            )
            or trace.INVALID_SPAN
        )
        if waiting:
            remaining = max(0.0, track.backoff_ends - now)
            track.backoff = self._start(
                BACKOFF,
                trace.set_span_in_context(track.loop, _ROOT),
                {
                    SERVER: str(track.attributes.get(SERVER, "")),
                    ATTEMPT: track.attempt + 1,
                    "mcp.backoff.delay": remaining,
                    "mcp.backoff.continued": True,
                },
            )

    def close(self) -> None:
        """End every open span (the daemon is stopping)."""
        for track in self._tracks.values():
            self._close(track, "shutdown")
        self._tracks.clear()
