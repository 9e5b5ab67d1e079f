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

`tests/test_compat.py` fails with `WHY` when the installed version lacks one.
"""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter
from opentelemetry.sdk.metrics.view import Aggregation
from opentelemetry.semconv._incubating.metrics.mcp_metrics import (
    MCP_CLIENT_OPERATION_DURATION,
    MCP_CLIENT_SESSION_DURATION,
)

__all__ = [
    "MCP_CLIENT_OPERATION_DURATION",
    "MCP_CLIENT_SESSION_DURATION",
    "WHY",
    "preferences",
]

WHY = (
    "mcp-manager reaches into OpenTelemetry's private names (semconv._incubating "
    "MCP metrics, MetricExporter._preferred_*; see "
    "manager/telemetry/compat_otel.py): this version no longer has one; "
    "move to the public API named there"
)


def preferences(
    exporter: MetricExporter,
) -> tuple[dict[type, AggregationTemporality] | None, dict[type, Aggregation] | None]:
    """The temporality and aggregation `exporter` was built to prefer."""
    return exporter._preferred_temporality, exporter._preferred_aggregation
