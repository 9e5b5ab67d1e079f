"""Exporter health: is the collector reachable, and one warning when it is not.

Every OTLP exporter is wrapped so each export's result lands in an
`ExportStatus`, and the `opentelemetry` loggers are captured by `LogCapture`: an
unreachable collector makes the SDK log a warning per export attempt (and more
once its queue is full); instead the daemon logs one WARNING when exports start
failing and one INFO when they work again. `ExportStatus` also feeds the `otlp`
entry of the control API's `info` (for the HUD), and `PauseWhileFailing` stops
recording spans while nobody receives them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes

from ..core.info import OtlpStatus
from ..core.redact import redact, redact_url
from .compat_otel import preferences

__all__ = [
    "PROBE_EVERY",
    "WARN_AGAIN_AFTER",
    "ExportStatus",
    "LogCapture",
    "PauseWhileFailing",
    "TrackedMetricExporter",
    "TrackedSpanExporter",
]

logger = logging.getLogger("manager.telemetry")

WARN_AGAIN_AFTER = 300.0
"""Seconds before a new outage of the collector is warned about again."""

PROBE_EVERY = 30.0
"""Seconds between two probe traces while exports fail (see `PauseWhileFailing`)."""


_STATUS_CODE = re.compile(r"StatusCode\.([A-Z_]+)")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()]+)")


def _reason(message: str) -> str:
    """A short reason from an OTLP exporter's log message."""
    lower = message.lower()
    if "connection refused" in lower:
        return "connection refused"
    code = _STATUS_CODE.search(message)
    details = message.partition("Error details:")[2].strip()
    if code:
        return f"{code.group(1)}: {details}"[:200] if details else code.group(1)
    errno = _ERRNO.search(message)
    if errno:
        return errno.group(1).strip()[:200]
    return re.sub(r",? retrying in [\d.]+s\.?", "", message).strip()[:200]


class ExportStatus:
    """Whether OTLP exports work, for the daemon log, `info` and the HUD.

    Thread-safe: exporters report from the SDK's worker threads.

    Args:
        endpoint: Where exports go (shown redacted).
        protocol: `grpc` or `http/protobuf`.
        clock: Monotonic clock (injectable).
    """

    def __init__(
        self,
        endpoint: str,
        protocol: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        endpoints: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoint = redact_url(endpoint)
        self.protocol = protocol
        self._endpoints = {k: redact_url(v) for k, v in (endpoints or {}).items()}
        self.last_error: str | None = None
        self.exports = 0
        self.failures = 0
        self.spans_queued = 0  # spans handed to the export queue
        self.spans_handed = 0  # spans the queue handed to the exporter
        self.spans_failed = 0  # of those, in exports that failed
        self.queue_length: Callable[[], int] = lambda: 0
        """What the export queue holds now (`export.DropSpans` sets it)."""
        self._queue_warned_at: float | None = None
        self.closing = False
        self._ok: dict[str, bool] = {}  # by signal: its last export worked
        self._failing: set[str] = set()  # endpoints
        self._warned_at: dict[str, float] = {}  # by endpoint
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def ok(self) -> bool | None:
        """Exports work (False while one signal's fail; None before any)."""
        if not self._ok:
            return None
        return all(self._ok.values())

    def ok_for(self, signal: str) -> bool | None:
        """`signal`'s (`traces`, `metrics`) exports work (None: none yet)."""
        return self._ok.get(signal)

    def record(
        self, ok: bool, error: str | None = None, signal: str = "traces"
    ) -> None:
        """Note one export's result (or an exporter's complaint, `ok=False`),
        for `signal`: one signal's failure neither pauses nor is blamed on
        the other's endpoint (said once per endpoint)."""
        where = self._endpoints.get(signal, self.endpoint)
        with self._lock:
            if self.closing:
                return
            if ok:
                self.exports += 1
                self._ok[signal] = True
                if where in self._failing:
                    self._failing.discard(where)
                    logger.info("OTLP export to %s works again", where)
                return
            self.failures += 1
            self._ok[signal] = False
            if error:
                self.last_error = redact(error, None)  # no MCP secret here
            if where in self._failing:
                return
            self._failing.add(where)
            now = self._clock()
            warned = self._warned_at.get(where)
            if warned is not None and now - warned < WARN_AGAIN_AFTER:
                return
            self._warned_at[where] = now
        logger.warning(
            "OTLP export to %s (%s) is failing: %s. The daemon runs on; traces and "
            "metrics are dropped until the collector answers (this is logged "
            "once). Start a collector, point --otlp-endpoint at one, or turn "
            "telemetry off with --no-telemetry or OTEL_SDK_DISABLED=true.",
            where,
            self.protocol,
            self.last_error or "export failed",
        )

    def queued(self, *, full: bool) -> None:
        """One span goes into the export queue; `full`: it was full, so one
        is pushed out, which is said while exports work (at most once in
        `WARN_AGAIN_AFTER`: the collector is slower than the spans made;
        losses while exports fail are the failure already said)."""
        with self._lock:
            self.spans_queued += 1
            if not full or self.closing or self._ok.get("traces") is False:
                return
            now = self._clock()
            warned = self._queue_warned_at
            if warned is not None and now - warned < WARN_AGAIN_AFTER:
                return
            self._queue_warned_at = now
            lost = self._spans_lost()
        logger.warning(
            "OTLP: spans are dropped because the export queue is full (%d lost "
            "so far; the count is in `info` and the HUD): the collector at %s "
            "takes them slower than they are made. Raise OTEL_BSP_MAX_QUEUE_SIZE "
            "(default 2048) or sample fewer (OTEL_TRACES_SAMPLER=traceidratio).",
            lost,
            self._endpoints.get("traces", self.endpoint),
        )

    def handed(self, count: int, *, ok: bool) -> None:
        """The queue handed `count` spans to an export (that failed: lost)."""
        with self._lock:
            self.spans_handed += count
            if not ok:
                self.spans_failed += count

    def _spans_lost(self) -> int:
        """Spans that will never reach the collector: in failed exports, and
        pushed out of the full queue (queued, neither handed on nor still
        there). Exact once the queue is flushed; while a batch is between the
        queue and the exporter it may count that batch for a moment."""
        pushed_out = self.spans_queued - self.spans_handed - self.queue_length()
        return self.spans_failed + max(0, pushed_out)

    def snapshot(self) -> OtlpStatus:
        """The `otlp` entry of `info`, as it stands."""
        with self._lock:
            return OtlpStatus(
                endpoint=self.endpoint,
                protocol=self.protocol,
                ok=self.ok,
                last_error=self.last_error,
                exports=self.exports,
                failures=self.failures,
                spans_lost=self._spans_lost(),
            )


class TrackedSpanExporter(SpanExporter):
    """Reports each export's result to an `ExportStatus`."""

    def __init__(self, inner: SpanExporter, status: ExportStatus) -> None:
        self.inner = inner
        self._status = status

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        ok = result is SpanExportResult.SUCCESS
        self._status.record(ok)
        self._status.handed(len(spans), ok=ok)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class TrackedMetricExporter(MetricExporter):
    """Reports each export's result to an `ExportStatus`."""

    def __init__(self, inner: MetricExporter, status: ExportStatus) -> None:
        temporality, aggregation = preferences(inner)
        super().__init__(
            preferred_temporality=temporality, preferred_aggregation=aggregation
        )
        self.inner = inner
        self._status = status

    def export(
        self,
        metrics_data: MetricsData,
        timeout_millis: float = 10_000,
        **kwargs: Any,
    ) -> MetricExportResult:
        result = self.inner.export(metrics_data, timeout_millis=timeout_millis)
        self._status.record(result is MetricExportResult.SUCCESS, signal="metrics")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis)


class LogCapture(logging.Handler):
    """Takes the `opentelemetry` loggers' records off the daemon log.

    Exporter warnings and errors become `ExportStatus` failures, "queue full"
    warnings (the collector cannot keep up, or is down) are dropped, and anything
    else goes on to the root logger's handlers. With `verbose` (the daemon runs
    at DEBUG), every record also goes on.

    Args:
        status: Where export problems are noted (None: no OTLP exporter).
        verbose: Also pass every record on.
    """

    LOGGER = "opentelemetry"

    def __init__(self, status: ExportStatus | None, *, verbose: bool = False) -> None:
        super().__init__(logging.DEBUG)
        self.status = status
        self.verbose = verbose
        self._logger = logging.getLogger(self.LOGGER)
        self._propagate = self._logger.propagate

    def install(self) -> LogCapture:
        """Attach to the `opentelemetry` logger and stop it propagating."""
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def uninstall(self) -> None:
        """Undo `install`."""
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # boundary: a bad record must not break exporting
            message = str(record.msg)
        status = self.status
        passed_on = self.verbose
        if record.levelno < logging.WARNING:
            pass
        elif "Queue full" in message:
            pass  # counted where spans are queued (`export.DropSpans`)
        elif record.name.startswith("opentelemetry.exporter"):
            if status is not None and "shutdown" not in message.lower():
                signal = "metrics" if "metric" in record.name else "traces"
                status.record(False, _reason(message), signal=signal)
        else:
            passed_on = True
        if passed_on:
            logging.getLogger().handle(record)


class PauseWhileFailing(Sampler):
    """Sample as `inner` does while exports work; while they fail, record only
    one probe span every `probe_every` seconds.

    A daemon with no collector would otherwise build, batch, encode and retry
    spans that nobody receives. The probe (and the metric exports, if any)
    notice when the collector is back, and recording resumes at once.

    Args:
        status: Whether exports work.
        inner: The sampler while they do (default: parent-based, always on).
        probe_every: Seconds between two spans recorded while failing.
        clock: Monotonic clock (injectable).
    """

    def __init__(
        self,
        status: ExportStatus,
        inner: Sampler | None = None,
        probe_every: float = PROBE_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._status = status
        self._inner = inner or ParentBased(ALWAYS_ON)
        self._probe_every = probe_every
        self._clock = clock
        self._probed = -probe_every

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        chosen = self._inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        sampled = chosen.decision is Decision.RECORD_AND_SAMPLE
        if self._status.ok_for("traces") is not False or not sampled:
            return chosen  # a span `inner` drops is no probe either
        now = self._clock()
        if now - self._probed < self._probe_every:
            return SamplingResult(Decision.DROP)
        self._probed = now
        return chosen

    def quiet(self) -> bool:
        """True while exports fail and no probe is due: no span would be recorded,
        so callers may skip building one at all (the cost of hundreds of dead
        upstreams' attempt spans, with no collector)."""
        failing = self._status.ok_for("traces") is False
        return failing and self._clock() - self._probed < self._probe_every

    def get_description(self) -> str:
        return "PauseWhileFailing"
