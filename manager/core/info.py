"""`info`'s reply, typed: the daemon-wide facts `status`'s footer and the HUD show.

`DaemonInfo` and its parts (the last run of startup.lua, the OTLP exporter's
health, the stdio start slots, the clients attached now), each a `wire.Wire`
read back forgivingly like every reply (`replies.py` says how). Pure: the CLI's
light client and the HUD import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .wire import Wire, write_fields

__all__ = [
    "OTLP_OFF",
    "AttachedClient",
    "DaemonInfo",
    "LastReload",
    "OtlpStatus",
    "StartSlots",
]


@dataclass(frozen=True, slots=True)
class OtlpStatus(Wire):
    """Whether OTLP exports work: the `otlp` entry of `info` when exporting.

    Attributes:
        endpoint: Where exports go (secrets masked).
        protocol: `grpc` or `http/protobuf`.
        ok: The last export worked; None before the first (or if unknown).
        last_error: Why the last failed export failed.
        exports: Exports that worked.
        failures: Exports that failed.
        spans_lost: Spans recorded and never delivered: in exports that
            failed, or dropped because the export queue was full.
    """

    endpoint: str = ""
    protocol: str = ""
    ok: bool | None = None
    last_error: str | None = None
    exports: int = 0
    failures: int = 0
    spans_lost: int = 0


OTLP_OFF = "off"
"""The `otlp` entry of `info` when nothing is exported over OTLP."""


@dataclass(frozen=True, slots=True)
class StartSlots(Wire):
    """The stdio start slots: how many servers may start at a time.

    Attributes:
        slots: Starts at a time.
        starting: Starts under way.
        waiting: Starts waiting for a slot.
    """

    slots: int = 0
    starting: int = 0
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class AttachedClient(Wire):
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


_OK_RUN = frozenset({"line", "message"})
"""What a run that went well leaves out of its wire form."""


@dataclass(frozen=True, slots=True)
class LastReload(Wire):
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
        return write_fields(self, _OK_RUN if self.ok else frozenset())


@dataclass(frozen=True, slots=True)
class DaemonInfo(Wire):
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
