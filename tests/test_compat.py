"""The `compat_*` doors: each foreign private name we use still exists.

Every private name of a foreign library is used in one `compat_*.py` module
whose docstring says why and which public API would replace it. Each test here
checks the names of one door on the installed library, without starting
anything, and fails with that door's `WHY`, so an upgrade that drops one says
exactly what broke. A door that no longer even imports fails with its `WHY` too
(read from its source).
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import io
import queue
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

MANAGER = Path(__file__).resolve().parent.parent / "manager"


def door(name: str) -> ModuleType:
    """Import `manager.<name>`, or fail with its `WHY` if that import fails."""
    try:
        return importlib.import_module(f"manager.{name}")
    except ImportError as exc:
        tree = ast.parse((MANAGER / f"{name.replace('.', '/')}.py").read_text())
        why = next(
            ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "WHY" for t in node.targets)
        )
        pytest.fail(f"{why} ({exc})")


def has(obj: object, name: str, why: str) -> object:
    """`obj.<name>`, or fail with `why`."""
    assert hasattr(obj, name), f"{why} (no {type(obj).__qualname__}.{name})"
    return getattr(obj, name)


# --- textual ---------------------------------------------------------------------


def test_textual_still_has_the_driver_writer_queue() -> None:
    why = door("hud.compat_textual").WHY
    from textual.app import App

    app = App[None]()
    has(app, "_driver", why)

    async def make_driver() -> object:
        return app.driver_class(app)  # wants a running loop; starts nothing

    has(asyncio.run(make_driver()), "_writer_thread", why)
    try:
        from textual.drivers._writer_thread import WriterThread
    except ImportError as exc:
        pytest.fail(f"{why} ({exc})")
    writer = WriterThread(io.StringIO())  # a thread, never started
    assert isinstance(has(writer, "_queue", why), queue.Queue), why


def test_writer_queue_finds_the_queue_and_forgives_its_absence() -> None:
    writer_queue = door("hud.compat_textual").writer_queue
    pending: queue.Queue[object] = queue.Queue(3)
    writer = SimpleNamespace(_queue=pending)
    app = SimpleNamespace(_driver=SimpleNamespace(_writer_thread=writer))
    assert writer_queue(app) is pending
    assert writer_queue(object()) is None
    assert writer_queue(SimpleNamespace(_driver=None)) is None
    assert writer_queue(SimpleNamespace(_driver=SimpleNamespace())) is None
    writer._queue = [1]  # not a queue: ignored
    assert writer_queue(app) is None


# --- OpenTelemetry ---------------------------------------------------------------


def test_otel_still_has_the_incubating_mcp_metrics() -> None:
    why = door("telemetry.compat_otel").WHY
    try:
        from opentelemetry.semconv._incubating.metrics import mcp_metrics
    except ImportError as exc:
        pytest.fail(f"{why} ({exc})")
    has(mcp_metrics, "MCP_CLIENT_OPERATION_DURATION", why)
    has(mcp_metrics, "MCP_CLIENT_SESSION_DURATION", why)


def test_otel_exporters_still_keep_their_preferences() -> None:
    compat = door("telemetry.compat_otel")
    from opentelemetry.sdk.metrics import Counter
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        ConsoleMetricExporter,
    )
    from opentelemetry.sdk.metrics.view import Aggregation, SumAggregation

    temporality: dict[type, AggregationTemporality] = {
        Counter: AggregationTemporality.DELTA
    }
    aggregation: dict[type, Aggregation] = {Counter: SumAggregation()}
    exporter = ConsoleMetricExporter(
        preferred_temporality=temporality, preferred_aggregation=aggregation
    )
    has(exporter, "_preferred_temporality", compat.WHY)
    has(exporter, "_preferred_aggregation", compat.WHY)
    got_temporality, got_aggregation = compat.preferences(exporter)
    assert got_temporality is not None, compat.WHY
    assert got_temporality[Counter] is AggregationTemporality.DELTA, compat.WHY
    assert got_aggregation is not None, compat.WHY
    assert got_aggregation[Counter] is aggregation[Counter], compat.WHY


def test_otel_batch_span_processors_still_keep_their_queue() -> None:
    compat = door("telemetry.compat_otel")
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    processor = BatchSpanProcessor(
        InMemorySpanExporter(), max_queue_size=2, max_export_batch_size=2
    )
    try:
        has(processor, "_batch_processor", compat.WHY)
        has(processor._batch_processor, "_queue", compat.WHY)
        has(processor._batch_processor, "_max_queue_size", compat.WHY)
        assert compat.queue_full(processor) is False, compat.WHY
        assert compat.queue_length(processor) == 0, compat.WHY
    finally:
        processor.shutdown()  # type: ignore[no-untyped-call]


# --- starlette -------------------------------------------------------------------


def test_starlette_requests_still_keep_their_send() -> None:
    compat = door("demo_server.compat_starlette")
    from starlette.requests import Request
    from starlette.types import Message

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        return None

    request = Request({"type": "http"}, receive, send)
    assert has(request, "_send", compat.WHY) is send, compat.WHY
    assert compat.asgi_send(request) is send


# --- mcp ---------------------------------------------------------------------------


def test_the_mcp_sdk_still_has_what_compat_mcp_uses() -> None:
    """Instances' private names (set in `__init__` or defined on the class)."""
    compat = door("transport.compat_mcp")
    import inspect

    for cls, names in compat.PRIVATE_NAMES.items():
        source = inspect.getsource(cls)
        for name in names:
            assert hasattr(cls, name) or f"self.{name}" in source, (
                f"{compat.WHY} (no {cls.__qualname__}.{name})"
            )


def test_the_mcp_sdk_server_side_still_has_what_compat_mcp_server_uses() -> None:
    """The session manager still keeps its transports by session id, and a
    transport still has the public names the door reads."""
    compat = door("gateway.compat_mcp_server")
    import inspect

    from mcp.server.streamable_http import StreamableHTTPServerTransport

    for cls, names in compat.PRIVATE_NAMES.items():
        source = inspect.getsource(cls)
        for name in names:
            assert hasattr(cls, name) or f"self.{name}" in source, (
                f"{compat.WHY} (no {cls.__qualname__}.{name})"
            )
    transport = StreamableHTTPServerTransport(mcp_session_id="s", idle_timeout=1)
    for name in ("is_terminated", "idle_scope"):
        has(transport, name, compat.WHY)


@pytest.mark.anyio
async def test_a_2026_session_still_stamps_through_the_wrapped_door() -> None:
    """`speak_for_the_caller` changes what the session sends: the caller's
    capabilities reach the server (the SDK still calls `_stamp`)."""
    compat = door("transport.compat_mcp")
    import anyio
    import mcp.types as types
    from mcp import ClientSession
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    sent: list[dict[str, object]] = []
    to_us, from_them = anyio.create_memory_object_stream[Any](1)
    to_them, from_us = anyio.create_memory_object_stream[Any](1)
    streams = (to_us, from_them, to_them, from_us)
    session = ClientSession(from_them, to_them)
    modern = types.DiscoverResult.model_validate(
        {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"},
            "resultType": "complete",
        },
        by_name=False,
    )
    session.adopt(modern)
    compat.speak_for_the_caller(session)
    data: dict[str, object] = {
        "method": "tools/call",
        "params": {
            "name": "x",
            "_meta": {CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}}},
        },
    }
    session._stamp(data, {})  # what send_request calls first
    sent.append(data)
    for stream in streams:
        stream.close()
    params = sent[0]["params"]
    assert isinstance(params, dict)
    assert params["_meta"][CLIENT_CAPABILITIES_META_KEY] == {"elicitation": {}}, (
        compat.WHY
    )


# --- anyio -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_anyio_processes_still_hold_the_asyncio_transport() -> None:
    compat = door("transport.compat_anyio")
    import sys

    import anyio

    process = await anyio.open_process([sys.executable, "-c", "pass"])
    try:
        await process.wait()
        inner = has(process, "_process", compat.WHY)
        transport = has(inner, "_transport", compat.WHY)
        compat.release_process(process)
        assert transport.is_closing(), compat.WHY  # type: ignore[attr-defined]
    finally:
        await process.aclose()


@pytest.mark.anyio
async def test_anyio_still_writes_a_process_stdin_through_an_asyncio_writer() -> None:
    """`write_at_once` reaches the writer under anyio's stdin stream: a line
    written that way reaches the child."""
    compat = door("transport.compat_anyio")
    import subprocess
    import sys

    import anyio

    process = await anyio.open_process(
        [sys.executable, "-c", "print(input())"], stdout=subprocess.PIPE
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        writer = has(process.stdin, "_stream", compat.WHY)
        has(writer, "transport", compat.WHY)
        assert compat.write_at_once(process.stdin, b"hello\n"), compat.WHY
        with anyio.fail_after(10):
            assert (await process.stdout.receive()).strip() == b"hello"
    finally:
        await process.aclose()
