"""The tracing seam: the little `connection.py` and `manager.py` ask of tracing.

Most spans are built from events by the telemetry sink after the fact. Two kinds
cannot be: a connect attempt and a tool call must be the *current* span while the
MCP SDK works, so that the SDK's own request spans, and the W3C `traceparent` it
sends upstream in `params._meta`, become their children. For those, the daemon
passes a `Tracing` down; its `span(name, attributes)` is a context manager that
makes a span current for the block. The default, `NO_TRACING`, does nothing and
costs about as much as an empty `with`.

`opentelemetry` is never imported here (it has one door: `telemetry`); the
attribute names below are plain strings, the OpenTelemetry MCP semantic
conventions where they exist and `mcp.*` names of our own for the lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

from ..core.spec import ConnectionSpec

__all__ = [
    "ATTEMPT",
    "ENDPOINT",
    "ERROR_TYPE",
    "EXIT_CODE",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROMPT_NAME",
    "HELD",
    "GEN_AI_TOOL_NAME",
    "MCP_METHOD_NAME",
    "MCP_PROTOCOL_VERSION",
    "MCP_RESOURCE_URI",
    "MCP_SESSION_ID",
    "NETWORK_TRANSPORT",
    "NO_TRACING",
    "OUTCOME",
    "PID",
    "SERVER",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "TRANSPORT",
    "AttributeValue",
    "NoTracing",
    "Span",
    "SpanKindName",
    "Tracing",
    "attempt_attributes",
    "call_attributes",
    "network_transport",
]

AttributeValue = str | bool | int | float
"""A span attribute value (OpenTelemetry also allows sequences; we never need them)."""

SpanKindName = Literal["internal", "client"]
"""The span kinds the daemon creates through this seam."""

# --- our own lifecycle attributes
SERVER: Final = "mcp.server"
"""The connection's name as declared in startup.lua."""
ENDPOINT: Final = "mcp.endpoint"
"""The endpoint for humans, secrets masked (`spec.display_endpoint`); set from
the `added` event on the lifecycle spans."""
TRANSPORT: Final = "mcp.transport"
"""`stdio`, `http` or `sse`."""
ATTEMPT: Final = "mcp.attempt"
"""Tries since the connection was last stable (1 for the first)."""
OUTCOME: Final = "mcp.outcome"
"""How a lifecycle span ended: `connected`, `failed`, `cancelled`, `removed`, …"""

# --- OpenTelemetry semantic conventions (strings checked against the semconv
# package in tests/test_telemetry.py)
ERROR_TYPE: Final = "error.type"
EXIT_CODE: Final = "process.exit.code"
PID: Final = "process.pid"
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
HELD: Final = "mcp.manager.held"
"""Seconds a call waited for its reconnecting server (`hold`) before it was sent."""
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
NETWORK_TRANSPORT: Final = "network.transport"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"


class Span(Protocol):
    """The span a `Tracing.span` block sees."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Add or replace one attribute (string values are redacted by the sink)."""
        ...


class Tracing(Protocol):
    """Makes spans current around work the MCP SDK does.

    An implementation records an exception leaving the block as the span's
    `error.type` (its class name) with an error status, and a cancellation as
    `mcp.outcome = cancelled` without one; the exception always propagates.
    """

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        kind: SpanKindName = "internal",
    ) -> AbstractContextManager[Span]:
        """A span, current for the `with` block.

        Args:
            name: Span name, e.g. `mcp.connect_attempt` or `tools/call echo`.
            attributes: Initial attributes.
            kind: `client` for a request to an upstream, else `internal`.
        """
        ...

    def send_span(
        self, method: str, target: str | None, request_id: str, meta: dict[str, Any]
    ) -> AbstractContextManager[Callable[[int, str], None]]:
        """The MCP SDK's own CLIENT span around a request our relay sends
        itself (`transport.relay`), as the SDK would make it: `MCP send
        <method> [<target>]`, current while it is sent, with the W3C trace
        context put into `meta` (the request's `params._meta`).

        Yields a function that records a JSON-RPC error answer (code, message).
        """
        ...

    def recording(self) -> bool:
        """Whether a span started now would be recorded (False while exports
        fail and spans are dropped anyway): lets callers skip making them."""
        ...


def _ignore_error(code: int, message: str) -> None:
    pass


class _NoSendSpan:
    """The send span of `NO_TRACING`: nothing recorded, nothing injected."""

    __slots__ = ()

    def __enter__(self) -> Callable[[int, str], None]:
        return _ignore_error

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NO_SEND_SPAN = _NoSendSpan()


class _NoSpan:
    """The span of `NO_TRACING`: its own context manager, records nothing."""

    __slots__ = ()

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NO_SPAN = _NoSpan()


class NoTracing:
    """A `Tracing` that records nothing (the default)."""

    __slots__ = ()

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        kind: SpanKindName = "internal",
    ) -> AbstractContextManager[Span]:
        """A span that records nothing."""
        return _NO_SPAN

    def send_span(
        self, method: str, target: str | None, request_id: str, meta: dict[str, Any]
    ) -> AbstractContextManager[Callable[[int, str], None]]:
        """No span: with nothing recording, the SDK would inject nothing either."""
        return _NO_SEND_SPAN

    def recording(self) -> bool:
        """Never."""
        return False


NO_TRACING: Final = NoTracing()
"""The shared do-nothing `Tracing`."""


def network_transport(spec: ConnectionSpec) -> str:
    """`network.transport` for a spec: `pipe` for stdio, `tcp` for HTTP and SSE."""
    return "pipe" if spec.transport == "stdio" else "tcp"


def attempt_attributes(spec: ConnectionSpec, attempt: int) -> dict[str, AttributeValue]:
    """The attributes of an `mcp.connect_attempt` span (its episode has the rest)."""
    return {SERVER: spec.name, TRANSPORT: spec.transport, ATTEMPT: attempt}


def call_attributes(spec: ConnectionSpec, tool: str) -> dict[str, AttributeValue]:
    """Semantic-convention attributes of a `tools/call` CLIENT span."""
    out: dict[str, AttributeValue] = {
        MCP_METHOD_NAME: "tools/call",
        GEN_AI_TOOL_NAME: tool,
        GEN_AI_OPERATION_NAME: "execute_tool",
        SERVER: spec.name,
        NETWORK_TRANSPORT: network_transport(spec),
    }
    if spec.transport != "stdio":
        try:
            parts = urlsplit(spec.url)
            host, port = parts.hostname, parts.port
        except ValueError:
            host, port = None, None
        if host and "${" not in host:
            out[SERVER_ADDRESS] = host
            if port is not None:
                out[SERVER_PORT] = port
    return out
