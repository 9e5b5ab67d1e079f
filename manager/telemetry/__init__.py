"""OpenTelemetry for the daemon: the only door to `opentelemetry` (style.md).

- `config`: `TelemetryConfig.from_env(os.environ, endpoint=..., protocol=...,
  disable=...)`: the standard `OTEL_*` variables plus the `run` flags.
- `export`: providers and exporters, `DropSpans` (no SDK ping spans) and the
  bounded shutdown.
- `health`: is the collector reachable (`ExportStatus`, one warning per outage,
  `LogCapture`), and `PauseWhileFailing`, which stops recording spans nobody
  receives.
- `spans`: the connection lifecycle as spans, built from events.
- `current`: the `manager.engine.tracing.Tracing` implementation, for spans that must
  be current while the SDK works (connect attempts, tool calls, reloads).
- `metrics`: connections by state, reconnects, call and session durations,
  events dropped per subscriber.
- `core`: `Telemetry`, which wires all of it to the bus, and `start_telemetry`.
- `compat_otel`: the only place that uses OpenTelemetry's private names.
"""

from __future__ import annotations

from .config import SignalConfig, TelemetryConfig
from .core import SCOPE, Telemetry, start_telemetry
from .export import DropSpans, is_sdk_ping
from .health import ExportStatus

__all__ = [
    "SCOPE",
    "DropSpans",
    "ExportStatus",
    "SignalConfig",
    "Telemetry",
    "TelemetryConfig",
    "is_sdk_ping",
    "start_telemetry",
]
