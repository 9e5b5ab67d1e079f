"""`describe(event)`: the one sentence for each event.

The daemon log, the HUD's log pane and `mcp-manager events` all print these
sentences, so an operator reads the same words wherever they look. Each starts
with the connection's name (`"fs: connected in 0.25 s (...)"`); daemon-wide
events (config, lag) start with what they are about.

Pure: no clock, no I/O. Text fields are shown by their first line only (the
rest of a traceback belongs in `--json` or the details view).
"""

from __future__ import annotations

from .events import (
    Added,
    ApprovalAsked,
    ApprovalDecided,
    AttemptFailed,
    AuthStep,
    CallFailed,
    CallFinished,
    CallStarted,
    CatalogChanged,
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
    SettingsChanged,
    ToolChanged,
    ToolsApproved,
    ToolsChanged,
    Unrecognized,
    Updated,
)
from .text import first_line, list_names

__all__ = ["describe", "duration"]


def duration(seconds: float) -> str:
    """A short human duration: `0.25 s`, `42 s`, `3m05s`, `2h07m`."""
    s = int(seconds)
    if s < 10:
        return f"{seconds:.2f} s"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _where(file: str, line: int | None) -> str:
    return f"{file}:{line}" if line else file


def _exit(code: int | None) -> str:
    return f", exit code {code}" if code is not None else ""


def describe(event: Event, retry: Reconnecting | None = None) -> str:
    """The sentence for `event`.

    Args:
        event: Any event, `Unrecognized` included.
        retry: For a failure (`AttemptFailed`, `Lost`), the `Reconnecting` that
            followed it, so one line says both what failed and when the next
            try is ("...; retrying in 0.20 s").
    """
    n = event.name
    match event:
        case Added():
            where = " ".join(x for x in (event.transport, event.endpoint) if x)
            return f"{n}: added ({where})"
        case Updated():
            return f"{n}: {', '.join(event.changed) or 'spec'} changed; restarting"
        case Connecting():
            return f"{n}: connecting (attempt {event.attempt})"
        case Connected():
            details = [f"attempt {event.attempt}", f"{event.tools} tools"]
            if event.server_name:
                server = f"server {event.server_name} {event.server_version}"
                details.append(server.rstrip())
            if event.protocol:
                details.append(f"protocol {event.protocol}")
            if event.pid is not None:
                details.append(f"pid {event.pid}")
            took = duration(event.elapsed)
            return f"{n}: connected in {took} ({', '.join(details)})"
        case AttemptFailed():
            error = first_line(event.error) or "connect failed"
            head = (
                f"{n}: connect failed (attempt {event.attempt}"
                f"{_exit(event.exit_code)}): {error}"
            )
            return head if retry is None else f"{head}; retrying in {retry.delay:.2f} s"
        case Lost():
            up = f"after {duration(event.uptime)}" if event.uptime else "at once"
            error = first_line(event.reason) or "the session ended"
            head = f"{n}: disconnected {up}{_exit(event.exit_code)}: {error}"
            return head if retry is None else f"{head}; retrying in {retry.delay:.2f} s"
        case Reconnecting():
            return f"{n}: retry {event.attempt} in {event.delay:.2f} s"
        case Idle():
            up = f" after {duration(event.uptime)} up" if event.uptime else ""
            return f"{n}: idle{up}: {event.reason}"
        case NeedsLogin():
            why = first_line(event.reason)
            return f"{n}: needs login ({why}); run: {event.command}"
        case Refused():
            why = first_line(event.reason)
            return (
                f"{n}: refused ({why}); not asked again by itself: to try again "
                f"run: {event.command} (or mcp-manager reconnect {n})"
            )
        case AuthStep():
            took = duration(event.elapsed)
            status = f" HTTP {event.status}" if event.status else ""
            if event.outcome in ("ok", "absent"):
                return f"{n}: oauth {event.step} {event.outcome}{status} in {took}"
            error = f": {first_line(event.error)}" if event.error else ""
            return f"{n}: oauth {event.step} failed{status} after {took}{error}"
        case ToolsChanged():
            parts = []
            if event.added:
                parts.append(f"added {list_names(event.added)}")
            if event.removed:
                parts.append(f"removed {list_names(event.removed)}")
            return f"{n}: tools {'; '.join(parts) or 'changed'} (now {event.tools})"
        case LaunchLock():
            return _launch_line(n, event)
        case ToolChanged():
            what = {"tools": "tool", "prompts": "prompt", "templates": "template"}.get(
                event.item_kind, event.item_kind
            )
            why = {
                "changed": "changed since it was approved",
                "new": "is new since the server was pinned",
                "suspicious": "reads as instructions to the model",
                "unverified": "cannot be checked (the pin file is unreadable)",
            }.get(event.change, event.change)
            held = "held back" if event.held else "still listed"
            flag = f"; suspicious: {event.suspicious}" if event.suspicious else ""
            return (
                f"{n}: {what} {event.item!r} {why} ({held}){flag}; review: "
                f"mcp-manager tools --changed; approve: mcp-manager approve "
                f"{event.name} {event.item}"
            )
        case ToolsApproved():
            return f"{n}: approved {list_names(event.items)}"
        case ApprovalAsked():
            who = f" by {event.client}" if event.client else ""
            return (
                f"{n}: call of {event.tool!r}{who} waits for your approval "
                f"({event.rule}); allow: mcp-manager allow {event.approval}; "
                f"deny: mcp-manager deny {event.approval}"
            )
        case ApprovalDecided(verdict="deny", by="deadline"):
            return f"{n}: call of {event.tool!r} not approved in time"
        case ApprovalDecided(verdict="deny", by="removal"):
            return f"{n}: call of {event.tool!r} not run: the server was removed"
        case ApprovalDecided(verdict="deny", by="stop"):
            return f"{n}: call of {event.tool!r} not run: mcp-manager stopped"
        case ApprovalDecided(verdict="deny", by="withdrawn"):
            return f"{n}: call of {event.tool!r} withdrawn: its client went away"
        case ApprovalDecided():
            verb = "allowed" if event.verdict == "allow" else "denied"
            scope = "" if event.scope == "once" else f" ({event.scope})"
            return f"{n}: call of {event.tool!r} {verb}{scope} by {event.by}"
        case Removed():
            return f"{n}: removed"
        case SettingsChanged():
            changed = ", ".join(event.changed) or "settings"
            return f"{n}: {changed} changed (applied without a reconnect)"
        case CatalogChanged():
            parts = []
            if event.added:
                parts.append(f"added {list_names(event.added)}")
            if event.removed:
                parts.append(f"removed {list_names(event.removed)}")
            what = "; ".join(parts) or "changed"
            return f"{n}: {event.items} {what} (now {event.count})"
        case ResourceUpdated():
            return f"{n}: resource updated: {event.uri}"
        case ServerLog():
            logger = f" {event.logger}" if event.logger else ""
            return f"{n}: log {event.level}{logger}: {first_line(event.data)}"
        case ServerStderr():
            more = f" ({event.suppressed} lines suppressed)" if event.suppressed else ""
            return f"{n}: stderr: {event.line.rstrip()}{more}"
        case ConfigLoaded():
            parts = [
                f"{len(names)} {what}" + (f" ({list_names(names)})" if names else "")
                for what, names in (
                    ("added", event.added),
                    ("removed", event.removed),
                    ("changed", event.changed),
                )
            ]
            parts.append(f"{event.unchanged} unchanged")
            also = (
                f"; also changed: {', '.join(event.settings)}" if event.settings else ""
            )
            return f"config loaded from {event.file}: {', '.join(parts)}{also}"
        case ConfigRejected():
            return (
                f"{_where(event.file, event.line)}: {first_line(event.message)} "
                "(config not applied; nothing changed)"
            )
        case HookFailed():
            return (
                f"Lua callback for {event.hook} failed: "
                f"{_where(event.file, event.line)}: {first_line(event.message)}"
            )
        case CallStarted():
            return f"{n}: call {event.tool} started"
        case CallFinished():
            outcome = "returned a tool error" if event.is_error else "finished"
            return f"{n}: call {event.tool} {outcome} in {event.duration:.3f} s"
        case CallFailed():
            return (
                f"{n}: call {event.tool} failed after {event.duration:.2f} s: "
                f"{first_line(event.error)}"
            )
        case Lagged(expired=0):
            return f"subscriber {n!r} fell behind and lost {event.dropped} events"
        case Lagged():
            return (
                f"{event.expired} of the events asked for are older than the "
                "daemon keeps: not shown"
            )
        case Unrecognized():
            fields = " ".join(f"{k}={first_line(v)}" for k, v in event.fields)
            return f"{n or '-'}: {event.wire_kind} {fields}".rstrip()
        case _:
            return f"{n or '-'}: {event.kind}"


def _launch_line(n: str, event: LaunchLock) -> str:
    package = event.package
    if event.change == "locked":
        return f"{n}: launch locked to {package} {event.version}"
    if event.change == "updated":
        return f"{n}: launch updated to {package} {event.version}"
    if event.change == "drift":
        return (
            f"{n}: {package} {event.available} is out; still starting the "
            f"locked {event.version}: see and take it with mcp-manager update "
            f"{event.name}"
        )
    why = first_line(event.reason)
    return f"{n}: launch of {package or 'the server'} not locked: {why}"
