"""OTLP receivers for tests: what a collector would receive, decoded.

`GrpcReceiver` serves the OTLP trace and metrics services over gRPC (grpcio and
the `opentelemetry-proto` messages); `HttpReceiver` takes OTLP/HTTP protobuf
POSTs on `/v1/traces` and `/v1/metrics` (`http.server`). Both listen on an
ephemeral 127.0.0.1 port, decode every request into `ReceivedSpan`s and
`ReceivedPoint`s, and let a test wait for what it expects (`wait_for`), never
sleep. Use as context managers; `endpoint` is the base URL for
`OTEL_EXPORTER_OTLP_ENDPOINT` (gRPC) or the HTTP base.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

import grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["GrpcReceiver", "HttpReceiver", "ReceivedPoint", "ReceivedSpan"]

Attributes = dict[str, object]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector got it (ids in hex)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    scope: str
    attributes: Attributes
    resource: Attributes
    links: tuple[tuple[str, str, Attributes], ...]
    status_code: int
    status_message: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class ReceivedPoint:
    """One metric data point: gauge/sum value, or a histogram's count and sum."""

    metric: str
    attributes: Attributes
    value: float
    count: int = 0
    resource: Attributes = field(default_factory=dict)


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> Attributes:
    return {kv.key: _value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


class _Store:
    """Decoded requests, with a condition to wait on."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.points: list[ReceivedPoint] = []
        self.requests = 0
        self.duplicates = 0
        """Spans received again: OTLP delivery is at least once (an export
        that timed out under load is sent again); kept once, as a trace
        backend keeps them."""
        self._seen: set[tuple[str, str]] = set()
        self._cond = threading.Condition()

    def add_traces(self, request: ExportTraceServiceRequest) -> None:
        with self._cond:
            self.requests += 1
            for rs in request.resource_spans:
                resource = _attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for sp in ss.spans:
                        key = (sp.trace_id.hex(), sp.span_id.hex())
                        if key in self._seen:
                            self.duplicates += 1
                            continue
                        self._seen.add(key)
                        self.spans.append(
                            ReceivedSpan(
                                name=sp.name,
                                trace_id=sp.trace_id.hex(),
                                span_id=sp.span_id.hex(),
                                parent_span_id=sp.parent_span_id.hex(),
                                kind=sp.kind,
                                scope=ss.scope.name,
                                attributes=_attributes(sp.attributes),
                                resource=resource,
                                links=tuple(
                                    (
                                        link.trace_id.hex(),
                                        link.span_id.hex(),
                                        _attributes(link.attributes),
                                    )
                                    for link in sp.links
                                ),
                                status_code=sp.status.code,
                                status_message=sp.status.message,
                                start_ns=sp.start_time_unix_nano,
                                end_ns=sp.end_time_unix_nano,
                            )
                        )
            self._cond.notify_all()

    def add_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self._cond:
            self.requests += 1
            for rm in request.resource_metrics:
                resource = _attributes(rm.resource.attributes)
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        self.points.extend(_points(metric, resource))
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)


def _points(metric: Any, resource: Attributes) -> list[ReceivedPoint]:
    kind = metric.WhichOneof("data")
    out = []
    if kind in ("gauge", "sum"):
        for dp in getattr(metric, kind).data_points:
            value = dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double
            out.append(
                ReceivedPoint(
                    metric.name, _attributes(dp.attributes), value, resource=resource
                )
            )
    elif kind == "histogram":
        out.extend(
            ReceivedPoint(
                metric.name,
                _attributes(dp.attributes),
                dp.sum,
                dp.count,
                resource=resource,
            )
            for dp in metric.histogram.data_points
        )
    return out


class _Receiver:
    """Shared surface of both receivers."""

    def __init__(self) -> None:
        self.store = _Store()
        self.port = 0

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far."""
        with self.store._cond:
            return list(self.store.spans)

    @property
    def points(self) -> list[ReceivedPoint]:
        """Every metric data point received so far."""
        with self.store._cond:
            return list(self.store.points)

    @property
    def endpoint(self) -> str:
        """Base URL to export to."""
        return f"http://127.0.0.1:{self.port}"

    def wait_for(
        self,
        predicate: Callable[[list[ReceivedSpan], list[ReceivedPoint]], bool],
        timeout: float = 15.0,
    ) -> bool:
        """Wait until `predicate(spans, points)` holds; False after `timeout`."""
        store = self.store
        return store.wait_for(lambda: predicate(store.spans, store.points), timeout)

    def start(self) -> int:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class GrpcReceiver(_Receiver):
    """The OTLP/gRPC trace and metrics services on 127.0.0.1.

    Args:
        port: Listen there (default: an ephemeral port).
    """

    def __init__(self, port: int = 0) -> None:
        super().__init__()
        self.port = port
        self._server: Any = None

    def _export_traces(
        self, request: ExportTraceServiceRequest, context: object
    ) -> ExportTraceServiceResponse:
        self.store.add_traces(request)
        return ExportTraceServiceResponse()

    def _export_metrics(
        self, request: ExportMetricsServiceRequest, context: object
    ) -> ExportMetricsServiceResponse:
        self.store.add_metrics(request)
        return ExportMetricsServiceResponse()

    def start(self) -> int:
        """Listen on an ephemeral port; returns it."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        for service, handler, request_type, response_type in (
            (
                "opentelemetry.proto.collector.trace.v1.TraceService",
                self._export_traces,
                ExportTraceServiceRequest,
                ExportTraceServiceResponse,
            ),
            (
                "opentelemetry.proto.collector.metrics.v1.MetricsService",
                self._export_metrics,
                ExportMetricsServiceRequest,
                ExportMetricsServiceResponse,
            ),
        ):
            method = grpc.unary_unary_rpc_method_handler(
                handler,
                request_deserializer=request_type.FromString,
                response_serializer=response_type.SerializeToString,
            )
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(service, {"Export": method}),)
            )
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        server.start()
        self._server = server
        return self.port

    def stop(self) -> None:
        """Stop at once."""
        if self._server is not None:
            self._server.stop(grace=None).wait(2)
            self._server = None


class HttpReceiver(_Receiver):
    """OTLP/HTTP protobuf on 127.0.0.1: `POST /v1/traces` and `/v1/metrics`."""

    def __init__(self) -> None:
        super().__init__()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.paths: list[str] = []

    def start(self) -> int:
        """Listen on an ephemeral port; returns it."""
        store, paths = self.store, self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                paths.append(self.path)
                if self.path == "/v1/traces":
                    store.add_traces(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    store.add_metrics(ExportMetricsServiceRequest.FromString(body))
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
