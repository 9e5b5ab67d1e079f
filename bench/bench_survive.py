"""Survival benchmarks: fleets of stdio servers started at once, and death detection.

Run: `.venv/bin/python bench/bench_survive.py [--quick] [--json PATH]` (full
size: about 9 minutes on 2 cores and ~20 GB of memory for 300 SDK servers;
`--quick`: under 2 minutes; `--help` for narrower runs). Prints
one table per figure; every figure says what it ran against. Everything runs
in-process against `manager.engine.manager.Manager` with its default options (so the
default number of parallel stdio starts, whatever this version of the Manager
does), and real server processes.

- Fleet start: N stdio servers declared at once, time until all N are
  `connected` at the same moment, next to the same N started one by one (add
  one, wait until it is connected, add the next) in a manager of their own.
  Kinds: the hand-written server (`tests/servers/raw_legacy.py`, ~25 ms start),
  the Python SDK demo server (`python -m manager.demo_server`, ~0.5-0.7 s,
  import heavy) and, if npm can install it, the Node reference server
  (`@modelcontextprotocol/server-everything`, stdio). Beside the times: attempts,
  `connect_failed` and `disconnected` events, the highest attempt number, the
  peak RSS of this process and its children (sampled every second; shared pages
  count once per process), their PSS once all are up, the CPU seconds spent by
  the manager (this process), the servers and the rest of the machine (other
  work on a shared machine shows there), and the teardown time.
  A run that does not converge within its limit reports "not all connected:
  k/N after T s" with the states at that moment. For big fleets of slow servers
  one-by-one is measured for the first 20 servers and extrapolated (the table
  says so). A fleet that would not fit in the free memory is skipped.
- Death detection: time from a signal sent to a server process to the
  manager's `disconnected` event, for the demo server over streamable HTTP
  (SIGKILL, and SIGSTOP: a silent hang only pings can see) and legacy SSE
  (SIGKILL), and for stdio servers (SIGKILL) for comparison. Each kill happens
  1 s after the connection came up; the server is restarted between rounds.

After every run the script checks that no process is left: children of its
own pid, and any process in the process group of a server it saw (stdio
servers lead their own group). Leftovers are killed by PID and reported as a
failure (exit status 1).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psutil
from private_state import use_private_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import HttpServerProcess, raw_command, stdio_command  # noqa: E402

from manager.core.events import (  # noqa: E402
    AttemptFailed,
    Connected,
    Connecting,
    Event,
    Lost,
    Removed,
)
from manager.core.spec import OPTION_DEFAULTS, parse_spec  # noqa: E402
from manager.engine.bus import EventBus  # noqa: E402
from manager.engine.manager import Manager  # noqa: E402

Command = tuple[str, list[str]]

NODE_PACKAGE = "@modelcontextprotocol/server-everything"
NODE_BIN = "mcp-server-everything"
SAMPLE_INTERVAL = 1.0
"""Seconds between two RSS samples of the process tree during a fleet run."""
SERIAL_SAMPLE = 20
"""Servers measured one by one when a full one-by-one run would take too long."""
SETTLE = 1.0
"""Seconds a connection stays up before a detection round kills its server."""
MEMORY_MARGIN = 2 * 2**30
"""Bytes of memory left free when deciding whether a fleet fits."""

INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-probe", "version": "0"},
            },
        }
    )
    + "\n"
).encode()


def table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 24))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    sys.stdout.flush()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def secs(seconds: float) -> str:
    return f"{seconds:.2f} s"


def dur(seconds: float) -> str:
    """Milliseconds below one second, seconds above."""
    return ms(seconds) if seconds < 1 else secs(seconds)


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:,.0f} MiB"


def short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------ helpers


class Recorder:
    """Bus listener: every event with its arrival time, plus running tallies."""

    def __init__(self, bus: EventBus) -> None:
        self.events: list[tuple[float, Event]] = []
        self.connected: dict[str, int | None] = {}  # name -> pid, while connected
        self.first_connected: dict[str, float] = {}
        self.attempts = 0
        self.failed = 0
        self.lost = 0
        self.max_attempt = 0
        self.errors: Counter[str] = Counter()
        self.loss_reasons: Counter[str] = Counter()
        self.pids: set[int] = set()
        self._wake = anyio.Event()
        self.detach = bus.add_listener(self._on_event)

    def _on_event(self, event: Event) -> None:
        now = time.perf_counter()
        self.events.append((now, event))
        if isinstance(event, Connecting):
            self.attempts += 1
            self.max_attempt = max(self.max_attempt, event.attempt)
        elif isinstance(event, Connected):
            self.connected[event.name] = event.pid
            self.first_connected.setdefault(event.name, now)
            if event.pid is not None:
                self.pids.add(event.pid)
        elif isinstance(event, AttemptFailed):
            self.failed += 1
            self.errors[short(event.error)] += 1
        elif isinstance(event, Lost):
            self.lost += 1
            self.loss_reasons[short(event.reason)] += 1
            self.connected.pop(event.name, None)
        elif isinstance(event, Removed):
            self.connected.pop(event.name, None)
        self._wake.set()
        self._wake = anyio.Event()

    async def wait_for(self, predicate: Callable[[], bool], limit: float) -> bool:
        """Wait until `predicate()` holds (checked after every event)."""
        with anyio.move_on_after(max(0.0, limit)):
            while not predicate():
                await self._wake.wait()
            return True
        return predicate()

    def first(
        self, kind: type[Event], name: str, after: int
    ) -> tuple[float, Event] | None:
        """The first event of `kind` for `name` at index >= `after`."""
        for at, event in self.events[after:]:
            if isinstance(event, kind) and event.name == name:
                return at, event
        return None


@dataclass
class Peak:
    """The largest process-tree RSS seen, and every child pid seen."""

    rss: int = 0
    processes: int = 0
    pids: set[int] = field(default_factory=set)


def tree_rss() -> tuple[int, list[int]]:
    """RSS of this process plus all its descendants; their pids."""
    me = psutil.Process()
    total = me.memory_info().rss
    pids = []
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
            pids.append(child.pid)
    return total, pids


def tree_pss() -> int:
    """PSS of this process plus all its descendants (reads smaps: call rarely)."""
    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error, AttributeError):
            total += proc.memory_full_info().pss
    return total


async def sample_once(peak: Peak) -> None:
    rss, pids = await anyio.to_thread.run_sync(tree_rss)
    peak.pids.update(pids)
    if rss > peak.rss:
        peak.rss, peak.processes = rss, len(pids)


async def sample_tree(peak: Peak) -> None:
    while True:
        await sample_once(peak)
        await anyio.sleep(SAMPLE_INTERVAL)


@dataclass(frozen=True)
class CpuMark:
    """CPU seconds so far: this process, its reaped children, the whole machine."""

    own: float
    reaped: float
    machine: float
    wall: float


def cpu_mark() -> CpuMark:
    mine = psutil.Process().cpu_times()
    m = psutil.cpu_times()
    busy = m.user + m.nice + m.system
    busy += sum(getattr(m, f, 0.0) for f in ("irq", "softirq", "steal"))
    return CpuMark(
        mine.user + mine.system,
        mine.children_user + mine.children_system,
        busy,
        time.perf_counter(),
    )


def live_children_cpu() -> float:
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system
    return total


@dataclass
class CpuUse:
    """CPU seconds spent during a run, and the wall time it took."""

    manager: float = 0.0
    servers: float = 0.0
    rest: float = 0.0
    wall: float = 0.0


def cpu_since(start: CpuMark) -> CpuUse:
    """CPU used since `start` (servers: the live ones, whole life, + reaped)."""
    live = live_children_cpu()
    end = cpu_mark()
    manager = end.own - start.own
    servers = live + end.reaped - start.reaped
    machine = end.machine - start.machine
    return CpuUse(
        manager, servers, max(0.0, machine - manager - servers), end.wall - start.wall
    )


def cpu_text(use: CpuUse) -> str:
    cores = os.cpu_count() or 1
    return (
        f"{use.manager:.1f} / {use.servers:.1f} / {use.rest:.1f} s of "
        f"{cores} x {use.wall:.1f} s"
    )


@dataclass
class Leftover:
    pid: int
    ppid: int
    status: str
    cmdline: str
    where: str


def find_leftovers(groups: set[int], since: float) -> list[psutil.Process]:
    """Live children of this process, and processes in a server's process group."""
    found = {p.pid: p for p in psutil.Process().children(recursive=True)}
    if groups:
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) in groups and proc.create_time() >= since - 1:
                    found[proc.pid] = proc
    return list(found.values())


def reap_leftovers(where: str, groups: set[int], since: float) -> list[Leftover]:
    """Wait up to 2 s for stray processes to go, then SIGKILL them by PID."""
    deadline = time.monotonic() + 2.0
    procs = find_leftovers(groups, since)
    while procs and time.monotonic() < deadline:
        time.sleep(0.1)
        procs = find_leftovers(groups, since)
    out = []
    for proc in procs:
        try:
            info = Leftover(
                proc.pid,
                proc.ppid(),
                proc.status(),
                short(" ".join(proc.cmdline()), 160),
                where,
            )
        except psutil.Error:
            continue
        out.append(info)
        with contextlib.suppress(psutil.Error):
            proc.kill()  # psutil checks the pid still names this very process
        with contextlib.suppress(psutil.Error):
            proc.wait(3)
    return out


class LogTally(logging.Handler):
    """Counts the manager's log records; keeps the first few errors."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.name} {record.levelname}"] += 1
        if record.levelno >= logging.ERROR and len(self.errors) < 5:
            text = f"{record.name}: {record.getMessage()}"
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({record.exc_info[1]!r})"
            self.errors.append(short(text, 200))


@dataclass
class Probe:
    """One server started alone: time to answer `initialize`, and its USS."""

    start: float
    uss: int


def probe(command: Command) -> Probe:
    """Start the server alone (twice: the first run warms the caches)."""
    result = Probe(0.0, 0)
    for _ in range(2):
        started = time.perf_counter()
        proc = subprocess.Popen(
            [command[0], *command[1]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(INITIALIZE)
            proc.stdin.flush()
            fd, buffer = proc.stdout.fileno(), b""
            deadline = time.monotonic() + 30
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise RuntimeError(f"{command[0]}: no answer to initialize")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"{command[0]}: exited before answering")
                buffer += chunk
            elapsed = time.perf_counter() - started
            uss = psutil.Process(proc.pid).memory_full_info().uss
            result = Probe(elapsed, uss)
        finally:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
    return result


# ------------------------------------------------------------------ fleet


@dataclass(frozen=True)
class Kind:
    key: str
    label: str
    command: Command
    serial_full: int
    """Largest N measured fully one by one; above it the first 20 are measured."""


@dataclass
class FleetRun:
    kind: str
    n: int
    mode: str  # "together" or "one by one"
    limit: float = 0.0
    complete: bool = False
    connected: int = 0
    elapsed: float = 0.0
    measured: int = 0
    extrapolated: float | None = None
    first: float | None = None
    median: float | None = None
    attempts: int = 0
    connect_failed: int = 0
    disconnected: int = 0
    max_attempt: int = 0
    errors: list[tuple[str, int]] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    peak_rss: int = 0
    peak_processes: int = 0
    pss_all_up: int | None = None
    cpu: CpuUse = field(default_factory=CpuUse)
    teardown: float = 0.0
    skipped: str = ""
    leftovers: list[Leftover] = field(default_factory=list)

    @property
    def total(self) -> float | None:
        """All-connected time, measured or extrapolated; None if incomplete."""
        if self.extrapolated is not None:
            return self.extrapolated
        return self.elapsed if self.complete else None


def stdio_spec(name: str, command: Command) -> Any:
    return parse_spec(name, {"command": command[0], "args": list(command[1])})


def tally(run: FleetRun, rec: Recorder) -> None:
    run.attempts = rec.attempts
    run.connect_failed = rec.failed
    run.disconnected = rec.lost
    run.max_attempt = rec.max_attempt
    run.errors = rec.errors.most_common(3)


async def fleet_together(kind: Kind, n: int, limit: float) -> FleetRun:
    run = FleetRun(kind.key, n, "together", limit=limit)
    bus = EventBus()
    rec = Recorder(bus)
    specs = [stdio_spec(f"{kind.key}{i:03d}", kind.command) for i in range(n)]
    peak = Peak()
    since = time.time()
    try:
        async with Manager(bus) as mgr:
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_tree, peak)
                mark = cpu_mark()
                started = time.perf_counter()
                for spec in specs:
                    mgr.add(spec)
                run.complete = await rec.wait_for(
                    lambda: len(rec.connected) >= n, limit
                )
                run.elapsed = time.perf_counter() - started
                run.cpu = await anyio.to_thread.run_sync(cpu_since, mark)
                tg.cancel_scope.cancel()
            await sample_once(peak)  # the fleet at its fullest
            run.connected = len(rec.connected)
            tally(run, rec)
            firsts = sorted(t - started for t in rec.first_connected.values())
            if firsts:
                run.first, run.median = firsts[0], statistics.median(firsts)
            run.states = dict(Counter(s.state for s in mgr.statuses()))
            if run.complete:
                run.pss_all_up = await anyio.to_thread.run_sync(tree_pss)
            closing = time.perf_counter()
        run.teardown = time.perf_counter() - closing
    finally:
        rec.detach()
        run.peak_rss, run.peak_processes = peak.rss, peak.processes
        groups = peak.pids | rec.pids
        run.leftovers = await anyio.to_thread.run_sync(
            reap_leftovers, f"{kind.key} x{n} together", groups, since
        )
    return run


async def fleet_one_by_one(
    kind: Kind, n: int, measure: int, limit_each: float, limit: float
) -> FleetRun:
    run = FleetRun(kind.key, n, "one by one", limit=limit, measured=measure)
    bus = EventBus()
    rec = Recorder(bus)
    peak = Peak()
    since = time.time()
    each: list[float] = []
    try:
        async with Manager(bus) as mgr:
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_tree, peak)
                mark = cpu_mark()
                started = time.perf_counter()
                for i in range(measure):
                    name = f"{kind.key}{i:03d}"
                    t0 = time.perf_counter()
                    mgr.add(stdio_spec(name, kind.command))
                    left = limit - (t0 - started)
                    ok = await rec.wait_for(
                        lambda name=name: name in rec.connected,
                        min(limit_each, left),
                    )
                    if not ok:
                        break
                    each.append(time.perf_counter() - t0)
                run.elapsed = time.perf_counter() - started
                run.cpu = await anyio.to_thread.run_sync(cpu_since, mark)
                tg.cancel_scope.cancel()
            await sample_once(peak)
            run.connected = len(rec.connected)
            run.complete = len(each) == measure and run.connected == measure
            tally(run, rec)
            run.states = dict(Counter(s.state for s in mgr.statuses()))
            if each:
                run.first, run.median = each[0], statistics.median(each)
            if run.complete and measure < n:
                run.extrapolated = run.elapsed / measure * n
            closing = time.perf_counter()
        run.teardown = time.perf_counter() - closing
    finally:
        rec.detach()
        run.peak_rss, run.peak_processes = peak.rss, peak.processes
        groups = peak.pids | rec.pids
        run.leftovers = await anyio.to_thread.run_sync(
            reap_leftovers, f"{kind.key} x{n} one by one", groups, since
        )
    return run


def together_limit(n: int) -> float:
    return 60.0 + 0.4 * n  # 30: 72 s, 100: 100 s, 300: 180 s


def fleet_rows(run: FleetRun, serial: FleetRun | None) -> list[tuple[str, str]]:
    p = f"N={run.n:<3} "
    if run.skipped:
        return [(p + "together", f"skipped: {run.skipped}")]
    rows = []
    if run.complete:
        rows.append(
            (
                p + "together: all connected",
                f"{secs(run.elapsed)} (first {secs(run.first or 0)}, "
                f"median {secs(run.median or 0)})",
            )
        )
    else:
        states = ", ".join(f"{k} {v}" for k, v in sorted(run.states.items()))
        rows.append(
            (
                p + "together: NOT ALL CONNECTED",
                f"{run.connected}/{run.n} after {run.elapsed:.1f} s ({states})",
            )
        )
    rows.append(
        (
            p + "together: connect_failed / disconnected",
            f"{run.connect_failed} / {run.disconnected} "
            f"({run.attempts} attempts, max attempt {run.max_attempt})",
        )
    )
    for text, count in run.errors:
        rows.append((p + "  connect_failed error", f"{count} x {text}"))
    pss = f", PSS all up {mib(run.pss_all_up)}" if run.pss_all_up else ""
    rows.append(
        (
            p + "together: peak RSS, process tree",
            f"{mib(run.peak_rss)} in {run.peak_processes + 1} processes{pss}",
        )
    )
    rows.append(
        (p + "together: CPU manager / servers / rest of machine", cpu_text(run.cpu))
    )
    rows.append((p + "together: teardown", secs(run.teardown)))
    if serial is None:
        return rows
    if serial.skipped:
        rows.append((p + "one by one", f"skipped: {serial.skipped}"))
        return rows
    if serial.complete:
        how = (
            f"extrapolated from {serial.measured}: they took {secs(serial.elapsed)}"
            if serial.extrapolated is not None
            else "measured"
        )
        rows.append(
            (
                p + "one by one: all connected",
                f"{secs(serial.total or 0)} ({how}; median "
                f"{secs(serial.median or 0)} each)",
            )
        )
    else:
        rows.append(
            (
                p + "one by one: NOT ALL CONNECTED",
                f"{serial.connected}/{serial.measured} after "
                f"{serial.elapsed:.1f} s (connect_failed {serial.connect_failed})",
            )
        )
    rows.append((p + "one by one: CPU manager / servers / rest", cpu_text(serial.cpu)))
    if serial.connect_failed or serial.disconnected:
        rows.append(
            (
                p + "one by one: connect_failed / disconnected",
                f"{serial.connect_failed} / {serial.disconnected}",
            )
        )
    if run.total is not None and serial.total is not None:
        rows.append((p + "together / one by one", f"{run.total / serial.total:.2f}"))
    return rows


async def bench_fleet(
    kind: Kind,
    sizes: list[int],
    probed: Probe,
    limit_override: float | None,
    failures: list[str],
) -> list[FleetRun]:
    runs: list[FleetRun] = []
    rows: list[tuple[str, str]] = []
    for n in sizes:
        need = n * probed.uss * 1.1 + MEMORY_MARGIN
        available = psutil.virtual_memory().available
        if need > available:
            note = f"needs ~{mib(need)}, {mib(available)} available"
            together = FleetRun(kind.key, n, "together", skipped=note)
            serial = FleetRun(kind.key, n, "one by one", skipped=note)
        else:
            limit = limit_override or together_limit(n)
            together = await fleet_together(kind, n, limit)
            measure = n if n <= kind.serial_full else min(n, SERIAL_SAMPLE)
            limit_each = 3 * float(str(OPTION_DEFAULTS["connect_timeout"]))
            serial = await fleet_one_by_one(
                kind, n, measure, limit_each, 60 + 4 * measure
            )
        for run in (together, serial):
            runs.append(run)
            failures.extend(
                f"leftover after {left.where}: pid {left.pid} (ppid "
                f"{left.ppid}, {left.status}) {left.cmdline}"
                for left in run.leftovers
            )
            if not run.skipped and not run.complete:
                failures.append(
                    f"{kind.key} x{n} {run.mode}: not all connected, "
                    f"{run.connected}/{run.measured or run.n} after "
                    f"{run.elapsed:.1f} s"
                )
        rows += fleet_rows(together, serial)
    table(
        f"fleet start: {kind.label}, declared at once vs one by one "
        f"(alone: {secs(probed.start)} to answer initialize, {mib(probed.uss)} "
        "USS; Manager defaults)",
        rows,
    )
    return runs


# ------------------------------------------------------------------ detection


@dataclass
class Detection:
    label: str
    signal: str
    options: str
    times: list[float] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    bound: str = ""
    leftovers: list[Leftover] = field(default_factory=list)


def options_text(opts: dict[str, object]) -> str:
    merged = {
        "ping_interval": OPTION_DEFAULTS["ping_interval"],
        "ping_timeout": OPTION_DEFAULTS["ping_timeout"],
        **opts,
    }
    text = f"ping_interval {merged['ping_interval']} s, "
    text += f"ping_timeout {merged['ping_timeout']} s"
    return text + ("" if opts else " (defaults)")


async def detect_http(
    transport: str, sig: signal.Signals, rounds: int, opts: dict[str, object]
) -> Detection:
    """Signal the demo HTTP/SSE server; time until `disconnected`."""
    label = "streamable HTTP" if transport == "http" else "legacy SSE"
    out = Detection(f"{label} demo server", sig.name, options_text(opts))
    bus = EventBus()
    rec = Recorder(bus)
    server = HttpServerProcess("http" if transport == "http" else "sse")
    endpoint: object = (
        server.url if transport == "http" else {"url": server.url, "transport": "sse"}
    )
    since = time.time()
    reasons: Counter[str] = Counter()
    came_back = 0
    rng = random.Random(1)
    interval = float(str(opts.get("ping_interval", OPTION_DEFAULTS["ping_interval"])))
    try:
        await anyio.to_thread.run_sync(server.start)
        async with Manager(bus) as mgr:
            mgr.add(parse_spec("web", endpoint, opts))
            for i in range(rounds):
                if not await rec.wait_for(lambda: "web" in rec.connected, 30):
                    out.problems.append(f"round {i + 1}: never connected within 30 s")
                    break
                # A hang only pings can see: stop at a random point of the ping
                # cycle (a fixed settle would always hit the same phase).
                phase = rng.uniform(0, interval) if sig == signal.SIGSTOP else 0
                await anyio.sleep(SETTLE + phase)
                mark = len(rec.events)
                killed = time.perf_counter()
                os.kill(server.pid, sig)
                ok = await rec.wait_for(
                    lambda mark=mark: rec.first(Lost, "web", mark) is not None,
                    60,
                )
                found = rec.first(Lost, "web", mark)
                if not ok or found is None:
                    out.problems.append(f"round {i + 1}: no disconnected within 60 s")
                else:
                    out.times.append(found[0] - killed)
                    assert isinstance(found[1], Lost)
                    reasons[short(found[1].reason, 120)] += 1
                if sig == signal.SIGSTOP:
                    os.kill(server.pid, signal.SIGCONT)
                    if await rec.wait_for(lambda: "web" in rec.connected, 10):
                        came_back += 1
                        continue
                if i == rounds - 1:
                    break
                await anyio.to_thread.run_sync(server.kill)
                await anyio.to_thread.run_sync(server.start)
    finally:
        rec.detach()
        with contextlib.suppress(ProcessLookupError, RuntimeError):
            if server.running:
                os.kill(server.pid, signal.SIGCONT)
        await anyio.to_thread.run_sync(server.kill)
        out.leftovers = await anyio.to_thread.run_sync(
            reap_leftovers, f"{label} {sig.name}", set(), since
        )
    out.reasons = dict(reasons)
    if sig == signal.SIGSTOP:
        out.notes.append(
            f"after SIGCONT the same process was connected again within 10 s in "
            f"{came_back}/{rounds} rounds (otherwise restarted)"
        )
    return out


async def detect_stdio(label: str, command: Command, rounds: int) -> Detection:
    """SIGKILL a connected stdio server; time until `disconnected`."""
    out = Detection(label, "SIGKILL", options_text({}))
    bus = EventBus()
    rec = Recorder(bus)
    since = time.time()
    reasons: Counter[str] = Counter()
    try:
        async with Manager(bus) as mgr:
            mgr.add(stdio_spec("s", command))
            for i in range(rounds):
                if not await rec.wait_for(lambda: "s" in rec.connected, 60):
                    out.problems.append(f"round {i + 1}: never connected within 60 s")
                    break
                await anyio.sleep(SETTLE)
                pid = rec.connected.get("s")
                if pid is None:
                    out.problems.append(f"round {i + 1}: connected without a pid")
                    break
                mark = len(rec.events)
                killed = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                ok = await rec.wait_for(
                    lambda mark=mark: rec.first(Lost, "s", mark) is not None,
                    30,
                )
                found = rec.first(Lost, "s", mark)
                if not ok or found is None:
                    out.problems.append(f"round {i + 1}: no disconnected within 30 s")
                    continue
                out.times.append(found[0] - killed)
                assert isinstance(found[1], Lost)
                reasons[short(found[1].reason, 120)] += 1
    finally:
        rec.detach()
        out.leftovers = await anyio.to_thread.run_sync(
            reap_leftovers, f"{label} SIGKILL", set(rec.pids), since
        )
    out.reasons = dict(reasons)
    return out


def detection_rows(det: Detection) -> list[tuple[str, str]]:
    key = f"{det.label}, {det.signal}"
    if det.times:
        value = (
            f"median {dur(statistics.median(det.times))}, max "
            f"{dur(max(det.times))} ({len(det.times)} rounds; {det.options})"
        )
    else:
        value = f"no measurement ({det.options})"
    if det.bound:
        value += f"; target {det.bound}"
    rows = [(key, value)]
    for reason, count in sorted(det.reasons.items(), key=lambda kv: -kv[1]):
        rows.append(("  reason", f"{count} x {reason}"))
    rows += [("  note", note) for note in det.notes]
    rows += [("  PROBLEM", text) for text in det.problems]
    return rows


async def bench_detection(
    rounds: int, stop_rounds: int, stop_opts: dict[str, object]
) -> list[Detection]:
    results = []
    kill = await detect_http("http", signal.SIGKILL, rounds, {})
    kill.bound = "< 1.5 s"
    results.append(kill)
    stop = await detect_http("http", signal.SIGSTOP, stop_rounds, stop_opts)
    interval = float(str(stop_opts.get("ping_interval", 10.0)))
    timeout = float(str(stop_opts.get("ping_timeout", 5.0)))
    stop.bound = f"<= ping_interval + ping_timeout = {interval + timeout:g} s"
    results.append(stop)
    sse = await detect_http("sse", signal.SIGKILL, rounds, {})
    sse.bound = "< 1.5 s (stream end)"
    results.append(sse)
    raw = await detect_stdio("stdio hand-written server", raw_command(), rounds)
    raw.bound = "milliseconds (process exit / stdout EOF)"
    results.append(raw)
    sdk = await detect_stdio(
        "stdio SDK demo server", stdio_command(), max(3, rounds // 2)
    )
    sdk.bound = raw.bound
    results.append(sdk)
    rows: list[tuple[str, str]] = []
    for det in results:
        rows += detection_rows(det)
    table(
        "death detection: signal to a connected server -> manager's `disconnected` "
        f"event (signal {SETTLE:g} s after connected, SIGSTOP at a random point "
        "of the ping cycle after that; server restarted between rounds)",
        rows,
    )
    return results


# ------------------------------------------------------------------ setup


def node_command(prefix: Path, install: bool) -> tuple[Command | None, str]:
    """The Node reference server over stdio, installing it once if asked."""
    binary = prefix / "node_modules" / ".bin" / NODE_BIN
    if not binary.exists():
        if not install:
            return None, f"not installed at {binary} (--no-node-install)"
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm not found"
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund"]
                + [NODE_PACKAGE],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None, "npm install timed out after 300 s"
        if done.returncode != 0 or not binary.exists():
            tail = short(done.stderr.strip().splitlines()[-1] if done.stderr else "")
            return None, f"npm install failed ({done.returncode}): {tail}"
    version = "?"
    with contextlib.suppress(OSError, ValueError, KeyError):
        meta = prefix / "node_modules" / NODE_PACKAGE / "package.json"
        version = json.loads(meta.read_text())["version"]
    return (str(binary), []), f"{NODE_PACKAGE} {version}"


def environment() -> dict[str, object]:
    """What the figures ran on: machine, load, code version, Manager options."""
    info: dict[str, object] = {
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "loadavg": os.getloadavg(),
        "memory_available": psutil.virtual_memory().available,
    }
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "manager"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\n")
        info["commit"] = head
        info["manager_changes"] = [line[3:] for line in dirty if line.strip()]
    params = inspect.signature(Manager).parameters
    if "start_slots" in params:
        slots: object = "default"
        with contextlib.suppress(ImportError, AttributeError):
            from manager.transport.stdio import starts

            slots = starts.default_start_slots()
        info["start_slots"] = slots
    else:
        info["start_slots"] = None
    return info


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    return value


async def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    sizes = args.sizes or ([10, 30] if quick else [30, 100, 300])
    node_sizes = [10] if quick else [30]
    rounds = 5 if quick else 10
    stop_rounds = 3
    stop_opts: dict[str, object] = (
        {"ping_interval": 2.0, "ping_timeout": 1.0} if quick else {}
    )
    failures: list[str] = []
    results: dict[str, Any] = {"fleet": [], "detection": [], "probes": {}}

    kinds = [
        Kind("raw", "hand-written stdio server (raw_legacy.py)", raw_command(), 300),
        Kind(
            "sdk",
            "Python SDK demo server (python -m manager.demo_server)",
            stdio_command(),
            100,
        ),
    ]
    if not args.skip_fleet:
        if "node" in args.kinds:
            command, note = await anyio.to_thread.run_sync(
                node_command, args.node_prefix, not args.no_node_install
            )
            results["node"] = note
            if command is None:
                table(
                    "fleet start: Node reference server",
                    [("skipped", note)],
                )
            else:
                kinds.append(
                    Kind("node", f"Node reference server ({note})", command, 100)
                )
        for kind in kinds:
            if kind.key not in args.kinds:
                continue
            try:
                probed = await anyio.to_thread.run_sync(probe, kind.command)
                results["probes"][kind.key] = asdict(probed)
                kind_sizes = node_sizes if kind.key == "node" else sizes
                runs = await bench_fleet(
                    kind, kind_sizes, probed, args.time_limit, failures
                )
                results["fleet"] += [asdict(r) for r in runs]
            except Exception:
                failures.append(f"fleet {kind.key}: {traceback.format_exc()}")
                print(f"\nfleet {kind.key} failed:\n{traceback.format_exc()}")

    if not args.skip_detect:
        try:
            dets = await bench_detection(rounds, stop_rounds, stop_opts)
            results["detection"] = [
                {**asdict(d), "median": statistics.median(d.times) if d.times else None}
                for d in dets
            ]
            for det in dets:
                failures += [f"{det.label} {det.signal}: {n}" for n in det.problems]
                failures += [
                    f"leftover after {x.where}: pid {x.pid} {x.cmdline}"
                    for x in det.leftovers
                ]
        except Exception:
            failures.append(f"detection: {traceback.format_exc()}")
            print(f"\ndetection failed:\n{traceback.format_exc()}")
    results["failures"] = failures
    return results


def main() -> None:
    use_private_state()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, smoke run")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write figures")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        help="fleet sizes, e.g. 30,100 (default 30,100,300; --quick 10,30)",
    )
    parser.add_argument(
        "--kinds",
        type=lambda s: s.split(","),
        default=["raw", "sdk", "node"],
        help="fleet server kinds: raw,sdk,node (default all)",
    )
    parser.add_argument(
        "--time-limit", type=float, help="seconds per together run (default 60+0.4N)"
    )
    parser.add_argument("--skip-fleet", action="store_true")
    parser.add_argument("--skip-detect", action="store_true")
    parser.add_argument("--node-prefix", type=Path, default=Path("/tmp/sev"))
    parser.add_argument(
        "--no-node-install",
        action="store_true",
        help=f"do not try `npm install {NODE_PACKAGE}` if it is missing",
    )
    args = parser.parse_args()

    # Every log record is counted, none printed (300 failing servers would
    # flood the tables); the SDK's HTTP/SSE teardown noise is filtered as the
    # daemon filters it, so what is counted is what the daemon would log.
    tally_handler = LogTally()
    logging.getLogger().addHandler(tally_handler)
    with contextlib.suppress(ImportError, AttributeError):
        from manager import logs

        for name in logs.TEARDOWN_NOISE_LOGGERS:
            logging.getLogger(name).addFilter(logs.TEARDOWN_NOISE)

    env = environment()
    slots = env["start_slots"]
    print(
        f"mcp-manager survival benchmarks on {env['cores']} cores, Python "
        f"{env['python']}, commit {env.get('commit', '?')}"
        + (" + local changes in manager/" if env.get("manager_changes") else "")
    )
    print(
        "Manager start_slots: "
        + ("not supported (no bound)" if slots is None else f"default ({slots})")
        + f"; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    started = time.time()
    results: dict[str, Any] = {}
    try:
        results = anyio.run(run, args)
    finally:
        final = reap_leftovers("the whole run", set(), started)
        failures: list[str] = results.setdefault("failures", [])
        failures += [
            f"leftover at the end: pid {x.pid} (ppid {x.ppid}, {x.status}) {x.cmdline}"
            for x in final
        ]
    log_counts = dict(tally_handler.counts)
    rows = [
        (
            "log records, WARNING and up",
            ", ".join(f"{k} x{v}" for k, v in sorted(log_counts.items())) or "none",
        ),
        *[("  error", text) for text in tally_handler.errors],
        ("load average at the end", " ".join(f"{x:.2f}" for x in os.getloadavg())),
        ("failures", str(len(failures)) if failures else "none"),
        *[("  failure", short(text, 300)) for text in failures],
    ]
    table("run summary", rows)
    if args.json:
        results["environment"] = env
        results["log"] = {"counts": log_counts, "errors": tally_handler.errors}
        results["quick"] = args.quick
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(jsonable(results), indent=2) + "\n")
        print(f"\nwritten to {args.json}")
    leftovers = [f for f in failures if f.startswith("leftover")]
    sys.exit(1 if leftovers else 0)


if __name__ == "__main__":
    main()
