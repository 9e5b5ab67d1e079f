"""The seam between a connection and its upstream: data types and protocols.

`connection.py` and the test fakes know only these: `Transport.open(spec, hooks)`
yields an `Upstream`. Nothing here imports the `mcp` SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from ..core.spec import ConnectionSpec

__all__ = [
    "CallResult",
    "EXIT_CODE_WAIT",
    "Hooks",
    "LossReport",
    "ProgressCallback",
    "ServerInfo",
    "ToolInfo",
    "Transport",
    "Upstream",
]

EXIT_CODE_WAIT = 0.5
"""Seconds to wait for an exit code after a stdio server closed its stdout."""


class ProgressCallback(Protocol):
    """Receives a call's `notifications/progress` from the server."""

    async def __call__(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...


# ----------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One upstream tool as listed.

    Attributes:
        name: The tool's name on its server.
        description: Its description, or "".
        raw: The full tool definition as a JSON-ready dict (camelCase keys).
    """

    name: str
    description: str
    raw: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call's result.

    Attributes:
        is_error: The tool reported an error (`isError`).
        data: The result as a JSON-ready dict (camelCase keys, as on the wire).
        raw: The SDK's result object, for pass-through without re-encoding.
    """

    is_error: bool
    data: Mapping[str, object]
    raw: object = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server told us in `initialize`."""

    name: str
    version: str
    protocol: str
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class LossReport:
    """Why an established session ended."""

    reason: str
    exit_code: int | None = None
    error_type: str = "Disconnected"


@dataclass(slots=True)
class Hooks:
    """Callbacks from the transport to its connection. All synchronous.

    Attributes:
        on_spawn: A stdio server process started (pid).
        on_stderr: A line the server wrote to stderr (or a note about bad stdout).
        on_tools_changed: The server sent `notifications/tools/list_changed`.
    """

    on_spawn: Callable[[int], None] = lambda pid: None
    on_stderr: Callable[[str], None] = lambda line: None
    on_tools_changed: Callable[[], None] = lambda: None


class Upstream(Protocol):
    """A connected, initialized session with all tools listed."""

    @property
    def info(self) -> ServerInfo:
        """Server identity and negotiated protocol."""
        ...

    @property
    def pid(self) -> int | None:
        """The stdio server process id, None for HTTP/SSE."""
        ...

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """All tools, as listed at connect time or by the last `list_tools()`."""
        ...

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        """List all pages again.

        Raises:
            TransportError: The session failed.
        """
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        """Call a tool.

        Args:
            name: The tool's name on this server.
            arguments: Its arguments.
            limit: Seconds to wait for the result.
            meta: `_meta` to send with the request (e.g. W3C `traceparent`).
            progress: Receives the server's progress notifications for the call.

        Raises:
            TransportError: Disconnected (the session died) or ConnectTimeout-like
                failures; `MCPError`s from the server are mapped too.
        """
        ...

    async def ping(self, limit: float) -> None:
        """Check the server answers (ping, or a cheap tools/list if ping is unknown).

        Raises:
            Disconnected: No answer within `timeout`, or the session failed.
        """
        ...

    async def wait_lost(self) -> LossReport:
        """Return when the transport itself reports the end (EOF, exit)."""
        ...

    async def wait_suspect(self) -> None:
        """Return when the server may have gone (its HTTP event stream ended).

        Not a loss by itself (servers end that stream at will): the caller
        probes with a ping at once instead of at the next `ping_interval`.
        """
        ...


class Transport(Protocol):
    """Opens upstream sessions. `connection.py` knows only this protocol."""

    def open(
        self, spec: ConnectionSpec, hooks: Hooks
    ) -> AbstractAsyncContextManager[Upstream]:
        """Connect, initialize and list all tools within `spec.connect_timeout`.

        Raises:
            TransportError: On any failure, already mapped and redacted.
            ConfigError: A `${env:NAME}` in the spec is not set.
        """
        ...
