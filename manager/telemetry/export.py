"""Exporters and providers: build them from a config, and shut them down fast.

`build_exporting(config)` makes the tracer and meter providers (never the global
ones unless asked), with `BatchSpanProcessor`s behind `DropSpans` (the SDK's
ping spans are not exported), the `PauseWhileFailing` sampler and
`PeriodicExportingMetricReader`s; each OTLP exporter reports to an
`ExportStatus` (see `health`).

Shutdown: the SDK's `force_flush` ignores its timeout and its
atexit hook can hang for many seconds, so providers are built with
`shutdown_on_exit=False`, the flush runs in a daemon thread under a budget (and
is skipped, or cut short, when the collector is known to be down), then the
exporters are shut down first (that aborts their retry loops) and the providers
after, again under a budget.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import anyio
import anyio.to_thread
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from .. import __version__
from .compat_otel import queue_full, queue_length
from .config import GRPC, SignalConfig, TelemetryConfig
from .health import (
    ExportStatus,
    PauseWhileFailing,
    TrackedMetricExporter,
    TrackedSpanExporter,
)

__all__ = [
    "FLUSH_BUDGET",
    "SHUTDOWN_BUDGET",
    "DropSpans",
    "Exporting",
    "build_exporting",
    "build_resource",
    "is_sdk_ping",
]

logger = logging.getLogger("manager.telemetry")

FLUSH_BUDGET = 0.7
"""Seconds the final flush of queued spans and metrics may take at shutdown."""

SHUTDOWN_BUDGET = 0.25
"""Seconds the providers get to stop after their exporters were shut down."""

_ABORT_POLL = 0.02
"""Seconds between two checks whether a flush should be given up."""

SDK_SCOPE = "mcp-python-sdk"
"""Instrumentation scope of the MCP SDK's own spans."""


_PING_SPANS = frozenset({"MCP send ping", "ping"})
"""The SDK's ping spans: ours to upstreams, and downstream clients' to the endpoint."""


def is_sdk_ping(span: ReadableSpan) -> bool:
    """The MCP SDK's span for one liveness ping (one per connection every 10 s)."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == SDK_SCOPE and span.name in _PING_SPANS


class DropSpans(SpanProcessor):
    """Pass spans on to `inner`, except those `drop` selects (at their end);
    with `status`, the spans queued are counted there, and a full queue said
    (`ExportStatus.queued`): what never reached the exporter is lost.

    Args:
        inner: The processor that exports.
        drop: True for a span that must not be exported.
        status: Where lost spans are counted (None: not counted).
    """

    def __init__(
        self,
        inner: SpanProcessor,
        drop: Callable[[ReadableSpan], bool],
        status: ExportStatus | None = None,
    ) -> None:
        self.inner = inner
        self.drop = drop
        self.status = status
        self._batch = inner if isinstance(inner, BatchSpanProcessor) else None
        if status is not None and self._batch is not None:
            status.queue_length = partial(queue_length, self._batch)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.drop(span):
            return
        status, batch = self.status, self._batch
        if (
            status is not None
            and batch is not None
            and span.context.trace_flags.sampled
        ):
            status.queued(full=queue_full(batch))
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


# ------------------------------------------------------------------ building


@dataclass(slots=True)
class Exporting:
    """The providers built from a config, and what shutting them down needs."""

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    status: ExportStatus | None = None
    sampler: PauseWhileFailing | None = None
    exporters: list[SpanExporter | MetricExporter] = field(default_factory=list)

    async def aclose(
        self,
        flush_budget: float = FLUSH_BUDGET,
        shutdown_budget: float = SHUTDOWN_BUDGET,
    ) -> None:
        """Flush what is queued (bounded), then stop everything (bounded).

        The flush is skipped when the last export failed, and cut short as soon
        as an export fails during it: a collector that is down would only eat
        the whole budget.
        """
        status = self.status
        flush = status is None or status.ok is not False
        if flush and flush_budget > 0:
            failing = (lambda: status.ok is False) if status is not None else None
            await _in_daemon_thread(self._flush, flush_budget, abort=failing)
        if status is not None:
            status.closing = True
        for exporter in self.exporters:
            try:
                exporter.shutdown()  # aborts retry loops, closes channels
            except Exception:  # boundary: shutting down must go on
                logger.debug("exporter shutdown failed", exc_info=True)
        await _in_daemon_thread(self._shutdown, shutdown_budget)

    def _flush(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.force_flush()
        if self.meter_provider is not None:
            self.meter_provider.force_flush()

    def _shutdown(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown(timeout_millis=SHUTDOWN_BUDGET * 1000)


async def _in_daemon_thread(
    fn: Callable[[], None],
    budget: float,
    *,
    abort: Callable[[], bool] | None = None,
) -> bool:
    """Run `fn` in a daemon thread; wait at most `budget` s. True if it finished.

    A daemon thread, not an anyio worker: one left running (a flush stuck in
    the SDK) must not keep the process from exiting. `abort()` true ends the
    wait early (checked every `_ABORT_POLL` s).
    """
    done = threading.Event()

    def wait() -> bool:
        deadline = time.monotonic() + budget
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if done.wait(min(_ABORT_POLL, remaining)):
                return True
            if abort is not None and abort():
                return False

    def target() -> None:
        try:
            fn()
        except Exception:  # boundary: telemetry must never break the shutdown
            logger.debug("telemetry shutdown step failed", exc_info=True)
        finally:
            done.set()

    threading.Thread(target=target, name="mcp-manager-otel-stop", daemon=True).start()
    finished = False
    with anyio.CancelScope(shield=True):
        finished = await anyio.to_thread.run_sync(wait)
    return finished


def build_sampler(name: str, ratio: float) -> Sampler:
    """The sampler `OTEL_TRACES_SAMPLER` names (`config.SAMPLERS`), built
    from the SDK's public classes (the SDK reads the variable only when no
    sampler is given, and ours wraps it: `PauseWhileFailing`)."""
    base = name.removeprefix("parentbased_")
    root: Sampler = (
        ALWAYS_ON
        if base == "always_on"
        else ALWAYS_OFF
        if base == "always_off"
        else TraceIdRatioBased(ratio)
    )
    return ParentBased(root) if name.startswith("parentbased_") else root


def build_resource(config: TelemetryConfig) -> Resource:
    """The OTel resource: service name and version, from OTEL_* unless set."""
    resource = Resource.create({SERVICE_VERSION: __version__})
    name = resource.attributes.get(SERVICE_NAME)
    if not name or str(name).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: config.service_name}))
    return resource


def _without_grpc_fork_handlers() -> None:
    """Keep gRPC's fork handlers out of the children the daemon spawns.

    uvloop (libuv) spawns a stdio server with `fork()`, and gRPC's
    `pthread_atfork` handlers then run in the child while the exporter's
    threads are inside gRPC: a spawned server was killed by SIGSEGV before
    its first line ran (about 1 start in 75 under load, with gRPC logging
    "Other threads are currently calling into gRPC, skipping fork()
    handlers"). Every fork here is followed by `exec`, the case gRPC's
    fork-support notes say to turn the handlers off for. An operator's own
    setting wins. Read when gRPC loads, so it is set before the import.
    """
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def _span_exporter(name: str, signal: SignalConfig) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter(out=sys.stderr)  # stdout may be the MCP stream
    if signal.protocol == GRPC:
        _without_grpc_fork_handlers()
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=signal.endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter(endpoint=signal.endpoint)


def _metric_exporter(name: str, signal: SignalConfig) -> MetricExporter:
    if name == "console":
        return ConsoleMetricExporter(out=sys.stderr)
    if signal.protocol == GRPC:
        _without_grpc_fork_handlers()
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(endpoint=signal.endpoint)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter(endpoint=signal.endpoint)


def build_exporting(config: TelemetryConfig, *, set_global: bool = False) -> Exporting:
    """Providers and exporters for `config`.

    Args:
        config: What to export and where.
        set_global: Also make the tracer provider the process's global one, so
            the MCP SDK's own spans are recorded (the daemon does; tests never).
    """
    out = Exporting()
    if not config.active:
        return out
    otlp = config.traces if config.traces.otlp else config.metrics
    if otlp.otlp:
        endpoints = {
            name: signal.endpoint
            for name, signal in (("traces", config.traces), ("metrics", config.metrics))
            if signal.otlp
        }
        out.status = ExportStatus(otlp.endpoint, otlp.protocol, endpoints=endpoints)
    resource = build_resource(config)
    if config.traces.exporters:
        chosen = build_sampler(config.sampler, config.sampler_ratio)
        sampler = (
            PauseWhileFailing(out.status, chosen) if out.status is not None else None
        )
        out.sampler = sampler
        provider = TracerProvider(
            resource=resource, sampler=sampler or chosen, shutdown_on_exit=False
        )
        for name in config.traces.exporters:
            try:
                exporter = _span_exporter(name, config.traces)
            except Exception as exc:  # boundary: bad settings must not stop the daemon
                logger.warning("trace exporter %s not started: %s", name, exc)
                continue
            out.exporters.append(exporter)
            status = out.status if name == "otlp" else None
            if status is not None:
                exporter = TrackedSpanExporter(exporter, status)
            provider.add_span_processor(
                DropSpans(BatchSpanProcessor(exporter), is_sdk_ping, status)
            )
        out.tracer_provider = provider
        if set_global:
            trace.set_tracer_provider(provider)
    if config.metrics.exporters:
        readers: list[MetricReader] = []
        for name in config.metrics.exporters:
            try:
                metric_exporter = _metric_exporter(name, config.metrics)
            except Exception as exc:  # boundary: as above
                logger.warning("metric exporter %s not started: %s", name, exc)
                continue
            out.exporters.append(metric_exporter)
            if name == "otlp" and out.status is not None:
                metric_exporter = TrackedMetricExporter(metric_exporter, out.status)
            readers.append(PeriodicExportingMetricReader(metric_exporter))
        out.meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, shutdown_on_exit=False
        )
    return out
