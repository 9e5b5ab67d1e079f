"""`HudState`: what the HUD shows, folded from bus events.

`apply(event, now)` takes an `Event`: the HUD inside the daemon gets them from
the bus, the one attached through the socket decodes them with
`manager.core.events.event_from_dict`, so both share every line of logic, and
each log line is `manager.core.describe.describe(event)`, the sentence the
daemon log and `mcp-manager events` print too. One handler per kind of event
does the folding (`hud.folding`, loaded with the first event: the status
table, which only reads a snapshot, loads no event type). `seed(rows, now)`
starts (or restarts, after a lag or a daemon restart) from a status snapshot;
`set_info(info)` takes the daemon-wide facts of the control API's `info`.

The reducer mirrors the daemon's state machine (`manager.core.state`) closely enough
that a snapshot taken later agrees with it: `connecting` is only the first try
after a connection was declared, every failure moves it to `reconnecting`, and
`attempt` counts tries since the connection was last stable.

Times: `now` and event `time`s are wall-clock seconds; when an event carries a
time, that time wins (a countdown is measured from when the daemon decided the
delay, not from when the HUD heard of it). No clock is read here.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.info import (
    OTLP_OFF,
    AttachedClient,
    DaemonInfo,
    LastReload,
    OtlpStatus,
    StartSlots,
)
from ..core.status import ConnectionStatus
from ..core.text import first_line, login_command

if TYPE_CHECKING:  # types only: the handlers (`folding`) load the events
    from ..core.events import ApprovalAsked, Event

__all__ = [
    "LOG_LINES",
    "STATE_RANK",
    "HudState",
    "LogLine",
    "Row",
    "matches",
    "refused_error",
    "sort_rows",
]

LOG_LINES = 2000
"""Log lines kept (events, stderr, log records); older ones scroll away."""

SAID_LINES = 200
"""A connection's stderr lines remembered during an outage (`Row.said`)."""

STATE_RANK = {
    "needs_login": 0,
    "refused": 0,
    "reconnecting": 0,
    "connecting": 1,
    "connected": 2,
    "idle": 2,
    "disabled": 3,
}
"""Sort order of rows: trouble first. Unknown states sort with `connecting`."""

_UNKNOWN_RANK = 1


@dataclass(slots=True)
class Row:
    """What the HUD knows about one connection.

    Attributes:
        name: Connection name.
        transport: `stdio`, `http` or `sse` ("" until known).
        endpoint: The endpoint as the daemon displays it (secrets masked).
        state: `connecting`, `connected`, `reconnecting`, `needs_login`,
            `refused`, `idle` or `disabled`.
        attempt: Tries since the connection was last stable.
        tools: Tool count of the current (or last) session.
        error: First line of the last error; "" once connected.
        next_retry_at: Wall time of the next try while waiting, else None.
        trying: A try is in flight right now.
        since: Wall time of the last state change.
        pid: stdio server process id while it runs.
        exit_code: Last exit code of the stdio server, until it is respawned.
        enabled: False for connections declared with `enabled = false`.
        server: Upstream server name and version, from the last `connected`.
        protocol: MCP revision of the current (or last) session.
        confinement: How a stdio server runs (`ConnectionStatus.confinement`).
        launch: Its launch lock (`ConnectionStatus.launch`), kept current by
            `launch_lock` events.
        changed: Definitions that differ from their pins, not approved yet
            (`tool_changed`), by name; held back ones marked True.
        stable_after: Seconds connected after which its attempt count is
            shown no more (the connection's `stable_after`).
        said: The stderr lines it wrote since it was last connected (at
            most `SAID_LINES`): said again at the next try, one is retry
            detail (`debug`), not news.
    """

    name: str
    transport: str = ""
    endpoint: str = ""
    state: str = "connecting"
    attempt: int = 0
    tools: int = 0
    error: str = ""
    next_retry_at: float | None = None
    trying: bool = False
    since: float = 0.0
    pid: int | None = None
    exit_code: int | None = None
    changed: dict[str, bool] = field(default_factory=dict)
    enabled: bool = True
    server: str = ""
    protocol: str = ""
    confinement: str = ""
    launch: str = ""
    stable_after: float = 10.0
    said: set[str] = field(default_factory=set)

    @property
    def drift(self) -> bool:
        """A newer release of its locked launch waits for `update`."""
        return self.launch.endswith(" available")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of the HUD's log.

    Attributes:
        time: Wall time it happened.
        level: `debug`, `info`, `ok`, `warn`, `error` or `stderr` (picks the style).
        text: The line, without the time.
        source: See below.
    """

    time: float
    level: str
    text: str
    source: str = ""
    """The connection whose chatter it is (its stderr, its log messages):
    what `m` mutes in the HUD; "" for every other line."""


def _row_error(item: ConnectionStatus) -> str:
    """The error column: for a connection waiting for the user, what to run."""
    if item.state == "needs_login":
        return f"run: {login_command(item.name)} ({first_line(item.error)})"
    if item.state == "refused":
        return refused_error(item.name, item.error)
    return first_line(item.error)


def refused_error(name: str, error: object) -> str:
    """The error column of a connection that stopped asking for logins."""
    return f"{first_line(error)} (to try again run: {login_command(name)})"


def matches(row: Row, needle: str) -> bool:
    """Whether the filter `needle` (case-insensitive substring) selects `row`.

    It is looked for in the name, state, transport, endpoint and error.
    """
    if not needle:
        return True
    needle = needle.lower()
    return any(
        needle in text.lower()
        for text in (row.name, row.state, row.transport, row.endpoint, row.error)
    )


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows sorted trouble-first (needs_login and reconnecting, connecting,
    connected, disabled),
    then by name, so a row only moves when its state class changes."""
    return sorted(rows, key=lambda r: (STATE_RANK.get(r.state, _UNKNOWN_RANK), r.name))


@dataclass
class HudState:
    """Everything the HUD shows, folded from events. Not thread-safe: one owner.

    Attributes:
        rows: One row per declared connection, by name.
        log: The most recent log lines, oldest first.
        log_total: Lines ever appended (lets a view find the new ones).
        revision: Bumped whenever a row is added, removed or changes state or
            content (lets a view skip re-sorting when nothing happened).
        config_file: The daemon's startup.lua.
        last_reload: The last run of it, if known (its message's first line).
        watching: The daemon reloads the file by itself when it changes.
        otlp: The OTLP exporter status from `info` (`"off"` if none).
        starts: The stdio start slots from `info`.
        attached: The clients attached through `mcp-manager attach`.
        endpoint: The daemon's HTTP endpoint (`--listen`), if it serves one.
        endpoint_token: Where that endpoint's bearer token is (never the token).
        hud_dropped: Events this HUD lost by falling behind (`lagged`).
        daemon_dropped: Events dropped per subscriber, daemon-wide (`info`).
        daemon_pid: The daemon's process id, if known.
        version: The daemon's version, if known.
        resync_needed: A `lagged` event arrived: the rows may be stale until a
            fresh snapshot is seeded.
        approvals: The calls waiting for the user's answer (`mcp_policy`
            `ask`), by approval id, oldest first.
    """

    rows: dict[str, Row] = field(default_factory=dict)
    log: deque[LogLine] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    log_total: int = 0
    revision: int = 0
    config_file: str = ""
    last_reload: LastReload | None = None
    watching: bool = False
    otlp: OtlpStatus | str = OTLP_OFF
    starts: StartSlots = field(default_factory=StartSlots)
    attached: tuple[AttachedClient, ...] = ()
    endpoint: str | None = None
    endpoint_token: str | None = None
    hud_dropped: int = 0
    daemon_dropped: dict[str, int] = field(default_factory=dict)
    daemon_pid: int | None = None
    version: str = ""
    resync_needed: bool = False
    approvals: dict[str, ApprovalAsked] = field(default_factory=dict)

    # --- inputs ---------------------------------------------------------------

    def seed(self, rows: Iterable[ConnectionStatus], now: float) -> None:
        """Replace every row with a status snapshot.

        Args:
            rows: The snapshot, one status per connection.
            now: When it was taken (for `next_retry_in`).
        """
        fresh: dict[str, Row] = {}
        for item in rows:
            if not item.name:
                continue
            retry_in = item.next_retry_in
            waiting = item.state in ("connecting", "reconnecting")
            fresh[item.name] = Row(
                name=item.name,
                transport=item.transport,
                endpoint=item.endpoint,
                state=item.state,
                attempt=item.attempt,
                tools=item.tools,
                error=_row_error(item),
                next_retry_at=None if retry_in is None else now + retry_in,
                trying=waiting and retry_in is None,
                since=item.since or now,
                pid=item.pid,
                exit_code=item.exit_code,
                enabled=item.enabled,
                protocol=item.protocol,
                confinement=item.confinement,
                launch=item.launch,
                changed={name: name in item.held for name in item.changed},
            )
        self.rows = fresh
        self.resync_needed = False
        self.revision += 1

    def set_info(self, info: DaemonInfo) -> None:
        """Take the daemon-wide facts of the control API's `info`."""
        self.config_file = info.config or self.config_file
        self.watching = info.watching
        self.otlp = info.otlp
        self.starts = info.starts
        self.attached = info.attached
        self.endpoint = info.endpoint
        self.endpoint_token = info.endpoint_token
        self.daemon_pid = info.pid
        self.version = info.version or self.version
        self.daemon_dropped = dict(info.dropped)
        last = info.last_reload
        if last is not None:
            self.last_reload = LastReload(
                ok=last.ok,
                time=last.time,
                file=last.file or self.config_file,
                line=last.line,
                message=first_line(last.message),
            )

    def note(self, time: float, level: str, text: str, source: str = "") -> None:
        """Append a line to the log (`source`: the connection it is chatter of)."""
        self.log.append(LogLine(time, level, text, source))
        self.log_total += 1

    def apply(self, event: Event, now: float) -> None:
        """Fold one event in.

        Args:
            event: An `Event`; the attached HUD decodes the socket's with
                `event_from_dict`, so both HUDs see the same types.
            now: The current wall time, used when the event carries none.
        """
        _fold()(self, event, event.time or now)

    # --- reading --------------------------------------------------------------

    def sorted_rows(self, needle: str = "") -> list[Row]:
        """The rows to show: filtered by `needle`, trouble first."""
        return sort_rows(r for r in self.rows.values() if matches(r, needle))

    def counts(self) -> dict[str, int]:
        """How many connections are in each state."""
        out: dict[str, int] = {}
        for row in self.rows.values():
            out[row.state] = out.get(row.state, 0) + 1
        return out

    def dropped_total(self) -> int:
        """Events dropped daemon-wide (every subscriber), or this HUD's if more."""
        return max(sum(self.daemon_dropped.values()), self.hud_dropped)

    # --- helpers for the handlers ---------------------------------------------

    def row(self, name: str, at: float) -> Row:
        """The row of `name` (made at `at` if new), counted as changed."""
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = Row(name=name, since=at)
        self.revision += 1
        return row


@functools.cache
def _fold() -> Callable[[HudState, Event, float], None]:
    """`folding.fold`, imported with the first event (the event types come
    with it); cached, so an event pays no import statement."""
    from .folding import fold

    return fold
