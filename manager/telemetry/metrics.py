"""The daemon's metrics: instruments and the values they observe.

- `mcp.manager.connections` (observable gauge): by `mcp.connection.state`.
- `mcp.manager.connection.up` (observable gauge): by `mcp.server`, 1 while the
  connection serves (connected, or idle: it starts at the next request), else
  0; an alert on one server's `0` needs no join.
- `mcp.manager.reconnects` (observable counter): by `mcp.server`, `mcp.reconnect.cause`
  (`attempt_failed` or `connection_lost`).
- `mcp.client.operation.duration` (histogram, s): tool calls, with the MCP
  semconv attributes (`mcp.method.name`, `gen_ai.tool.name`, `error.type`, …).
- `mcp.client.session.duration` (histogram, s): sessions that ended, by
  `mcp.server`, `mcp.protocol.version`, `error.type`.
- `mcp.manager.events.dropped` (observable counter): by `mcp.manager.subscriber`.
- `mcp.manager.auth.steps` (observable counter): OAuth steps by `mcp.server`,
  `mcp.auth.step` (`refresh`, `token`, `authorize`, ...) and `mcp.outcome`
  (`ok`, `failed`, `absent`): refreshes and failures, per connection.

Observable instruments are read by the SDK's reader thread; they only read a
snapshot that the event loop replaces whole (`snapshot()`), so they never touch
live daemon state from another thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..engine.tracing import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_NAME,
    MCP_METHOD_NAME,
    MCP_PROTOCOL_VERSION,
    NETWORK_TRANSPORT,
    SERVER,
    SERVER_ADDRESS,
    SERVER_PORT,
    AttributeValue,
)
from .compat_otel import MCP_CLIENT_OPERATION_DURATION, MCP_CLIENT_SESSION_DURATION

__all__ = [
    "AUTH_STEP",
    "AUTH_STEPS",
    "CONNECTIONS",
    "DROPPED",
    "RECONNECTS",
    "STATES",
    "Metrics",
]

CONNECTIONS: Final = "mcp.manager.connections"
UP: Final = "mcp.manager.connection.up"
UP_STATES: Final = frozenset({"connected", "idle"})
"""The states in which a connection serves requests (`UP` is 1)."""
RECONNECTS: Final = "mcp.manager.reconnects"
DROPPED: Final = "mcp.manager.events.dropped"
AUTH_STEPS: Final = "mcp.manager.auth.steps"
AUTH_STEP: Final = "mcp.auth.step"

STATES: Final = (
    "connecting",
    "connected",
    "reconnecting",
    "needs_login",
    "refused",
    "idle",
    "disabled",
)
"""States always reported (0 when empty), so a series drops to 0, not away."""

DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""Histogram bounds the MCP semantic conventions advise, seconds."""

OPERATION_ATTRIBUTES: Final = frozenset(
    {
        MCP_METHOD_NAME,
        GEN_AI_TOOL_NAME,
        GEN_AI_OPERATION_NAME,
        ERROR_TYPE,
        NETWORK_TRANSPORT,
        MCP_PROTOCOL_VERSION,
        SERVER_ADDRESS,
        SERVER_PORT,
        SERVER,
    }
)
"""Span attributes copied onto `mcp.client.operation.duration` (low cardinality)."""


class Metrics:
    """The instruments, on one meter.

    Args:
        meter: Where the instruments live.
    """

    def __init__(self, meter: Meter) -> None:
        self._states: Mapping[str, int] = {}
        self._up: Mapping[str, int] = {}
        self._dropped: Mapping[str, int] = {}
        # Counted here and observed at export time: an SDK counter `add` per
        # retry would be most of telemetry's cost with hundreds of dead upstreams.
        self._reconnects: Counter[tuple[str, str]] = Counter()
        self._auth_steps: Counter[tuple[str, str, str]] = Counter()
        meter.create_observable_counter(
            AUTH_STEPS,
            callbacks=[self._observe_auth_steps],
            unit="{step}",
            description="OAuth steps (discovery, registration, authorize, token, "
            "refresh) by outcome: token refreshes and authorization failures.",
        )
        meter.create_observable_counter(
            RECONNECTS,
            callbacks=[self._observe_reconnects],
            unit="{reconnect}",
            description="Retries scheduled after a failed attempt or a lost session.",
        )
        self.operation_duration = meter.create_histogram(
            MCP_CLIENT_OPERATION_DURATION,
            unit="s",
            description="Duration of MCP requests made through the daemon "
            "(tool calls), as the caller saw them.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.session_duration = meter.create_histogram(
            MCP_CLIENT_SESSION_DURATION,
            unit="s",
            description="How long upstream sessions stayed up.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        meter.create_observable_gauge(
            CONNECTIONS,
            callbacks=[self._observe_states],
            unit="{connection}",
            description="Declared connections by state.",
        )
        meter.create_observable_gauge(
            UP,
            callbacks=[self._observe_up],
            unit="1",
            description="1 while a connection serves requests (connected or idle), "
            "else 0.",
        )
        meter.create_observable_counter(
            DROPPED,
            callbacks=[self._observe_dropped],
            unit="{event}",
            description="Events the bus dropped for a subscriber that fell behind.",
        )

    def snapshot(
        self, states: Iterable[tuple[str, str]], dropped: Mapping[str, int]
    ) -> None:
        """Replace the observed values (call from the event loop)."""
        self.count_states(states)
        self._dropped = dict(dropped)

    def count_states(self, states: Iterable[tuple[str, str]]) -> None:
        """Replace the connections gauges (event loop) from each connection's
        (name, state): at each change of phase, so an export never reports a
        state the fleet left a second ago."""
        named = list(states)
        counts = Counter(state for _, state in named)
        self._states = {state: counts.get(state, 0) for state in (*STATES, *counts)}
        self._up = {name: int(state in UP_STATES) for name, state in named}

    def record_operation(
        self, duration: float, attributes: Mapping[str, AttributeValue]
    ) -> None:
        """One MCP request's duration, with its span's low-cardinality attributes."""
        self.operation_duration.record(
            duration,
            {k: v for k, v in attributes.items() if k in OPERATION_ATTRIBUTES},
        )

    def count_reconnect(self, server: str, cause: str) -> None:
        """One retry scheduled (event loop; cheap: a dict increment)."""
        self._reconnects[(server, cause)] += 1

    def count_auth_step(self, server: str, step: str, outcome: str) -> None:
        """One OAuth step ended (event loop)."""
        self._auth_steps[(server, step, outcome)] += 1

    def _observe_auth_steps(self, options: CallbackOptions) -> Iterator[Observation]:
        for (server, step, outcome), count in dict(self._auth_steps).items():
            yield Observation(
                count, {SERVER: server, AUTH_STEP: step, "mcp.outcome": outcome}
            )

    def _observe_reconnects(self, options: CallbackOptions) -> Iterator[Observation]:
        for (server, cause), count in dict(self._reconnects).items():  # atomic copy
            yield Observation(count, {SERVER: server, "mcp.reconnect.cause": cause})

    def _observe_states(self, options: CallbackOptions) -> Iterator[Observation]:
        for state, count in self._states.items():
            yield Observation(count, {"mcp.connection.state": state})

    def _observe_up(self, options: CallbackOptions) -> Iterator[Observation]:
        for server, up in self._up.items():
            yield Observation(up, {SERVER: server})

    def _observe_dropped(self, options: CallbackOptions) -> Iterator[Observation]:
        for name, count in self._dropped.items():
            yield Observation(count, {"mcp.manager.subscriber": name})
