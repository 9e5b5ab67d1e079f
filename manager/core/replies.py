"""The control socket's replies, typed: one frozen dataclass per command's answer.

The daemon builds them, `control/dispatch.py` sends `to_dict()` and the client
reads them back with `from_dict()`. The reader is forgiving, as the events' is,
because the daemon may be newer or older than it: a field that is missing or of
the wrong type takes its default, unknown fields are ignored. `to_dict` gives
the wire form the control API documents (`control/protocol.py`), key for key.

`status` answers with `ConnectionStatus` (`status.py`), `events` with events
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

from .wire import (
    read_bool,
    read_counts,
    read_float,
    read_int,
    read_mapping,
    read_names,
    read_str,
)

if TYPE_CHECKING:
    from .events import ConfigLoaded

__all__ = [
    "OTLP_OFF",
    "AlreadyApplied",
    "ApproveReply",
    "AttachedClient",
    "CallbackReply",
    "CatalogRow",
    "ConnectionDetails",
    "DaemonInfo",
    "LastReload",
    "LoginResult",
    "LoginStart",
    "LogoutReply",
    "OtlpStatus",
    "Pong",
    "ReconnectReply",
    "ReloadSummary",
    "StartSlots",
    "TokenReply",
    "UpdateReply",
]


def _names(value: object) -> tuple[str, ...]:
    return read_names(value) or ()


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


# ------------------------------------------------------------------- ping


@dataclass(frozen=True, slots=True)
class Pong:
    """`ping`: the daemon answers.

    Attributes:
        pid: The daemon's process id (None if it did not say).
    """

    pid: int | None = None

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"pid"}`."""
        return {"pid": self.pid}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Pong:
        """Read the wire form back, forgivingly."""
        return cls(pid=read_int(data.get("pid")))


# ------------------------------------------------------------------- info


@dataclass(frozen=True, slots=True)
class OtlpStatus:
    """Whether OTLP exports work: the `otlp` entry of `info` when exporting.

    Attributes:
        endpoint: Where exports go (secrets masked).
        protocol: `grpc` or `http/protobuf`.
        ok: The last export worked; None before the first (or if unknown).
        last_error: Why the last failed export failed.
        exports: Exports that worked.
        failures: Exports that failed.
    """

    endpoint: str = ""
    protocol: str = ""
    ok: bool | None = None
    last_error: str | None = None
    exports: int = 0
    failures: int = 0

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, by name."""
        return {
            "endpoint": self.endpoint,
            "protocol": self.protocol,
            "ok": self.ok,
            "last_error": self.last_error,
            "exports": self.exports,
            "failures": self.failures,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> OtlpStatus:
        """Read the wire form back, forgivingly."""
        return cls(
            endpoint=read_str(data.get("endpoint")) or "",
            protocol=read_str(data.get("protocol")) or "",
            ok=read_bool(data.get("ok")),
            last_error=read_str(data.get("last_error")),
            exports=read_int(data.get("exports")) or 0,
            failures=read_int(data.get("failures")) or 0,
        )


OTLP_OFF = "off"
"""The `otlp` entry of `info` when nothing is exported over OTLP."""


@dataclass(frozen=True, slots=True)
class StartSlots:
    """The stdio start slots: how many servers may start at a time.

    Attributes:
        slots: Starts at a time.
        starting: Starts under way.
        waiting: Starts waiting for a slot.
    """

    slots: int = 0
    starting: int = 0
    waiting: int = 0

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"slots", "starting", "waiting"}`."""
        return {"slots": self.slots, "starting": self.starting, "waiting": self.waiting}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> StartSlots:
        """Read the wire form back, forgivingly."""
        return cls(
            slots=read_int(data.get("slots")) or 0,
            starting=read_int(data.get("starting")) or 0,
            waiting=read_int(data.get("waiting")) or 0,
        )


@dataclass(frozen=True, slots=True)
class ApproveReply:
    """`approve`: what was pinned.

    Attributes:
        server: The connection.
        approved: The names (or `uriTemplate`s) pinned now.
    """

    server: str = ""
    approved: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"server", "approved"}`."""
        return {"server": self.server, "approved": list(self.approved)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ApproveReply:
        """Read the wire form back, forgivingly."""
        return cls(
            server=read_str(data.get("server")) or "",
            approved=_names(data.get("approved")),
        )


@dataclass(frozen=True, slots=True)
class AttachedClient:
    """A client attached through `mcp-manager attach`, now.

    Attributes:
        profile: The profile it sees; "" is the whole endpoint.
        client: The program that spawned `attach` (its parent's name).
        pid: `attach`'s process id.
        since: When it attached (epoch seconds).
    """

    profile: str = ""
    client: str = "?"
    pid: int = 0
    since: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"profile", "client", "pid", "since"}`."""
        return {
            "profile": self.profile,
            "client": self.client,
            "pid": self.pid,
            "since": self.since,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> AttachedClient:
        """Read the wire form back, forgivingly."""
        return cls(
            profile=read_str(data.get("profile")) or "",
            client=read_str(data.get("client")) or "?",
            pid=read_int(data.get("pid")) or 0,
            since=read_float(data.get("since")) or 0.0,
        )


@dataclass(frozen=True, slots=True)
class LastReload:
    """The last run of startup.lua.

    Attributes:
        ok: It ran cleanly and was applied.
        time: When (wall time; 0 if unknown).
        file: The script (or the module that failed).
        line: The line of the error, if known.
        message: The error ("" when it ran cleanly).
    """

    ok: bool = False
    time: float = 0.0
    file: str = ""
    line: int | None = None
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"ok", "time", "file"}`, and for a failed run also
        `"line"` and `"message"`."""
        out: dict[str, object] = {"ok": self.ok, "time": self.time, "file": self.file}
        if not self.ok:
            out["line"] = self.line
            out["message"] = self.message
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LastReload:
        """Read the wire form back, forgivingly."""
        return cls(
            ok=data.get("ok") is True,
            time=read_float(data.get("time")) or 0.0,
            file=read_str(data.get("file")) or "",
            line=read_int(data.get("line")),
            message=read_str(data.get("message")) or "",
        )


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """`info`: daemon-wide facts for `status`'s footer and the HUD.

    Attributes:
        version: The daemon's version.
        pid: Its process id.
        config: Its startup.lua.
        last_reload: The last run of it (None before the first).
        watching: It reloads the script by itself when the file changes.
        dropped: Events dropped so far, per subscriber name.
        connections: Connections declared.
        otlp: The OTLP exporter's status, or `"off"` (or what another
            version says instead, as text).
        starts: The stdio start slots.
        listener_errors: Exceptions raised so far, per event listener.
        guardian: The pid of the process that kills the servers if the daemon
            dies, while it runs.
        profiles: The declared profiles (`mcp_profile`), by name.
        attached: The clients attached now (`mcp-manager attach`).
        endpoint: The HTTP endpoint's URL (`--listen`), None without one.
        endpoint_token: Where its bearer token is (a file's path,
            `$MCP_MANAGER_TOKEN`, or `none (--no-token)`); never the token.
    """

    version: str = ""
    pid: int | None = None
    config: str = ""
    last_reload: LastReload | None = None
    watching: bool = False
    dropped: Mapping[str, int] = field(default_factory=dict)
    connections: int = 0
    otlp: OtlpStatus | str = OTLP_OFF
    starts: StartSlots = field(default_factory=StartSlots)
    listener_errors: Mapping[str, int] = field(default_factory=dict)
    guardian: int | None = None
    profiles: tuple[str, ...] = ()
    attached: tuple[AttachedClient, ...] = ()
    endpoint: str | None = None
    endpoint_token: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, by name; the nested ones as objects."""
        return {
            "version": self.version,
            "pid": self.pid,
            "config": self.config,
            "last_reload": (
                self.last_reload.to_dict() if self.last_reload is not None else None
            ),
            "watching": self.watching,
            "dropped": dict(self.dropped),
            "connections": self.connections,
            "otlp": self.otlp.to_dict()
            if isinstance(self.otlp, OtlpStatus)
            else self.otlp,
            "starts": self.starts.to_dict(),
            "listener_errors": dict(self.listener_errors),
            "guardian": self.guardian,
            "profiles": list(self.profiles),
            "attached": [client.to_dict() for client in self.attached],
            "endpoint": self.endpoint,
            "endpoint_token": self.endpoint_token,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DaemonInfo:
        """Read the wire form back, forgivingly."""
        last = read_mapping(data.get("last_reload"))
        otlp_data = data.get("otlp")
        otlp_map = read_mapping(otlp_data)
        otlp: OtlpStatus | str = (
            OtlpStatus.from_dict(otlp_map)
            if otlp_map is not None
            else read_str(otlp_data) or OTLP_OFF
        )
        starts = read_mapping(data.get("starts"))
        return cls(
            version=read_str(data.get("version")) or "",
            pid=read_int(data.get("pid")),
            config=read_str(data.get("config")) or "",
            last_reload=LastReload.from_dict(last) if last is not None else None,
            watching=data.get("watching") is True,
            dropped=read_counts(data.get("dropped")) or {},
            connections=read_int(data.get("connections")) or 0,
            otlp=otlp,
            starts=StartSlots.from_dict(starts) if starts is not None else StartSlots(),
            listener_errors=read_counts(data.get("listener_errors")) or {},
            guardian=read_int(data.get("guardian")),
            profiles=_names(data.get("profiles")),
            attached=tuple(
                AttachedClient.from_dict(row)
                for item in _list(data.get("attached"))
                if (row := read_mapping(item)) is not None
            ),
            endpoint=read_str(data.get("endpoint")),
            endpoint_token=read_str(data.get("endpoint_token")),
        )


# ----------------------------------------------------------------- reload


@dataclass(frozen=True, slots=True)
class AlreadyApplied:
    """The earlier load that applied the same script, when a reload changed
    nothing.

    Attributes:
        time: When it ran (wall time).
        trigger: Who asked for it (`file watcher`, `SIGHUP`, `reload command`...).
    """

    time: float = 0.0
    trigger: str = ""

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"time", "trigger"}`."""
        return {"time": self.time, "trigger": self.trigger}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> AlreadyApplied:
        """Read the wire form back, forgivingly."""
        return cls(
            time=read_float(data.get("time")) or 0.0,
            trigger=read_str(data.get("trigger")) or "",
        )


@dataclass(frozen=True, slots=True)
class ReloadSummary:
    """`reload` (and every load of startup.lua): what changed.

    Attributes:
        file: The script.
        added: Connections declared anew.
        removed: Connections no longer declared.
        changed: Connections whose declaration changed.
        unchanged: How many stayed as they were.
        connections: How many the script declares.
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

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, the names as lists; `already_applied`
        only when there is one."""
        out: dict[str, object] = {
            "file": self.file,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "unchanged": self.unchanged,
            "connections": self.connections,
        }
        if self.already_applied is not None:
            out["already_applied"] = self.already_applied.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ReloadSummary:
        """Read the wire form back, forgivingly."""
        earlier = read_mapping(data.get("already_applied"))
        return cls(
            file=read_str(data.get("file")) or "",
            added=_names(data.get("added")),
            removed=_names(data.get("removed")),
            changed=_names(data.get("changed")),
            unchanged=read_int(data.get("unchanged")) or 0,
            connections=read_int(data.get("connections")) or 0,
            already_applied=(
                AlreadyApplied.from_dict(earlier) if earlier is not None else None
            ),
        )

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
        )


# ------------------------------------------------ reconnect, details


@dataclass(frozen=True, slots=True)
class ReconnectReply:
    """`reconnect`: whether the connection's backoff wait was cut short.

    Attributes:
        server: The connection.
        retrying: It was waiting to retry and tries now; False when it was
            connected or a try was already under way.
    """

    server: str = ""
    retrying: bool = False

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"server", "retrying"}`."""
        return {"server": self.server, "retrying": self.retrying}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ReconnectReply:
        """Read the wire form back, forgivingly."""
        return cls(
            server=read_str(data.get("server")) or "",
            retrying=data.get("retrying") is True,
        )


@dataclass(frozen=True, slots=True)
class ConnectionDetails:
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

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"spec", "stderr", "tools", "calls", "beside"}`."""
        return {
            "spec": dict(self.spec),
            "stderr": list(self.stderr),
            "tools": list(self.tools),
            "calls": [dict(call) for call in self.calls],
            "beside": self.beside,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ConnectionDetails:
        """Read the wire form back, forgivingly."""
        return cls(
            spec=read_mapping(data.get("spec")) or {},
            stderr=_names(data.get("stderr")),
            tools=_names(data.get("tools")),
            calls=tuple(
                row
                for item in _list(data.get("calls"))
                if (row := read_mapping(item)) is not None
            ),
            beside=str(data.get("beside") or ""),
        )


# ------------------------------------------------------------------ login


@dataclass(frozen=True, slots=True)
class LoginResult:
    """`login_wait`: how the login of a connection ended (or that it has not).

    Attributes:
        server: The connection.
        done: The login ended (else the wait timed out).
        connected: The connection is connected.
        state: Its state (`removed` if it is gone).
        error: Why the login failed, if it did.
        unsupported: The authorization server does not offer the kind of
            login asked for (`--device` without RFC 8628).
    """

    server: str = ""
    done: bool = False
    connected: bool = False
    state: str = ""
    error: str | None = None
    unsupported: bool = False

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, by name."""
        return {
            "server": self.server,
            "done": self.done,
            "connected": self.connected,
            "state": self.state,
            "error": self.error,
            "unsupported": self.unsupported,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LoginResult:
        """Read the wire form back, forgivingly."""
        return LoginResult(
            server=read_str(data.get("server")) or "",
            done=data.get("done") is True,
            connected=data.get("connected") is True,
            state=read_str(data.get("state")) or "",
            error=read_str(data.get("error")),
            unsupported=data.get("unsupported") is True,
        )


@dataclass(frozen=True, slots=True)
class LoginStart(LoginResult):
    """`login`: the authorization URL once the daemon has it, or how the login
    ended if it ended first.

    Attributes:
        url: The address the user opens; None if there is none (the login
            ended, or none was needed).
        redirect_uri: Where the browser is sent back (for `login --manual`).
        user_code: A device login's code, for the user to enter at `url`.
        url_complete: A device login's address with the code in it, if any.
    """

    url: str | None = None
    redirect_uri: str | None = None
    user_code: str | None = None
    url_complete: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The wire form: `login_wait`'s, then `"url"`, `"redirect_uri"`,
        `"user_code"` and `"url_complete"`."""
        out = LoginResult.to_dict(self)
        out["url"] = self.url
        out["redirect_uri"] = self.redirect_uri
        out["user_code"] = self.user_code
        out["url_complete"] = self.url_complete
        return out

    @classmethod
    def of(
        cls,
        ended: LoginResult,
        url: str | None,
        redirect_uri: str | None,
        user_code: str | None = None,
        url_complete: str | None = None,
    ) -> LoginStart:
        """How the login stands (`ended`), with where the user goes."""
        return cls(
            server=ended.server,
            done=ended.done,
            connected=ended.connected,
            state=ended.state,
            error=ended.error,
            unsupported=ended.unsupported,
            url=url,
            redirect_uri=redirect_uri,
            user_code=user_code,
            url_complete=url_complete,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LoginStart:
        """Read the wire form back, forgivingly."""
        return cls.of(
            LoginResult.from_dict(data),
            read_str(data.get("url")),
            read_str(data.get("redirect_uri")),
            read_str(data.get("user_code")),
            read_str(data.get("url_complete")),
        )


@dataclass(frozen=True, slots=True)
class CallbackReply:
    """`login_callback`: what the daemon made of a pasted redirect URL.

    Attributes:
        server: The connection.
        message: What happened, for the user.
    """

    server: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"server", "message"}`."""
        return {"server": self.server, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CallbackReply:
        """Read the wire form back, forgivingly."""
        return cls(
            server=read_str(data.get("server")) or "",
            message=read_str(data.get("message")) or "",
        )


@dataclass(frozen=True, slots=True)
class LogoutReply:
    """`logout`: whether there were tokens to forget.

    Attributes:
        server: The connection.
        forgot: Tokens or a client registration were stored and are gone.
    """

    server: str = ""
    forgot: bool = False

    def to_dict(self) -> dict[str, object]:
        """The wire form: `{"server", "forgot"}`."""
        return {"server": self.server, "forgot": self.forgot}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LogoutReply:
        """Read the wire form back, forgivingly."""
        return cls(
            server=read_str(data.get("server")) or "",
            forgot=data.get("forgot") is True,
        )


# ------------------------------------------------------------------ token


@dataclass(frozen=True, slots=True)
class TokenReply:
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

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field, by name."""
        return {
            "source": self.source,
            "path": self.path,
            "rotated": self.rotated,
            "streams_ended": self.streams_ended,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> TokenReply:
        """Read the wire form back, forgivingly."""
        return cls(
            source=read_str(data.get("source")) or "",
            path=read_str(data.get("path")),
            rotated=data.get("rotated") is True,
            streams_ended=read_int(data.get("streams_ended")) or 0,
        )


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


# ----------------------------------------------------------------- update


@dataclass(frozen=True, slots=True)
class UpdateReply:
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

    def to_dict(self) -> dict[str, object]:
        """The wire form: every field by its name."""
        return {
            "server": self.server,
            "package": self.package,
            "locked": self.locked,
            "available": self.available,
            "published": self.published,
            "newest": self.newest,
            "note": self.note,
            "taken": self.taken,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> UpdateReply:
        """Read the wire form back, forgivingly."""
        text = {
            key: read_str(data.get(key)) or ""
            for key in (
                "server",
                "package",
                "locked",
                "available",
                "published",
                "newest",
                "note",
            )
        }
        return cls(**text, taken=data.get("taken") is True)
