"""A pytest plugin for `make test`: the libraries imports, before coverage starts.

`make test` loads it with `-p untraced_imports` (this directory on
`PYTHONPATH`). In an xdist worker it imports, at plugin load, the third-party
modules the test modules and the package import at module level, so that
collection finds them imported. Coverage (pytest-cov) starts right after the
plugins are loaded and traces every Python frame from then on (Python 3.11 has
no `sys.monitoring`): importing the SDK's pydantic models, textual,
hypothesis, OpenTelemetry... under it cost each worker about 2.4 CPU-seconds
more than importing them here (4 workers on 2 cores: about 5 s of wall time
before the first test).

Nothing of `manager` is imported here, directly or through a library: its
module-level lines must run under coverage, or they would count as missed.
A module missing from `MODULES` costs collection time, never a result; the
xdist controller (which collects nothing) imports nothing.
"""

from __future__ import annotations

import importlib
import os
import sys

MODULES = (
    "anyio",
    "anyio.abc",
    "anyio.from_thread",
    "anyio.lowlevel",
    "anyio.streams.buffered",
    "anyio.streams.memory",
    "anyio.to_thread",
    "bm25s",
    "bm25s.stopwords",
    "cryptography.hazmat.primitives",
    "cryptography.hazmat.primitives.asymmetric.ec",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "cryptography.hazmat.primitives.asymmetric.rsa",
    "cryptography.hazmat.primitives.serialization",
    "grpc",
    "httpx2",
    "hypothesis",
    "hypothesis.strategies",
    "lupa.lua54",
    "mcp",
    "mcp.client.auth",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.client.auth.oauth2",
    "mcp.client.session",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.subscriptions",
    "mcp.server",
    "mcp.server.lowlevel.server",
    "mcp.server.sse",
    "mcp.server.stdio",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.subscriptions",
    "mcp.server.transport_security",
    "mcp.shared.auth",
    "mcp.shared.exceptions",
    "mcp.shared.memory",
    "mcp.types",
    "mcp_types",
    "opentelemetry.metrics",
    "opentelemetry.propagate",
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    "opentelemetry.sdk.metrics",
    "opentelemetry.sdk.metrics.export",
    "opentelemetry.sdk.metrics.view",
    "opentelemetry.sdk.resources",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.trace.export.in_memory_span_exporter",
    "opentelemetry.sdk.trace.sampling",
    "opentelemetry.semconv._incubating.attributes.gen_ai_attributes",
    "opentelemetry.semconv._incubating.attributes.mcp_attributes",
    "opentelemetry.semconv._incubating.metrics.mcp_metrics",
    "opentelemetry.trace",
    "psutil",
    "pydantic",
    "rich.console",
    "rich.table",
    "rich.text",
    "snowballstemmer",
    "starlette.applications",
    "starlette.requests",
    "starlette.responses",
    "starlette.routing",
    "textual.app",
    "textual.containers",
    "textual.pilot",
    "textual.screen",
    "textual.widgets",
    "uvicorn",
)
"""What the test modules and the package import at module level, less the
standard library and ourselves (measured after a collection)."""


def _preload() -> None:
    for name in MODULES:
        importlib.import_module(name)
    ours = sorted(m for m in sys.modules if m == "manager" or m.startswith("manager."))
    if ours:  # it would hide their module-level lines from coverage
        raise RuntimeError(f"untraced_imports imported the package: {ours}")


if os.environ.get("PYTEST_XDIST_WORKER"):
    _preload()
