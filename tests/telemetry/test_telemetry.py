"""Telemetry in-process: spans and metrics from providers the tests pass in.

Never the global tracer provider (it can be set once per process): each test
builds a `TracerProvider` with an `InMemorySpanExporter` and a `MeterProvider`
with an `InMemoryMetricReader`, and hands them to `Telemetry`. The MCP SDK's own
spans therefore stay non-recording here; that they nest under ours is checked
against the real daemon in test_telemetry_daemon.py.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from fakes import FakeTransport, Recorder
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from memory import MemoryServers, memory_spec
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.semconv._incubating.attributes import (
    gen_ai_attributes,
    mcp_attributes,
    process_attributes,
)
from opentelemetry.semconv.attributes import (
    error_attributes,
    network_attributes,
    server_attributes,
)
from opentelemetry.trace import SpanKind, StatusCode
from servers import Blackhole, free_port, raw_command, stdio_command
from servers.oauth import CLIENT_ID, SECRET, oauth_demo

from manager.core.errors import ServerUnavailable, UnknownServer
from manager.core.events import (
    Added,
    AttemptFailed,
    Connected,
    Connecting,
    Reconnecting,
)
from manager.core.info import OtlpStatus
from manager.core.redact import SecretRegistry
from manager.core.spec import ConnectionSpec, parse_spec
from manager.engine import tracing
from manager.engine.bus import EventBus
from manager.engine.manager import Manager
from manager.gateway import EndpointOptions, Gateway
from manager.hud.view import _otlp
from manager.telemetry import (
    DropSpans,
    ExportStatus,
    Telemetry,
    TelemetryConfig,
    is_sdk_ping,
)
from manager.telemetry.current import CurrentSpans
from manager.telemetry.export import build_exporting
from manager.telemetry.health import LogCapture, PauseWhileFailing, TrackedSpanExporter
from manager.transport.connect import McpTransport

FAST = {"backoff": {"initial": 0.01, "cap": 0.08}, "ping_interval": 0}


def fake_spec(name: str = "s", **opts: object) -> ConnectionSpec:
    return parse_spec(name, "http://127.0.0.1:1/mcp", {**FAST, **opts})


@dataclass
class Traced:
    """A `Telemetry` on in-memory exporters, and ways to read what it made."""

    bus: EventBus
    telemetry: Telemetry
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    secrets: SecretRegistry

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.spans]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        kids = [s for s in self.spans if parent_id(s) == span_id(parent)]
        return sorted(kids, key=lambda s: s.start_time or 0)

    def points(self, metric: str) -> list[tuple[dict[str, object], float]]:
        data = self.reader.get_metrics_data()
        out: list[tuple[dict[str, object], float]] = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        for dp in m.data.data_points:
                            value = getattr(dp, "value", None)
                            if value is None:
                                value = dp.count  # type: ignore[union-attr]
                            out.append((dict(dp.attributes or {}), value))
        return out


@pytest.fixture
def traced() -> Iterator[Traced]:
    bus = EventBus()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(DropSpans(SimpleSpanProcessor(exporter), is_sdk_ping))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    secrets = SecretRegistry()
    telemetry = Telemetry(
        bus, tracer_provider=provider, meter_provider=meters, secrets=secrets
    )
    yield Traced(bus, telemetry, exporter, reader, secrets)
    telemetry.close()
    provider.shutdown()
    meters.shutdown()


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


# ------------------------------------------------------------ the span tree


@pytest.mark.anyio
async def test_a_connection_that_fails_twice_then_connects_gives_the_expected_tree(
    traced: Traced,
) -> None:
    rec = Recorder(traced.bus)
    async with Manager(
        traced.bus, FakeTransport(failures=2), tracing=traced.telemetry.tracing
    ) as mgr:
        mgr.add(fake_spec())
        await rec.wait_for("connected", "s")
    add = traced.one("mcp.add")
    loop = traced.one("mcp.connect_loop")
    assert add.parent is None
    assert parent_id(loop) == span_id(add) and trace_id(loop) == trace_id(add)
    tree = [
        (s.name, attrs(s).get("mcp.attempt"), attrs(s).get("mcp.outcome"))
        for s in traced.children(loop)
    ]
    assert tree == [
        ("mcp.connect_attempt", 1, "failed"),
        ("mcp.backoff_wait", 2, None),
        ("mcp.connect_attempt", 2, "failed"),
        ("mcp.backoff_wait", 3, None),
        ("mcp.connect_attempt", 3, "connected"),
    ]
    # Exactly these spans, nothing else: add, loop, 3 attempts, 2 waits, remove.
    assert sorted(s.name for s in traced.spans) == sorted(
        ["mcp.add", "mcp.connect_loop", "mcp.remove"]
        + ["mcp.connect_attempt"] * 3
        + ["mcp.backoff_wait"] * 2
    )
    naming = {"mcp.server": "s", "mcp.transport": "http"}
    endpoint = {"mcp.endpoint": "http://127.0.0.1:1/mcp"}
    assert attrs(add) == {**naming, **endpoint}
    assert attrs(loop) == {
        **naming,
        **endpoint,
        "mcp.connect_loop.cause": "added",
        "mcp.connect_loop.segment": 1,
        "mcp.outcome": "connected",
        "mcp.attempt": 3,
        "mcp.connect_loop.attempts": 3,
        "mcp.tools.count": 1,
        "mcp.upstream.name": "fake",
        "mcp.upstream.version": "1.0",
        "mcp.protocol.version": "2025-11-25",
        "mcp.connect.elapsed": attrs(loop)["mcp.connect.elapsed"],
    }
    failed = traced.children(loop)[0]
    assert attrs(failed)["error.type"] == "ConnectFailed"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "connection refused"
    waits = traced.named("mcp.backoff_wait")
    delays = [attrs(w)["mcp.backoff.delay"] for w in waits]
    assert 0.009 <= delays[0] <= 0.01 and 0.018 <= delays[1] <= 0.02  # type: ignore[operator]
    remove = traced.one("mcp.remove")
    assert remove.parent is None and attrs(remove)["mcp.server"] == "s"
    for span in traced.spans:  # every span ended after it started
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time >= span.start_time


@pytest.mark.anyio
async def test_a_lost_session_starts_a_new_trace_linked_to_the_episode_that_connected(
    traced: Traced,
) -> None:
    rec = Recorder(traced.bus)
    transport = FakeTransport()
    async with Manager(traced.bus, transport, tracing=traced.telemetry.tracing) as mgr:
        mgr.add(fake_spec())
        first = await rec.wait_for("connected", "s")
        transport.upstreams[-1].die("killed", exit_code=-9)
        await rec.wait_for("connected", "s", after=first.seq)
    loops = traced.named("mcp.connect_loop")
    assert len(loops) == 2
    lost = traced.one("mcp.connection_lost")
    assert lost.parent is None  # a trace of its own
    assert trace_id(lost) != trace_id(loops[0])
    assert [link.context.span_id for link in lost.links] == [span_id(loops[0])]
    assert attrs(lost)["mcp.lost.reason"] == "killed"
    assert attrs(lost)["process.exit.code"] == -9
    second = loops[1]
    assert parent_id(second) == span_id(lost) and trace_id(second) == trace_id(lost)
    assert attrs(second)["mcp.connect_loop.cause"] == "connection_lost"
    assert [s.name for s in traced.children(second)] == [
        "mcp.backoff_wait",
        "mcp.connect_attempt",
    ]
    assert attrs(second)["mcp.outcome"] == "connected"


@pytest.mark.anyio
async def test_spans_started_inside_a_reload_are_its_children(traced: Traced) -> None:
    rec = Recorder(traced.bus)
    tracing_ = traced.telemetry.tracing
    async with Manager(traced.bus, FakeTransport(), tracing=tracing_) as mgr:
        with tracing_.span("mcp.reload"):
            mgr.reconcile([fake_spec("a"), fake_spec("b", enabled=False)])
        first_session = await rec.wait_for("connected", "a")
        with tracing_.span("mcp.reload"):
            mgr.reconcile([fake_spec("a", call_timeout=5)])  # b gone, a changed
        await rec.wait_for("connected", "a", after=first_session.seq)
    first, second = sorted(traced.named("mcp.reload"), key=lambda s: s.start_time or 0)
    assert sorted(s.name for s in traced.children(first)) == ["mcp.add", "mcp.add"]
    changes = {attrs(s)["mcp.server"]: s for s in traced.children(second)}
    assert {name: s.name for name, s in changes.items()} == {
        "a": "mcp.update",
        "b": "mcp.remove",
    }
    assert attrs(changes["a"])["mcp.changed"] == ("call_timeout",)
    # The restart is a new episode under the update; the disabled one never tried.
    old, new = traced.named("mcp.connect_loop")
    assert attrs(old)["mcp.outcome"] == "connected"
    assert parent_id(new) == span_id(changes["a"])
    assert attrs(new)["mcp.connect_loop.cause"] == "updated"
    assert {attrs(s)["mcp.server"] for s in traced.named("mcp.connect_loop")} == {"a"}


def test_an_episode_longer_than_a_minute_goes_on_in_a_linked_span(
    traced: Traced,
) -> None:
    clock = [0.0]
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(traced.exporter))
    bus = EventBus()
    telemetry = Telemetry(bus, tracer_provider=provider, clock=lambda: clock[0])
    bus.publish(Added(name="s", transport="http", endpoint="http://h/mcp"))
    bus.publish(Connecting(name="s", attempt=1))
    bus.publish(AttemptFailed(name="s", attempt=1, error="refused"))
    bus.publish(Reconnecting(name="s", attempt=2, delay=100.0))  # a cap above 60 s
    clock[0] = 30.0
    telemetry.sweep()
    assert traced.named("mcp.connect_loop") == []
    clock[0] = 59.5
    telemetry.sweep()
    (first,) = traced.named("mcp.connect_loop")
    assert attrs(first)["mcp.outcome"] == "continued"
    (cut_wait,) = traced.named("mcp.backoff_wait")
    assert attrs(cut_wait)["mcp.outcome"] == "continued"
    clock[0] = 100.0
    bus.publish(Connecting(name="s", attempt=2))
    bus.publish(Connected(name="s", attempt=2, tools=1))
    second = traced.named("mcp.connect_loop")[1]
    assert second.parent is None and trace_id(second) != trace_id(first)
    assert [link.context.span_id for link in second.links] == [span_id(first)]
    assert attrs(second)["mcp.connect_loop.segment"] == 2
    assert attrs(second)["mcp.connect_loop.cause"] == "continued"
    assert attrs(second)["mcp.outcome"] == "connected"
    rest = traced.named("mcp.backoff_wait")[1]
    assert parent_id(rest) == span_id(second)
    assert attrs(rest)["mcp.backoff.delay"] == pytest.approx(40.5)
    for span in traced.spans:
        assert span.end_time is not None
    telemetry.close()


def test_close_ends_every_open_span(traced: Traced) -> None:
    bus = traced.bus
    bus.publish(Added(name="s", transport="http", endpoint="http://h/mcp"))
    bus.publish(Connecting(name="s", attempt=1))
    bus.publish(AttemptFailed(name="s", attempt=1, error="refused"))
    bus.publish(Reconnecting(name="s", attempt=2, delay=1.0))
    assert traced.telemetry.lifecycle.open_spans == 2
    traced.telemetry.close()
    assert traced.telemetry.lifecycle.open_spans == 0
    assert attrs(traced.one("mcp.connect_loop"))["mcp.outcome"] == "shutdown"
    assert attrs(traced.one("mcp.backoff_wait"))["mcp.outcome"] == "cancelled"
    bus.publish(Connecting(name="s", attempt=2))  # no longer listening
    assert traced.telemetry.lifecycle.open_spans == 0


# ------------------------------------------------------------ tool calls


@pytest.mark.anyio
@pytest.mark.usefixtures("no_leaked_children")
async def test_a_tool_call_span_is_current_while_the_sdk_sends_the_request(
    traced: Traced,
) -> None:
    command, args = stdio_command()
    spec = parse_spec("demo", {"command": command, "args": args}, {"ping_interval": 0})
    rec = Recorder(traced.bus)
    async with Manager(traced.bus, tracing=traced.telemetry.tracing) as mgr:
        mgr.add(spec)
        await rec.wait_for("connected", "demo")
        result = await mgr.call("demo", "meta", {})
        failed = await mgr.call("demo", "fail", {"message": "no"})
    assert failed.is_error
    call = traced.one("tools/call meta")
    assert call.kind is SpanKind.CLIENT
    assert attrs(call) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "meta",
        "gen_ai.operation.name": "execute_tool",
        "mcp.server": "demo",
        "network.transport": "pipe",
        "mcp.protocol.version": "2025-11-25",
    }
    # No global provider here, so the SDK's own span does not record and the
    # traceparent it sends is our span's: the upstream saw exactly our span.
    content = result.data["content"]
    assert isinstance(content, list)
    meta = json.loads(content[0]["text"])
    version, trace, parent, flags = meta["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace, 16) == trace_id(call) and int(parent, 16) == span_id(call)
    tool_error = traced.one("tools/call fail")
    assert attrs(tool_error)["error.type"] == "tool_error"
    assert tool_error.status.status_code is StatusCode.ERROR
    durations = traced.points("mcp.client.operation.duration")
    by_tool = {a["gen_ai.tool.name"]: (a, n) for a, n in durations}
    assert by_tool["meta"][1] == 1 and "error.type" not in by_tool["meta"][0]
    assert by_tool["fail"][0]["error.type"] == "tool_error"
    # The attempt that connected was current while the SDK connected.
    attempt = traced.one("mcp.connect_attempt")
    assert attrs(attempt)["mcp.outcome"] == "connected"
    assert isinstance(attrs(attempt)["process.pid"], int)


@pytest.mark.anyio
@pytest.mark.usefixtures("no_leaked_children")
async def test_a_call_through_the_endpoint_continues_the_callers_trace(
    traced: Traced,
) -> None:
    command, args = raw_command()
    spec = parse_spec("fast", {"command": command, "args": args}, {"ping_interval": 0})
    trace_hex, parent_hex = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    rec = Recorder(traced.bus)
    async with Manager(traced.bus, tracing=traced.telemetry.tracing) as manager:
        gateway = Gateway(manager, traced.bus)
        async with anyio.create_task_group() as tg:
            await tg.start(partial(gateway.serve, EndpointOptions("127.0.0.1", 0)))
            manager.add(spec)
            await rec.wait_for("connected", "fast")
            with anyio.fail_after(5):
                while "fast__echo" not in gateway.table.routes:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            async with (
                httpx2.AsyncClient() as http,
                streamable_http_client(str(gateway.url), http_client=http) as streams,
                ClientSession(*streams) as client,
            ):
                await client.initialize()
                meta = {"traceparent": f"00-{trace_hex}-{parent_hex}-01"}
                await client.call_tool("fast__echo", {"text": "x"}, meta=meta)  # type: ignore[call-overload]
            await gateway.aclose()
    call = traced.one("tools/call echo")
    assert trace_id(call) == int(trace_hex, 16)
    assert parent_id(call) == int(parent_hex, 16)


@pytest.mark.anyio
async def test_a_call_that_cannot_be_made_records_the_error_type(
    traced: Traced,
) -> None:
    tracing_ = traced.telemetry.tracing
    rec = Recorder(traced.bus)
    async with Manager(
        traced.bus, FakeTransport(failures=10**6), tracing=tracing_
    ) as m:
        m.add(fake_spec("down", hold=0, backoff={"initial": 5, "cap": 5}))
        m.add(fake_spec("held", hold=5, backoff={"initial": 5, "cap": 5}))
        await rec.wait_for("connect_failed", "down")
        await rec.wait_for("connect_failed", "held")
        with pytest.raises(UnknownServer):
            await m.call("nope", "echo")
        with pytest.raises(ServerUnavailable):
            await m.call("down", "echo")
        with anyio.move_on_after(0.05):  # the caller gives up while it is held
            await m.call("held", "echo")
    calls = {attrs(s)["mcp.server"]: s for s in traced.named("tools/call echo")}
    assert attrs(calls["nope"])["error.type"] == "UnknownServer"
    assert calls["nope"].status.status_code is StatusCode.ERROR
    assert attrs(calls["down"])["error.type"] == "ServerUnavailable"
    assert attrs(calls["down"])["server.address"] == "127.0.0.1"
    assert attrs(calls["down"])["server.port"] == 1
    assert "down is reconnecting" in (calls["down"].status.description or "")
    assert attrs(calls["held"])["error.type"] == "cancelled"
    # the wait for the reconnecting server is on the span (why it took long)
    held = attrs(calls["held"])["mcp.manager.held"]
    assert isinstance(held, float) and held > 0
    assert "mcp.manager.held" not in attrs(calls["down"])  # hold = 0: no wait
    (_, count) = next(
        point
        for point in traced.points("mcp.client.operation.duration")
        if point[0]["mcp.server"] == "held"
    )
    assert count == 1


@pytest.mark.anyio
async def test_no_secret_reaches_a_span(traced: Traced) -> None:
    secret = "s3cr3t-for-telemetry-test"
    traced.secrets.add([secret])  # as the transport registers a resolved secret
    rec = Recorder(traced.bus)
    transport = FakeTransport(failures=1, error=f"refused with token {secret}")
    spec = parse_spec("s", f"http://user:{secret}@127.0.0.1:1/mcp", {**FAST, "hold": 0})
    async with Manager(
        traced.bus,
        transport,
        tracing=traced.telemetry.tracing,
        secrets=traced.secrets,  # the daemon's one registry
    ) as m:
        m.add(spec)
        await rec.wait_for("connected", "s")
        transport.upstreams[-1].die(f"died holding {secret}")
        await rec.wait_for("disconnected", "s")
        with traced.telemetry.tracing.span("custom", {"note": secret}) as span:
            span.set_attribute("later", f"x{secret}x")
    seen = [
        str(value)
        for span in traced.spans
        for value in [*attrs(span).values(), span.status.description, span.name]
    ]
    assert seen and not [text for text in seen if secret in text]
    assert any("***" in text for text in seen)


# ------------------------------------------------------------ metrics


@pytest.mark.anyio
async def test_metrics_count_states_reconnects_and_dropped_events(
    traced: Traced,
) -> None:
    rec = Recorder(traced.bus)
    tele = traced.telemetry
    async with Manager(
        traced.bus, FakeTransport(failures=2), tracing=tele.tracing
    ) as m:
        tele.observe_states(lambda: [(c.name, c.phase.value) for c in m.connections()])
        m.add(fake_spec("s"))
        m.add(fake_spec("off", enabled=False))
        await rec.wait_for("connected", "s")
        with traced.bus.subscribe("slow", maxlen=1):
            await m.call("s", "echo", {"text": "x"})  # 2 call events, 1 dropped
            tele.sweep()
        await m.call("s", "echo", {"text": "y"})
        states = {
            a["mcp.connection.state"]: v
            for a, v in traced.points("mcp.manager.connections")
        }
        up = {a["mcp.server"]: v for a, v in traced.points("mcp.manager.connection.up")}
    assert states == {
        "connecting": 0,
        "connected": 1,
        "reconnecting": 0,
        "needs_login": 0,
        "refused": 0,
        "idle": 0,
        "disabled": 1,
    }
    assert up == {"s": 1, "off": 0}
    reconnects = traced.points("mcp.manager.reconnects")
    assert reconnects == [
        ({"mcp.server": "s", "mcp.reconnect.cause": "attempt_failed"}, 2)
    ]
    assert traced.points("mcp.manager.events.dropped") == [
        ({"mcp.manager.subscriber": "slow"}, 1)
    ]
    (calls,) = traced.points("mcp.client.operation.duration")
    assert calls[1] == 2 and calls[0]["mcp.method.name"] == "tools/call"
    (sessions,) = traced.points("mcp.client.session.duration")
    assert sessions[0] == {"mcp.server": "s", "mcp.protocol.version": "2025-11-25"}


@pytest.mark.anyio
async def test_the_connections_gauge_follows_each_change_of_phase_between_sweeps(
    traced: Traced,
) -> None:
    """An export between two sweeps (a second apart) reports the states the
    connections are in, not the ones they were in at the last sweep."""
    rec = Recorder(traced.bus)
    tele = traced.telemetry

    def counted() -> dict[object, float]:
        return {
            a["mcp.connection.state"]: v
            for a, v in traced.points("mcp.manager.connections")
            if v
        }

    async with Manager(traced.bus, FakeTransport(), tracing=tele.tracing) as m:
        tele.observe_states(lambda: [(c.name, c.phase.value) for c in m.connections()])
        m.add(fake_spec("s"))
        await rec.wait_for("connected", "s")
        assert counted() == {"connected": 1}
        m.add(fake_spec("off", enabled=False))
        assert counted() == {"connected": 1, "disabled": 1}
        m.remove("s")
        await rec.wait_for("removed", "s")
        assert counted() == {"disabled": 1}


# ------------------------------------------------------------ export health


def test_sdk_ping_spans_are_not_exported() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(DropSpans(SimpleSpanProcessor(exporter), is_sdk_ping))
    sdk = provider.get_tracer("mcp-python-sdk")
    ours = provider.get_tracer("mcp-manager")
    for tracer, name in [
        (sdk, "MCP send ping"),
        (sdk, "ping"),  # a downstream client pinging the endpoint
        (sdk, "MCP send tools/list"),
        (ours, "MCP send ping"),
    ]:
        tracer.start_span(name).end()
    exported = [
        (s.instrumentation_scope.name if s.instrumentation_scope else "", s.name)
        for s in exporter.get_finished_spans()
    ]
    assert exported == [
        ("mcp-python-sdk", "MCP send tools/list"),
        ("mcp-manager", "MCP send ping"),
    ]
    provider.shutdown()


TRANSIENT = (
    "Transient error StatusCode.UNAVAILABLE encountered while exporting traces to "
    "127.0.0.1:4317, retrying in 1.01s. Error details: failed to connect to all "
    "addresses; last error: UNKNOWN: ipv4:127.0.0.1:4317: Failed to connect to "
    "remote host: Connection refused"
)
"""What the gRPC exporter logs per attempt when nothing listens (SDK 1.45)."""


def test_an_unreachable_collector_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [0.0]
    status = ExportStatus("http://u:pw@127.0.0.1:4317", "grpc", clock=lambda: clock[0])
    capture = LogCapture(status).install()
    sdk = logging.getLogger("opentelemetry.exporter.otlp.proto.grpc.exporter")
    queue = logging.getLogger("opentelemetry.sdk._shared_internal")
    other = logging.getLogger("opentelemetry.attributes")
    try:
        with caplog.at_level(logging.DEBUG):
            for _ in range(5):
                sdk.warning(TRANSIENT)
                queue.warning("Queue full, dropping spans.")
            other.warning("Invalid type %s for attribute value", "dict")
            assert status.snapshot() == OtlpStatus(
                endpoint="http://u:***@127.0.0.1:4317",
                protocol="grpc",
                ok=False,
                last_error="connection refused",
                exports=0,
                failures=5,
            )
            status.record(True)  # it came back
            clock[0] = 10.0
            status.record(False, "UNAVAILABLE")  # and went again: no new warning yet
            clock[0] = 400.0
            status.record(True)
            status.record(False, "UNAVAILABLE")  # a new outage, much later
    finally:
        capture.uninstall()
    lines = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    warnings = [m for name, level, m in lines if level == "WARNING" and "OTLP" in m]
    assert len(warnings) == 2
    assert warnings[0].startswith(
        "OTLP export to http://u:***@127.0.0.1:4317 (grpc) is failing: connection "
        "refused."
    )
    assert not [m for _, _, m in lines if "Transient" in m or "Queue full" in m]
    assert (
        "opentelemetry.attributes",
        "WARNING",
        "Invalid type dict for attribute value",
    ) in lines
    assert [m for _, level, m in lines if level == "INFO"] == [
        "OTLP export to http://u:***@127.0.0.1:4317 works again"
    ] * 2
    assert logging.getLogger("opentelemetry").propagate


def test_a_failing_metrics_endpoint_neither_pauses_spans_nor_is_blamed_on_traces(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Traces and metrics shared one export status: a dead metrics endpoint
    paused the spans (about 80 % lost while traces exported fine), and the
    log blamed the traces endpoint, "works again" every few seconds (found
    by an audit). Each signal has its own state now; each endpoint its
    warning."""
    status = ExportStatus(
        "http://c:14318",
        "http/protobuf",
        endpoints={
            "traces": "http://c:14318/v1/traces",
            "metrics": "http://c:9/v1/metrics",
        },
    )
    sampler = PauseWhileFailing(status, probe_every=30.0, clock=lambda: 0.0)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            status.record(True)  # a span export
            status.record(False, "connection refused", signal="metrics")
            decision = sampler.should_sample(None, 1, "mcp.connect_attempt")
            assert decision.decision is Decision.RECORD_AND_SAMPLE
            assert not sampler.quiet()
    said = [r.getMessage() for r in caplog.records if "OTLP" in r.getMessage()]
    assert said == [
        "OTLP export to http://c:9/v1/metrics (http/protobuf) is failing: "
        + said[0].split("is failing: ", 1)[1]
    ]
    assert status.ok is False  # the footer still says something fails
    assert status.ok_for("traces") is True


def test_before_the_first_export_the_status_says_so_and_spans_are_still_made() -> None:
    """The HUD's footer showed ✔ before anything was exported: the status
    is unknown (None) until the first export, and spans are sampled then."""
    status = ExportStatus("http://c:4317", "grpc")
    assert status.snapshot().ok is None
    sampler = PauseWhileFailing(status, probe_every=30.0, clock=lambda: 0.0)
    assert not sampler.quiet()
    provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    assert provider.get_tracer("t").start_span("first").is_recording()
    status.record(True)
    assert status.snapshot().ok is True and status.snapshot().exports == 1


def test_quiet_tells_span_builders_to_skip_work_until_a_probe_is_due() -> None:
    clock = [100.0]
    status = ExportStatus("http://c:4317", "grpc")
    sampler = PauseWhileFailing(status, probe_every=30.0, clock=lambda: clock[0])
    assert not sampler.quiet()  # exports work
    status.record(False, "connection refused")
    assert not sampler.quiet()  # failing, but the first probe is due
    provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    provider.get_tracer("t").start_span("probe").end()
    assert sampler.quiet()  # probed: nothing to build for 30 s
    clock[0] += 31.0
    assert not sampler.quiet()
    status.record(True)
    assert not sampler.quiet()


def test_while_exports_fail_only_a_probe_span_is_recorded_now_and_then() -> None:
    clock = [0.0]
    status = ExportStatus("http://c:4317", "grpc")
    sampler = PauseWhileFailing(status, probe_every=30.0, clock=lambda: clock[0])
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")

    def make(name: str) -> None:
        tracer.start_span(name).end()

    make("up")
    with tracer.start_as_current_span("episode"):
        status.record(False, "connection refused")  # the collector went away
        make("probe")  # the first span while failing is recorded
        make("dropped")
        clock[0] = 31.0
        make("next probe")
        make("dropped too")
        status.record(True)  # it is back
        make("in an episode started before")
    make("back")
    with tracer.start_as_current_span("paused"):
        status.record(False, "refused")
    status.record(True)
    with tracer.start_as_current_span("paused"):
        make("child of a recorded parent")
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == [
        "up",
        "probe",
        "next probe",
        "in an episode started before",
        "episode",
        "back",
        "paused",
        "child of a recorded parent",
        "paused",
    ]
    provider.shutdown()


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
async def test_shutdown_with_a_silent_collector_is_bounded(
    protocol: str, blackhole: Blackhole
) -> None:
    config = TelemetryConfig.from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{blackhole.port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        }
    )
    exporting = build_exporting(config)
    telemetry = Telemetry(
        EventBus(),
        tracer_provider=exporting.tracer_provider,
        meter_provider=exporting.meter_provider,
        exporting=exporting,
    )
    for i in range(600):
        with telemetry.tracing.span("busy", {"i": i}):
            pass
    started = time.monotonic()
    await telemetry.aclose()
    elapsed = time.monotonic() - started
    # Budgets: 0.7 s flush + 0.25 s for the providers, wall-clock; the rest is
    # slack for a loaded or slower machine. Unbounded, the SDK would wait out
    # its 10 s export timeout here, so the bound still tells the two apart.
    assert elapsed < 4.0, elapsed


@pytest.mark.anyio
async def test_shutdown_with_no_collector_listening_skips_the_flush() -> None:
    config = TelemetryConfig.from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    )
    exporting = build_exporting(config)
    assert exporting.status is not None
    capture = LogCapture(exporting.status).install()
    try:
        telemetry = Telemetry(
            EventBus(),
            tracer_provider=exporting.tracer_provider,
            meter_provider=exporting.meter_provider,
            exporting=exporting,
        )
        for i in range(600):
            with telemetry.tracing.span("busy", {"i": i}):
                pass
        telemetry.close()
        # A budget nothing would reach: the flush must end because the first
        # export failed, not because time ran out. Had it waited, the
        # exporter's retries (1 + 2 + 4 s of backoff, jitter at most 20 %)
        # would take 5.6 s or more; ended by the failure it takes a fraction
        # of a second, here or on a machine several times slower.
        started = time.monotonic()
        await exporting.aclose(flush_budget=60.0)
        elapsed = time.monotonic() - started
    finally:
        capture.uninstall()
    assert elapsed < 4.0, elapsed
    info = telemetry.info()
    assert isinstance(info, OtlpStatus) and info.ok is False
    assert info.last_error == "connection refused"


def test_info_is_off_without_an_otlp_exporter() -> None:
    assert Telemetry(EventBus()).info() == "off"
    assert Telemetry(EventBus()).tracing is tracing.NO_TRACING
    console = TelemetryConfig.from_env(
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    )
    exporting = build_exporting(console)
    assert exporting.status is None and exporting.tracer_provider is not None
    assert exporting.meter_provider is None


# ------------------------------------------------------------ the seam


def test_the_tracing_seam_uses_the_semantic_convention_names() -> None:
    assert tracing.MCP_METHOD_NAME == mcp_attributes.MCP_METHOD_NAME
    assert tracing.MCP_SESSION_ID == mcp_attributes.MCP_SESSION_ID
    assert tracing.MCP_PROTOCOL_VERSION == mcp_attributes.MCP_PROTOCOL_VERSION
    assert tracing.GEN_AI_TOOL_NAME == gen_ai_attributes.GEN_AI_TOOL_NAME
    assert tracing.GEN_AI_PROMPT_NAME == gen_ai_attributes.GEN_AI_PROMPT_NAME
    assert tracing.MCP_RESOURCE_URI == mcp_attributes.MCP_RESOURCE_URI
    assert tracing.GEN_AI_OPERATION_NAME == gen_ai_attributes.GEN_AI_OPERATION_NAME
    assert tracing.ERROR_TYPE == error_attributes.ERROR_TYPE
    assert tracing.NETWORK_TRANSPORT == network_attributes.NETWORK_TRANSPORT
    assert tracing.SERVER_ADDRESS == server_attributes.SERVER_ADDRESS
    assert tracing.SERVER_PORT == server_attributes.SERVER_PORT
    assert tracing.EXIT_CODE == process_attributes.PROCESS_EXIT_CODE
    assert tracing.PID == process_attributes.PROCESS_PID


def test_no_tracing_records_nothing_and_lets_errors_through() -> None:
    with tracing.NO_TRACING.span("x", {"a": 1}, kind="client") as span:
        span.set_attribute("b", 2)
    with pytest.raises(KeyError), tracing.NO_TRACING.span("x"):
        raise KeyError("boom")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            parse_spec("h", "https://user:pw@example.com:8443/mcp"),
            {"server.address": "example.com", "server.port": 8443},
            id="https-with-port",
        ),
        pytest.param(
            parse_spec("h", "http://example.com/mcp"),
            {"server.address": "example.com"},
            id="no-port",
        ),
        pytest.param(
            parse_spec("p", {"command": "srv"}),
            {"network.transport": "pipe"},
            id="stdio",
        ),
    ],
)
def test_call_attributes_name_the_server(
    spec: ConnectionSpec, expected: dict[str, object]
) -> None:
    got = tracing.call_attributes(spec, "t")
    assert expected.items() <= got.items()
    assert "pw" not in str(got)


@pytest.mark.anyio
async def test_oauth_steps_are_spans_under_the_connect_attempt_and_counted(
    traced: Traced, tmp_path: Path
) -> None:
    rec = Recorder(traced.bus)
    tele = traced.telemetry
    transport = McpTransport(getenv={"S": SECRET}.get, state_dir=tmp_path)
    async with oauth_demo() as server:
        async with Manager(traced.bus, transport, tracing=tele.tracing) as m:
            oauth = {
                "grant": "client_credentials",
                "client_id": CLIENT_ID,
                "client_secret": "${env:S}",
                "issuer": server.base,
            }
            m.add(parse_spec("tracker", f"{server.base}/mcp", {"oauth": oauth}))
            await rec.wait_for("connected", "tracker")
    attempt = traced.one("mcp.connect_attempt")
    auth = traced.named("mcp.auth")
    steps = sorted(str((s.attributes or {})["mcp.auth.step"]) for s in auth)
    assert steps == ["discovery", "discovery", "token"]
    for span in auth:
        assert span.parent is not None
        assert span.parent.span_id == attempt.context.span_id
        assert attempt.start_time is not None
        assert span.start_time is not None and span.end_time is not None
        assert attempt.start_time <= span.start_time <= span.end_time
    counted = {
        (a["mcp.auth.step"], a["mcp.outcome"]): v
        for a, v in traced.points("mcp.manager.auth.steps")
    }
    assert counted == {("discovery", "ok"): 2, ("token", "ok"): 1}


def test_the_relays_send_span_carries_the_current_trace_also_while_quiet() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("t")
    quiet = [False]
    spans = CurrentSpans(tracer, quiet=lambda: quiet[0])
    assert spans.recording()
    with tracer.start_as_current_span("call") as call:
        context = call.get_span_context()
        for quiet[0] in (False, True):
            meta: dict[str, object] = {"k": "v"}
            with spans.send_span("tools/call", "echo", "mcp-manager:1", meta) as fail:
                fail(-32000, "not recorded here")  # no global provider: a no-op
            # No global provider: the SDK's span does not record, so what goes
            # upstream is the current span, made span or not.
            traceparent = str(meta["traceparent"]).split("-")
            assert traceparent[:3] == [
                "00",
                f"{context.trace_id:032x}",
                f"{context.span_id:016x}",
            ]
            assert meta["k"] == "v"
    assert not spans.recording()  # quiet: spans would be dropped
    assert not tracing.NO_TRACING.recording()
    meta = {}
    with tracing.NO_TRACING.send_span("tools/call", None, "mcp-manager:2", meta):
        pass
    assert meta == {}


@pytest.mark.anyio
@pytest.mark.parametrize("exporter", ["otlp", "console"])
async def test_otel_traces_sampler_chooses_what_is_recorded(exporter: str) -> None:
    """`OTEL_TRACES_SAMPLER` is the operator's: `always_off` records no span
    (not even the probe of a failing collector), a ratio keeps about that
    share of new traces."""
    environ = {
        "OTEL_TRACES_EXPORTER": exporter,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_TRACES_SAMPLER": "always_off",
    }
    off = build_exporting(TelemetryConfig.from_env(environ))
    assert off.tracer_provider is not None
    tracer = off.tracer_provider.get_tracer("t")
    if off.status is not None:
        off.status.record(False, "connection refused")  # a probe would be due
    assert not any(tracer.start_span(f"s{i}").is_recording() for i in range(50))
    await off.aclose(flush_budget=0.1, shutdown_budget=0.5)
    environ["OTEL_TRACES_SAMPLER"] = "traceidratio"
    environ["OTEL_TRACES_SAMPLER_ARG"] = "0.5"
    half = build_exporting(TelemetryConfig.from_env(environ))
    assert half.tracer_provider is not None
    tracer = half.tracer_provider.get_tracer("t")
    recorded = sum(tracer.start_span(f"s{i}").is_recording() for i in range(400))
    await half.aclose(flush_budget=0.1, shutdown_budget=0.5)
    assert 100 < recorded < 300, recorded  # 200 expected; binomial sd 10


class _SlowCollector(SpanExporter):
    """Takes spans only once `open` is set; keeps how many it took."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.taken = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.open.wait(30)
        self.taken += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.open.set()


def test_every_span_is_delivered_or_counted_lost_and_a_full_queue_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No span is silently lost: with a collector slower than the spans made,
    what the export queue drops is counted (`info`'s `spans_lost`, the HUD)
    and said once; delivered + lost = made."""
    status = ExportStatus("http://c:4317", "grpc")
    status.record(True)  # the collector answers: it is only slow
    collector = _SlowCollector()
    processor = BatchSpanProcessor(
        TrackedSpanExporter(collector, status),
        max_queue_size=8,
        max_export_batch_size=4,
        schedule_delay_millis=60_000,
    )
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(DropSpans(processor, is_sdk_ping, status))
    with caplog.at_level(logging.WARNING):
        tracer = provider.get_tracer("t")
        for i in range(100):
            tracer.start_span(f"s{i}").end()
        collector.open.set()
        provider.shutdown()
    lost = status.snapshot().spans_lost
    assert lost > 0 and collector.taken + lost == 100, (collector.taken, lost)
    said = [r.getMessage() for r in caplog.records if "queue is full" in r.getMessage()]
    assert len(said) == 1 and "OTEL_BSP_MAX_QUEUE_SIZE" in said[0], said
    assert "spans lost" in _otlp(status.snapshot())[0]


def test_spans_of_a_failed_export_are_counted_lost() -> None:
    class Refusing(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.FAILURE

    status = ExportStatus("http://c:4317", "grpc")
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(
        SimpleSpanProcessor(TrackedSpanExporter(Refusing(), status))
    )
    for i in range(3):
        provider.get_tracer("t").start_span(f"s{i}").end()
    provider.shutdown()
    assert status.snapshot().spans_lost == 3


@pytest.mark.anyio
async def test_reads_and_prompts_are_named_as_the_semantic_conventions_say(
    traced: Traced,
) -> None:
    """`resources/read` spans are named by the method alone (a URI would make
    a span name per resource) with `mcp.resource.uri`; `prompts/get NAME`
    carries `gen_ai.prompt.name`."""
    memory = MemoryServers()
    rec = Recorder(traced.bus)
    transport = McpTransport(open_streams=memory.open)
    async with Manager(traced.bus, transport, tracing=traced.telemetry.tracing) as mgr:
        mgr.add(memory_spec("demo", ping_interval=0))
        await rec.wait_for("connected", "demo")
        read = types.ReadResourceRequest(
            params=types.ReadResourceRequestParams(uri="demo://readme")
        )
        prompt = types.GetPromptRequest(
            params=types.GetPromptRequestParams(name="greet", arguments={"name": "x"})
        )
        await mgr.request(
            "demo",
            "resources/read",
            "demo://readme",
            lambda up, limit: up.send(read, types.ReadResourceResult, limit),
        )
        await mgr.request(
            "demo",
            "prompts/get",
            "greet",
            lambda up, limit: up.send(prompt, types.GetPromptResult, limit),
        )
    assert attrs(traced.one("resources/read"))["mcp.resource.uri"] == "demo://readme"
    assert attrs(traced.one("prompts/get greet"))["gen_ai.prompt.name"] == "greet"
    assert not [s for s in traced.spans if "demo://" in s.name]
