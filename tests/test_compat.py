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
