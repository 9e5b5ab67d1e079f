"""The control socket's replies, typed: one frozen dataclass per command's answer.

The daemon builds them, `control/dispatch.py` sends `to_dict()` and the client
reads them back with `from_dict()`; both are read off the fields by the one
codec of events and replies (`wire.Wire`). The reader is forgiving, because
the daemon may be newer or older than it: a field that is missing or of the
wrong type takes its default, unknown fields are ignored. `to_dict` gives the
wire form the control API documents (`control/protocol.py`), key for key: two
replies leave a field out (`LastReload`, `ReloadSummary`), and a catalog row
has a shape per kind (`CatalogRow`, the one written by hand).

`info` answers with `DaemonInfo` (`info.py`), the logins with `login.py`'s
replies, `status` with `ConnectionStatus` (`status.py`), `events` with events
(`events.py`); `call` and `request` answer with the MCP result itself, a JSON
object the manager passes through. What stays JSON-shaped inside a reply is
named so: the spec summary of `details`, a tool's input schema in a catalog row.

Pure: the CLI's light client imports this module, so it imports no more than
the wire readers (`as_event` loads the events on demand).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .wire import Wire, read_mapping, read_str, write_fields

if TYPE_CHECKING:
    from .events import ConfigLoaded

__all__ = [
    "AlreadyApplied",
    "ApproveReply",
    "CallLogReply",
    "CatalogRow",
    "ConnectionDetails",
    "Pong",
    "ReconnectReply",
    "ReloadSummary",
    "TokenReply",
    "UpdateReply",
]


# ------------------------------------------------------------------- ping


@dataclass(frozen=True, slots=True)
class Pong(Wire):
    """`ping`: the daemon answers.

    Attributes:
        pid: The daemon's process id (None if it did not say).
    """

    pid: int | None = None


# ----------------------------------------------------------------- reload

_NOT_APPLIED = frozenset({"already_applied"})
_NO_SETTINGS = frozenset({"settings"})
_NOT_APPLIED_NOR_SETTINGS = _NOT_APPLIED | _NO_SETTINGS
"""What a reload that was not already applied leaves out of its wire form."""


@dataclass(frozen=True, slots=True)
class AlreadyApplied(Wire):
    """The earlier load that applied the same script, when a reload changed
    nothing.

    Attributes:
        time: When it ran (wall time).
        trigger: Who asked for it (`file watcher`, `SIGHUP`, `reload command`...).
    """

    time: float = 0.0
    trigger: str = ""


@dataclass(frozen=True, slots=True)
class ReloadSummary(Wire):
    """`reload` (and every load of startup.lua): what changed.

    Attributes:
        file: The script.
        added: Connections declared anew.
        removed: Connections no longer declared.
        changed: Connections whose declaration changed.
        unchanged: How many stayed as they were.
        connections: How many the script declares.
        settings: What else changed: `policy` (the `mcp_policy` rules),
            `profile NAME` (one added, removed or changed).
        already_applied: When the same script was already applied and nothing
            changed: that earlier load; else None.
    """

    file: str = ""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: int = 0
    connections: int = 0
    already_applied: AlreadyApplied | None = None
    settings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, the names as lists; `already_applied`
        and `settings` only when there are some."""
        if self.already_applied is None:
            skipped = _NOT_APPLIED if self.settings else _NOT_APPLIED_NOR_SETTINGS
            return write_fields(self, skipped)
        return write_fields(self, frozenset() if self.settings else _NO_SETTINGS)

    def as_event(self) -> ConfigLoaded:
        """The `config_loaded` event this load published (its fields are the
        event's), to say it the same way (`describe`)."""
        from .events import ConfigLoaded  # the light client never needs it

        return ConfigLoaded(
            file=self.file,
            added=self.added,
            removed=self.removed,
            changed=self.changed,
            unchanged=self.unchanged,
            settings=self.settings,
        )


# ------------------------------------------------ reconnect, details


@dataclass(frozen=True, slots=True)
class ReconnectReply(Wire):
    """`reconnect`: whether the connection's backoff wait was cut short.

    Attributes:
        server: The connection.
        retrying: It was waiting to retry and tries now; False when it was
            connected or a try was already under way.
        state: Its state when asked (`connected`, `connecting`, ...), to say
            which.
    """

    server: str = ""
    retrying: bool = False
    state: str = ""


@dataclass(frozen=True, slots=True)
class ConnectionDetails(Wire):
    """`details`: one connection's declaration, stderr and tools.

    Attributes:
        spec: The spec summary (`spec.spec_summary`: JSON-shaped, every secret
            masked; its keys depend on the transport and the options set).
        stderr: The last lines the server wrote to stderr.
        tools: The names of its tools.
        calls: Its last calls from the call log (`engine.calllog`), oldest
            first: `{time, client, tool, outcome, error, duration}`.
        beside: The session of the other era open beside its own
            (`ConnectionStatus.beside`); "" when none.
    """

    spec: Mapping[str, object] = field(default_factory=dict)
    stderr: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    calls: tuple[Mapping[str, object], ...] = ()
    beside: str = ""


# ------------------------------------------------------------------ token


@dataclass(frozen=True, slots=True)
class TokenReply(Wire):
    """`token`: where the HTTP endpoint's bearer token is (never the token).

    Attributes:
        source: Where it comes from: a file's path, `$MCP_MANAGER_TOKEN`, or
            `none (--no-token)`.
        path: The file it is read from (None: the environment, or none).
        rotated: A new one has just replaced it.
        streams_ended: Listening streams opened with the old one, ended.
    """

    source: str = ""
    path: str | None = None
    rotated: bool = False
    streams_ended: int = 0


@dataclass(frozen=True, slots=True)
class CallLogReply(Wire):
    """`call_log`: the daemon wrote the calls it had queued; where its log is.

    Attributes:
        path: The daemon's `calls.sqlite3`.
        dropped: Rows it could not log since it started (its queue was full,
            or the disk failed).
    """

    path: str = ""
    dropped: int = 0


# ---------------------------------------------------------------- catalog


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """`catalog`: one tool, prompt or resource (or template) of a connection.

    Attributes:
        kind: What the row lists: `tools`, `prompts` or `resources`.
        server: The connection that has it.
        name: The tool's or prompt's name; a resource's URI (or URI template).
        exposed: The name (or URI) the endpoint shows it under; None when a
            filter hides it or the endpoint leaves it out.
        hidden: A filter of the connection hides it.
        held: Pinning holds it back (`pin = "strict"`: it changed since it
            was pinned, or is new); `mcp-manager approve` shows it again.
        description: Its description ("" if none).
        input_schema: A tool's input schema (JSON Schema, as the server sent it).
        template: A resource row lists a URI template.
    """

    kind: str
    server: str = ""
    name: str = ""
    exposed: str | None = None
    hidden: bool = False
    held: bool = False
    description: str = ""
    input_schema: Mapping[str, object] = field(default_factory=dict)
    template: bool = False

    def to_dict(self) -> dict[str, object]:
        """The wire form, which depends on `kind` (`kind` itself is not sent):
        `server`, `name`, `exposed`, `hidden`, `description`, and for tools
        `inputSchema`; for resources `server`, `uri`, `exposed`, `hidden`,
        `template`, `description`."""
        if self.kind == "resources":
            return {
                "server": self.server,
                "uri": self.name,
                "exposed": self.exposed,
                "hidden": self.hidden,
                "held": self.held,
                "template": self.template,
                "description": self.description,
            }
        out: dict[str, object] = {
            "server": self.server,
            "name": self.name,
            "exposed": self.exposed,
            "hidden": self.hidden,
            "held": self.held,
            "description": self.description,
        }
        if self.kind == "tools":
            out["inputSchema"] = dict(self.input_schema)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object], kind: str) -> CatalogRow:
        """Read the wire form of a `kind` row back, forgivingly."""
        return cls(
            kind=kind,
            server=read_str(data.get("server")) or "",
            name=read_str(data.get("uri" if kind == "resources" else "name")) or "",
            exposed=read_str(data.get("exposed")),
            hidden=data.get("hidden") is True,
            held=data.get("held") is True,
            description=read_str(data.get("description")) or "",
            input_schema=read_mapping(data.get("inputSchema")) or {},
            template=data.get("template") is True,
        )


# ---------------------------------------------------------------- approve


@dataclass(frozen=True, slots=True)
class ApproveReply(Wire):
    """`approve`: what was pinned.

    Attributes:
        server: The connection.
        approved: The names (or `uriTemplate`s) pinned now.
    """

    server: str = ""
    approved: tuple[str, ...] = ()


# ----------------------------------------------------------------- update


@dataclass(frozen=True, slots=True)
class UpdateReply(Wire):
    """`update`: a launch lock and the newer release it could take, or took.

    Attributes:
        server: The connection.
        package: Its package as the command asks for it (`name@^1`).
        locked: The version (or image digest) it starts now ("" if none).
        available: A newer release to take ("" if none).
        published: When `available` was published ("" if not known).
        newest: A still newer release that `min_age` holds back ("" if none).
        note: Why there is nothing to offer ("" when there is).
        taken: The lock now says `available` and the server restarts on it.
    """

    server: str = ""
    package: str = ""
    locked: str = ""
    available: str = ""
    published: str = ""
    newest: str = ""
    note: str = ""
    taken: bool = False
