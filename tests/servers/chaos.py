"""Chaos campaign: the real daemon under random faults while clients call through it.

`await ChaosCampaign(ChaosConfig(workdir=DIR, seconds=40)).run()` starts five HTTP
upstreams (three demo servers over streamable HTTP, one over legacy SSE, one
`closing_http` server in `close` mode), writes a startup.lua declaring them and
about thirty stdio servers (mostly `raw_legacy`, a few SDK demo servers, each of
which spawns a `sleep` grandchild), runs `mcp-manager run --listen
127.0.0.1:PORT` (`DaemonProcess`) and keeps SDK sessions calling `SERVER__echo`
through the aggregated endpoint (`chaos_clients.EchoClients`). Once all are
connected, about every `fault_interval` s one fault, drawn at random (seeded;
the seed is the first line `say` gets):

- SIGKILL a connected stdio server (its pid from `status`);
- SIGSTOP one, SIGCONT it 1-3 s later;
- stop (SIGTERM) or kill an HTTP upstream, start it again on its port 0.5-2 s
  later;
- a reload adding or removing a spare stdio server: startup.lua saved (by
  rename, as editors do; the daemon watches it), half the time also SIGHUP.

Then chaos stops: every stopped server continued, every HTTP upstream running,
the spares removed. The report (`chaos_report.ChaosReport`) has one row per
check: every declared connection connected again within `converge_within`;
the daemon's RSS, fds and threads flat from start to end; one more echo to every
server from a fresh session; no stray server process; SIGTERM: exit 0 within
`stop_within`; nothing the daemon started (grandchildren too) left afterwards;
and on the record: every SIGKILL seen as `disconnected` with exit -9, event
`seq` contiguous (a `lagged` gap is reported), calls ok / failed by kind (held
then failed is fine, a wrong text or a hung call never), p50/p99, no config or
hook error, no ERROR or Traceback in the daemon log. The workdir keeps
startup.lua, every server's log, `daemon.log`, `events.jsonl` (the event stream
as received) and `faults.jsonl` (what was done, when).

Only processes started here are signalled, always by PID: the HTTP upstreams,
the daemon, and the daemon's children (checked to be its children first; psutil
refuses a reused PID). Every stdio server gets `MM_CHAOS_MARKER=<uuid>` in its
environment, which its grandchildren inherit, so what is left can be told apart
from other people's processes, and is SIGKILLed at the end.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
import anyio.to_thread
import mcp.types as types
import psutil

from manager.core.errors import ManagerError

from .chaos_clients import EchoClients, open_session, text_of
from .chaos_report import (
    ChaosReport,
    Fault,
    Kill,
    check_calls,
    check_config,
    check_faults,
    check_kills,
    check_log,
    check_recoveries,
    check_sequence,
)
from .daemon import DaemonProcess
from .process import (
    CLOSING_HTTP_SCRIPT,
    DEMO_MODULE,
    HttpServerProcess,
    free_port,
    raw_command,
    stdio_command,
)

__all__ = ["FAULT_WEIGHTS", "MARKER_VAR", "ChaosCampaign", "ChaosConfig"]

MARKER_VAR = "MM_CHAOS_MARKER"
"""Environment variable marking every process the campaign's daemon starts."""

FAULT_WEIGHTS: Mapping[str, float] = {
    "kill": 0.4,
    "stop": 0.25,
    "http": 0.15,
    "reload": 0.2,
}
"""How often each fault is drawn, relatively."""

POLL_INTERVAL = 0.1
"""Seconds between two `status` polls while waiting for connections."""

SETTLE_WITHIN = 5.0
"""Seconds the end sample of fds and threads may take to come back in bounds
(a socket being closed, a worker thread ending, right when it is taken)."""

CLOSE_WITHIN = 2.5
"""Seconds a removed or lost stdio server (and its group) may take to be gone:
the daemon's close bound (2 s) plus margin."""

LEFTOVER_GRACE = 1.0
"""Seconds after the daemon's exit for the processes it started to be gone."""

GRANDCHILD_SECONDS = 900
"""How long the demo servers' `sleep` grandchildren would live on their own."""

Row = dict[str, object]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ChaosConfig:
    """What to run, how hard, and the bounds the checks use.

    Attributes:
        workdir: Where startup.lua, the servers' logs, `daemon.log` and
            `faults.jsonl` go (kept afterwards).
        seconds: Length of the chaos phase.
        seed: Seed of every random choice; a fresh one if None.
        raw_servers: `raw_legacy` stdio servers (~25 ms to start).
        demo_servers: SDK demo stdio servers (~0.5 s of CPU to start).
        spare_servers: `raw_legacy` servers that reloads add and remove.
        clients: SDK sessions calling through the endpoint.
        fault_interval: Mean seconds between two faults.
        call_pause: Seconds each client waits between two calls.
        client_timeout: Seconds before a client's call counts as hung.
        server_call_timeout: `call_timeout` of every connection.
        startup_within: Seconds for every connection to connect at start.
        converge_within: Seconds for every connection to be connected again
            once chaos stopped.
        stop_within: Seconds the daemon may take to exit on SIGTERM.
        rss_growth_mb: Allowed RSS growth of the daemon, start to end.
        fd_slack: Allowed change in the daemon's open fds, start to end.
        thread_slack: Allowed change in the daemon's threads, start to end.
        log_level: The daemon's `--log-level`.
        say: Receives progress lines (the seed first); stderr by default.
    """

    workdir: Path
    seconds: float = 40.0
    seed: int | None = None
    raw_servers: int = 26
    demo_servers: int = 4
    spare_servers: int = 3
    clients: int = 4
    fault_interval: float = 0.3
    call_pause: float = 0.02
    client_timeout: float = 30.0
    server_call_timeout: float = 15.0
    startup_within: float = 60.0
    converge_within: float = 20.0
    stop_within: float = 3.0
    rss_growth_mb: float = 30.0
    fd_slack: int = 20
    thread_slack: int = 5
    log_level: str = "INFO"
    say: Callable[[str], None] = _stderr


# ------------------------------------------------------------------- processes


def _lua(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def marked_processes(marker: str) -> set[int]:
    """PIDs of live (non-zombie) processes whose environment carries `marker`."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.add(int(entry.name))
    return found


def _alive(pid: int, created: float | None, marked: set[int]) -> bool:
    """Whether `pid` still runs and is the process seen before (not a reuse).

    Without a known create time, the run's marker in its environment decides.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if created is not None:
            return bool(proc.create_time() == created)
        return pid in marked
    except psutil.Error:
        return False


def _describe(pids: Sequence[int]) -> str:
    out = []
    for pid in pids[:5]:
        try:
            out.append(f"{pid} ({' '.join(psutil.Process(pid).cmdline())[:80]})")
        except psutil.Error:
            out.append(f"{pid} (gone)")
    return ": " + ", ".join(out) if out else ""


# -------------------------------------------------------------------- campaign


class ChaosCampaign:
    """One run of the campaign: `await run()` once.

    Args:
        config: What to run and the bounds of the checks.
    """

    def __init__(self, config: ChaosConfig) -> None:
        self.config = config
        seed = config.seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self.seed = seed
        title = (
            f"chaos campaign: seed {seed}, {config.seconds:g} s of faults every "
            f"~{config.fault_interval:g} s, {config.raw_servers} raw + "
            f"{config.demo_servers} demo stdio + 5 http servers "
            f"(+{config.spare_servers} spare), {config.clients} clients"
        )
        self.report = ChaosReport(seed=seed, title=title)
        self._rng = random.Random(seed)
        self._marker = uuid.uuid4().hex
        self._workdir = config.workdir
        self._script = config.workdir / "startup.lua"
        self._port = free_port()
        self._url = f"http://127.0.0.1:{self._port}/mcp"
        self._token = secrets.token_urlsafe(24)
        """The endpoint's bearer token, given to the daemon by its environment."""
        # Real processes (signals, process groups): never forked stand-ins.
        raw, demo = raw_command(), stdio_command(fork=False)
        self._stdio = {f"raw{i:02d}": raw for i in range(config.raw_servers)}
        self._stdio.update({f"demo{i}": demo for i in range(config.demo_servers)})
        self._spares = [f"spare{i}" for i in range(config.spare_servers)]
        self._active_spares: set[str] = set()
        self._http = {f"web{i}": self._http_server("http", f"web{i}") for i in range(3)}
        self._http["sse0"] = self._http_server("sse", "sse0")
        self._http["close0"] = self._http_server(
            "http",
            "close0",
            ["--mode", "close"],
            (sys.executable, CLOSING_HTTP_SCRIPT),
        )
        self._daemon: DaemonProcess | None = None
        self._daemon_pid = 0
        self._pids: dict[int, float | None] = {}
        """Every pid the daemon started that we saw, with its create time."""
        self._grandchildren: list[int] = []
        self._peak_rss = 0
        self._started = 0.0
        self._ending = anyio.Event()
        self._kills: list[Kill] = []
        self._stopped: set[int] = set()
        self._bouncing: set[str] = set()

    def _http_server(
        self,
        transport: Literal["http", "sse"],
        name: str,
        flags: Sequence[str] = (),
        program: Sequence[str | Path] = (sys.executable, "-m", DEMO_MODULE),
    ) -> HttpServerProcess:
        log = self._workdir / f"{name}.log"
        return HttpServerProcess(transport, flags, log_path=log, program=program)

    async def run(self) -> ChaosReport:
        """Run the campaign; a failed check is a row of the report, not an error.

        Raises:
            RuntimeError: An HTTP upstream or the daemon did not start.
            TimeoutError: The daemon did not answer on its control socket.
        """
        cfg = self.config
        cfg.say(f"chaos: seed {self.seed} (workdir {self._workdir})")
        self._workdir.mkdir(parents=True, exist_ok=True)
        try:
            async with anyio.create_task_group() as tg:
                for server in self._http.values():
                    tg.start_soon(server.astart)
            self._write_script()
            daemon = DaemonProcess(
                self._script,
                *("--listen", f"127.0.0.1:{self._port}"),
                *("--log-level", cfg.log_level, "--no-hud"),
                env={"MCP_MANAGER_TOKEN": self._token},
            )
            self._daemon = daemon
            try:
                await anyio.to_thread.run_sync(daemon.start)
                self._daemon_pid = daemon.process.pid
                await self._campaign(daemon)
            finally:
                await anyio.to_thread.run_sync(daemon.close)
                (self._workdir / "daemon.log").write_text(daemon.log())
                with (self._workdir / "events.jsonl").open("w") as out:
                    out.writelines(json.dumps(e) + "\n" for e in daemon.events)
            self._analyse(daemon)
        finally:
            for server in self._http.values():
                await server.akill()
            await self._sweep_leftovers()
            with (self._workdir / "faults.jsonl").open("w") as out:
                out.writelines(json.dumps(asdict(f)) + "\n" for f in self.report.faults)
        return self.report

    async def _campaign(self, daemon: DaemonProcess) -> None:
        cfg, report = self.config, self.report
        started = time.monotonic()
        missing = await self._wait_connected(cfg.startup_within)
        took = time.monotonic() - started
        report.add(
            "startup", self._connected_text(missing, f"in {took:.1f} s"), not missing
        )
        if missing:
            await self._stop_daemon(daemon)
            return
        await self._spawn_grandchildren()
        cfg.say(f"chaos: all connected in {took:.1f} s; clients warming up")
        clients = EchoClients(
            self._url,
            sorted([*self._stdio, *self._http]),
            report.calls,
            token=self._token,
            count=cfg.clients,
            seed=self.seed,
            timeout=cfg.client_timeout,
            pause=cfg.call_pause,
        )
        async with anyio.create_task_group() as tg:
            for index in range(cfg.clients):
                tg.start_soon(clients.run, index)
            with anyio.move_on_after(cfg.client_timeout):
                await clients.warm.wait()
            warm = f"{clients.warmed}/{cfg.clients} made an ok call"
            report.add("clients warm", warm, clients.warmed == cfg.clients)
            start = self._sample()
            cfg.say(f"chaos: {cfg.seconds:g} s of faults")
            ended = await self._chaos()
            restored = time.monotonic()
            cfg.say("chaos: over; waiting for every connection")
            missing = await self._wait_connected(cfg.converge_within)
            now = time.monotonic()
            when = (
                f"{now - ended:.2f} s after chaos ended "
                f"({now - restored:.2f} s after the last restore)"
            )
            report.add(
                "reconnected after chaos",
                self._connected_text(missing, when),
                not missing,
            )
            clients.stop()
            with anyio.move_on_after(cfg.client_timeout + 10):
                await clients.idle.wait()
            idle = f"{clients.idled}/{cfg.clients} finished their last call"
            report.add("clients stopped", idle, clients.idled == cfg.clients)
            await self._check_resources(start)
            await self._final_round()
            await self._check_strays()
            clients.release()
        await self._stop_daemon(daemon)

    def _analyse(self, daemon: DaemonProcess) -> None:
        """The checks on the record, once the daemon is gone and its events are in."""
        events = list(daemon.events)
        report = self.report
        report.extend(check_faults(report.faults))
        report.checks.append(check_kills(self._kills, events))
        report.extend(check_recoveries(report.faults, events))
        report.checks.append(check_sequence(events))
        report.extend(check_calls(report.calls))
        report.checks.append(check_config(events))
        log_check, report.log_lines = check_log(daemon.log())
        report.checks.append(log_check)

    # --- startup and status --------------------------------------------------

    def _declared(self) -> set[str]:
        return {*self._stdio, *self._http, *self._active_spares}

    def _stdio_line(self, name: str, command: tuple[str, list[str]]) -> str:
        args = ", ".join(_lua(a) for a in command[1])
        return (
            f"mcp_add({_lua(name)}, {{command = {_lua(command[0])}, "
            f"args = {{{args}}}, env = {{{MARKER_VAR} = {_lua(self._marker)}}}}}, "
            f"{self._options()})\n"
        )

    def _options(self) -> str:
        return f"{{call_timeout = {self.config.server_call_timeout:g}}}"

    def _write_script(self) -> None:
        lines = ["-- written by tests/servers/chaos.py\n"]
        lines += [self._stdio_line(n, c) for n, c in sorted(self._stdio.items())]
        for name, server in sorted(self._http.items()):
            endpoint = _lua(server.url)
            if server.transport == "sse":
                endpoint = f'{{url = {endpoint}, transport = "sse"}}'
            lines.append(f"mcp_add({_lua(name)}, {endpoint}, {self._options()})\n")
        raw = raw_command()
        lines += [self._stdio_line(n, raw) for n in sorted(self._active_spares)]
        # Saved by rename, as editors do: the watcher never reads half a file.
        partial = self._script.with_name(".startup.lua.partial")
        partial.write_text("".join(lines))
        os.replace(partial, self._script)

    async def _status(self) -> list[Row]:
        """The daemon's status rows; every pid in them is remembered."""
        assert self._daemon is not None
        statuses = await anyio.to_thread.run_sync(self._daemon.client.status)
        rows = [status.to_dict() for status in statuses]  # as the wire has them
        for row in rows:
            pid = _int(row.get("pid"))
            if pid is not None and self._pids.get(pid) is None:
                self._pids[pid] = self._create_time(pid, child=True)
        return rows

    def _create_time(self, pid: int, *, child: bool) -> float | None:
        """`pid`'s create time, if it runs (as the daemon's child, if `child`)."""
        try:
            proc = psutil.Process(pid)
            if child and proc.ppid() != self._daemon_pid:
                return None
            return float(proc.create_time())
        except psutil.Error:
            return None

    async def _wait_connected(self, within: float) -> dict[str, str]:
        """Poll status until exactly the declared connections are all connected.

        Returns:
            Those not connected (name -> state, "absent" or "extra") when time
            ran out; empty on success.
        """
        deadline = time.monotonic() + within
        while True:
            names = self._declared()
            try:
                states = {str(r["name"]): str(r["state"]) for r in await self._status()}
            except ManagerError as exc:
                states = {"(status)": str(exc)}
            missing = {n: states.get(n, "absent") for n in names}
            missing = {n: s for n, s in missing.items() if s != "connected"}
            missing.update({n: "extra" for n in states if n not in names})
            if not missing or time.monotonic() > deadline:
                return missing
            await anyio.sleep(POLL_INTERVAL)

    def _connected_text(self, missing: Mapping[str, str], when: str) -> str:
        declared = self._declared()
        up = len(declared - set(missing))
        text = f"{up}/{len(declared)} connected {when}"
        if missing:
            shown = ", ".join(f"{n}={s}" for n, s in sorted(missing.items())[:8])
            text += f"; not connected: {shown}"
        return text

    async def _spawn_grandchildren(self) -> None:
        """Each demo server starts a `sleep` grandchild, which must die with it."""
        demos = sorted(n for n in self._stdio if n.startswith("demo"))
        try:
            with anyio.fail_after(self.config.client_timeout):
                async with open_session(self._url, self._token) as session:
                    for name in demos:
                        args = {"seconds": GRANDCHILD_SECONDS}
                        result = await session.call_tool(f"{name}__spawn_child", args)
                        assert isinstance(result, types.CallToolResult)
                        pid = int(text_of(result))
                        self._grandchildren.append(pid)
                        self._pids[pid] = self._create_time(pid, child=False)
        except Exception as exc:  # boundary: a finding, not a crash
            self.report.add("grandchildren", f"could not spawn: {exc!r}", False)

    # --- chaos ---------------------------------------------------------------

    async def _chaos(self) -> float:
        """Faults for `seconds`, then restore everything; when the faults ended."""
        cfg = self.config
        self._started = time.monotonic()
        deadline = self._started + cfg.seconds
        kinds, weights = list(FAULT_WEIGHTS), list(FAULT_WEIGHTS.values())
        async with anyio.create_task_group() as restores:
            while time.monotonic() < deadline:
                await anyio.sleep(self._rng.uniform(0.5, 1.5) * cfg.fault_interval)
                kind = self._rng.choices(kinds, weights)[0]
                try:
                    rows = await self._status()
                except ManagerError as exc:
                    self._fault("status-failed", "", str(exc))
                    continue
                self._sample_peak()
                if kind == "reload":
                    await self._reload()
                elif kind == "http" and self._bounce_http(restores):
                    pass
                elif kind == "stop" and self._stop_stdio(rows, restores):
                    pass
                else:
                    self._kill_stdio(rows)
            ended = time.monotonic()
            self._ending.set()  # the pending restores happen now
            if self._active_spares:  # back to the set declared at the start
                self._active_spares.clear()
                await anyio.to_thread.run_sync(self._write_script)
                self._fault("reload-remove", "every spare", "startup.lua saved")
        self._fault("restored", "", "every server continued, every HTTP server up")
        self.report.faults.sort(key=lambda f: f.at)  # an HTTP stop is logged late
        return ended

    def _fault(
        self,
        kind: str,
        target: str,
        detail: str = "",
        when: tuple[float, float] | None = None,
    ) -> None:
        """Record a fault done now, or at `when` (monotonic, wall clock)."""
        mono, wall = when or (time.monotonic(), time.time())
        at = round(mono - self._started, 3)
        self.report.faults.append(Fault(at, kind, target, detail, wall))

    def _last_seq(self) -> int:
        assert self._daemon is not None
        for event in reversed(self._daemon.events):
            seq = _int(event.get("seq"))
            if seq:  # a `lagged` notice has seq 0
                return seq
        return 0

    def _victim(self, rows: list[Row]) -> tuple[str, psutil.Process] | None:
        """A connected, running stdio server of the daemon, at random."""
        candidates = [
            (str(r["name"]), pid)
            for r in rows
            if (pid := _int(r.get("pid"))) is not None
            and r["name"] in self._stdio
            and r["state"] == "connected"
            and pid not in self._stopped
        ]
        self._rng.shuffle(candidates)
        for name, pid in candidates:
            try:
                proc = psutil.Process(pid)
                if proc.ppid() == self._daemon_pid:
                    return name, proc
            except psutil.Error:
                continue
        return None

    def _kill_stdio(self, rows: list[Row]) -> None:
        victim = self._victim(rows)
        if victim is None:
            self._fault("skipped", "", "no connected stdio server to kill")
            return
        name, proc = victim
        after = self._last_seq()
        try:
            proc.kill()
        except psutil.Error as exc:
            self._fault("kill-gone", name, f"pid {proc.pid}: {exc!r}")
            return
        self._kills.append(Kill(name, proc.pid, after))
        self._fault("kill", name, f"SIGKILL pid {proc.pid}")

    def _stop_stdio(self, rows: list[Row], restores: anyio.abc.TaskGroup) -> bool:
        victim = self._victim(rows)
        if victim is None:
            return False
        name, proc = victim
        delay = self._rng.uniform(1.0, 3.0)
        try:
            proc.suspend()
        except psutil.Error as exc:
            self._fault("kill-gone", name, f"pid {proc.pid} before SIGSTOP: {exc!r}")
            return True
        self._stopped.add(proc.pid)
        self._fault("stop", name, f"SIGSTOP pid {proc.pid} for {delay:.1f} s")
        restores.start_soon(self._continue_later, name, proc, delay)
        return True

    async def _continue_later(
        self, name: str, proc: psutil.Process, delay: float
    ) -> None:
        with anyio.move_on_after(delay):
            await self._ending.wait()
        try:
            proc.resume()
            self._fault("cont", name, f"SIGCONT pid {proc.pid}")
        except psutil.Error as exc:
            self._fault("cont-gone", name, f"pid {proc.pid}: {exc!r}")
        self._stopped.discard(proc.pid)

    def _bounce_http(self, restores: anyio.abc.TaskGroup) -> bool:
        up = sorted(n for n in self._http if n not in self._bouncing)
        if not up:
            return False
        name = self._rng.choice(up)
        how = self._rng.choice(["term", "kill"])
        delay = self._rng.uniform(0.5, 2.0)
        self._bouncing.add(name)
        restores.start_soon(self._bounce, name, how, delay)
        return True

    async def _bounce(self, name: str, how: str, delay: float) -> None:
        server = self._http[name]
        pid = server.pid
        started = time.monotonic(), time.time()  # the signal goes out now
        code = await (server.astop() if how == "term" else server.akill())
        took = time.monotonic() - started[0]
        detail = f"pid {pid}: exit {code} after {took:.2f} s; back in {delay:.1f} s"
        self._fault(f"http-{how}", name, detail, started)
        with anyio.move_on_after(delay):
            await self._ending.wait()
        for attempt in range(1, 4):
            try:
                await server.astart()
            except RuntimeError as exc:
                self._fault("http-up-failed", name, f"try {attempt}: {exc}")
                continue
            self._fault("http-up", name, f"pid {server.pid} (try {attempt})")
            break
        self._bouncing.discard(name)

    async def _reload(self) -> None:
        assert self._daemon is not None
        if not self._spares:
            return
        name = self._rng.choice(self._spares)
        if name in self._active_spares:
            self._active_spares.discard(name)
            kind = "reload-remove"
        else:
            self._active_spares.add(name)
            kind = "reload-add"
        await anyio.to_thread.run_sync(self._write_script)
        via = self._rng.choice(["watch", "sighup"])
        if via == "sighup":
            self._daemon.signal(signal.SIGHUP)
        self._fault(kind, name, f"startup.lua saved ({via})")

    # --- checks while the daemon runs ----------------------------------------

    def _sample(self) -> tuple[int, int, int]:
        """The daemon's RSS (bytes), open fds and threads."""
        proc = psutil.Process(self._daemon_pid)
        rss = int(proc.memory_info().rss)
        self._peak_rss = max(self._peak_rss, rss)
        return rss, int(proc.num_fds()), int(proc.num_threads())

    def _sample_peak(self) -> None:
        try:
            self._sample()
        except psutil.Error:
            pass

    async def _check_resources(self, start: tuple[int, int, int]) -> None:
        cfg = self.config
        rss0, fds0, threads0 = start
        settle = time.monotonic() + SETTLE_WITHIN
        while True:
            try:
                rss, fds, threads = self._sample()
            except psutil.Error as exc:
                self.report.add("daemon resources", f"cannot sample: {exc!r}", False)
                return
            fds_ok = abs(fds - fds0) <= cfg.fd_slack
            threads_ok = abs(threads - threads0) <= cfg.thread_slack
            if (fds_ok and threads_ok) or time.monotonic() > settle:
                break
            await anyio.sleep(POLL_INTERVAL)
        mb = 2**20
        growth = (rss - rss0) / mb
        self.report.add(
            "daemon RSS",
            f"{rss0 / mb:.1f} -> {rss / mb:.1f} MB ({growth:+.1f}, peak "
            f"{self._peak_rss / mb:.1f}; bound +{cfg.rss_growth_mb:g})",
            growth < cfg.rss_growth_mb,
        )
        self.report.add(
            "daemon fds", f"{fds0} -> {fds} (bound +-{cfg.fd_slack})", fds_ok
        )
        self.report.add(
            "daemon threads",
            f"{threads0} -> {threads} (bound +-{cfg.thread_slack})",
            threads_ok,
        )

    async def _final_round(self) -> None:
        """One echo to every declared server from a fresh session: all must work."""
        names = sorted(self._declared())
        ok, failed = 0, []
        timeout = self.config.client_timeout
        try:
            with anyio.fail_after(timeout * 2):
                async with open_session(self._url, self._token) as session:
                    for name in names:
                        text = f"final-{name}-{uuid.uuid4().hex[:8]}"
                        result = await session.call_tool(
                            f"{name}__echo",
                            {"text": text},
                            read_timeout_seconds=timeout,
                        )
                        if (
                            isinstance(result, types.CallToolResult)
                            and not result.is_error
                            and text_of(result) == text
                        ):
                            ok += 1
                        else:
                            failed.append(name)
        except Exception as exc:  # boundary: a finding, not a crash
            failed.append(repr(exc))
        value = f"{ok}/{len(names)} echo ok from a new session"
        if failed:
            value += f"; failed: {', '.join(failed[:8])}"
        self.report.add("final round", value, ok == len(names))

    async def _check_strays(self) -> None:
        """No marked process but the live servers and their descendants.

        Removed and killed servers get `CLOSE_WITHIN` to be gone, as promised.
        """
        deadline = time.monotonic() + CLOSE_WITHIN
        while True:
            try:
                rows = await self._status()
            except ManagerError as exc:
                self.report.add("stray processes", f"no status: {exc}", False)
                return
            live = {pid for r in rows if (pid := _int(r.get("pid")))}
            expected = set(live)
            for pid in live:
                try:
                    expected.update(p.pid for p in psutil.Process(pid).children(True))
                except psutil.Error:
                    continue
            marked = await anyio.to_thread.run_sync(marked_processes, self._marker)
            strays = sorted(marked - expected)
            if not strays or time.monotonic() > deadline:
                break
            await anyio.sleep(POLL_INTERVAL)
        self.report.add(
            "stray processes",
            f"{len(strays)} besides {len(live)} live stdio servers and their "
            f"children{_describe(strays)}",
            not strays,
        )

    # --- stop ----------------------------------------------------------------

    async def _stop_daemon(self, daemon: DaemonProcess) -> None:
        """SIGTERM the daemon: exit 0 in time, and nothing it started left."""
        cfg = self.config
        try:
            await self._status()  # the last pids
        except ManagerError:
            pass
        try:
            children = list(psutil.Process(self._daemon_pid).children(recursive=True))
        except psutil.Error:
            children = []
        for proc in children:
            if self._pids.get(proc.pid) is None:
                self._pids[proc.pid] = self._create_time(proc.pid, child=False)
        early = daemon.process.poll()
        if early is not None:
            self.report.add(
                "daemon alive until SIGTERM", f"it had exited with {early}", False
            )
        started = time.monotonic()
        daemon.signal(signal.SIGTERM)
        code: int | None = None
        for limit in (cfg.stop_within, 10.0):
            try:
                code = await anyio.to_thread.run_sync(daemon.wait, limit)
                break
            except subprocess.TimeoutExpired:
                continue
        took = time.monotonic() - started
        self.report.add(
            "daemon stop (SIGTERM)",
            f"exit {code} in {took:.2f} s (bound {cfg.stop_within:g} s)",
            early is None and code == 0 and took <= cfg.stop_within,
        )
        deadline = time.monotonic() + LEFTOVER_GRACE
        while True:
            left = await anyio.to_thread.run_sync(self._leftovers)
            if not left or time.monotonic() > deadline:
                break
            await anyio.sleep(POLL_INTERVAL)
        self.report.add(
            "processes left",
            f"{len(left)} of {len(self._pids)} pids seen ({len(children)} "
            f"descendants at SIGTERM, {len(self._grandchildren)} grandchildren "
            f"spawned){_describe(left)}",
            not left,
        )

    def _leftovers(self) -> list[int]:
        marked = marked_processes(self._marker)
        left = {p for p, t in self._pids.items() if _alive(p, t, marked)}
        return sorted(left | marked)

    async def _sweep_leftovers(self) -> None:
        """SIGKILL whatever carries this run's marker (ours by construction)."""
        for pid in await anyio.to_thread.run_sync(marked_processes, self._marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
