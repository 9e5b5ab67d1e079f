"""Spans current while the MCP SDK works: the `Tracing` seam's implementation.

`CurrentSpans.span()` starts a span and makes it current for the block, so the
SDK's own request span, and the `traceparent` it puts into `params._meta`, are
its children. A `mcp.connect_attempt` is placed under its connection's open
episode (`LifecycleSpans.episode`). An exception leaving the block becomes the
span's `error.type` (and `process.exit.code` when it carries one), with an
error status whose description is the redacted first line; a cancellation
becomes `mcp.outcome = cancelled` (and, for a CLIENT request, `error.type =
cancelled`). A CLIENT span with `mcp.method.name` also
records `mcp.client.operation.duration`, even when traces are off.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import Token
from types import TracebackType
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from ..core.redact import SecretRegistry, redact
from ..engine.tracing import (
    ERROR_TYPE,
    EXIT_CODE,
    MCP_METHOD_NAME,
    OUTCOME,
    SERVER,
    AttributeValue,
    SpanKindName,
)
from .metrics import Metrics
from .spans import ATTEMPT_SPAN, LifecycleSpans, clean

__all__ = ["CurrentSpans"]

_KINDS: Final = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class _ActiveSpan:
    """One `CurrentSpans.span()` block; also the `Span` the block sees."""

    __slots__ = ("_attributes", "_kind", "_name", "_owner", "_span", "_start", "_token")

    def __init__(
        self,
        owner: CurrentSpans,
        name: str,
        attributes: Mapping[str, AttributeValue] | None,
        kind: SpanKindName,
    ) -> None:
        self._owner = owner
        self._name = name
        self._attributes = clean(attributes, owner.secrets) if attributes else {}
        self._kind = kind
        self._span: trace.Span | None = None
        self._token: Token[Context] | None = None
        self._start = 0.0

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if isinstance(value, str):
            value = redact(value, self._owner.secrets)
        self._attributes[key] = value
        if self._span is not None:
            self._span.set_attribute(key, value)

    def __enter__(self) -> _ActiveSpan:
        owner = self._owner
        self._start = time.perf_counter()
        if owner.tracer is not None and not owner.quiet():
            parent = None
            if self._name == ATTEMPT_SPAN and owner.lifecycle is not None:
                parent = owner.lifecycle.episode(str(self._attributes.get(SERVER, "")))
            span = owner.tracer.start_span(
                self._name,
                context=parent,
                kind=_KINDS[self._kind],
                attributes=self._attributes,
            )
            self._span = span
            self._token = otel_context.attach(trace.set_span_in_context(span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        attributes = self._attributes
        ending: dict[str, AttributeValue] = {}
        description = None
        if exc is not None:
            if isinstance(exc, Exception):
                if ERROR_TYPE not in attributes:
                    ending[ERROR_TYPE] = type(exc).__name__
                if OUTCOME not in attributes:
                    ending[OUTCOME] = "failed"
                code = getattr(exc, "exit_code", None)
                if isinstance(code, int):
                    ending[EXIT_CODE] = code
                first = str(exc).split("\n", 1)[0]
                description = redact(first, self._owner.secrets)[:500]
            else:
                if OUTCOME not in attributes:
                    ending[OUTCOME] = "cancelled"
                if self._kind == "client":  # a request that never completed
                    ending[ERROR_TYPE] = "cancelled"
            attributes.update(ending)
        if span is not None:
            if ending:
                span.set_attributes(ending)
            if ERROR_TYPE in attributes:
                span.set_status(Status(StatusCode.ERROR, description))
            if self._token is not None:
                otel_context.detach(self._token)
            span.end()
        if self._kind == "client" and MCP_METHOD_NAME in self._attributes:
            metrics = self._owner.metrics
            if metrics is not None:
                metrics.record_operation(
                    time.perf_counter() - self._start, self._attributes
                )


class CurrentSpans:
    """The `Tracing` implementation: spans current while the SDK works.

    Args:
        tracer: Where spans are made (None: no spans, metrics still recorded).
        lifecycle: Where a connect attempt finds its episode.
        metrics: Records `mcp.client.operation.duration` for CLIENT spans.
        secrets: The values masked in every string attribute and error text.
    """

    def __init__(
        self,
        tracer: Tracer | None,
        lifecycle: LifecycleSpans | None = None,
        metrics: Metrics | None = None,
        quiet: Callable[[], bool] = lambda: False,
        secrets: SecretRegistry | None = None,
    ) -> None:
        self.secrets = secrets if secrets is not None else SecretRegistry()
        self.tracer = tracer
        self.lifecycle = lifecycle
        self.metrics = metrics
        self.quiet = quiet

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        kind: SpanKindName = "internal",
    ) -> _ActiveSpan:
        """A span, current for the `with` block (see `engine.tracing.Tracing`)."""
        return _ActiveSpan(self, name, attributes, kind)

    def recording(self) -> bool:
        """Whether a span started now would be recorded (`engine.tracing.Tracing`)."""
        return self.tracer is not None and not self.quiet()

    @contextlib.contextmanager
    def send_span(
        self, method: str, target: str | None, request_id: str, meta: dict[str, Any]
    ) -> Iterator[Callable[[int, str], None]]:
        """The SDK's span for a request the relay sends (`engine.tracing.Tracing`).

        Made as the SDK's dispatcher makes it (its tracer, name, kind and
        attributes), so a trace looks the same whichever way the call went;
        not made while `quiet` (no collector: it would be dropped anyway).
        """
        if self.quiet():
            # Exports fail and the sampler would drop the span: skip making
            # it, as our own spans do; the current context still goes along.
            propagate.inject(meta)
            yield _ignore_error
            return
        with _SDK_TRACER.start_as_current_span(
            f"MCP send {method}{f' {target}' if target else ''}",
            kind=SpanKind.CLIENT,
            attributes={"mcp.method.name": method, "jsonrpc.request.id": request_id},
        ) as span:
            propagate.inject(meta)

            def failed(code: int, message: str) -> None:
                span.set_attributes(
                    {"error.type": str(code), "rpc.response.status_code": str(code)}
                )
                span.set_status(StatusCode.ERROR, message)

            yield failed


def _ignore_error(code: int, message: str) -> None:
    pass


_SDK_TRACER = trace.get_tracer("mcp-python-sdk")
"""The MCP SDK's tracer (`mcp.shared._otel`): its spans follow the global provider."""
