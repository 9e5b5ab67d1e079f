"""The HUD: the pure reducer (tables), the one-shot status table (snapshot), the
textual app driven headless by real bus events (pilot), output capture, the
attached reader across a daemon restart, and the real thing end to end (the
status table against a real daemon, and `run` in a pseudo-terminal)."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import fcntl
import html
import io
import json
import logging
import os
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import anyio
import anyio.from_thread
import pytest
from rich.console import Console
from servers import raw_command
from servers.daemon import DaemonThread
from textual.pilot import Pilot

from manager.cli import main
from manager.control.client import ControlClient
from manager.control.server import serve_control
from manager.core.errors import ConfigError, UnknownServer
from manager.core.events import (
    Added,
    ApprovalAsked,
    ApprovalDecided,
    AttemptFailed,
    CallFailed,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    Lagged,
    LaunchLock,
    Lost,
    Reconnecting,
    Removed,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
    ToolChanged,
    ToolsApproved,
    ToolsChanged,
    Updated,
    event_from_dict,
    event_to_dict,
)
from manager.core.info import AttachedClient, DaemonInfo, LastReload, StartSlots
from manager.core.replies import ConnectionDetails, ReconnectReply, ReloadSummary
from manager.core.spec import parse_spec, spec_summary
from manager.core.status import ConnectionStatus
from manager.engine.bus import EventBus
from manager.hud.app import HudApp
from manager.hud.details import DetailsScreen, details_text
from manager.hud.feed import (
    Note,
    QueueFeed,
    Snapshot,
    SubscriptionFeed,
    Unreachable,
)
from manager.hud.render import render_status
from manager.hud.run import AttachedReader, run_inline
from manager.hud.state import HudState
from manager.hud.terminal import OutputCapture, TerminalFile, open_terminal
from manager.hud.view import (
    age,
    approval_cells,
    cells,
    countdown,
    footer_lines,
    header_cells,
    layout,
    tools_cell,
    transport_cell,
)
from manager.logs import LogSink
from manager.logs.setup import RecentStreamHandler


def typed(rows: list[dict[str, object]]) -> list[ConnectionStatus]:
    """Status snapshots in their typed form, from their wire form."""
    return [ConnectionStatus.from_dict(row) for row in rows]


T0 = 1_700_000_000.0
"""A fixed wall-clock instant for the reducer and snapshot tests."""


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock strings (`HH:MM:SS`) in UTC, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def stamped(event: Event, at: float) -> Event:
    """`event` as the bus would stamp it at time `at`."""
    object.__setattr__(event, "time", at)
    return event


def fold(*steps: tuple[float, Event], as_dicts: bool = False) -> HudState:
    """Fold `steps` in; `as_dicts` sends each through the socket's wire form and
    back (`event_to_dict` then `event_from_dict`), as the attached HUD gets it."""
    hud = HudState()
    for at, event in steps:
        event = stamped(event, at)
        hud.apply(event_from_dict(event_to_dict(event)) if as_dicts else event, now=at)
    return hud


# ------------------------------------------------------------------- reducer

ADD_WEB = (T0, Added(name="web", transport="http", endpoint="http://h:9/mcp"))
ADD_FS = (T0, Added(name="fs", transport="stdio", endpoint="python -m fs"))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [ADD_WEB],
            {"state": "connecting", "attempt": 0, "transport": "http", "since": T0},
            id="added",
        ),
        pytest.param(
            [ADD_FS, (T0 + 1, Connecting(name="fs", attempt=1))],
            {"state": "connecting", "attempt": 1, "trying": True},
            id="first-try",
        ),
        pytest.param(
            [
                ADD_FS,
                (T0 + 1, Connecting(name="fs", attempt=1)),
                (T0 + 2, Connected(name="fs", attempt=1, tools=12, pid=42)),
            ],
            {
                "state": "connected",
                "tools": 12,
                "pid": 42,
                "since": T0 + 2,
                "trying": False,
                "error": "",
            },
            id="connected",
        ),
        pytest.param(
            [
                ADD_WEB,
                (T0 + 1, Connecting(name="web", attempt=1)),
                (T0 + 2, AttemptFailed(name="web", attempt=1, error="refused\nmore")),
                (T0 + 2, Reconnecting(name="web", attempt=2, delay=0.4)),
            ],
            {
                "state": "reconnecting",
                "attempt": 1,
                "error": "refused",
                "next_retry_at": T0 + 2.4,
                "since": T0 + 2,
            },
            id="failed-waits-with-first-line-of-error",
        ),
        pytest.param(
            [
                ADD_WEB,
                (T0 + 2, AttemptFailed(name="web", attempt=1, error="refused")),
                (T0 + 3, Connecting(name="web", attempt=2)),
                (T0 + 4, AttemptFailed(name="web", attempt=2, error="timeout")),
            ],
            {"since": T0 + 2, "error": "timeout", "attempt": 2, "trying": False},
            id="outage-keeps-its-start",
        ),
        pytest.param(
            [
                ADD_FS,
                (T0 + 1, Connected(name="fs", attempt=1, tools=3, pid=42)),
                (T0 + 60, Lost(name="fs", reason="exited", exit_code=-9, uptime=59)),
                (T0 + 60, Reconnecting(name="fs", attempt=1, delay=0.1)),
            ],
            {
                "state": "reconnecting",
                "attempt": 0,
                "exit_code": -9,
                "pid": None,
                "tools": 3,
                "since": T0 + 60,
            },
            id="lost-after-stable-resets-attempt-keeps-tools",
        ),
        pytest.param(
            [
                ADD_FS,
                (T0 + 1, Lost(name="fs", reason="exited", exit_code=1)),
                (T0 + 2, Connected(name="fs", attempt=2, tools=3, pid=43)),
            ],
            {"exit_code": None, "pid": 43, "attempt": 2},
            id="respawned-clears-exit-code",
        ),
        pytest.param(
            [ADD_FS, (T0 + 1, ToolsChanged(name="fs", added=("b",), tools=4))],
            {"tools": 4},
            id="tools-changed",
        ),
        pytest.param(
            [
                ADD_FS,
                (T0 + 1, AttemptFailed(name="fs", attempt=1, error="x")),
                (T0 + 5, Updated(name="fs", changed=("args",), endpoint="python -m y")),
            ],
            {
                "state": "connecting",
                "attempt": 0,
                "error": "",
                "endpoint": "python -m y",
                "transport": "stdio",
                "since": T0 + 5,
            },
            id="updated-restarts",
        ),
    ],
)
def test_reducer_follows_a_connection_through_its_states(
    steps: list[tuple[float, Event]], expected: dict[str, object]
) -> None:
    for as_dicts in (False, True):  # the socket's dicts fold exactly like events
        hud = fold(*steps, as_dicts=as_dicts)
        (row,) = hud.rows.values()
        assert {k: getattr(row, k) for k in expected} == expected


def test_removed_drops_the_row_and_logs_it() -> None:
    hud = fold(ADD_FS, ADD_WEB, (T0 + 1, Removed(name="fs")))
    assert list(hud.rows) == ["web"]
    assert hud.log[-1].text == "fs: removed"


def test_log_lines_say_what_happened() -> None:
    hud = fold(
        ADD_FS,
        (T0 + 1, Connected(name="fs", attempt=1, tools=2, pid=7, elapsed=0.25)),
        (T0 + 2, Lost(name="fs", reason="EOF\ntrace", exit_code=-9, uptime=1.0)),
        (T0 + 3, ServerStderr(name="fs", line="boom\x1b[31m", suppressed=2)),
        (T0 + 4, CallFailed(name="fs", tool="echo", duration=0.5, error="gone")),
        (T0 + 5, ConfigRejected(file="s.lua", line=3, message="bad\nx")),
    )
    texts = [(line.level, line.text) for line in hud.log]
    assert texts == [
        ("info", "fs: added (stdio python -m fs)"),
        ("ok", "fs: connected in 0.25 s (attempt 1, 2 tools, pid 7)"),
        ("warn", "fs: disconnected after 1.00 s, exit code -9: EOF"),
        ("stderr", "fs: stderr: boom\x1b[31m (2 lines suppressed)"),
        ("error", "fs: call echo failed after 0.50 s: gone"),
        ("error", "s.lua:3: bad (config not applied; nothing changed)"),
    ]


def test_a_crash_looping_server_s_stderr_is_news_once_per_outage() -> None:
    """A server that fails at every start says the same at every try (every
    3 s, forever) and pushed everything else out of the log (found by an
    audit): the same line again in one outage is retry detail (`debug`,
    shown by `v`); a new line is news, and so is everything once connected."""
    fail = AttemptFailed(name="fs", attempt=1, error="exited with code 3")
    said = ServerStderr(name="fs", line="fatal: missing API key")
    hud = fold(
        ADD_FS,
        (T0 + 1, said),
        (T0 + 1, fail),
        (T0 + 4, said),
        (T0 + 4, dataclasses.replace(fail, attempt=2)),
        (T0 + 5, ServerStderr(name="fs", line="fatal: bad config")),
        (T0 + 6, Connected(name="fs", attempt=3, tools=1, pid=7, elapsed=0.1)),
        (T0 + 7, said),
    )
    stderr = [(line.level, line.text) for line in hud.log if "stderr" in line.text]
    assert stderr == [
        ("stderr", "fs: stderr: fatal: missing API key"),
        ("debug", "fs: stderr: fatal: missing API key"),
        ("stderr", "fs: stderr: fatal: bad config"),
        ("stderr", "fs: stderr: fatal: missing API key"),
    ]


def test_unknown_event_kinds_are_logged_not_fatal() -> None:
    hud = HudState()
    event = event_from_dict({"kind": "brand_new", "name": "fs", "time": T0, "x": 1})
    hud.apply(event, now=T0)
    assert hud.log[-1].text == "fs: brand_new x=1"
    assert hud.rows == {}


def test_seed_takes_a_status_snapshot() -> None:
    hud = HudState()
    hud.seed(
        typed(
            [
                {
                    "name": "web",
                    "transport": "http",
                    "state": "reconnecting",
                    "attempt": 4,
                    "tools": 0,
                    "error": "refused\nline two",
                    "next_retry_in": 1.5,
                    "since": T0 - 30,
                    "pid": None,
                    "exit_code": None,
                    "enabled": True,
                },
                {"name": "off", "state": "disabled", "enabled": False, "since": T0},
                {"name": "busy", "state": "reconnecting", "next_retry_in": None},
            ]
        ),
        now=T0,
    )
    web, off, busy = hud.rows["web"], hud.rows["off"], hud.rows["busy"]
    assert (web.error, web.next_retry_at, web.since) == ("refused", T0 + 1.5, T0 - 30)
    assert countdown(web, T0 + 0.25) == "1.2s"
    assert (off.state, off.enabled) == ("disabled", False)
    assert countdown(busy, T0) == "trying"


def test_rows_sort_trouble_first_then_by_name_and_filter() -> None:
    hud = HudState()
    states = {"a": "connected", "b": "reconnecting", "c": "disabled", "d": "connecting"}
    hud.seed(typed([{"name": n, "state": s} for n, s in states.items()]), now=T0)
    hud.rows["a"].error = ""
    hud.rows["b"].error = "connection refused"
    assert [r.name for r in hud.sorted_rows()] == ["b", "d", "a", "c"]
    assert [r.name for r in hud.sorted_rows("REFUSED")] == ["b"]
    assert [r.name for r in hud.sorted_rows("conn")] == ["b", "d", "a"]


def test_a_config_error_stays_in_the_footer_until_a_later_load() -> None:
    hud = fold((T0, ConfigLoaded(file="startup.lua")))
    assert footer_lines(hud)[0] == ("config startup.lua ✔ loaded 22:13:20", "green")
    hud.apply(ConfigRejected(file="startup.lua", line=12, message="oops"), T0 + 1)
    broken = footer_lines(hud)[0]
    assert broken[1] == "bold red"
    assert broken[0].startswith("config ✖ startup.lua:12: oops — not applied")
    hud.apply(Connecting(name="x", attempt=1), T0 + 2)  # anything else: still there
    assert footer_lines(hud)[0] == broken
    hud.apply(stamped(ConfigLoaded(file="startup.lua"), T0 + 3), T0 + 3)
    assert footer_lines(hud)[0][0] == "config startup.lua ✔ loaded 22:13:23"


def test_the_footer_names_the_http_endpoint_the_daemon_serves() -> None:
    hud = HudState()
    hud.set_info(DaemonInfo(endpoint="http://127.0.0.1:8080/mcp"))
    assert ("endpoint http://127.0.0.1:8080/mcp", "cyan") in footer_lines(hud)[1]
    hud.set_info(DaemonInfo())  # no --listen
    assert not any("endpoint" in text for text, _ in footer_lines(hud)[1])


def test_the_footer_says_how_many_stdio_servers_wait_to_start() -> None:
    hud = HudState()
    hud.set_info(DaemonInfo(starts=StartSlots(slots=2, starting=2, waiting=28)))
    assert ("28 waiting to start (2 at a time)", "yellow") in footer_lines(hud)[1]
    hud.set_info(DaemonInfo(starts=StartSlots(slots=2, starting=1, waiting=0)))
    assert not any("waiting" in text for text, _ in footer_lines(hud)[1])


def test_lag_is_counted_and_asks_for_a_fresh_snapshot() -> None:
    hud = HudState()
    hud.apply(Lagged(name="hud", dropped=17, time=T0), T0)
    assert (hud.hud_dropped, hud.resync_needed) == (17, True)
    hud.set_info(DaemonInfo(dropped={"hud": 17, "control": 3}))
    assert footer_lines(hud)[1][1] == ("dropped 20 (this HUD 17)", "yellow")
    hud.seed([], T0)
    assert hud.resync_needed is False


OTLP = {"endpoint": "http://localhost:4317", "protocol": "grpc"}


@pytest.mark.parametrize(
    ("info", "shown"),
    [
        ({}, ("otlp: off", "dim")),
        ({"otlp": "off"}, ("otlp: off", "dim")),
        (
            {"otlp": {**OTLP, "ok": None}},
            ("otlp: grpc http://localhost:4317 · no export yet", "dim"),
        ),
        (
            {"otlp": {**OTLP, "ok": True, "exports": 12}},
            ("otlp: grpc http://localhost:4317 ✔ 12 exports", "green"),
        ),
        (
            {"otlp": {**OTLP, "ok": False, "failures": 3, "last_error": "UNAVAILABLE"}},
            ("otlp: grpc http://localhost:4317 ✖ failing (3×): UNAVAILABLE", "red"),
        ),
        ({"otlp": "exporter crashed: error"}, ("otlp: exporter crashed: error", "red")),
    ],
)
def test_the_footer_shows_the_otlp_status_when_the_daemon_has_one(
    info: dict[str, object], shown: tuple[str, str]
) -> None:
    hud = HudState()
    hud.set_info(DaemonInfo.from_dict(info))  # as the attached HUD reads it
    assert footer_lines(hud)[1][0] == shown


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.9, "59s"), (185, "3m05s"), (7500, "2h05m"), (273600, "3d04h")],
)
def test_age_is_short(seconds: float, text: str) -> None:
    assert age(seconds) == text


@pytest.mark.parametrize(
    ("width", "keys"),
    [
        (80, "name state attempt retry tools for error"),
        (100, "name state transport attempt retry tools for exit error"),
        (120, "name state transport attempt retry tools for pid exit error"),
    ],
)
def test_columns_fit_the_width(width: int, keys: str) -> None:
    columns = layout(width, ["a-long-name"])
    assert " ".join(c.key for c, _ in columns) == keys
    assert sum(size for _, size in columns) + 2 * (len(columns) - 1) == width
    assert columns[0][1] == len("a-long-name")


def test_a_wide_terminal_shows_long_names_and_the_whole_tools_cell() -> None:
    """A 63-character name was cut at 28 even at 230 columns, and `5 ⚠1 1
    held` to `5 ⚠1…` at every width (found by an audit)."""
    long = "a-really-long-connection-name-" + "x" * 33
    held = "5 ⚠1 1 held"
    wide = {c.key: size for c, size in layout(230, [long], len(held))}
    assert wide["name"] == 230 // 4 and wide["tools"] == len(held)
    narrow = {c.key: size for c, size in layout(80, [long], len(held))}
    assert narrow["name"] == 28 and narrow["tools"] == len(held)
    assert layout(80, ["fs"], 2) == layout(80, ["fs"])  # 5 at least, as before


# ------------------------------------------------------------ one-shot table

STATUS: list[dict[str, object]] = [
    {
        "name": "fs",
        "transport": "stdio",
        "endpoint": "python -m fs",
        "state": "connected",
        "attempt": 1,
        "tools": 12,
        "error": None,
        "next_retry_in": None,
        "since": T0 - 100,
        "pid": 4242,
        "exit_code": None,
    },
    {
        "name": "web",
        "transport": "http",
        "endpoint": "http://127.0.0.1:9/mcp",
        "state": "reconnecting",
        "attempt": 41,
        "tools": 0,
        "error": "connection refused (127.0.0.1:9)\ntraceback …",
        "next_retry_in": 2.5,
        "since": T0 - 500,
        "pid": None,
        "exit_code": None,
    },
    {
        "name": "flaky",
        "transport": "stdio",
        "endpoint": "python -m flaky",
        "state": "reconnecting",
        "attempt": 2,
        "tools": 3,
        "error": "process exited with code -9",
        "next_retry_in": None,
        "since": T0 - 1,
        "pid": None,
        "exit_code": -9,
    },
]

INFO = DaemonInfo(
    config="startup.lua",
    last_reload=LastReload(
        ok=False,
        time=T0 - 5,
        file="startup.lua",
        line=12,
        message="mcp_add('web'): bad URL",
    ),
    dropped={"control": 0},
)


def recorded(renderable: object, width: int) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def test_status_table_snapshot() -> None:
    text = recorded(render_status(typed(STATUS), T0, info=INFO, width=120), 120)
    assert text == SNAPSHOT_120


SNAPSHOT_120 = """\
NAME   STATE           TRANSPORT  ATTEMPT   RETRY  TOOLS     FOR      PID  EXIT  LAST ERROR
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
flaky  ↻ reconnecting  stdio            2  trying      3      1s             -9  process exited with code -9
web    ↻ reconnecting  http            41    2.5s          8m20s                 connection refused (127.0.0.1:9)
fs     ● connected     stdio                          12   1m40s     4242
config ✖ startup.lua:12: mcp_add('web'): bad URL — not applied, running set unchanged (22:13:15)
otlp: off │ dropped 0 │ 3 connections: ● 1 connected  ↻ 2 reconnecting"""  # noqa: E501


def test_status_table_drops_columns_on_a_narrow_terminal() -> None:
    text = recorded(render_status(typed(STATUS), T0, width=80), 80)
    header = text.splitlines()[0].split()
    assert header == [
        "NAME",
        "STATE",
        "ATTEMPT",
        "RETRY",
        "TOOLS",
        "FOR",
        "LAST",
        "ERROR",
    ]
    assert "connection refused" in text  # wrapped in its column, not lost
    assert all(len(line) <= 80 for line in text.splitlines())


# ------------------------------------------------------------ headless app


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeBackend:
    """What the keys act on, recording every request."""

    rows: list[dict[str, object]] = field(default_factory=list)
    reloads: int = 0
    reload_error: ConfigError | None = None
    reconnects: list[str] = field(default_factory=list)
    snapshots: int = 0
    decided: list[tuple[str, str, str]] = field(default_factory=list)

    async def decide(self, approval: str, verdict: str, scope: str) -> None:
        self.decided.append((approval, verdict, scope))

    async def snapshot(self) -> Snapshot:
        self.snapshots += 1
        return Snapshot(typed(self.rows), DaemonInfo(config="startup.lua"))

    async def info(self) -> DaemonInfo:
        return DaemonInfo(config="startup.lua")

    async def reload(self) -> ReloadSummary:
        self.reloads += 1
        if self.reload_error is not None:
            raise self.reload_error
        return ReloadSummary(
            file="startup.lua", added=("x",), unchanged=2, connections=3
        )

    async def reconnect(self, server: str) -> ReconnectReply:
        self.reconnects.append(server)
        return ReconnectReply(server=server, retrying=True)

    async def details(self, server: str) -> ConnectionDetails:
        if server != "api":
            raise UnknownServer(f"no connection named {server!r}")
        spec = parse_spec(
            "api",
            {
                "url": "https://user:hunter2@api.example/mcp",
                "headers": {"Authorization": "Bearer sekrit-token"},
            },
        )
        return ConnectionDetails(
            spec=spec_summary(spec),
            stderr=("listening", "ready"),
            tools=("search", "fetch"),
        )


@dataclass
class Rig:
    bus: EventBus
    backend: FakeBackend
    clock: Clock
    app: HudApp
    pilot: Pilot[str]

    def publish(self, *events: Event) -> None:
        for event in events:
            self.bus.publish(event)

    def frame(self, advance: float = 0.0) -> None:
        """Move the clock and run one frame now (no waiting on the timer)."""
        self.clock.now += advance
        self.app.frame()

    async def screen(self) -> str:
        """The screen once textual has drawn everything pending."""
        await self.pilot.pause()
        return screen_text(self.app)


_SVG_TEXT = re.compile(
    r'<text[^>]*? x="([\d.]+)"[^>]*?clip-path="url\(#[\w-]+-line-(\d+)\)"[^>]*>'
    r"([^<]*)</text>"
)
_SVG_CELL = 12.2
"""Width of one cell in textual's SVG screenshots (0.61 × its 20 px font)."""


def screen_text(app: HudApp) -> str:
    """The screen as plain text lines, rebuilt from textual's own screenshot."""
    rows: dict[int, dict[int, str]] = {}
    for x, line, text in _SVG_TEXT.findall(app.export_screenshot()):
        rows.setdefault(int(line), {})[round(float(x) / _SVG_CELL)] = html.unescape(
            text
        ).replace("\xa0", " ")
    out = []
    for line in range(max(rows, default=-1) + 1):
        chars: list[str] = []
        for col, text in sorted(rows.get(line, {}).items()):
            chars.extend(" " * (col - len(chars)))
            chars[col:] = list(text)
        out.append("".join(chars).rstrip())
    return "\n".join(out)


@contextlib.asynccontextmanager
async def rig(
    size: tuple[int, int] = (120, 30),
    maxlen: int = 10_000,
    bus_clock: Callable[[], float] | None = None,
    info: DaemonInfo | None = None,
) -> AsyncIterator[Rig]:
    clock = Clock()
    bus = EventBus(clock=bus_clock or clock)
    backend = FakeBackend()
    with bus.subscribe("hud", maxlen) as sub:
        app = HudApp(
            backend,
            SubscriptionFeed(sub),
            initial=Snapshot(
                [], info or DaemonInfo(config="startup.lua", version="9.9")
            ),
            clock=clock,
        )
        async with app.run_test(size=size, notifications=True) as pilot:
            yield Rig(bus, backend, clock, app, pilot)


def fleet() -> list[Event]:
    return [
        Added(name="fs", transport="stdio", endpoint="python -m fs"),
        Connecting(name="fs", attempt=1),
        Connected(name="fs", attempt=1, tools=12, pid=4242),
        Added(name="web", transport="http", endpoint="http://127.0.0.1:9/mcp"),
        Connecting(name="web", attempt=1),
        AttemptFailed(name="web", attempt=1, error="connection refused\ntrace"),
        Reconnecting(name="web", attempt=2, delay=3.0),
    ]


@pytest.mark.anyio
async def test_hud_shows_state_changes_from_bus_events() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.frame()
        table = r.app.table
        assert table.names == ["web", "fs"]  # trouble first
        assert table.cell("fs", "state") == "● connected"
        assert table.cell("fs", "tools") == "12"
        assert table.cell("fs", "pid") == "4242"
        assert table.cell("web", "state") == "↻ reconnecting"
        assert table.cell("web", "error") == "connection refused"
        assert table.cell("web", "retry") == "3.0s"

        r.publish(Connecting(name="web", attempt=2))
        r.frame(3.0)
        assert table.cell("web", "retry") == "trying"
        r.publish(Connected(name="web", attempt=2, tools=1))
        r.frame(0.2)
        assert table.names == ["fs", "web"]
        assert table.cell("web", "error") == ""
        assert table.cell("web", "for") == "0s"

        screen = await r.screen()
        assert "● connected" in screen and "↻" not in screen
        assert "web: connected in 0.00 s (attempt 2, 1 tools)" in screen
        assert "config startup.lua" in screen and "otlp: off" in screen


@pytest.mark.anyio
async def test_a_call_waiting_for_approval_has_a_prompt_row_and_keys() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.frame()
        assert "approve?" not in await r.screen()
        for approval, tool in (("id1", "write_file"), ("id2", "delete")):
            r.publish(
                ApprovalAsked(
                    name="fs",
                    tool=tool,
                    approval=approval,
                    client="claude-code",
                    rule="startup.lua:6",
                    arguments='{"path": "/etc/hosts", "token": "***"}',
                    deadline=r.clock() + 60,
                )
            )
        r.frame()
        screen = await r.screen()
        assert "approve? fs.write_file by claude-code" in screen
        assert "startup.lua:6" in screen and "(1 more waiting)" in screen
        assert '"token": "***"' in screen
        await r.pilot.press("a")  # the oldest: allowed once
        await r.pilot.pause()
        assert r.backend.decided == [("id1", "allow", "once")]
        r.publish(
            ApprovalDecided(
                name="fs", tool="write_file", verdict="allow", by="hud", approval="id1"
            )
        )
        r.frame()
        assert "approve? fs.delete" in await r.screen()
        await r.pilot.press("d")
        await r.pilot.pause()
        assert r.backend.decided[-1] == ("id2", "deny", "once")
        r.frame()
        assert "approve?" not in await r.screen()
        await r.pilot.press("A")  # nothing waits: said, nothing sent
        await r.pilot.pause()
        assert len(r.backend.decided) == 2


@pytest.mark.anyio
async def test_the_footer_says_where_the_endpoint_and_its_token_are() -> None:
    info = DaemonInfo(
        config="startup.lua",
        endpoint="http://127.0.0.1:8765/mcp",
        endpoint_token="/state/endpoint-token",
    )
    async with rig(info=info) as r:
        r.publish(*fleet())
        r.frame()
        screen = await r.screen()
        footer = "endpoint http://127.0.0.1:8765/mcp │ token /state/endpoint-token"
        assert footer in screen
    open_info = DaemonInfo(
        config="startup.lua",
        endpoint="http://127.0.0.1:8765/mcp",
        endpoint_token="none (--no-token)",
    )
    async with rig(info=open_info) as r:
        r.frame()
        assert "no token: any local process may call" in await r.screen()


@pytest.mark.anyio
async def test_countdown_ticks_on_its_own() -> None:
    # Real time on the bus: the frame timer moves the countdown.
    async with rig(bus_clock=time.time) as r:
        r.clock.now = time.time()
        r.publish(*fleet())
        r.frame()
        first = float(r.app.table.cell("web", "retry").rstrip("s"))
        r.clock.now += 0.3
        frames = r.app.frames
        with anyio.fail_after(5):
            while r.app.frames < frames + 2:  # two timer frames, no manual ones
                await r.pilot.pause()
        assert float(r.app.table.cell("web", "retry").rstrip("s")) <= first - 0.3
        assert f"{r.app.table.cell('web', 'retry')}" in await r.screen()


@pytest.mark.anyio
async def test_error_lines_show_their_first_line_only() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.publish(
            AttemptFailed(name="web", attempt=2, error="\n  TLS handshake failed\nx")
        )
        r.frame()
        assert r.app.table.cell("web", "error") == "TLS handshake failed"
        screen = await r.screen()
        assert "TLS handshake failed" in screen and "\nx" not in screen
        assert "web: connect failed (attempt 2): TLS handshake failed" in screen


@pytest.mark.anyio
async def test_a_lagging_hud_shows_what_it_lost_and_resyncs() -> None:
    async with rig(maxlen=10) as r:
        r.backend.rows = [{"name": "fs", "state": "connected", "tools": 5}]
        r.publish(*[Connecting(name="fs", attempt=i) for i in range(1, 51)])
        r.frame()  # the queue held 10 of the 50: it lost 40
        assert r.app.hud.hud_dropped == 40
        with anyio.fail_after(5):
            while r.backend.snapshots == 0:
                await r.pilot.pause()
        r.frame()
        assert r.app.table.cell("fs", "tools") == "5"
        screen = await r.screen()
        assert "dropped 40 (this HUD 40)" in screen
        assert "the HUD fell behind and lost 40 events" in screen


@pytest.mark.anyio
async def test_a_config_error_is_shown_until_fixed() -> None:
    async with rig() as r:
        r.publish(
            ConfigRejected(file="startup.lua", line=7, message="command is empty")
        )
        r.frame()
        assert "config ✖ startup.lua:7: command is empty" in await r.screen()
        r.publish(ConfigLoaded(file="startup.lua", unchanged=2))
        r.frame()
        screen = await r.screen()
        assert "config ✖" not in screen and "config startup.lua ✔ loaded" in screen


@pytest.mark.anyio
async def test_on_a_short_terminal_the_footer_keeps_to_two_lines() -> None:
    """At 45x12 the footer wrapped to three or four lines and the log had
    none left (found by an audit): there it is cut, not wrapped."""
    long = "mcp_add('web'): bad URL 'htp://x': use http://HOST[:PORT]/PATH"
    async with rig(size=(45, 12)) as r:
        r.publish(*fleet())
        r.publish(ConfigRejected(file="startup.lua", line=12, message=long))
        r.frame()
        screen = await r.screen()
        assert r.app.query_one("#status").size.height == 2
        assert "config ✖ startup.lua:12: mcp_add" in screen  # cut, still there
        assert "otlp:" in screen  # the second line is not pushed out
    async with rig(size=(45, 30)) as r:  # a tall one: the error wraps whole
        r.publish(*fleet())
        r.publish(ConfigRejected(file="startup.lua", line=12, message=long))
        r.frame()
        await r.screen()
        assert r.app.query_one("#status").size.height > 2


@pytest.mark.anyio
async def test_c_reconnects_the_selected_connection() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.frame()
        await r.pilot.press("down")  # cursor from web (first row) to fs
        assert r.app.table.selected == "fs"
        await r.pilot.press("c")
        await r.pilot.pause()
        await r.app.workers.wait_for_complete()
        assert r.backend.reconnects == ["fs"]
        # The cursor follows fs when fs moves to the top of the table.
        r.publish(Lost(name="fs", reason="exited", exit_code=-9))
        r.frame()
        assert r.app.table.names[0] == "fs" and r.app.table.selected == "fs"
        await r.pilot.press("c")
        await r.pilot.pause()
        await r.app.workers.wait_for_complete()
        assert r.backend.reconnects == ["fs", "fs"]


@pytest.mark.anyio
async def test_slash_filters_as_you_type_and_escape_clears() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.frame()
        await r.pilot.press("slash", "f", "s")
        assert r.app.table.names == ["fs"]  # at once, not at the next frame
        assert "filter 'fs': 1 of 2" in await r.screen()
        await r.pilot.press("q")  # typed into the filter: does not quit
        assert r.app.is_running and r.app.filter == "fsq"
        await r.pilot.press("escape")
        assert r.app.table.names == ["web", "fs"] and r.app.filter == ""


@pytest.mark.anyio
async def test_enter_shows_details_with_secrets_masked() -> None:
    async with rig(size=(120, 50)) as r:
        r.publish(
            Added(name="api", transport="http", endpoint="https://api.example/mcp"),
            AttemptFailed(name="api", attempt=1, error="HTTP 401", exit_code=None),
        )
        r.frame()
        await r.pilot.press("enter")
        with anyio.fail_after(5):
            while not isinstance(r.app.screen, DetailsScreen):
                await r.pilot.pause()
        screen = await r.screen()
        for shown in ("api: details", "HTTP 401", "search, fetch", "ready", "***"):
            assert shown in screen
        assert "hunter2" not in screen and "sekrit" not in screen
        # It follows the row while open (it kept saying attempt 1: an audit).
        r.publish(AttemptFailed(name="api", attempt=2, error="HTTP 503"))
        r.frame()
        details = r.app.screen
        assert isinstance(details, DetailsScreen) and "attempt 1" in details.body.plain
        details.redraw()  # what its timer does every second
        assert "attempt 2" in details.body.plain
        await r.pilot.press("c")  # reconnect from the details screen too
        await r.app.workers.wait_for_complete()
        assert r.backend.reconnects == ["api"]
        await r.pilot.press("escape")
        assert not isinstance(r.app.screen, DetailsScreen)


@pytest.mark.anyio
async def test_a_failing_action_is_reported_and_the_hud_goes_on() -> None:
    async with rig() as r:
        r.publish(Added(name="boom", transport="http", endpoint="http://h/mcp"))
        r.frame()
        r.backend.details = broken  # type: ignore[method-assign]
        await r.pilot.press("enter")
        await r.app.workers.wait_for_complete()
        assert r.app.is_running
        assert "details failed unexpectedly; see the log" in await r.screen()


async def broken(server: str) -> ConnectionDetails:
    raise RuntimeError("a bug")


@pytest.mark.anyio
async def test_v_shows_every_retry_in_the_log() -> None:
    async with rig() as r:
        r.publish(*fleet())
        r.publish(AttemptFailed(name="web", attempt=2, error="connection refused"))
        r.frame()
        quiet = r.app.log_view.lines
        assert not any("retry" in line or "connecting (" in line for line in quiet)
        assert sum("web: connect failed" in line for line in quiet) == 1  # not news
        await r.pilot.press("v")
        loud = r.app.log_view.lines
        assert any("web: retry 2 in 3.00 s" in line for line in loud)
        assert sum("web: connect failed" in line for line in loud) == 2
        assert "all events" in await r.screen()


@pytest.mark.anyio
async def test_m_mutes_the_selected_connections_chatter_in_the_log() -> None:
    """One chatty server's stderr filled the log, and `/` filters rows only
    (found by an audit): `m` leaves the selected connection's stderr out of
    the log, and its state changes in; `m` again shows them."""
    async with rig() as r:
        r.publish(*fleet())
        r.frame()
        await r.pilot.press("down")
        assert r.app.table.selected == "fs"
        r.publish(ServerStderr(name="fs", line="chatter 1"))
        r.publish(ServerStderr(name="web", line="other server"))
        r.frame()
        assert any("chatter 1" in line for line in r.app.log_view.lines)
        await r.pilot.press("m")
        r.publish(ServerStderr(name="fs", line="chatter 2"))
        r.publish(Lost(name="fs", reason="exited", exit_code=-9))
        r.frame()
        shown = r.app.log_view.lines
        assert not any("chatter" in line for line in shown)
        assert any("other server" in line for line in shown)
        assert any("fs: lost" in line or "exited" in line for line in shown)
        assert "muted: fs" in await r.screen()  # said, not only done (an audit)
        await r.pilot.press("m")
        assert any("chatter 2" in line for line in r.app.log_view.lines)
        r.frame()
        assert "muted:" not in await r.screen()


@pytest.mark.anyio
@pytest.mark.parametrize(("state", "frames"), [("busy", 0), ("lost", 0)])
async def test_a_stalled_terminal_skips_frames_and_a_lost_one_ends_the_hud(
    state: str, frames: int
) -> None:
    feed = QueueFeed()
    terminal = ["ok"]
    app = HudApp(FakeBackend(), feed, terminal_state=lambda: terminal[0])
    async with app.run_test() as pilot:
        drawn = app.frames
        terminal[0] = state
        app.frame()
        assert app.frames == drawn + frames
        if state == "busy":
            assert app.skipped_frames == 1 and app.is_running
        else:
            with anyio.fail_after(5):
                while app.is_running:
                    await pilot.pause()
    if state == "lost":
        assert app.return_value == "hangup"


def test_a_hung_up_terminal_loses_output_instead_of_raising() -> None:
    master, slave = os.openpty()
    terminal = TerminalFile(open_terminal(slave))
    try:
        terminal.write("frame 1")
        assert os.read(master, 100) == b"frame 1" and not terminal.lost
        os.close(master)  # the terminal window is closed
        assert terminal.write("frame 2") == len("frame 2")
        assert terminal.lost
    finally:
        terminal.close()
        os.close(slave)


def test_a_closing_hud_waits_for_a_stalled_terminal_only_briefly() -> None:
    master, slave = os.openpty()
    terminal = TerminalFile(open_terminal(slave), close_grace=0.05)
    terminal.closing = True
    try:
        started = time.monotonic()
        terminal.write("x" * 1_000_000)  # nobody reads the terminal
        assert time.monotonic() - started < 3 and terminal.lost
    finally:
        terminal.close()
        os.close(slave)
        os.close(master)


@pytest.mark.anyio
async def test_r_reloads_and_a_bad_script_is_reported() -> None:
    async with rig() as r:
        await r.pilot.press("r")
        await r.app.workers.wait_for_complete()
        await r.pilot.pause()
        # The sentence of the `config_loaded` event, as the log and the CLI say it.
        toast = " ".join(
            line.split("▌", 1)[1].strip()
            for line in (await r.screen()).splitlines()
            if "▌" in line
        )  # the notification wraps inside its box
        assert (
            "config loaded from startup.lua: 1 added (x), 0 removed, 0 changed, "
            "2 unchanged" in toast
        )
        r.backend.reload_error = ConfigError("command is empty", file="s.lua", line=3)
        await r.pilot.press("r")
        await r.app.workers.wait_for_complete()
        await r.pilot.pause()
        assert r.backend.reloads == 2
        assert "s.lua:3: command is empty" in await r.screen()


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_q_and_ctrl_c_quit(key: str) -> None:
    async with rig() as r:
        await r.pilot.press(key)
        with anyio.fail_after(5):
            while r.app.is_running:
                await r.pilot.pause()
    assert r.app.return_value == "quit"


@pytest.mark.anyio
async def test_an_unreachable_daemon_is_shown_and_a_snapshot_reattaches() -> None:
    clock = Clock()
    feed = QueueFeed()
    app = HudApp(FakeBackend(), feed, attached=True, clock=clock)
    async with app.run_test(size=(100, 20)):
        endpoint = "http://127.0.0.1:8765/mcp"
        info = DaemonInfo(pid=11, endpoint=endpoint)
        feed.queue.put(Snapshot(typed([{"name": "fs", "state": "connected"}]), info))
        app.frame()
        assert endpoint in screen_text(app)
        feed.queue.put(Unreachable("no socket there"))
        app.frame()
        screen = screen_text(app)
        assert "daemon unreachable, retrying" in screen
        assert "daemon unreachable: no socket there" in screen
        # The footer's facts were the gone daemon's.
        assert endpoint not in screen
        assert "daemon pid 11 unreachable: rows are as it last said" in screen
        assert app.table.stale
        feed.queue.put(
            Snapshot(typed([{"name": "fs", "state": "connected"}]), DaemonInfo(pid=12))
        )
        app.frame()
        screen = screen_text(app)
        assert "attached to daemon pid 11" in screen
        assert "reattached to daemon pid 12" in screen
        assert "unreachable, retrying" not in screen.splitlines()[0]
        assert not app.table.stale


@pytest.mark.anyio
async def test_three_hundred_rows_draw_only_what_is_on_screen() -> None:
    async with rig(size=(100, 24)) as r:
        for i in range(300):
            name = f"srv-{i:03d}"
            r.publish(Added(name=name, transport="http", endpoint="http://h/mcp"))
            r.publish(AttemptFailed(name=name, attempt=1, error="refused"))
            r.publish(Reconnecting(name=name, attempt=2, delay=3.0))
        r.frame()
        assert len(r.app.table.names) == 300
        await r.pilot.press("end")
        assert r.app.table.selected == "srv-299"
        assert "srv-299" in await r.screen()


# ------------------------------------------------------------ output capture


def test_capture_routes_logging_and_fd2_into_the_hud_and_restores_them() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    log = logging.getLogger("manager.test_hud")
    log.setLevel(logging.INFO)
    with OutputCapture(exclusive=True) as capture:
        assert root.handlers != before
        log.warning("disk %s", "full")
        # The log sink's lines about events: the HUD shows the events instead.
        sink = LogSink(EventBus())
        sink.handle(stamped(Lost(name="fs", reason="exited", exit_code=-9), T0))
        sink.close()  # flushes the held-back failure line (a WARNING)
        os.write(2, b"native library says hi\n")
        deadline = time.monotonic() + 5
        notes: list[Note] = []
        while len(notes) < 2 and time.monotonic() < deadline:
            notes += list(capture.poll(100))
            time.sleep(0.01)
    assert root.handlers == before
    texts = sorted(n.text for n in notes)
    assert texts == [
        "WARNING manager.test_hud: disk full",
        "stderr ▏ native library says hi",
    ]


@contextlib.contextmanager
def the_only_handler(handler: logging.Handler) -> Iterator[None]:
    """`handler` is the root logger's one handler meanwhile (as the daemon's
    is when a HUD starts)."""
    root = logging.getLogger()
    saved = list(root.handlers)
    for old in saved:
        root.removeHandler(old)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for old in saved:
            root.addHandler(old)


def test_capture_shows_what_was_logged_before_the_hud_took_the_terminal() -> None:
    """The daemon's handler keeps its last records; a HUD started after them
    shows them in its log (found by an audit: they were only under the
    HUD's screen), and does not write them to the terminal a second time."""
    out = io.StringIO()
    log = logging.getLogger("manager.test_hud")
    with the_only_handler(RecentStreamHandler(out)):
        log.warning("config warning before the HUD")
        log.error("fs: removed", extra={"mcp_event": object()})  # an event's
        with OutputCapture(exclusive=True) as capture:
            notes = list(capture.poll(10))
    assert [n.text for n in notes] == [
        "WARNING manager.test_hud: config warning before the HUD"
    ]
    assert out.getvalue().count("config warning before the HUD") == 1


def test_the_lines_of_events_before_the_hud_subscribed_are_in_its_log() -> None:
    """'offline: connect failed (attempt 1)' came before the HUD subscribed:
    it never sees that event, so its line is shown (it was left out, as if
    the HUD showed the event); a later event's line is not (it does)."""
    log = logging.getLogger("manager.test_hud")
    with the_only_handler(RecentStreamHandler(io.StringIO())):
        before, after = SimpleNamespace(seq=4), SimpleNamespace(seq=5)
        log.warning("offline: connect failed", extra={"mcp_event": before})
        log.warning("web: connect failed", extra={"mcp_event": after})
        with OutputCapture(exclusive=True, events_from=5) as capture:
            # The log sink lags behind the bus: an early event's line may
            # come once the HUD runs, and is kept then too.
            log.warning("fs: added", extra={"mcp_event": SimpleNamespace(seq=2)})
            log.warning("db: added", extra={"mcp_event": SimpleNamespace(seq=9)})
            notes = list(capture.poll(10))
    assert [n.text for n in notes] == [
        "WARNING manager.test_hud: offline: connect failed",
        "WARNING manager.test_hud: fs: added",
    ]


def test_capture_replays_what_the_hud_never_showed() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    root = logging.getLogger()
    keep = Keep()
    saved = list(root.handlers)
    for handler in saved:
        root.removeHandler(handler)
    root.addHandler(keep)
    try:
        with OutputCapture(exclusive=True) as capture:
            log = logging.getLogger("manager.test_hud")
            log.error("stopping: closing 3")  # logged, never shown: replayed
            log.error("fs: removed", extra={"mcp_event": object()})  # shown: not
            capture.hold()  # the daemon is stopping: event lines replay too
            log.error("web: removed", extra={"mcp_event": object()})
            assert list(capture.poll(10)) == []
    finally:
        root.removeHandler(keep)
        for handler in saved:
            root.addHandler(handler)
    assert records == ["stopping: closing 3", "web: removed"]


# ------------------------------------------------------------ inline runner


class FakeDaemon:
    """The part of `Daemon` that `run_inline` uses, over a real bus."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.options = type("Options", (), {"socket": Path("/tmp/x.sock")})()

    def status(self) -> list[ConnectionStatus]:
        return [ConnectionStatus("fs", state="connecting")]

    def info(self) -> DaemonInfo:
        return DaemonInfo(config="startup.lua", pid=os.getpid())

    def reconnect(self, server: str) -> ReconnectReply:
        return ReconnectReply(server=server, retrying=False)

    def details(self, server: str) -> ConnectionDetails:
        return ConnectionDetails()

    def decide(
        self, approval: str, verdict: str, scope: str, by: str = "cli"
    ) -> object:
        return None

    async def reload(self) -> ReloadSummary:
        return ReloadSummary()


@pytest.mark.anyio
async def test_inline_hud_quit_stops_the_daemon_and_stop_closes_the_hud() -> None:
    daemon = FakeDaemon()
    stop = anyio.Event()
    seen: list[str] = []

    async def drive(pilot: Pilot[object]) -> None:
        app = pilot.app
        assert isinstance(app, HudApp)
        daemon.bus.publish(Connected(name="fs", attempt=1, tools=2))
        logging.getLogger("manager.test_hud").warning("into the HUD log")
        with anyio.fail_after(5):
            while "into the HUD log" not in " ".join(app.log_view.lines):
                await pilot.pause()
        seen.append(app.table.cell("fs", "state"))
        await pilot.press("q")

    await run_inline(
        daemon, stop, run_app=lambda app: app.run_async(headless=True, auto_pilot=drive)
    )
    assert seen == ["● connected"] and stop.is_set()
    assert daemon.bus.subscriber_names == ()  # its subscription is gone

    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run_inline(
                daemon, stop, run_app=lambda app: app.run_async(headless=True)
            )
        )
        stop.set()  # SIGINT/SIGTERM from outside: the HUD closes itself


# ------------------------------------------------------------ attached reader


@dataclass
class StatusBackend:
    """A daemon stand-in for the control server."""

    bus: EventBus = field(default_factory=EventBus)

    def status(self) -> list[ConnectionStatus]:
        return [ConnectionStatus("fs", state="connected")]

    def info(self) -> DaemonInfo:
        return DaemonInfo(pid=7)

    def subscribe(self, name: str) -> object:
        return self.bus.subscribe(name)


def take(feed: QueueFeed, kind: type, within: float = 5.0) -> object:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            item = feed.queue.get(timeout=0.05)
            if isinstance(item, kind):
                return item
    raise TimeoutError(f"no {kind.__name__} in the feed")


def test_attached_reader_survives_a_daemon_restart() -> None:
    path = Path(tempfile.mkdtemp(prefix="mm-", dir="/tmp")) / "control.sock"
    feed = QueueFeed()
    reader = AttachedReader(ControlClient(path), feed, retry=0.05)
    reader.start()
    try:
        assert "no socket there" in str(take(feed, Unreachable))
        for _ in range(2):  # the daemon starts, stops, starts again
            backend = StatusBackend()
            with anyio.from_thread.start_blocking_portal("asyncio") as portal:
                future, _ = portal.start_task(serve_control, backend, path)
                snapshot = take(feed, Snapshot)
                assert isinstance(snapshot, Snapshot)
                assert snapshot.rows == backend.status()
                assert snapshot.info == DaemonInfo(pid=7)
                portal.call(backend.bus.publish, Connecting(name="fs", attempt=9))
                event = take(feed, Connecting)  # typed at the socket edge
                assert isinstance(event, Connecting) and event.attempt == 9
                future.cancel()
            assert isinstance(take(feed, Unreachable), Unreachable)
    finally:
        reader.stop()
        path.unlink(missing_ok=True)
        path.parent.rmdir()


# ------------------------------------------------------------ layering


@pytest.mark.parametrize("module", ["state", "view", "feed"])
def test_the_reducer_and_its_views_import_neither_rich_nor_textual(
    module: str,
) -> None:
    path = Path(__file__).parent.parent.parent / "manager" / "hud" / f"{module}.py"
    tree = ast.parse(path.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
    }
    assert not imported & {"rich", "textual", "anyio"}


# ------------------------------------------------------------ command line


def test_hud_needs_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hud", "--socket", str(tmp_path / "x.sock")]) == 2
    assert "hud needs a terminal" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "tty", "term", "shown"),
    [
        (["run"], True, "xterm", True),
        (["run", "--no-hud"], True, "xterm", False),
        (["run"], False, "xterm", False),
        (["run"], True, "dumb", False),
    ],
)
def test_run_shows_the_hud_only_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    tty: bool,
    term: str,
    shown: bool,
) -> None:
    from manager.cli import commands as cli

    monkeypatch.setattr(sys.stdin, "isatty", lambda: tty)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    monkeypatch.setenv("TERM", term)
    args = cli.build_parser().parse_args(argv)
    assert cli.hud_wanted(args) is shown


# ------------------------------------------------------------ end to end


def write_script(path: Path, *names: str) -> Path:
    command, args = raw_command()
    lines = [
        f"mcp_add({json.dumps(n)}, {{command = {json.dumps(command)}, "
        f"args = {{{', '.join(json.dumps(a) for a in args)}}}}})"
        for n in names
    ]
    lines.append('mcp_add("down", "http://127.0.0.1:9/mcp")')
    path.write_text("\n".join(lines) + "\n")
    return path


IMPORTS = """
import json, sys
from manager.cli import main
heavy = {{'textual', 'rich', 'mcp', 'lupa', 'opentelemetry'}}
# Ours that a snapshot needs not: the event types (32 dataclasses, about 25 ms)
# and the state machine come with the first event a HUD folds.
folding = {{'manager.core.events', 'manager.core.state', 'manager.hud.folding'}}
for argv in (["status", "--json"], ["status"]):  # in this order: json loads less
    rc = main([*argv, "--socket", {socket!r}])
    tops = {{m.split('.')[0] for m in sys.modules}}
    loaded = sorted((tops & heavy) | (set(sys.modules) & folding))
    print(json.dumps([argv, rc, loaded]), file=sys.stderr)
"""


@pytest.mark.usefixtures("no_leaked_children")
def test_status_table_against_a_real_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with DaemonThread(write_script(tmp_path / "startup.lua", "fast")) as daemon:
        daemon.wait_event("connected", "fast")
        daemon.wait_event("connect_failed", "down")
        assert main(["status", "--socket", str(daemon.socket)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split()[:4] == ["NAME", "STATE", "TRANSPORT", "ATTEMPT"]
        assert lines[2].startswith("down ") and "↻ reconnecting" in lines[2]
        assert "connection refused" in lines[2]
        assert lines[3].startswith("fast ") and "● connected" in lines[3]
        assert lines[4].startswith("config ") and "✔ loaded" in lines[4]
        assert "2 connections: ● 1 connected  ↻ 1 reconnecting" in lines[5]

        details = daemon.client.details("fast")
        assert sorted(details.tools) == ["crash", "echo", "pid"]
        assert details.spec["transport"] == "stdio"

        code = IMPORTS.format(socket=str(daemon.socket))
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
        )
        assert [json.loads(line) for line in proc.stderr.splitlines()] == [
            [["status", "--json"], 0, []],
            [["status"], 0, ["rich"]],  # the table needs rich, never textual
        ]


def read_until(fd: int, buffer: bytearray, needle: bytes, within: float) -> None:
    deadline = time.monotonic() + within
    while needle not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{needle!r} not on screen:\n{buffer[-3000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                buffer += os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                raise TimeoutError(f"{needle!r} not on screen") from None


@pytest.mark.usefixtures("no_leaked_children")
def test_run_on_a_terminal_shows_the_hud_and_q_stops_the_daemon(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "startup.lua", "fast")
    sock = Path(tempfile.mkdtemp(prefix="mm-", dir="/tmp")) / "control.sock"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "manager", "run", str(script), "--socket", str(sock)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color", "OTEL_SDK_DISABLED": "true"},
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()
    try:
        read_until(master, screen, "● connected".encode(), 30)
        read_until(master, screen, b"connection refused", 10)
        hud_from = screen.index(b"\x1b[?1049h")  # the HUD's own screen
        os.kill(proc.pid, signal.SIGHUP)  # the daemon logs a line: into the HUD
        read_until(master, screen, b"INFO manager: SIGHUP: reloading", 10)
        os.write(master, b"q")
        assert proc.wait(timeout=15) == 0
        with contextlib.suppress(TimeoutError):
            read_until(master, screen, b"stopped", 5)
        hud_to = screen.index(b"\x1b[?1049l")
        # While the HUD owned the terminal, no log line was printed across it
        # (the text formatter's "INFO    logger:"); after it, they are again.
        assert b"INFO    manager" not in screen[hud_from:hud_to]
        assert b"INFO    manager: stopped" in screen[hud_to:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        sock.unlink(missing_ok=True)
        sock.parent.rmdir()


def test_upstream_log_messages_are_detail_unless_severe() -> None:
    hud = fold(
        (T0, ServerLog(name="fs", level="info", data="cache warm")),
        (T0 + 1, ServerLog(name="fs", level="error", logger="db", data="disk full")),
        (T0 + 2, ResourceUpdated(name="fs", uri="file:///x")),
    )
    assert [(line.level, line.text) for line in hud.log] == [
        ("debug", "fs: log info: cache warm"),
        ("warn", "fs: log error db: disk full"),
        ("debug", "fs: resource updated: file:///x"),
    ]


def test_the_header_says_the_filter_an_unreachable_daemon_and_needs_login() -> None:
    hud = HudState()
    hud.seed(
        typed(
            [
                {"name": "a", "state": "connected"},
                {"name": "b", "state": "needs_login", "error": "no token"},
            ]
        ),
        T0,
    )
    text = "".join(
        part
        for part, _ in header_cells(
            hud, T0, needle="a", shown=1, unreachable=True, verbose=True
        )
    )
    assert "● 1" in text and "⚿ 1" in text  # needs_login is counted too
    assert "filter 'a': 1 of 2" in text
    assert "daemon unreachable, retrying" in text and "all events" in text
    row = hud.rows["b"]
    assert row.error == "run: mcp-manager login b (no token)"


def test_a_refused_connection_sorts_first_and_says_how_to_try_again() -> None:
    from manager.core.events import AttemptFailed, Refused

    hud = HudState()
    hud.seed(
        typed(
            [
                {"name": "a", "state": "connected"},
                {"name": "b", "state": "refused", "error": "no scope after 3 logins"},
            ]
        ),
        T0,
    )
    assert [row.name for row in hud.sorted_rows()] == ["b", "a"]
    text = "".join(part for part, _ in header_cells(hud, T0))
    assert "⊘ 1" in text
    expected = "no scope after 3 logins (to try again run: mcp-manager login b)"
    assert hud.rows["b"].error == expected
    hud.apply(
        AttemptFailed(name="a", attempt=1, error="x", error_type="AuthMismatch"),
        T0,
    )
    hud.apply(
        Refused(name="a", reason="metadata for another resource", command="c"), T0
    )
    assert hud.rows["a"].state == "refused"
    assert "to try again run: mcp-manager login a" in hud.rows["a"].error
    assert cells(hud.rows["a"], T0)["state"][0].startswith("⊘")
    levels = [line.level for line in hud.log]
    assert levels[-2:] == ["debug", "error"]  # the refused line says it all


def test_the_attempt_count_goes_once_a_connection_is_stable() -> None:
    hud = HudState()
    hud.apply(Connected(name="a", attempt=4, tools=1, stable_after=10.0), T0)
    assert cells(hud.rows["a"], T0 + 5)["attempt"] == ("4", "yellow")  # flapping
    assert cells(hud.rows["a"], T0 + 10)["attempt"] == ("", "")  # stable now


def test_details_name_the_protocol_revision_and_its_era() -> None:
    state = HudState()
    state.apply(
        Connected(name="new", attempt=1, tools=1, protocol="2026-07-28"), now=1.0
    )
    state.apply(
        Connected(name="old", attempt=1, tools=1, protocol="2025-06-18"), now=1.0
    )
    new = details_text(state.rows["new"], ConnectionDetails(), now=2.0).plain
    old = details_text(state.rows["old"], ConnectionDetails(), now=2.0).plain
    assert "MCP 2026-07-28 (stateless era)" in new
    assert "MCP 2025-06-18 (handshake era)" in old


def test_details_show_the_last_calls_failures_in_red() -> None:
    calls = (
        {"time": 0.0, "client": "claude", "tool": "echo", "outcome": "ok",
         "error": "", "duration": 0.004},
        {"time": 1.0, "client": "cli", "tool": "fail", "outcome": "failed",
         "error": "CallTimeout", "duration": 30.0},
    )  # fmt: skip
    text = details_text(None, ConnectionDetails(calls=calls), now=2.0)
    plain = text.plain
    assert "last calls (2)" in plain
    assert "echo  ok  4 ms  claude" in plain
    assert "fail  failed CallTimeout  30000 ms  cli" in plain
    failed = plain.index("fail  failed")
    assert any(
        span.start <= failed < span.end and "red" in str(span.style)
        for span in text.spans
    )
    assert "last calls" not in details_text(None, ConnectionDetails(), 2.0).plain


def test_the_footer_says_which_clients_are_attached_to_which_profile() -> None:
    hud = HudState()
    assert not any("attached" in text for text, _ in footer_lines(hud)[1])
    hud.set_info(
        DaemonInfo(
            attached=(
                AttachedClient("coding", "code", 11, 0.0),
                AttachedClient("", "claude", 12, 0.0),
                AttachedClient("coding", "cursor", 13, 0.0),
            )
        )
    )
    spans = footer_lines(hud)[1]
    assert ("attached 3: all ← claude; coding ← code, cursor", "cyan") in spans
    header = "".join(text for text, _ in header_cells(hud, 0.0))
    assert "attached 3: all ← claude; coding ← code, cursor" in header


def test_a_changed_tool_marks_the_row_and_its_details_until_approved() -> None:
    state = HudState()
    state.apply(Added(name="gh", transport="stdio", endpoint="gh-server"), now=1.0)
    state.apply(ToolChanged(name="gh", item="create_issue", held=True), now=2.0)
    state.apply(ToolChanged(name="gh", item="list_repos"), now=2.0)
    row = state.rows["gh"]
    assert tools_cell(row) == ("⚠2 1 held", "bold yellow")
    body = details_text(row, ConnectionDetails(), now=3.0).plain
    assert (
        "⚠ create_issue (held back)" in body and "⚠ list_repos (still listed)" in body
    )
    assert "mcp-manager approve gh" in body
    approved = ToolsApproved(name="gh", items=("create_issue", "list_repos"))
    state.apply(approved, now=4.0)
    assert tools_cell(state.rows["gh"])[0] == ""


def test_a_snapshot_marks_what_changed_before_the_hud_looked() -> None:
    """An attached HUD, `status` and a HUD that starts over from a snapshot
    mark what changed since approved: the snapshot says so (the mark came
    only from the `tool_changed` events a HUD happened to see)."""
    state = HudState()
    state.seed(
        [
            ConnectionStatus(
                "gh",
                state="connected",
                tools=5,
                changed=("create_issue", "list_repos"),
                held=("create_issue",),
            )
        ],
        now=1.0,
    )
    assert tools_cell(state.rows["gh"]) == ("5 ⚠2 1 held", "bold yellow")


def test_each_stdio_server_shows_how_it_is_confined() -> None:
    """A confined server's transport is marked `⛨`, one that runs unconfined
    although it asked for a sandbox `!` (red); its details say which."""
    state = HudState()
    state.seed(
        typed(
            [
                {"name": "safe", "transport": "stdio", "confinement": "landlock"},
                {
                    "name": "bare",
                    "transport": "stdio",
                    "confinement": "UNCONFINED: this kernel has no Landlock",
                },
                {"name": "plain", "transport": "stdio", "confinement": "off"},
            ]
        ),
        now=1.0,
    )
    assert transport_cell(state.rows["safe"]) == ("stdio ⛨", "green")
    assert transport_cell(state.rows["bare"]) == ("stdio !", "bold red")
    assert transport_cell(state.rows["plain"]) == ("stdio", "dim")
    body = details_text(state.rows["bare"], ConnectionDetails(), now=2.0).plain
    assert "sandbox UNCONFINED: this kernel has no Landlock" in body


def test_a_newer_release_of_a_locked_launch_is_marked_until_taken() -> None:
    """Status seeds the lock; a `drift` event marks the transport `↑` (and
    the details name `update`); `updated` clears it."""
    state = HudState()
    state.seed(
        typed(
            [
                {
                    "name": "srv",
                    "transport": "stdio",
                    "confinement": "landlock",
                    "launch": "pkg 1.0.0 locked",
                }
            ]
        ),
        now=1.0,
    )
    row = state.rows["srv"]
    assert transport_cell(row) == ("stdio ⛨", "green")
    state.apply(
        LaunchLock(
            name="srv",
            change="drift",
            package="pkg",
            version="1.0.0",
            available="1.1.0",
        ),
        now=2.0,
    )
    assert transport_cell(row) == ("stdio ⛨ ↑", "yellow")
    body = details_text(row, ConnectionDetails(), now=3.0).plain
    assert "launch pkg 1.0.0 locked; 1.1.0 available (mcp-manager update srv)" in body
    state.apply(
        LaunchLock(name="srv", change="updated", package="pkg", version="1.1.0"),
        now=4.0,
    )
    assert transport_cell(row) == ("stdio ⛨", "green")
    assert (
        "launch pkg 1.1.0 locked"
        in details_text(row, ConnectionDetails(), now=5.0).plain
    )


def test_the_prompt_row_says_the_oldest_call_waiting_and_how_to_answer() -> None:
    hud = HudState()
    assert approval_cells(hud, 100.0) == []
    for approval, tool in (("id1", "write_file"), ("id2", "delete")):
        hud.apply(
            ApprovalAsked(
                name="fs",
                tool=tool,
                approval=approval,
                client="",
                rule="policy.lua:3",
                arguments='{"path": "/tmp/x"}',
                deadline=130.4,
            ),
            100.0,
        )
    text = "".join(part for part, _ in approval_cells(hud, 100.0))
    assert text == (
        " approve? fs.write_file  (policy.lua:3; 30 s left)   a allow  A always"
        '  d deny   (1 more waiting)\n   {"path": "/tmp/x"}'
    )
    assert "".join(p for p, _ in approval_cells(hud, 200.0)).count("0 s left") == 1
