"""`Telemetry`: the daemon's traces and metrics, wired to its bus.

One object per daemon. It listens on the bus for the lifecycle spans and the
reconnect/session metrics, is the `Tracing` handed to the manager (connect
attempts, tool calls, removals) and the daemon (reloads), sweeps once a second
(cuts long episodes, snapshots the observed metrics) and reports the exporter's
health for `info`. `start_telemetry(config, bus)` builds it from a config with
its own providers; tests build it around providers they made themselves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from .. import __version__
from ..core.events import PHASE_EVENTS, Event
from ..core.info import OTLP_OFF, OtlpStatus
from ..core.redact import SecretRegistry, redact_url
from ..engine.bus import EventBus
from ..engine.tracing import NO_TRACING, Tracing
from .config import SignalConfig, TelemetryConfig
from .current import CurrentSpans
from .export import Exporting, build_exporting
from .health import LogCapture
from .metrics import Metrics
from .spans import LifecycleSpans

__all__ = ["SCOPE", "SWEEP_INTERVAL", "Telemetry", "start_telemetry"]

logger = logging.getLogger("manager.telemetry")

SCOPE = "mcp-manager"
"""Instrumentation scope of the daemon's own spans and metrics."""

SWEEP_INTERVAL = 1.0
"""Seconds between two sweeps (episode cutting, metric snapshots)."""


class Telemetry:
    """Spans and metrics for one daemon.

    Args:
        bus: The daemon's event bus (listened to; its drop counts are observed).
        tracer_provider: Where spans go (None: no spans).
        meter_provider: Where metrics go (None: no metrics).
        exporting: The exporters behind the providers, when this object owns
            them (shut down by `aclose`).
        clock: Monotonic clock for episode cutting (injectable).
        secrets: The values masked in every span attribute (the daemon's
            registry; one of its own if None).
    """

    def __init__(
        self,
        bus: EventBus,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        exporting: Exporting | None = None,
        clock: Callable[[], float] = time.monotonic,
        secrets: SecretRegistry | None = None,
    ) -> None:
        secrets = secrets if secrets is not None else SecretRegistry()
        tracer = (
            tracer_provider.get_tracer(SCOPE, __version__) if tracer_provider else None
        )
        meter = meter_provider.get_meter(SCOPE, __version__) if meter_provider else None
        self.metrics = Metrics(meter) if meter is not None else None
        sampler = exporting.sampler if exporting is not None else None
        quiet = sampler.quiet if sampler is not None else (lambda: False)
        self.lifecycle = LifecycleSpans(
            tracer, self.metrics, clock=clock, quiet=quiet, secrets=secrets
        )
        self.active = tracer is not None or self.metrics is not None
        self._current = CurrentSpans(
            tracer, self.lifecycle, self.metrics, quiet, secrets
        )
        self._bus = bus
        self._exporting = exporting
        self._states: Callable[[], Iterable[tuple[str, str]]] | None = None
        self._capture: LogCapture | None = None
        self._unlisten = bus.add_listener(self._on_event) if self.active else None

    @property
    def tracing(self) -> Tracing:
        """The `Tracing` for the manager and the daemon (`NO_TRACING` when off)."""
        return self._current if self.active else NO_TRACING

    def observe_states(self, states: Callable[[], Iterable[tuple[str, str]]]) -> None:
        """Tell the connection gauges where to read each connection's (name,
        state) (loop thread only)."""
        self._states = states

    def _on_event(self, event: Event) -> None:
        self.lifecycle.on_event(event)
        if (
            isinstance(event, PHASE_EVENTS)
            and self.metrics is not None
            and self._states is not None
        ):
            self.metrics.count_states(self._states())

    def capture_logs(self, *, verbose: bool) -> None:
        """Take the `opentelemetry` loggers off the daemon log until `aclose()`.

        Does nothing without exporters of its own, or when already capturing.
        """
        if self._exporting is not None and self._capture is None:
            capture = LogCapture(self._exporting.status, verbose=verbose)
            self._capture = capture.install()

    def sweep(self) -> None:
        """Cut long episodes and refresh the observed metric values."""
        self.lifecycle.rotate()
        if self.metrics is not None:
            states = self._states() if self._states is not None else ()
            self.metrics.snapshot(states, self._bus.dropped())

    async def run(self) -> None:
        """Sweep every `SWEEP_INTERVAL` seconds, until cancelled."""
        if not self.active:
            return
        while True:
            self.sweep()
            await anyio.sleep(SWEEP_INTERVAL)

    def info(self) -> OtlpStatus | str:
        """The `otlp` entry of the daemon's `info`: exporter status, or "off"."""
        status = self._exporting.status if self._exporting is not None else None
        return status.snapshot() if status is not None else OTLP_OFF

    def close(self) -> None:
        """Stop listening and end every open lifecycle span."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        self.lifecycle.close()

    async def aclose(self) -> None:
        """`close()`, then flush and stop the exporters this object owns (~1 s max)."""
        self.close()
        if self._exporting is not None:
            if self.metrics is not None and self._states is not None:
                self.sweep()  # last values for the final metric export
            await self._exporting.aclose()
        if self._capture is not None:
            self._capture.uninstall()
            self._capture = None


def start_telemetry(
    config: TelemetryConfig,
    bus: EventBus,
    *,
    set_global: bool = False,
    capture_logs: bool = False,
    secrets: SecretRegistry | None = None,
) -> Telemetry:
    """Build the exporters of `config` and a `Telemetry` that owns them.

    Args:
        config: What to export and where.
        bus: The daemon's event bus.
        set_global: Make the tracer provider the process's global one, so the
            MCP SDK's own spans (children of ours) are exported too. Only the
            daemon process does this; tests never do.
        capture_logs: Take the `opentelemetry` loggers off the daemon log (one
            warning per collector outage instead of one per export attempt).
        secrets: The daemon's registry, masked in every span attribute.
    """
    for warning in config.warnings:
        logger.warning("telemetry: %s", warning)
    if not config.active:
        logger.info("telemetry off")
        return Telemetry(bus, secrets=secrets)
    exporting = build_exporting(config, set_global=set_global)
    telemetry = Telemetry(
        bus,
        tracer_provider=exporting.tracer_provider,
        meter_provider=exporting.meter_provider,
        exporting=exporting,
        secrets=secrets,
    )
    if capture_logs:
        verbose = logging.getLogger().isEnabledFor(logging.DEBUG)
        telemetry.capture_logs(verbose=verbose)
    logger.info(
        "telemetry: service.name=%s; traces: %s; metrics: %s",
        config.service_name,
        _describe(config.traces),
        _describe(config.metrics),
    )
    return telemetry


def _describe(signal: SignalConfig) -> str:
    if not signal.exporters:
        return "off"
    return ", ".join(
        f"OTLP {signal.protocol} to {redact_url(signal.endpoint)}"
        if name == "otlp"
        else name
        for name in signal.exporters
    )
