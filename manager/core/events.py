"""Typed events: everything that happens to a connection, the config or a call.

Events are frozen, keyword-only dataclasses. `seq` (monotonic per daemon) and
`time` (wall clock, seconds) are stamped by the bus when it publishes; `name` is the
connection (empty for daemon-wide events such as `config_loaded`). `kind` is the
stable wire name used by the CLI, logs, Lua hooks and the HUD. Text fields are
already redacted by whoever builds the event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "EVENT_TYPES",
    "Added",
    "AttemptFailed",
    "CallFailed",
    "CallFinished",
    "CallStarted",
    "ConfigLoaded",
    "ConfigRejected",
    "Connected",
    "Connecting",
    "Event",
    "HookFailed",
    "Lagged",
    "Lost",
    "Reconnecting",
    "Removed",
    "ServerStderr",
    "ToolsChanged",
    "Updated",
    "event_to_dict",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Base of every event.

    Attributes:
        name: The connection the event is about; empty for daemon-wide events.
        seq: Position in the daemon's event order (stamped on publish).
        time: Wall-clock seconds since the epoch (stamped on publish).
    """

    kind: ClassVar[str] = "event"
    name: str = ""
    seq: int = 0
    time: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Added(Event):
    """A connection was declared."""

    kind: ClassVar[str] = "added"
    transport: str
    endpoint: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Updated(Event):
    """A declared connection's spec changed; it restarts."""

    kind: ClassVar[str] = "updated"
    changed: tuple[str, ...]
    endpoint: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Connecting(Event):
    """A connection attempt started."""

    kind: ClassVar[str] = "connecting"
    attempt: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Connected(Event):
    """Initialize and the full tool listing succeeded."""

    kind: ClassVar[str] = "connected"
    attempt: int
    tools: int
    server_name: str = ""
    server_version: str = ""
    protocol: str = ""
    elapsed: float = 0.0
    pid: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptFailed(Event):
    """A connection attempt failed; a retry follows."""

    kind: ClassVar[str] = "connect_failed"
    attempt: int
    error: str
    error_type: str = ""
    exit_code: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Lost(Event):
    """An established session died."""

    kind: ClassVar[str] = "disconnected"
    reason: str
    exit_code: int | None = None
    uptime: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Reconnecting(Event):
    """The next attempt will start after `delay` seconds."""

    kind: ClassVar[str] = "reconnecting"
    attempt: int
    delay: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolsChanged(Event):
    """The upstream's tool list changed (after `list_changed` or a reconnect)."""

    kind: ClassVar[str] = "tools_changed"
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tools: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Removed(Event):
    """The connection was removed and closed. Terminal."""

    kind: ClassVar[str] = "removed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerStderr(Event):
    """A line a stdio server wrote to its stderr (rate-limited per connection)."""

    kind: ClassVar[str] = "stderr"
    line: str
    suppressed: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigLoaded(Event):
    """startup.lua ran cleanly and its desired set was applied."""

    kind: ClassVar[str] = "config_loaded"
    file: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigRejected(Event):
    """startup.lua failed; nothing was changed."""

    kind: ClassVar[str] = "config_error"
    file: str
    line: int | None
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class HookFailed(Event):
    """A Lua callback (`mcp_on` hook or `mcp_call` completion) failed or ran away.

    `hook` is the event kind it was handling, or `mcp_call`.
    """

    kind: ClassVar[str] = "hook_error"
    file: str
    line: int | None
    message: str
    hook: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CallStarted(Event):
    """A tool call was sent to the server `name`."""

    kind: ClassVar[str] = "call_started"
    tool: str
    call_id: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFinished(Event):
    """A tool call returned a result (which may be a tool-level error)."""

    kind: ClassVar[str] = "call_finished"
    tool: str
    duration: float
    is_error: bool = False
    call_id: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFailed(Event):
    """A tool call could not be made or did not finish."""

    kind: ClassVar[str] = "call_failed"
    tool: str
    duration: float
    error: str
    call_id: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Lagged(Event):
    """Delivered to one subscriber only: it fell behind and lost `dropped` events.

    `name` is the subscriber's name.
    """

    kind: ClassVar[str] = "lagged"
    dropped: int


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        Added,
        Updated,
        Connecting,
        Connected,
        AttemptFailed,
        Lost,
        Reconnecting,
        ToolsChanged,
        Removed,
        ServerStderr,
        ConfigLoaded,
        ConfigRejected,
        HookFailed,
        CallStarted,
        CallFinished,
        CallFailed,
        Lagged,
    )
}
"""Every event class by its `kind`."""

_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in EVENT_TYPES.values()
}


def event_to_dict(event: Event) -> dict[str, object]:
    """A JSON-ready dict of `event`: `seq`, `time`, `kind`, `name`, then its fields.

    Tuples become lists.
    """
    out: dict[str, object] = {"seq": event.seq, "time": event.time, "kind": event.kind}
    for key in _FIELDS.get(type(event)) or tuple(
        f.name for f in dataclasses.fields(event)
    ):
        if key in ("seq", "time"):
            continue
        value = getattr(event, key)
        out[key] = list(value) if isinstance(value, tuple) else value
    return out
