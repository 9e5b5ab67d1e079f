"""HUD benchmarks: what the HUD costs while 300 connections flap, and how fast a key
press reaches the screen.

Run: `.venv/bin/python bench/bench_hud.py [--connections 300] [--seconds 10]`.

The HUD runs exactly as inside `mcp-manager run` (`run_inline`: its own bus
subscription, logging and fd 2 routed into it, textual drawing on a real
pseudo-terminal of 200x50 that this process reads like a terminal emulator
would). Its event source is a synthetic fleet on a real `EventBus`: every
connection cycles connecting -> connected (up 0.5-3 s) -> disconnected ->
reconnecting (0.1-1 s) and now and then fails an attempt, so the table re-sorts,
countdowns tick and the log scrolls all the time.

Figures (from the child process that runs the event loop):

- reducer alone: microseconds to fold one event into `HudState`.
- CPU: the process's CPU (% of one core) with the fleet alone, then with the HUD
  on top; the difference is the HUD's cost. Plus frames drawn per second and
  bytes written to the terminal per second.
- event-loop lag: how late a 10 ms sleep wakes up (p50 / p99 / max), fleet
  alone and with the HUD: what the HUD adds to every other task of the daemon.
- input to screen: a character typed into the filter box, from the write to
  the pseudo-terminal until the screen shows the filter with that character
  (`filter 'srv-12'` in the header), under the same load.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import anyio
from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from manager.core.events import (  # noqa: E402
    Added,
    AttemptFailed,
    Connected,
    Connecting,
    Event,
    Lost,
    Reconnecting,
)
from manager.core.status import ConnectionStatus  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.hud.state import HudState  # noqa: E402

SIZE = (200, 50)
"""Columns and lines of the pseudo-terminal."""


# ------------------------------------------------------------------ child


class Options:
    socket = Path("/tmp/bench-hud.sock")


class BenchDaemon:
    """What `run_inline` needs of the daemon, over a synthetic fleet."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self.options = Options()

    def statuses(self) -> list[ConnectionStatus]:
        return []  # the HUD learns the fleet from the events alone

    def info(self) -> dict[str, object]:
        return {
            "config": "bench.lua",
            "pid": os.getpid(),
            "dropped": self.bus.dropped(),
        }

    def reconnect(self, server: str) -> dict[str, object]:
        return {"server": server, "retrying": False}

    def details(self, server: str) -> dict[str, object]:
        return {"spec": {}, "stderr": [], "tools": []}

    async def reload(self) -> dict[str, object]:
        return {}


async def flap(daemon: BenchDaemon, name: str, rng: random.Random) -> None:
    bus = daemon.bus
    bus.publish(Added(name=name, transport="stdio", endpoint=f"python -m {name}"))
    attempt = 0
    while True:
        attempt += 1
        bus.publish(Connecting(name=name, attempt=attempt))
        await anyio.sleep(rng.uniform(0.02, 0.1))
        if rng.random() < 0.2:
            bus.publish(AttemptFailed(name=name, attempt=attempt, error="refused"))
            delay = min(3.0, 0.1 * 2 ** min(attempt, 5))
            bus.publish(Reconnecting(name=name, attempt=attempt + 1, delay=delay))
            await anyio.sleep(delay)
            continue
        bus.publish(Connected(name=name, attempt=attempt, tools=5, pid=1000))
        await anyio.sleep(rng.uniform(0.5, 3.0))
        bus.publish(Lost(name=name, reason="exited", exit_code=-9, uptime=1.0))
        delay = rng.uniform(0.1, 1.0)
        attempt = 0
        bus.publish(Reconnecting(name=name, attempt=1, delay=delay))
        await anyio.sleep(delay)


class Lag:
    """How late 10 ms sleeps wake up."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await anyio.sleep(0.01)
            self.samples.append(time.perf_counter() - started - 0.01)

    def take(self) -> dict[str, float]:
        samples, self.samples = sorted(self.samples), []
        return {
            "p50_ms": samples[len(samples) // 2] * 1000,
            "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
            "max_ms": samples[-1] * 1000,
        }


async def window(bus: EventBus, lag: Lag, seconds: float) -> dict[str, float]:
    lag.take()
    seq, cpu, wall = bus.last_seq, time.process_time(), time.perf_counter()
    await anyio.sleep(seconds)
    wall = time.perf_counter() - wall
    return {
        "cpu_pct": (time.process_time() - cpu) / wall * 100,
        "events_per_s": (bus.last_seq - seq) / wall,
        **lag.take(),
    }


def reducer_cost(n: int = 100_000) -> float:
    rng = random.Random(1)
    events: list[Event] = []
    for i in range(n):
        name = f"srv-{rng.randrange(300):03d}"
        events.append(
            [
                Connecting(name=name, attempt=i),
                Connected(name=name, attempt=1, tools=5),
                Lost(name=name, reason="exited", exit_code=-9),
                Reconnecting(name=name, attempt=1, delay=0.5),
            ][i % 4]
        )
    hud = HudState()
    started = time.perf_counter()
    for event in events:
        hud.apply(event, 0.0)
    return (time.perf_counter() - started) / n * 1e6


async def child(connections: int, seconds: float, out: Path) -> None:
    from manager.hud.app import HudApp
    from manager.hud.run import run_inline

    results: dict[str, object] = {"reducer_us_per_event": reducer_cost()}
    bus = EventBus()
    daemon = BenchDaemon(bus)
    lag = Lag()
    stop = anyio.Event()
    apps: list[HudApp] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lag.run)
        rng = random.Random(7)
        for i in range(connections):
            tg.start_soon(flap, daemon, f"srv-{i:03d}", random.Random(rng.random()))
        await anyio.sleep(2)  # every connection is flapping
        results["fleet_alone"] = await window(bus, lag, seconds)

        async def run_app(app: HudApp) -> str | None:
            apps.append(app)
            return await app.run_async()

        with anyio.open_signal_receiver(signal.SIGUSR1) as typed:
            tg.start_soon(lambda: run_inline(daemon, stop, run_app=run_app))
            await anyio.sleep(2)
            await anyio.Path(out.parent / "ready").touch()  # the parent may type
            results["with_hud"] = await window(bus, lag, seconds)
            app = apps[0]
            results["frames"] = app.frames
            results["skipped_frames"] = app.skipped_frames
            results["rows"] = len(app.hud.rows)
            results["dropped"] = app.hud.hud_dropped
            async for _ in typed:  # the parent is done typing
                break
        stop.set()
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    await anyio.Path(out).write_text(json.dumps(results))


# ------------------------------------------------------------------ parent


class Screen:
    """Reads the pseudo-terminal like a terminal emulator, keeping the output."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = bytearray()
        self.bytes = 0
        self.lock = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.bytes += len(chunk)
                self.data += chunk
                del self.data[: -(1 << 20)]
                self.lock.notify_all()

    def mark(self) -> None:
        """Forget what was shown so far: wait only for what comes next."""
        with self.lock:
            self.data.clear()

    def wait_for(self, needle: bytes, within: float) -> float:
        started = time.perf_counter()
        with self.lock:
            if not self.lock.wait_for(lambda: needle in self.data, within):
                raise TimeoutError(needle)
        return time.perf_counter() - started


def parent(connections: int, seconds: float, samples: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-hud-", dir="/tmp"))
    out = work / "results.json"
    master, slave = os.openpty()
    columns, lines = SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", str(out)]
        + ["--connections", str(connections), "--seconds", str(seconds)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    screen = Screen(master)
    latencies: list[float] = []
    try:
        deadline = time.monotonic() + 60 + 2 * seconds
        while not (work / "ready").exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the HUD did not start")
            time.sleep(0.05)
        bytes_before, started = screen.bytes, time.perf_counter()
        time.sleep(1)
        os.write(master, b"/")
        screen.wait_for(b"filter", 5)
        typed = ""
        for i in range(samples):
            char = "srv-1"[i % 5]
            if i % 5 == 0 and typed:
                screen.mark()
                os.write(master, b"\x7f" * len(typed))  # backspace it all
                screen.wait_for(b"filter: name", 5)  # the placeholder is back
                typed = ""
            typed += char
            screen.mark()
            written = time.perf_counter()
            os.write(master, char.encode())
            screen.wait_for(f"filter '{typed}'".encode(), 5)
            latencies.append(time.perf_counter() - written)
            time.sleep(0.05)
        bytes_rate = (screen.bytes - bytes_before) / (time.perf_counter() - started)
        os.kill(proc.pid, signal.SIGUSR1)  # done typing
        proc.wait(timeout=30 + 2 * seconds)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    results = json.loads(out.read_text())
    for name in ("results.json", "ready"):
        (work / name).unlink(missing_ok=True)
    work.rmdir()
    report(results, latencies, bytes_rate, connections)


def report(
    r: dict[str, object], latencies: list[float], bytes_rate: float, n: int
) -> None:
    alone, hud = r["fleet_alone"], r["with_hud"]
    assert isinstance(alone, dict) and isinstance(hud, dict)
    lat = sorted(latencies)
    rows = [
        ("connections flapping", f"{n} ({hud['events_per_s']:.0f} events/s)"),
        ("reducer alone", f"{r['reducer_us_per_event']:.1f} µs per event"),
        ("CPU, fleet alone", f"{alone['cpu_pct']:.1f} % of one core"),
        ("CPU, fleet + HUD", f"{hud['cpu_pct']:.1f} % of one core"),
        (
            "CPU used by the HUD",
            f"{hud['cpu_pct'] - alone['cpu_pct']:.1f} % of one core",
        ),
        ("frames drawn / skipped", f"{r['frames']} / {r['skipped_frames']}"),
        ("terminal output", f"{bytes_rate / 1024:.0f} KiB/s"),
        ("rows shown / events lost", f"{r['rows']} / {r['dropped']}"),
        (
            "loop lag, fleet alone",
            f"p50 {alone['p50_ms']:.2f} ms, p99 {alone['p99_ms']:.2f} ms, "
            f"max {alone['max_ms']:.1f} ms",
        ),
        (
            "loop lag, fleet + HUD",
            f"p50 {hud['p50_ms']:.2f} ms, p99 {hud['p99_ms']:.2f} ms, "
            f"max {hud['max_ms']:.1f} ms",
        ),
        (
            "input to screen (filter key)",
            f"median {statistics.median(lat) * 1000:.0f} ms, "
            f"p90 {lat[int(len(lat) * 0.9)] * 1000:.0f} ms, "
            f"max {lat[-1] * 1000:.0f} ms ({len(lat)} keys)",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\nHUD under a flapping fleet ({SIZE[0]}x{SIZE[1]} pseudo-terminal)")
    print("-" * (width + 50))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def main() -> None:
    use_private_state()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--keys", type=int, default=30, help="latency samples")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        anyio.run(child, args.connections, args.seconds, args.child)
    else:
        parent(args.connections, args.seconds, args.keys)


if __name__ == "__main__":
    main()
