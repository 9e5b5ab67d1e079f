"""Typed events: everything that happens to a connection, the config or a call.

Events are frozen, keyword-only dataclasses. `seq` (monotonic per daemon) and
`time` (wall clock, seconds) are stamped by the bus when it publishes; `name` is the
connection (empty for daemon-wide events such as `config_loaded`). `kind` is the
stable wire name used by the CLI, logs, Lua hooks and the HUD. Text fields are
already redacted by whoever builds the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .wire import read_fields, read_float, read_int, read_str, write_fields

__all__ = [
    "EVENT_TYPES",
    "PHASE_EVENTS",
    "Added",
    "AttemptFailed",
    "ApprovalAsked",
    "ApprovalDecided",
    "AuthStep",
    "CallFailed",
    "CallFinished",
    "CallStarted",
    "CatalogChanged",
    "ConfigLoaded",
    "ConfigRejected",
    "Connected",
    "Connecting",
    "Event",
    "HookFailed",
    "Lagged",
    "Lost",
    "NeedsLogin",
    "Reconnecting",
    "Refused",
    "Idle",
    "Removed",
    "ResourceUpdated",
    "ServerLog",
    "ServerStderr",
    "SettingsChanged",
    "ToolsChanged",
    "ToolChanged",
    "LaunchLock",
    "ToolsApproved",
    "Unrecognized",
    "Updated",
    "event_from_dict",
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
    stable_after: float = 10.0
    """Seconds connected after which `attempt` no longer counts (stable)."""


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
class Idle(Event):
    """An on-demand connection has no session until the next request: at its
    start, or stopped after `idle_stop` seconds unused (`uptime` > 0)."""

    kind: ClassVar[str] = "idle"
    reason: str
    uptime: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class NeedsLogin(Event):
    """An OAuth connection waits for the user: nothing is tried until `command`
    (or a reload that changes it, or `reconnect`)."""

    kind: ClassVar[str] = "needs_login"
    reason: str
    command: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Refused(Event):
    """An OAuth connection stopped asking for logins: the server kept refusing
    what they got (`LOGIN_LIMIT` in a row), or its OAuth metadata or answer was
    not for this server. Nothing is tried until `command`, `reconnect` or a
    changed config."""

    kind: ClassVar[str] = "refused"
    reason: str
    command: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthStep(Event):
    """One step of an OAuth flow finished (`mcp.auth` spans and metrics).

    `step` is `discovery`, `registration`, `device` (a device login's code,
    RFC 8628), `authorize` (the user's browser, or approval of a device login),
    `token` or `refresh`; `outcome` is `ok`, `failed` or `absent` (a discovery
    URL that is not there: the next fallback is tried); `status` the HTTP
    status (0: none); `error` is
    redacted and never holds a token, secret, code or verifier.
    """

    kind: ClassVar[str] = "auth"
    step: str
    outcome: str
    status: int = 0
    elapsed: float = 0.0
    error: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolsChanged(Event):
    """The upstream's tool list changed (after a reconnect), or the server
    said it did (`list_changed`): then `added` and `removed` may be empty (a
    description or a schema changed, or a change was undone)."""

    kind: ClassVar[str] = "tools_changed"
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tools: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolChanged(Event):
    """A listed definition differs from the one pinned (`engine.pins`): a
    tool, prompt or resource template (`item_kind`) `changed`, `new` on a
    pinned connection, `suspicious` on first sight, or `unverified` (the pin
    file is unreadable). `diff` is unified, secrets masked; `suspicious` says
    what text in it reads as instructions to the model; `held`: not listed,
    not callable until approved (`pin = "strict"`)."""

    kind: ClassVar[str] = "tool_changed"
    item: str
    item_kind: str = "tools"
    change: str = "changed"
    diff: str = ""
    suspicious: str = ""
    held: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchLock(Event):
    """A stdio server launched from a registry (`npx`, `uvx`, `docker run`,
    ... `core.launch`) and its lock (`transport.stdio.locks`): `locked` at
    its first start to `version`; `drift`: a newer `available` release is
    offered, not taken (`mcp-manager update NAME` takes it); `updated` to
    `version` by `update`; `unlocked`: it starts as written, `reason` says
    why (the registry did not answer, the package is a path or URL)."""

    kind: ClassVar[str] = "launch_lock"
    change: str
    package: str = ""
    version: str = ""
    available: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolsApproved(Event):
    """`mcp-manager approve`: what the server lists now is pinned."""

    kind: ClassVar[str] = "tools_approved"
    items: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class SettingsChanged(Event):
    """Settings that need no reconnect changed (prefix, filters, roots)."""

    kind: ClassVar[str] = "settings_changed"
    changed: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class CatalogChanged(Event):
    """The upstream's prompts, resources or resource templates changed, or
    the server said they did (`list_changed`; `added` and `removed` may then
    be empty).

    `items` says which (`prompts`, `resources`, `templates`); `count` is how
    many there are now.
    """

    kind: ClassVar[str] = "catalog_changed"
    items: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    count: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceUpdated(Event):
    """The upstream sent `notifications/resources/updated` for `uri`."""

    kind: ClassVar[str] = "resource_updated"
    uri: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerLog(Event):
    """The upstream sent a log message (`notifications/message`).

    `data` is the message's data as text (JSON unless it was a string),
    redacted and cut to a few kilobytes. `in_call`: it came while the server
    served requests of the endpoint's clients, and went to those.
    """

    kind: ClassVar[str] = "server_log"
    level: str
    logger: str = ""
    data: str = ""
    in_call: bool = False


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
    settings: tuple[str, ...] = ()
    """What else a reload changed: `policy`, `profile NAME`."""


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
class ApprovalAsked(Event):
    """A call to `tool` of `name` waits for the user (`mcp_policy` `ask`):
    `approval` is its id for `mcp-manager allow ID` / `deny ID`, `client` who
    called, `rule` the rule's `FILE:LINE` and why it matched, `arguments`
    the arguments as JSON with secrets masked, `deadline` (epoch seconds)
    when it is denied unanswered."""

    kind: ClassVar[str] = "approval_asked"
    tool: str
    approval: str
    client: str = ""
    rule: str = ""
    arguments: str = ""
    deadline: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalDecided(Event):
    """A call's verdict from the policy: `allow` or `deny`, `by` whom (`hud`,
    `cli`, `rule FILE:LINE`, `remembered`, `deadline`, `removal`, `withdrawn`: its
    caller went away, `reload`: the rules reloaded while it waited, `stop`: the
    daemon stopped), for `scope` (`once`,
    `session`: until the daemon stops, `always`: kept with the pins);
    `approval` the id of the question, empty when nobody was asked."""

    kind: ClassVar[str] = "approval_decided"
    tool: str
    verdict: str
    by: str
    scope: str = "once"
    approval: str = ""
    client: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Lagged(Event):
    """Delivered to one subscriber only: `dropped` events before the next one
    will never reach it. It fell behind and lost them, or (`expired`, as many
    of them) it asked for events older than the daemon keeps (`events --since`).

    `name` is the subscriber's name.
    """

    kind: ClassVar[str] = "lagged"
    dropped: int
    expired: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Unrecognized(Event):
    """An event whose kind this side does not know (a newer daemon sent it).

    Only `event_from_dict` makes these; `wire_kind` is the kind it had and
    `fields` its other fields, as text, in wire order.
    """

    kind: ClassVar[str] = "unrecognized"
    wire_kind: str
    fields: tuple[tuple[str, str], ...] = ()


PHASE_EVENTS: tuple[type[Event], ...] = (
    Added,
    Updated,
    Connecting,
    Connected,
    AttemptFailed,
    Lost,
    Reconnecting,
    Idle,
    NeedsLogin,
    Refused,
    Removed,
)
"""The events published as a connection enters a phase (the connections
gauge recounts at each)."""

_OTHER_EVENTS: tuple[type[Event], ...] = (
    AuthStep,
    ToolsChanged,
    ToolChanged,
    LaunchLock,
    ToolsApproved,
    SettingsChanged,
    CatalogChanged,
    ResourceUpdated,
    ServerLog,
    ServerStderr,
    ConfigLoaded,
    ConfigRejected,
    HookFailed,
    CallStarted,
    CallFinished,
    CallFailed,
    ApprovalAsked,
    ApprovalDecided,
    Lagged,
)
EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls for cls in (*PHASE_EVENTS, *_OTHER_EVENTS)
}
"""Every event class by its `kind`."""


def event_to_dict(event: Event) -> dict[str, object]:
    """A JSON-ready dict of `event`: `seq`, `time`, `kind`, `name`, then its fields.

    Tuples become lists (`wire.write_fields`).
    """
    head: dict[str, object] = {"seq": event.seq, "time": event.time, "kind": event.kind}
    return head | write_fields(event, _STAMPS)


_STAMPS = frozenset({"seq", "time"})
_WIRE_KEYS = frozenset({"seq", "time", "kind", "name"})


def event_from_dict(data: Mapping[str, object]) -> Event:
    """The `Event` that `event_to_dict` (or the control socket) turned into `data`.

    The reader on the far side of the socket is forgiving, because the daemon
    may be newer or older than it: a field that is missing or of the wrong type
    takes its default (or its type's zero), unknown fields are ignored, and an
    unknown `kind` becomes an `Unrecognized` event that keeps its fields as text.
    """
    kind = str(data.get("kind") or "")
    common: dict[str, Any] = {
        "name": read_str(data.get("name")) or "",
        "seq": read_int(data.get("seq")) or 0,
        "time": read_float(data.get("time")) or 0.0,
    }
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        fields = tuple(
            (str(k), str(v))
            for k, v in data.items()
            if k not in _WIRE_KEYS and v not in (None, "", [], ())
        )
        return Unrecognized(wire_kind=kind or "?", fields=fields, **common)
    return cls(**common, **read_fields(cls, data, _WIRE_KEYS))
