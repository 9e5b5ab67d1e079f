"""Telemetry benchmarks: what tracing costs the daemon, and how much it can take.

Run: `.venv/bin/python bench/bench_telemetry.py [--quick]`. Every figure says
what it ran against; "collector" is an in-process OTLP/gRPC receiver
(tests/servers/otlp.py) that decodes every request, as a real collector would.

- span cost: the event-loop time of one connect attempt's spans (the attempt
  span made current around a failing connect, its events, the backoff span),
  through the real pipeline (BatchSpanProcessor, OTLP gRPC exporter), and how
  many of them reached the collector.
- the daemon under load: the real daemon (`mcp-manager run`) with 100 dead HTTP
  upstreams retrying at a fixed interval (100 to 2000 attempts/s, 2 spans per
  attempt), telemetry off / to a collector / to nothing: attempts per second
  achieved (are connections slowed?), spans per second exported, CPU of the
  daemon, time to stop. With no collector the daemon stops recording spans
  after the first failed export (one probe every 30 s), so that case should
  cost about what "off" does.
- tool call overhead: sequential `echo` calls to a stdio server through
  `Manager.call`, tracing off vs on (our CLIENT span, the SDK's span under it,
  the operation-duration histogram).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import psutil
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import raw_command  # noqa: E402

from manager.control.client import ControlClient  # noqa: E402
from manager.core.errors import ConnectFailed  # noqa: E402
from manager.core.events import (  # noqa: E402
    Added,
    AttemptFailed,
    Connected,
    Connecting,
    Event,
    Reconnecting,
)
from manager.core.spec import parse_spec  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.engine.manager import Manager  # noqa: E402
from manager.engine.tracing import NO_TRACING, Tracing  # noqa: E402
from manager.telemetry import Telemetry, TelemetryConfig  # noqa: E402
from manager.telemetry.export import build_exporting  # noqa: E402


def table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 30))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _telemetry(endpoint: str, bus: EventBus) -> Telemetry:
    config = TelemetryConfig.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    exporting = build_exporting(config)
    return Telemetry(
        bus,
        tracer_provider=exporting.tracer_provider,
        meter_provider=exporting.meter_provider,
        exporting=exporting,
    )


# ------------------------------------------------------------ receivers


class ReceiverProcess:
    """A `GrpcReceiver` in a child process, so decoding never competes with us."""

    SCRIPT = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from servers.otlp import GrpcReceiver; r = GrpcReceiver();"
        "print(r.start(), flush=True); sys.stdin.read();"
        "print(len(r.spans), flush=True); r.stop()"
    )

    def __enter__(self) -> ReceiverProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(ROOT / "tests")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.endpoint = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"
        return self

    def spans(self) -> int:
        """Stop the receiver; how many spans it got."""
        out, _ = self.proc.communicate(timeout=20)
        return int(out.strip() or 0)

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class _Null(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


# ------------------------------------------------------------ span cost


def _attempt_cycle(bus: EventBus, tracing: Tracing, name: str, attempt: int) -> None:
    """What one failed attempt makes the event loop do, spans included."""
    bus.publish(Connecting(name=name, attempt=attempt))
    try:
        with tracing.span(
            "mcp.connect_attempt",
            {"mcp.server": name, "mcp.transport": "http", "mcp.attempt": attempt},
        ):
            raise ConnectFailed("connection refused (127.0.0.1:9)")
    except ConnectFailed:
        pass
    bus.publish(AttemptFailed(name=name, attempt=attempt, error="connection refused"))
    bus.publish(Reconnecting(name=name, attempt=attempt + 1, delay=0.1))


def _cycles(bus: EventBus, tracing: Tracing, cycles: int) -> float:
    names = [f"c{i}" for i in range(100)]
    for name in names:
        bus.publish(Added(name=name, transport="http", endpoint="http://h/mcp"))
    started = time.perf_counter()
    for i in range(cycles):
        _attempt_cycle(bus, tracing, names[i % 100], i // 100 + 1)
    elapsed = time.perf_counter() - started
    for name in names:
        bus.publish(Connected(name=name, attempt=0, tools=0))
    return elapsed / cycles


async def bench_span_cost(cycles: int) -> None:
    rows: list[tuple[str, str]] = []
    off = _cycles(EventBus(), NO_TRACING, cycles)
    rows.append(("tracing off: loop time per failed attempt", f"{off * 1e6:.1f} µs"))

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(_Null()))
    bus = EventBus()
    null = _cycles(bus, Telemetry(bus, tracer_provider=provider).tracing, cycles)
    provider.shutdown()
    rows.append(
        (
            "tracing on, spans built and batched, not sent",
            f"{null * 1e6:.1f} µs ({(null - off) * 1e6 / 2:.0f} µs per span, "
            f"{2 / (null - off):,.0f} spans/s per core)",
        )
    )

    with ReceiverProcess() as rx:
        bus = EventBus()
        telemetry = _telemetry(rx.endpoint, bus)
        sent = _cycles(bus, telemetry.tracing, cycles)
        await telemetry.aclose()
        got = rx.spans()
    rows.append(
        (
            "tracing on, OTLP/gRPC to a collector",
            f"{sent * 1e6:.1f} µs ({(sent - off) * 1e6 / 2:.0f} µs per span incl. "
            f"encoding; {got:,} of {2 * cycles + 200:,} spans arrived)",
        )
    )
    table(
        f"span cost: {cycles:,} failed attempts (2 spans each) as fast as the loop "
        "goes",
        rows,
    )


# ------------------------------------------------------------ daemon load


def _closed_ports(n: int) -> list[int]:
    ports = []
    for _ in range(n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ports


def _daemon_load(
    n: int, interval: float, env: dict[str, str], window: float
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        os.chmod(tmp, 0o700)
        script = Path(tmp) / "startup.lua"
        script.write_text(
            "\n".join(
                f'mcp_add("c{i}", "http://127.0.0.1:{port}/mcp", {{backoff = '
                f"{{initial = {interval}, cap = {interval}}}, ping_interval = 0}})"
                for i, port in enumerate(_closed_ports(n))
            )
        )
        sock = f"{tmp}/c.sock"
        child = subprocess.Popen(
            [sys.executable, "-m", "manager", "run", str(script), "--socket", sock],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        try:
            proc = psutil.Process(child.pid)
            client = ControlClient(Path(sock))
            deadline = time.monotonic() + 20
            while True:
                try:
                    client.status()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            time.sleep(2.0)  # warm up

            def attempts() -> int:
                return sum(int(str(row.attempt)) for row in client.status())

            a0, cpu0, t0 = attempts(), proc.cpu_times(), time.monotonic()
            time.sleep(window)
            a1, cpu1, t1 = attempts(), proc.cpu_times(), time.monotonic()
        finally:
            child.send_signal(signal.SIGTERM)
            stop = time.monotonic()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            stopped = time.monotonic() - stop
    cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (t1 - t0)
    return {"attempts": (a1 - a0) / (t1 - t0), "cpu": cpu * 100, "stop": stopped}


def bench_daemon_load(n: int, intervals: list[float], window: float) -> None:
    rows: list[tuple[str, str]] = []
    fast = {"OTEL_BSP_SCHEDULE_DELAY": "500", "OTEL_METRIC_EXPORT_INTERVAL": "5000"}
    nothing = f"http://127.0.0.1:{_closed_ports(1)[0]}"
    for interval in intervals:
        target = n / interval
        for label in ("off", "collector", "no collector"):
            with ReceiverProcess() as rx:
                env = {
                    "off": {"OTEL_SDK_DISABLED": "true"},
                    "collector": {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, **fast},
                    "no collector": {"OTEL_EXPORTER_OTLP_ENDPOINT": nothing, **fast},
                }[label]
                started = time.monotonic()
                got = _daemon_load(n, interval, env, window)
                lived = time.monotonic() - started
                spans = rx.spans()
            exported = f", {spans / lived:,.0f} spans/s exported" if spans else ""
            share = got["attempts"] / target
            cpu, stop = got["cpu"], got["stop"]
            rows.append(
                (
                    f"{target:,.0f} attempts/s wanted, telemetry {label}",
                    f"{got['attempts']:,.0f} attempts/s ({share:.0%}), "
                    f"CPU {cpu:.0f} % of a core, stop {stop:.2f} s{exported}",
                )
            )
    table(
        f"the daemon under load: {n} dead HTTP upstreams retrying at a fixed "
        f"interval ({window:g} s windows; 2 spans per attempt)",
        rows,
    )


# ------------------------------------------------------------ call overhead


async def _calls(tracing: Tracing, n: int) -> list[float]:
    bus = EventBus()
    command, args = raw_command()
    spec = parse_spec("fast", {"command": command, "args": args}, {"ping_interval": 0})
    done: list[Event] = []
    bus.add_listener(lambda e: done.append(e) if e.kind == "connected" else None)
    durations = []
    async with Manager(bus, tracing=tracing) as mgr:
        mgr.add(spec)
        with anyio.fail_after(10):
            await mgr.connection("fast").wait_connected()  # type: ignore[union-attr]
        for _ in range(200):  # warm up
            await mgr.call("fast", "echo", {"text": "x"})
        for _ in range(n):
            started = time.perf_counter()
            await mgr.call("fast", "echo", {"text": "x"})
            durations.append(time.perf_counter() - started)
    return durations


def _summary(durations: list[float]) -> str:
    q = statistics.quantiles(durations, n=100)
    return (
        f"mean {statistics.fmean(durations) * 1e6:.0f} µs, p50 {q[49] * 1e6:.0f} µs, "
        f"p99 {q[98] * 1e6:.0f} µs"
    )


async def bench_call_overhead(n: int) -> None:
    off = await _calls(NO_TRACING, n)
    with ReceiverProcess() as rx:
        bus = EventBus()
        telemetry = _telemetry(rx.endpoint, bus)
        # As in the daemon: the SDK records its own span (under ours) only
        # through the global provider. This is a benchmark process, not a test.
        provider = telemetry._exporting.tracer_provider  # type: ignore[union-attr]
        assert provider is not None
        trace.set_tracer_provider(provider)
        on = await _calls(telemetry.tracing, n)
        await telemetry.aclose()
    mean_off, mean_on = statistics.fmean(off), statistics.fmean(on)
    p50_off = statistics.median(off)
    p50_on = statistics.median(on)
    table(
        f"tool call overhead: {n:,} sequential echo calls to a stdio server "
        "(Manager.call, in-process)",
        [
            ("tracing off", _summary(off)),
            ("tracing on (ours + SDK span, histogram)", _summary(on)),
            (
                "overhead per call",
                f"mean {(mean_on - mean_off) * 1e6:+.0f} µs, "
                f"p50 {(p50_on - p50_off) * 1e6:+.0f} µs",
            ),
        ],
    )


def main() -> None:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cores, version = os.cpu_count(), sys.version.split()[0]
    print(f"mcp-manager telemetry benchmarks on {cores} cores, Python {version}")
    anyio.run(bench_span_cost, 20_000 if args.quick else 100_000)
    window = 5.0 if args.quick else 10.0
    intervals = [1.0, 0.1] if args.quick else [1.0, 0.25, 0.1, 0.05]
    bench_daemon_load(100, intervals, window)
    anyio.run(bench_call_overhead, 2_000 if args.quick else 10_000)


if __name__ == "__main__":
    main()
