"""How each event changes what the HUD shows: one handler per kind of event.

`fold(hud, event, at)` is what `HudState.apply` runs. Apart from `state`, so
that what only reads a snapshot (the CLI's status table, `render`) loads no
event type: the events and their sentences (`core.describe`) come in with
the first event a HUD folds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.describe import describe
from ..core.events import (
    Added,
    ApprovalAsked,
    ApprovalDecided,
    AttemptFailed,
    AuthStep,
    CallFailed,
    CallFinished,
    CallStarted,
    ConfigLoaded,
    ConfigRejected,
    Connected,
    Connecting,
    Event,
    HookFailed,
    Idle,
    Lagged,
    LaunchLock,
    Lost,
    NeedsLogin,
    Reconnecting,
    Refused,
    Removed,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
    ToolChanged,
    ToolsApproved,
    ToolsChanged,
    Updated,
)
from ..core.info import LastReload
from ..core.launch import lock_line
from ..core.state import AUTH_MISMATCH, AUTHORIZATION_REFUSED, LOGIN_REQUIRED
from ..core.text import first_line
from .state import SAID_LINES, HudState, Row, refused_error

__all__ = ["fold"]

_WAITS_FOR_USER = frozenset({LOGIN_REQUIRED, AUTHORIZATION_REFUSED, AUTH_MISMATCH})
"""`error_type`s after which a connection waits for the user."""


# --- one handler per event -------------------------------------------------------

Handler = Callable[[HudState, Any, float], str | None]
"""Folds one kind of event into the HUD; returns the level its log line goes
out at (None: no line)."""

_HANDLERS: dict[type[Event], Handler] = {}

_LEVELS: dict[type[Event], str] = {
    ServerStderr: "stderr",
    HookFailed: "error",
    CallStarted: "debug",
    CallFailed: "error",
    ResourceUpdated: "debug",
}
"""The level of the events that change nothing in the HUD: their line is all
they do. Any other event without a handler is logged at `info`."""


def _on(*kinds: type[Event]) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for kind in kinds:
            _HANDLERS[kind] = handler
        return handler

    return register


def fold(hud: HudState, event: Event, at: float) -> None:
    """Fold `event` into `hud` and log its sentence at the HUD's level for it."""
    handler = _HANDLERS.get(type(event))
    level = handler(hud, event, at) if handler else _LEVELS.get(type(event), "info")
    if level is not None:
        chatter = isinstance(event, ServerStderr | ServerLog)
        hud.note(at, level, describe(event), event.name if chatter else "")


@_on(Added)
def _added(hud: HudState, event: Added, at: float) -> str:
    hud.rows[event.name] = Row(
        name=event.name, transport=event.transport, endpoint=event.endpoint, since=at
    )
    hud.revision += 1
    return "info"


@_on(Updated)
def _updated(hud: HudState, event: Updated, at: float) -> str:
    old = hud.rows.get(event.name)
    transport = old.transport if old else ""
    if "transport" in event.changed:
        transport = ""  # the next snapshot tells; the event does not carry it
    endpoint = event.endpoint or (old.endpoint if old else "")
    hud.rows[event.name] = Row(
        name=event.name, transport=transport, endpoint=endpoint, since=at
    )
    hud.revision += 1
    return "info"


@_on(Connecting)
def _connecting(hud: HudState, event: Connecting, at: float) -> str:
    row = hud.row(event.name, at)
    row.attempt = event.attempt or row.attempt + 1
    row.next_retry_at = None
    row.trying = True
    row.pid = None
    return "debug"


@_on(Connected)
def _connected(hud: HudState, event: Connected, at: float) -> str:
    row = hud.row(event.name, at)
    row.state = "connected"
    row.attempt = event.attempt
    row.stable_after = event.stable_after
    row.tools = event.tools
    row.error = ""
    row.next_retry_at = None
    row.trying = False
    row.since = at
    row.pid = event.pid
    row.exit_code = None  # a new process (stdio) or no process at all
    row.server = f"{event.server_name} {event.server_version}".strip()
    row.protocol = event.protocol
    row.said.clear()
    return "ok"


@_on(ServerStderr)
def _server_stderr(hud: HudState, event: ServerStderr, at: float) -> str:
    # A server that fails at every start says the same at every try (every
    # 3 s, forever): the outage's first saying is news, the same line again
    # retry detail (`debug`), as a connect error repeated is.
    row = hud.rows.get(event.name)
    if row is None or row.state == "connected":
        return "stderr"
    if event.line in row.said:
        return "debug"
    if len(row.said) < SAID_LINES:
        row.said.add(event.line)
    return "stderr"


@_on(AttemptFailed)
def _attempt_failed(hud: HudState, event: AttemptFailed, at: float) -> str:
    row = hud.row(event.name, at)
    error = first_line(event.error) or "connect failed"
    # The noise bound of the log sink: an outage's first failure and each
    # new error are news; the same error again is retry detail (`debug`).
    news = row.state != "reconnecting" or error != row.error
    level = "error" if news else "debug"
    if event.error_type in _WAITS_FOR_USER:
        level = "debug"  # the needs_login/refused line that follows says it
    if row.state != "reconnecting":
        row.since = at
    row.state = "reconnecting"
    row.attempt = event.attempt
    row.error = error
    row.exit_code = event.exit_code
    row.trying = False
    row.pid = None
    return level


@_on(Lost)
def _lost(hud: HudState, event: Lost, at: float) -> str:
    row = hud.row(event.name, at)
    row.state = "reconnecting"
    row.since = at
    row.error = first_line(event.reason) or "disconnected"
    row.exit_code = event.exit_code
    row.trying = False
    row.pid = None
    return "warn"


@_on(Reconnecting)
def _reconnecting(hud: HudState, event: Reconnecting, at: float) -> str:
    row = hud.row(event.name, at)
    row.state = "reconnecting"
    row.attempt = max(0, event.attempt - 1)  # `attempt` is the next try's
    row.next_retry_at = at + event.delay
    row.trying = False
    return "debug"


def _stopped(hud: HudState, name: str, at: float, state: str, error: str) -> None:
    """`name` waits in `state` (not trying, no process) with `error` shown."""
    row = hud.row(name, at)
    row.state = state
    row.since = at
    row.error = error
    row.next_retry_at = None
    row.trying = False
    row.pid = None


@_on(Idle)
def _idle(hud: HudState, event: Idle, at: float) -> str:
    _stopped(hud, event.name, at, "idle", "")
    hud.rows[event.name].attempt = 0
    return "info"


@_on(NeedsLogin)
def _needs_login(hud: HudState, event: NeedsLogin, at: float) -> str:
    error = f"run: {event.command} ({first_line(event.reason)})"
    _stopped(hud, event.name, at, "needs_login", error)
    return "warn"


@_on(Refused)
def _refused(hud: HudState, event: Refused, at: float) -> str:
    _stopped(hud, event.name, at, "refused", refused_error(event.name, event.reason))
    return "error"


@_on(AuthStep)
def _auth_step(hud: HudState, event: AuthStep, at: float) -> str:
    return "warn" if event.outcome == "failed" else "debug"


@_on(ToolsChanged)
def _tools_changed(hud: HudState, event: ToolsChanged, at: float) -> str:
    hud.row(event.name, at).tools = event.tools
    return "info"


@_on(LaunchLock)
def _launch_lock(hud: HudState, event: LaunchLock, at: float) -> str:
    row = hud.row(event.name, at)
    hud.revision += 1
    if event.change == "unlocked":
        row.launch = f"not locked: {event.reason}"
        return "warn"
    row.launch = lock_line(event.package, event.version, event.available)
    return "warn" if event.change == "drift" else "info"


@_on(ToolChanged)
def _tool_changed(hud: HudState, event: ToolChanged, at: float) -> str:
    hud.row(event.name, at).changed[event.item] = event.held
    hud.revision += 1
    return "warn"


@_on(ToolsApproved)
def _tools_approved(hud: HudState, event: ToolsApproved, at: float) -> str:
    changed = hud.row(event.name, at).changed
    for item in event.items:
        changed.pop(item, None)
    hud.revision += 1
    return "ok"


@_on(ApprovalAsked)
def _approval_asked(hud: HudState, event: ApprovalAsked, at: float) -> str:
    hud.approvals[event.approval] = event
    return "warn"


@_on(ApprovalDecided)
def _approval_decided(hud: HudState, event: ApprovalDecided, at: float) -> str:
    hud.approvals.pop(event.approval, None)
    return "ok" if event.verdict == "allow" else "warn"


@_on(Removed)
def _removed(hud: HudState, event: Removed, at: float) -> str:
    if hud.rows.pop(event.name, None) is not None:
        hud.revision += 1
    return "info"


@_on(ConfigLoaded)
def _config_loaded(hud: HudState, event: ConfigLoaded, at: float) -> str:
    file = event.file or hud.config_file
    hud.config_file = hud.config_file or file
    hud.last_reload = LastReload(ok=True, time=at, file=file)
    return "ok"


@_on(ConfigRejected)
def _config_rejected(hud: HudState, event: ConfigRejected, at: float) -> str:
    hud.last_reload = LastReload(
        ok=False,
        time=at,
        file=event.file or hud.config_file,
        line=event.line,
        message=first_line(event.message),
    )
    return "error"


@_on(CallFinished)
def _call_finished(hud: HudState, event: CallFinished, at: float) -> str:
    return "warn" if event.is_error else "info"


_SEVERE = frozenset({"warning", "error", "critical", "alert", "emergency"})


@_on(ServerLog)
def _server_log(hud: HudState, event: ServerLog, at: float) -> str:
    # Upstream log messages are detail unless they say something is wrong.
    return "warn" if event.level in _SEVERE else "debug"


@_on(Lagged)
def _lagged(hud: HudState, event: Lagged, at: float) -> None:
    hud.hud_dropped += event.dropped
    hud.resync_needed = True
    hud.note(
        at,
        "warn",
        f"the HUD fell behind and lost {event.dropped} events; "
        "refreshing from a snapshot",
    )
    return None
