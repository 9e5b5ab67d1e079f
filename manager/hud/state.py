"""`HudState`: a pure reducer from bus events to what the HUD shows.

`apply(event, now)` takes an `Event` or the dict the control socket streams for
it (`manager.core.events.event_to_dict`), so the HUD inside the daemon and the one
attached through the socket share every line of logic. `seed(rows, now)` starts
(or restarts, after a lag or a daemon restart) from a status snapshot;
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

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..core.events import Event, event_to_dict
from ..core.status import ConnectionStatus

__all__ = [
    "LOG_LINES",
    "STATE_RANK",
    "HudState",
    "LogLine",
    "ReloadResult",
    "Row",
    "first_line",
    "matches",
    "sort_rows",
]

LOG_LINES = 2000
"""Log lines kept (events, stderr, log records); older ones scroll away."""

STATE_RANK = {"reconnecting": 0, "connecting": 1, "connected": 2, "disabled": 3}
"""Sort order of rows: trouble first. Unknown states sort with `connecting`."""

_UNKNOWN_RANK = 1


def first_line(text: object) -> str:
    """The first non-empty line of `text`, stripped ("" for None)."""
    if text is None:
        return ""
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass(slots=True)
class Row:
    """What the HUD knows about one connection.

    Attributes:
        name: Connection name.
        transport: `stdio`, `http` or `sse` ("" until known).
        endpoint: The endpoint as the daemon displays it (secrets masked).
        state: `connecting`, `connected`, `reconnecting` or `disabled`.
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
    enabled: bool = True
    server: str = ""


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of the HUD's log.

    Attributes:
        time: Wall time it happened.
        level: `debug`, `info`, `ok`, `warn`, `error` or `stderr` (picks the style).
        text: The line, without the time.
    """

    time: float
    level: str
    text: str


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """The last run of startup.lua.

    Attributes:
        ok: It applied cleanly.
        time: When (wall time; 0 if unknown).
        file: The script.
        line: Line of the error, if any.
        message: The error, if any.
    """

    ok: bool
    time: float
    file: str
    line: int | None = None
    message: str = ""


def _int(value: object, default: int | None = None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _names(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _list_names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown}, +{len(names) - limit} more" if len(names) > limit else shown


def _secs(value: object) -> str:
    seconds = _num(value) or 0.0
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"


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
    """Rows sorted trouble-first (reconnecting, connecting, connected, disabled),
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
        last_reload: The last run of it, if known.
        watching: The daemon reloads the file by itself when it changes.
        otlp: The OTLP exporter status from `info`, if the daemon reports one.
        starts: stdio start slots from `info`: `slots`, `starting`, `waiting`.
        hud_dropped: Events this HUD lost by falling behind (`lagged`).
        daemon_dropped: Events dropped per subscriber, daemon-wide (`info`).
        daemon_pid: The daemon's process id, if known.
        version: The daemon's version, if known.
        resync_needed: A `lagged` event arrived: the rows may be stale until a
            fresh snapshot is seeded.
    """

    rows: dict[str, Row] = field(default_factory=dict)
    log: deque[LogLine] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    log_total: int = 0
    revision: int = 0
    config_file: str = ""
    last_reload: ReloadResult | None = None
    watching: bool = False
    otlp: object = None
    starts: Mapping[str, object] = field(default_factory=dict)
    hud_dropped: int = 0
    daemon_dropped: dict[str, int] = field(default_factory=dict)
    daemon_pid: int | None = None
    version: str = ""
    resync_needed: bool = False

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
                error=first_line(item.error),
                next_retry_at=None if retry_in is None else now + retry_in,
                trying=waiting and retry_in is None,
                since=item.since or now,
                pid=item.pid,
                exit_code=item.exit_code,
                enabled=item.enabled,
            )
        self.rows = fresh
        self.resync_needed = False
        self.revision += 1

    def set_info(self, info: Mapping[str, object]) -> None:
        """Take the daemon-wide facts of the control API's `info`."""
        self.config_file = str(info.get("config") or self.config_file)
        self.watching = bool(info.get("watching"))
        self.otlp = info.get("otlp")
        starts = info.get("starts")
        self.starts = starts if isinstance(starts, Mapping) else {}
        self.daemon_pid = _int(info.get("pid"))
        self.version = str(info.get("version") or self.version)
        dropped = info.get("dropped")
        if isinstance(dropped, Mapping):
            self.daemon_dropped = {
                str(k): v for k, v in dropped.items() if isinstance(v, int)
            }
        last = info.get("last_reload")
        if isinstance(last, Mapping):
            self.last_reload = ReloadResult(
                ok=bool(last.get("ok")),
                time=_num(last.get("time")) or 0.0,
                file=str(last.get("file") or self.config_file),
                line=_int(last.get("line")),
                message=first_line(last.get("message")),
            )

    def note(self, time: float, level: str, text: str) -> None:
        """Append a line that is not an event (a log record, a stderr line)."""
        self.log.append(LogLine(time, level, text))
        self.log_total += 1

    def apply(self, event: Event | Mapping[str, object], now: float) -> None:
        """Fold one event in.

        Args:
            event: An `Event`, or its `event_to_dict` form from the socket.
            now: The current wall time, used when the event carries none.
        """
        ev: Mapping[str, object] = (
            event_to_dict(event) if isinstance(event, Event) else event
        )
        kind = str(ev.get("kind", ""))
        name = str(ev.get("name") or "")
        at = _num(ev.get("time")) or now
        handler = _HANDLERS.get(kind)
        if handler is None:
            extra = " ".join(
                f"{k}={first_line(v)}"
                for k, v in ev.items()
                if k not in ("seq", "time", "kind", "name") and v not in (None, "")
            )
            self.note(at, "info", f"{name} {kind} {extra}".strip())
            return
        handler(self, name, ev, at)

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

    def _row(self, name: str, at: float) -> Row:
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = Row(name=name, since=at)
        self.revision += 1
        return row


def _added(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    transport, endpoint = str(ev.get("transport") or ""), str(ev.get("endpoint") or "")
    hud.rows[name] = Row(name=name, transport=transport, endpoint=endpoint, since=at)
    hud.revision += 1
    hud.note(at, "info", f"{name} added ({transport} {endpoint})".strip())


def _updated(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    old = hud.rows.get(name)
    endpoint = str(ev.get("endpoint") or (old.endpoint if old else ""))
    transport = old.transport if old else ""
    changed = _names(ev.get("changed"))
    if "transport" in changed:
        transport = ""  # the next snapshot tells; the event does not carry it
    hud.rows[name] = Row(name=name, transport=transport, endpoint=endpoint, since=at)
    hud.revision += 1
    what = ", ".join(changed) or "spec"
    hud.note(at, "info", f"{name} {what} changed; restarting")


def _connecting(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    row = hud._row(name, at)
    row.attempt = _int(ev.get("attempt"), row.attempt + 1) or 0
    row.next_retry_at = None
    row.trying = True
    row.pid = None
    hud.note(at, "debug", f"{name} connecting (attempt {row.attempt})")


def _connected(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    row = hud._row(name, at)
    row.state = "connected"
    row.attempt = _int(ev.get("attempt"), row.attempt) or 0
    row.tools = _int(ev.get("tools"), row.tools) or 0
    row.error = ""
    row.next_retry_at = None
    row.trying = False
    row.since = at
    row.pid = _int(ev.get("pid"))
    row.exit_code = None  # a new process (stdio) or no process at all
    server = f"{ev.get('server_name') or ''} {ev.get('server_version') or ''}"
    row.server = server.strip()
    details = [f"attempt {row.attempt}", f"{row.tools} tools"]
    if row.pid is not None:
        details.append(f"pid {row.pid}")
    elapsed = _secs(ev.get("elapsed"))
    hud.note(at, "ok", f"{name} connected in {elapsed} ({', '.join(details)})")


def _failed(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    row = hud._row(name, at)
    error = first_line(ev.get("error")) or "connect failed"
    # The noise bound of the log sink: an outage's first failure and each new
    # error are news; the same error again is retry detail (`debug`).
    news = row.state != "reconnecting" or error != row.error
    if row.state != "reconnecting":
        row.since = at
    row.state = "reconnecting"
    row.attempt = _int(ev.get("attempt"), row.attempt) or 0
    row.error = error
    row.exit_code = _int(ev.get("exit_code"))
    row.trying = False
    row.pid = None
    code = f", exit {row.exit_code}" if row.exit_code is not None else ""
    hud.note(
        at,
        "error" if news else "debug",
        f"{name} connect failed (attempt {row.attempt}{code}): {row.error}",
    )


def _lost(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    row = hud._row(name, at)
    row.state = "reconnecting"
    row.since = at
    row.error = first_line(ev.get("reason")) or "disconnected"
    row.exit_code = _int(ev.get("exit_code"))
    row.trying = False
    row.pid = None
    uptime = _num(ev.get("uptime"))
    after = f" after {_secs(uptime)}" if uptime else ""
    code = f" (exit {row.exit_code})" if row.exit_code is not None else ""
    hud.note(at, "warn", f"{name} disconnected{after}{code}: {row.error}")


def _reconnecting(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    row = hud._row(name, at)
    row.state = "reconnecting"
    nxt = _int(ev.get("attempt"))
    if nxt is not None:
        row.attempt = max(0, nxt - 1)  # `attempt` is the next try's number
    delay = _num(ev.get("delay")) or 0.0
    row.next_retry_at = at + delay
    row.trying = False
    hud.note(at, "debug", f"{name} retry {nxt} in {delay:.2f} s")


def _tools_changed(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    row = hud._row(name, at)
    row.tools = _int(ev.get("tools"), row.tools) or 0
    parts = []
    if added := _names(ev.get("added")):
        parts.append(f"+{_list_names(added)}")
    if removed := _names(ev.get("removed")):
        parts.append(f"-{_list_names(removed)}")
    changes = " ".join(parts) or "changed"
    hud.note(at, "info", f"{name} tools {changes} (now {row.tools})")


def _removed(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    if hud.rows.pop(name, None) is not None:
        hud.revision += 1
    hud.note(at, "info", f"{name} removed")


def _stderr(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    suppressed = _int(ev.get("suppressed"), 0) or 0
    note = f" ({suppressed} lines suppressed)" if suppressed else ""
    hud.note(at, "stderr", f"{name} ▏ {str(ev.get('line', '')).rstrip()}{note}")


def _config_loaded(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    file = str(ev.get("file") or hud.config_file)
    hud.config_file = hud.config_file or file
    hud.last_reload = ReloadResult(ok=True, time=at, file=file)
    parts = []
    for what in ("added", "removed", "changed"):
        names = _names(ev.get(what))
        parts.append(
            f"{len(names)} {what}" + (f" ({_list_names(names)})" if names else "")
        )
    parts.append(f"{_int(ev.get('unchanged'), 0)} unchanged")
    hud.note(at, "ok", f"config loaded from {file}: {', '.join(parts)}")


def _config_error(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    file = str(ev.get("file") or hud.config_file)
    line = _int(ev.get("line"))
    message = first_line(ev.get("message"))
    hud.last_reload = ReloadResult(
        ok=False, time=at, file=file, line=line, message=message
    )
    where = f"{file}:{line}" if line else file
    hud.note(at, "error", f"{where}: {message} (config not applied; nothing changed)")


def _hook_error(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    file, line = str(ev.get("file") or ""), _int(ev.get("line"))
    where = f"{file}:{line}" if line else file
    hook = ev.get("hook") or "?"
    message = first_line(ev.get("message"))
    hud.note(at, "error", f"Lua callback for {hook} failed: {where}: {message}")


def _call_started(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    hud.note(at, "debug", f"{name} call {ev.get('tool')} started")


def _call_finished(
    hud: HudState, name: str, ev: Mapping[str, object], at: float
) -> None:
    took = _num(ev.get("duration")) or 0.0
    if ev.get("is_error"):
        hud.note(at, "warn", f"{name} call {ev.get('tool')} returned a tool error")
    else:
        hud.note(at, "info", f"{name} call {ev.get('tool')} finished in {took:.3f} s")


def _call_failed(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    took = _num(ev.get("duration")) or 0.0
    error = first_line(ev.get("error"))
    hud.note(
        at, "error", f"{name} call {ev.get('tool')} failed after {took:.2f} s: {error}"
    )


def _lagged(hud: HudState, name: str, ev: Mapping[str, object], at: float) -> None:
    lost = _int(ev.get("dropped"), 0) or 0
    hud.hud_dropped += lost
    hud.resync_needed = True
    hud.note(
        at,
        "warn",
        f"the HUD fell behind and lost {lost} events; refreshing from a snapshot",
    )


_HANDLERS = {
    "added": _added,
    "updated": _updated,
    "connecting": _connecting,
    "connected": _connected,
    "connect_failed": _failed,
    "disconnected": _lost,
    "reconnecting": _reconnecting,
    "tools_changed": _tools_changed,
    "removed": _removed,
    "stderr": _stderr,
    "config_loaded": _config_loaded,
    "config_error": _config_error,
    "hook_error": _hook_error,
    "call_started": _call_started,
    "call_finished": _call_finished,
    "call_failed": _call_failed,
    "lagged": _lagged,
}
