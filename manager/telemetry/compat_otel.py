"""The one door to OpenTelemetry's private names.

* `opentelemetry.semconv._incubating.metrics.mcp_metrics`
  (`MCP_CLIENT_OPERATION_DURATION`, `MCP_CLIENT_SESSION_DURATION`): the MCP
  semantic conventions are still incubating, and the semconv package ships
  incubating names only under `_incubating`. Replace with
  `opentelemetry.semconv.metrics` once the MCP metrics are stable.
* `MetricExporter._preferred_temporality` and `._preferred_aggregation`
  (`preferences`): `TrackedMetricExporter` wraps an exporter and must ask the
  SDK for what the wrapped one prefers (the SDK's own reader reads them the
  same way). Replace with public getters on `MetricExporter` (none in 1.x).
* `BatchSpanProcessor._batch_processor._queue` and `._max_queue_size`
  (`queue_full`): a span queued while the queue is full pushes one out, and
  the SDK says so only in a log line its `DuplicateFilter` lets through once
  in 20 s; counting every lost span needs the queue's length. Replace with
  the SDK's processor metrics (`otel.sdk.processor.span.processed`,
  `error.type=queue_full`) once they are on by default.

`tests/test_compat.py` fails with `WHY` when the installed version lacks one.
"""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter
from opentelemetry.sdk.metrics.view import Aggregation
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.semconv._incubating.metrics.mcp_metrics import (
    MCP_CLIENT_OPERATION_DURATION,
    MCP_CLIENT_SESSION_DURATION,
)

__all__ = [
    "MCP_CLIENT_OPERATION_DURATION",
    "MCP_CLIENT_SESSION_DURATION",
    "WHY",
    "preferences",
    "queue_full",
    "queue_length",
]

WHY = (
    "mcp-manager reaches into OpenTelemetry's private names (semconv._incubating "
    "MCP metrics, MetricExporter._preferred_*, BatchSpanProcessor's queue; see "
    "manager/telemetry/compat_otel.py): this version no longer has one; "
    "move to the public API named there"
)


def preferences(
    exporter: MetricExporter,
) -> tuple[dict[type, AggregationTemporality] | None, dict[type, Aggregation] | None]:
    """The temporality and aggregation `exporter` was built to prefer."""
    return exporter._preferred_temporality, exporter._preferred_aggregation


def queue_full(processor: BatchSpanProcessor) -> bool:
    """Whether `processor`'s queue is full: the next span queued pushes one out."""
    batch = processor._batch_processor
    return len(batch._queue) >= batch._max_queue_size


def queue_length(processor: BatchSpanProcessor) -> int:
    """How many spans `processor`'s queue holds now."""
    return len(processor._batch_processor._queue)
