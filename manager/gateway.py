"""The aggregated MCP endpoint: one stable MCP server in front of every upstream.

Downstream clients (editors, agents) connect once, over streamable HTTP at `/mcp`
(`mcp-manager run --listen HOST:PORT`) or over this process's own stdin/stdout
(`mcp-manager stdio`), and see the tools of every upstream as `{server}__{tool}`.
This is the only module that imports the server side of the `mcp` SDK.

* **Tool table.** Rebuilt from the manager's connections whenever an event says
  a tool list may have changed (`connected`, `tools_changed`, `removed`, …),
  debounced by `LIST_CHANGED_DEBOUNCE`. The last known tools of a reconnecting
  upstream stay listed. When the union changes, every downstream session gets
  `notifications/tools/list_changed` (handshake-era sessions on their
  standalone channel, 2026-07-28 clients on their `subscriptions/listen` stream).
  Names that are not valid MCP tool names (`[A-Za-z0-9._-]{1,128}`) or that
  collide are renamed deterministically, never dropped, and each rename is
  logged once and marked in the tool's `_meta` (`mcp-manager/upstream`).
* **Calls** go through `Manager.call`: forwarded at once to a connected
  upstream with the caller's `_meta` (W3C trace context) and progress; held up
  to `hold` for a reconnecting one, then answered with a tool error
  (`isError: true`) naming the server, its state, attempt, next retry and last
  error. Never retried. Cancelling the downstream request cancels the upstream
  call (the SDK sends `notifications/cancelled` on).
* **Security** (HTTP): `_Guard` checks the Host header (DNS rebinding), the
  Origin header (only the endpoint's own loopback origins unless allowed
  explicitly) and, when configured, a bearer token, before the SDK sees the
  request. `endpoint_options` refuses a non-loopback bind without a token.
* **Lifecycle.** uvicorn runs inside the daemon's event loop on a socket we
  bind ourselves (so a busy port is a clear `EndpointError`, not uvicorn's
  `sys.exit`), without its signal handlers (the daemon owns signals), and is
  stopped with `should_exit` and a bounded grace.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import socket
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
import uvicorn
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ToolsListChanged,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import __version__
from .core.errors import (
    CallError,
    ManagerError,
    ServerUnavailable,
    UnknownServer,
)
from .core.events import Event
from .core.redact import SECRETS
from .engine.bus import EventBus
from .engine.manager import Manager
from .transport.base import ProgressCallback

__all__ = [
    "HTTP_PATH",
    "LIST_CHANGED_DEBOUNCE",
    "SEPARATOR",
    "TOKEN_ENV",
    "UPSTREAM_META_KEY",
    "EndpointError",
    "EndpointOptions",
    "Gateway",
    "HttpEndpoint",
    "ToolRoute",
    "ToolTable",
    "build_tool_table",
    "endpoint_options",
]

logger = logging.getLogger(__name__)

SEPARATOR = "__"
"""Between the server and the tool name; connection names cannot contain it."""

MAX_TOOL_NAME = 128
"""Longest valid MCP tool name, characters."""

HTTP_PATH = "/mcp"
"""Where the streamable HTTP endpoint is served."""

TOKEN_ENV = "MCP_MANAGER_TOKEN"
"""Environment variable holding the bearer token (`--token-file` wins)."""

UPSTREAM_META_KEY = "mcp-manager/upstream"
"""`_meta` key on a renamed tool: `{"server": ..., "tool": ...}` it calls."""

ERROR_META_KEY = "mcp-manager/error"
"""`_meta` key on a tool error made by the gateway: the server's status."""

LIST_CHANGED_DEBOUNCE = 0.05
"""Seconds to gather tool-list changes before rebuilding and notifying once."""

STARTUP_LIST_WAIT = 5.0
"""Seconds after start during which `tools/list` waits for connections still on
their first attempt, so a client that lists once at startup sees their tools."""

NOTIFY_TIMEOUT = 1.0
"""Seconds a `list_changed` notification may take per session before it is dropped."""

SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds without a request after which an HTTP session is forgotten (the SDK
closes it after the same time)."""

HTTP_SHUTDOWN_GRACE = 1
"""Seconds uvicorn waits for open requests and streams when stopping (an int)."""

HTTP_KEEP_ALIVE = 30
"""Seconds an idle downstream connection stays open: longer than clients keep
theirs (httpx: 5 s), so a client never sends on a connection we are closing."""

HTTP_STOP_LIMIT = 3.0
"""Seconds `HttpEndpoint.aclose` waits for uvicorn before giving up on it."""

_FORWARDED_META_DROP = "io.modelcontextprotocol/"
"""Reserved `_meta` keys that describe the downstream envelope, not the call."""

_TABLE_EVENTS = frozenset(
    {
        "added",
        "updated",
        "connected",
        "connect_failed",
        "tools_changed",
        "removed",
        "config_loaded",
        "lagged",
    }
)
"""Event kinds after which the tool table (or first-attempt state) may differ."""

_VALID_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9._-]")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class EndpointError(ManagerError):
    """The MCP endpoint cannot be set up: bad `--listen`, a non-loopback bind
    without a token, an unreadable token file, or the address is taken."""


# --------------------------------------------------------------------- tool table


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """Where an exposed tool name leads.

    Attributes:
        name: The name downstream clients see.
        server: The connection.
        tool: The tool's name on that server.
    """

    name: str
    server: str
    tool: str


@dataclass(frozen=True, slots=True)
class ToolTable:
    """The union of all upstream tools, as exposed downstream.

    Attributes:
        routes: Exposed name -> route.
        tools: The exposed tool definitions, server by server, in listing order.
        problems: One line per tool that had to be renamed or was left out.
    """

    routes: Mapping[str, ToolRoute] = field(default_factory=dict)
    tools: tuple[types.Tool, ...] = ()
    problems: tuple[str, ...] = ()

    def same_tools(self, other: ToolTable) -> bool:
        """Whether both expose the same definitions (what list_changed is about)."""
        return self.tools == other.tools


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:6]


def _with_digest(name: str, server: str, tool: str) -> str:
    suffix = f"_{_digest(server, tool)}"
    return name[: MAX_TOOL_NAME - len(suffix)] + suffix


def _candidate(server: str, tool: str) -> tuple[str, str | None]:
    """The exposed name for (server, tool) and why it differs, if it does."""
    plain = f"{server}{SEPARATOR}{tool}"
    if _VALID_NAME.fullmatch(plain):
        return plain, None
    cleaned = _INVALID_CHAR.sub("_", tool) or "_"
    name = f"{server}{SEPARATOR}{cleaned}"
    reasons = []
    if cleaned != tool:
        reasons.append("its name has characters MCP tool names may not contain")
    if len(name) > MAX_TOOL_NAME:
        name = _with_digest(name, server, tool)
        reasons.append(f"'{plain}' would be longer than {MAX_TOOL_NAME} characters")
    return name, " and ".join(reasons) or "its name is not a valid MCP tool name"


def build_tool_table(sources: Iterable[tuple[str, Sequence[Any]]]) -> ToolTable:
    """Expose every upstream tool under a unique, valid MCP tool name.

    Args:
        sources: (connection name, its tools) pairs; each tool has `name` and
            `raw` (the JSON tool definition), like `transport.ToolInfo`.

    Returns:
        The table. A tool whose plain name `{server}__{tool}` is valid and unique
        keeps it; otherwise it gets a cleaned and/or hashed name (stable for the
        same server and tool), recorded in `problems` and in its `_meta`.
    """
    entries: list[tuple[str, str, Mapping[str, object], str, str | None]] = []
    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    for server, tools in sorted(sources, key=lambda pair: pair[0]):
        for info in tools:
            key = (server, info.name)
            if key in seen:
                problems.append(
                    f"{server}: tool {info.name!r} is listed twice by the server; "
                    "only the first definition is exposed"
                )
                continue
            seen.add(key)
            name, reason = _candidate(server, info.name)
            entries.append((server, info.name, info.raw, name, reason))
    # Resolve collisions: a plain (unrenamed) name wins, then the first server.
    claims: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        claims.setdefault(entry[3], []).append(index)
    final: dict[int, tuple[str, str | None]] = {}
    for name, indexes in claims.items():
        ordered = sorted(indexes, key=lambda i: (entries[i][4] is not None, i))
        final[ordered[0]] = (name, entries[ordered[0]][4])
        for loser in ordered[1:]:
            server, tool = entries[loser][0], entries[loser][1]
            owner = entries[ordered[0]]
            why = f"'{name}' is already taken by {owner[0]}'s tool {owner[1]!r}"
            final[loser] = (_with_digest(name, server, tool), why)
    routes: dict[str, ToolRoute] = {}
    exposed: list[types.Tool] = []
    for index, (server, tool, raw, _, _) in enumerate(entries):
        name, reason = final[index]
        if name in routes:  # a hashed name hit another one: vanishingly rare
            problems.append(
                f"{server}: tool {tool!r} left out: no unique name for it ({name!r})"
            )
            continue
        definition = dict(raw)
        definition["name"] = name
        if reason is not None:
            meta = definition.get("_meta")
            definition["_meta"] = {
                **(meta if isinstance(meta, dict) else {}),
                UPSTREAM_META_KEY: {"server": server, "tool": tool},
            }
            problems.append(f"{server}: tool {tool!r} is exposed as {name!r}: {reason}")
        try:
            model = types.Tool.model_validate(definition, by_name=False)
        except ValueError as exc:
            problems.append(
                f"{server}: tool {tool!r} left out: invalid definition "
                f"({str(exc).splitlines()[0]})"
            )
            continue
        routes[name] = ToolRoute(name=name, server=server, tool=tool)
        exposed.append(model)
    return ToolTable(routes=routes, tools=tuple(exposed), problems=tuple(problems))


# ------------------------------------------------------------------------ gateway


@dataclass(slots=True)
class _Peer:
    """A handshake-era downstream session, for `list_changed`."""

    session: ServerSession
    last_seen: float


class _GatewayServer(Server[dict[str, Any]]):
    """The SDK server, advertising `tools.listChanged` on every transport.

    The streamable HTTP session manager calls `create_initialization_options()`
    without arguments, so the default has to change here.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def _text_error(
    text: str, meta: Mapping[str, object] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta=dict(meta) if meta else None,
    )


def _forwarded_meta(params: Mapping[str, Any] | None) -> dict[str, object] | None:
    """The downstream request's `_meta` minus what describes only that hop."""
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict) or not meta:
        return None
    out = {
        key: value
        for key, value in meta.items()
        if key != "progressToken" and not key.startswith(_FORWARDED_META_DROP)
    }
    return out or None


def _progress_forwarder(session: ServerSession, token: str | int) -> ProgressCallback:
    """Relay upstream progress to the downstream caller under its own token.

    Sent without `related_request_id`: over HTTP the endpoint answers with plain
    JSON (no per-request stream), so progress travels on the session's
    standalone stream; the token tells the client which call it belongs to.
    """

    async def forward(
        progress: float, total: float | None, message: str | None
    ) -> None:
        await session.send_progress_notification(token, progress, total, message)

    return forward


def _session_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The downstream connection a request came on: its HTTP session id, or stdio."""
    request = ctx.request
    if request is None:
        return "stdio"
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


class Gateway:
    """The aggregated MCP server over a running `Manager`.

    Args:
        manager: The connections (entered).
        bus: The event bus (tool-list changes are read from it).
        debounce: Seconds to gather changes before one `list_changed`.
        list_wait: Seconds after start during which `tools/list` waits for
            connections on their first attempt.
        config_pending: The configuration has not been loaded yet: `tools/list`
            also waits (within `list_wait`) for the first `config_loaded`.
    """

    def __init__(
        self,
        manager: Manager,
        bus: EventBus,
        *,
        debounce: float = LIST_CHANGED_DEBOUNCE,
        list_wait: float = STARTUP_LIST_WAIT,
        config_pending: bool = False,
    ) -> None:
        self.manager = manager
        self._config_pending = config_pending
        self._bus = bus
        self._debounce = debounce
        self._list_wait = list_wait
        self._table = ToolTable()
        self._dirty = anyio.Event()
        self._refreshed = anyio.Event()
        self._settle_until = 0.0
        self._reported: set[str] = set()
        self._peers: dict[str, _Peer] = {}
        self._subscriptions = InMemorySubscriptionBus()
        self._http: HttpEndpoint | None = None
        self._scope: anyio.CancelScope | None = None
        self.server: Server[dict[str, Any]] = _GatewayServer(
            "mcp-manager",
            version=__version__,
            instructions=(
                "Tools of the MCP servers that mcp-manager keeps connected, named "
                "SERVER__TOOL. A server that is restarting keeps its tools listed; "
                "a call to it waits briefly for it, then fails with its status."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._subscriptions),
        )
        self.server.middleware.append(self._track_session)

    @property
    def table(self) -> ToolTable:
        """The tool table as last rebuilt."""
        return self._table

    @property
    def url(self) -> str | None:
        """The HTTP endpoint's URL once it listens, else None."""
        return self._http.url if self._http is not None else None

    # --- lifecycle ------------------------------------------------------------

    async def serve(
        self,
        endpoint: EndpointOptions | None = None,
        *,
        stdio: bool = False,
        on_stdio_closed: Callable[[], None] = lambda: None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep the tool table current and serve the requested endpoints.

        Runs until cancelled or `aclose()`. Reports started once the HTTP endpoint
        accepts requests (its address is then `url`).

        Args:
            endpoint: Serve streamable HTTP there.
            stdio: Serve MCP on this process's stdin/stdout.
            on_stdio_closed: Called once the stdio client closed stdin.

        Raises:
            EndpointError: The HTTP address cannot be bound (before reporting).
        """
        http = HttpEndpoint(self, endpoint) if endpoint is not None else None
        if http is not None:
            http.bind()
        self._http = http
        with anyio.CancelScope() as self._scope:
            async with anyio.create_task_group() as tg:
                await tg.start(self.run)
                if http is not None:
                    await tg.start(http.run)
                if stdio:
                    tg.start_soon(self._serve_stdio, on_stdio_closed)
                task_status.started()

    async def aclose(self) -> None:
        """Stop serving: HTTP first (bounded grace), then everything else."""
        if self._http is not None:
            await self._http.aclose()
        if self._scope is not None:
            self._scope.cancel()

    async def _serve_stdio(self, on_closed: Callable[[], None]) -> None:
        try:
            async with stdio_server() as (read, write):
                await self.server.run(
                    read, write, self.server.create_initialization_options()
                )
        finally:
            logger.info("stdio client closed the connection")
            on_closed()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Rebuild the table after relevant events and notify sessions (forever)."""
        remove = self._bus.add_listener(self._on_event)
        try:
            self._settle_until = anyio.current_time() + self._list_wait
            self._refresh()
            task_status.started()
            while True:
                await self._dirty.wait()
                await anyio.sleep(self._debounce)
                self._dirty = anyio.Event()
                if self._refresh():
                    await self.notify_tools_changed()
        finally:
            remove()

    def _on_event(self, event: Event) -> None:
        # A bus listener, not a subscription: it runs on every publish (two per
        # tool call), so it only filters and flags; the rebuild runs in `run`.
        if event.kind in _TABLE_EVENTS:
            self._dirty.set()
        if event.kind in ("config_loaded", "config_error"):
            self._config_pending = False

    def _refresh(self) -> bool:
        """Rebuild the table from the manager. Returns whether the tools changed."""
        table = build_tool_table(
            (conn.name, conn.tools) for conn in self.manager.connections()
        )
        for problem in table.problems:
            if problem not in self._reported:
                self._reported.add(problem)
                logger.warning("gateway: %s", problem)
        changed = not table.same_tools(self._table)
        self._table = table
        self._refreshed.set()
        self._refreshed = anyio.Event()
        if changed:
            logger.debug("gateway: %d tools exposed", len(table.tools))
        return changed

    async def notify_tools_changed(self) -> None:
        """Send `notifications/tools/list_changed` to every downstream session."""
        await self._subscriptions.publish(ToolsListChanged())
        now = time.monotonic()
        async with anyio.create_task_group() as tg:
            for key, peer in list(self._peers.items()):
                if now - peer.last_seen > SESSION_IDLE_TIMEOUT:
                    self._peers.pop(key, None)
                else:
                    tg.start_soon(self._notify_peer, key, peer)

    async def _notify_peer(self, key: str, peer: _Peer) -> None:
        try:
            with anyio.fail_after(NOTIFY_TIMEOUT):
                await peer.session.send_tool_list_changed()
        except Exception:  # boundary: a gone client must not stop the others
            logger.debug("gateway: dropping session %s (notify failed)", key[:8])
            self._peers.pop(key, None)

    def forget_session(self, key: str) -> None:
        """Stop notifying a downstream session (it was closed)."""
        self._peers.pop(key, None)

    @property
    def sessions(self) -> int:
        """Downstream sessions that get `list_changed` on their standalone channel."""
        return len(self._peers)

    # --- MCP handlers -----------------------------------------------------------

    async def _track_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if (
            ctx.method != "initialize"
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            key = _session_key(ctx)
            if key is not None:
                peer = self._peers.get(key)
                if peer is None:
                    self._peers[key] = _Peer(ctx.session, time.monotonic())
                else:
                    peer.last_seen = time.monotonic()
        return await call_next(ctx)

    async def _settle(self) -> None:
        """At startup, wait (bounded) until the configuration is loaded, no
        connection is on its first attempt and the table shows it all."""
        while anyio.current_time() < self._settle_until and (
            self._config_pending
            or self._dirty.is_set()  # a change the table does not show yet
            or any(conn.phase == "connecting" for conn in self.manager.connections())
        ):
            with anyio.move_on_after(self._settle_until - anyio.current_time()):
                await self._refreshed.wait()

    async def _list_tools(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListToolsResult:
        if anyio.current_time() < self._settle_until:
            await self._settle()
        return types.ListToolsResult(tools=list(self._table.tools))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        route = self._table.routes.get(name)
        if route is not None:
            server, tool = route.server, route.tool
        else:
            # Not (yet) in the table: a declared server that has not listed its
            # tools yet (first attempt, or a change not rebuilt yet) still gets
            # the call, with the usual hold; anything else is unknown.
            server, sep, tool = name.partition(SEPARATOR)
            if not sep or server not in self.manager.specs:
                raise MCPError(INVALID_PARAMS, self._unknown_tool(name))
        progress = None
        if ctx.meta is not None:
            token = ctx.meta.get("progress_token")
            if isinstance(token, str | int):
                progress = _progress_forwarder(ctx.session, token)
        try:
            result = await self.manager.call(
                server,
                tool,
                params.arguments,
                meta=_forwarded_meta(ctx.params),
                progress=progress,
            )
        except (ServerUnavailable, UnknownServer) as exc:
            return _text_error(f"{name}: {exc}", self._status_meta(server))
        except CallError as exc:
            cause = exc.__cause__
            if isinstance(cause, MCPError):  # the upstream's own protocol error
                raise MCPError(
                    cause.code, f"{server}: {cause.message}", cause.data
                ) from None
            return _text_error(f"{name}: {exc}", self._status_meta(server))
        raw = result.raw
        if isinstance(raw, types.CallToolResult):
            return raw
        return types.CallToolResult.model_validate(result.data, by_name=False)

    def _unknown_tool(self, name: str) -> str:
        servers = ", ".join(sorted(self.manager.specs)) or "none"
        return (
            f"unknown tool {name!r}: mcp-manager exposes tools as "
            f"SERVER{SEPARATOR}TOOL (servers: {servers}); list the tools again"
        )

    def _status_meta(self, server: str) -> dict[str, object] | None:
        status = self.manager.status(server)
        if status is None:
            return None
        keep = ("state", "attempt", "next_retry_in", "error", "since")
        return {ERROR_META_KEY: {"server": server, **{k: status.get(k) for k in keep}}}


# ------------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """Where and how the HTTP endpoint listens.

    Attributes:
        host: Interface to bind (an IP literal or `localhost`).
        port: TCP port; 0 picks a free one.
        token: Bearer token every request must carry; None for none.
        allowed_hosts: Extra Host header names accepted (besides loopback names
            and the bound address).
        allowed_origins: Extra Origin values accepted (besides the endpoint's
            own loopback origins).
    """

    host: str
    port: int
    token: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the bound address."""
        return _is_loopback(self.host)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT`, `:PORT` or `PORT` -> (host, port)."""
    value = text.strip()
    if value.isdigit():
        host, port_text = "127.0.0.1", value
    elif value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if not rest.startswith(":"):
            raise EndpointError(f"--listen {text!r}: use [IPV6]:PORT, e.g. [::1]:8765")
        port_text = rest[1:]
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise EndpointError(
                f"--listen {text!r}: use HOST:PORT, e.g. 127.0.0.1:8765"
            )
        host = host or "127.0.0.1"
        if ":" in host:
            raise EndpointError(f"--listen {text!r}: write IPv6 as [ADDR]:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise EndpointError(f"--listen {text!r}: port must be a number 0-65535")
    if host.lower() != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise EndpointError(
                f"--listen {text!r}: give an IP address (or localhost), "
                "not a host name, so the bound interface is unambiguous"
            ) from None
    return host, int(port_text)


def _read_token_file(path: str) -> str:
    file = Path(path)
    try:
        info = file.stat()
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise EndpointError(
            f"cannot read token file {path}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise EndpointError(f"token file {path} is not UTF-8 text") from None
    token = text.strip()
    if not token:
        raise EndpointError(f"token file {path} is empty")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "token file %s is readable by other users (mode %o); chmod 600 it",
            path,
            stat.S_IMODE(info.st_mode),
        )
    return token


def endpoint_options(
    listen: str,
    *,
    token_file: str | None = None,
    env: Mapping[str, str] = os.environ,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> EndpointOptions:
    """Validate `--listen` and the token settings.

    The token comes from `token_file` if given, else `$MCP_MANAGER_TOKEN`; it is
    registered as a secret, so it is masked wherever it would be logged.

    Raises:
        EndpointError: Bad address, unreadable or empty token file, or a
            non-loopback address without a token.
    """
    host, port = _parse_listen(listen)
    token = _read_token_file(token_file) if token_file else None
    if token is None:
        token = env.get(TOKEN_ENV, "").strip() or None
    if token is not None:
        if any(ch.isspace() for ch in token):
            raise EndpointError("the token must not contain whitespace")
        SECRETS.add([token])
    options = EndpointOptions(
        host=host,
        port=port,
        token=token,
        allowed_hosts=tuple(h.lower() for h in allowed_hosts),
        allowed_origins=tuple(o.rstrip("/") for o in allowed_origins),
    )
    if not options.loopback and token is None:
        raise EndpointError(
            f"refusing to listen on {listen} without a token: anyone who can reach "
            f"that address could call every tool. Set {TOKEN_ENV} or pass "
            "--token-file FILE (or listen on 127.0.0.1)"
        )
    return options


def _host_of(url_host: str) -> str:
    return f"[{url_host}]" if ":" in url_host else url_host


class _Guard:
    """ASGI middleware: Host, Origin and bearer-token checks, then the MCP app.

    Args:
        app: The MCP ASGI app.
        hosts: Accepted Host header names (any port); None accepts any.
        origins: Accepted Origin values (exact).
        token: The bearer token, or None.
        on_delete: Called with the session id of a DELETE (the session ends).
    """

    def __init__(
        self,
        app: Any,
        *,
        hosts: frozenset[str] | None,
        origins: frozenset[str],
        token: str | None,
        on_delete: Callable[[str], None],
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self._token = f"Bearer {token}".encode() if token else None
        self._on_delete = on_delete

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = auth = session = None
        for key, value in scope["headers"]:
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value
            elif key == b"authorization":
                auth = value
            elif key == b"mcp-session-id":
                session = value
        problem = self._check(host, origin, auth)
        if problem is not None:
            status, message, extra = problem
            await _reject(send, status, message, extra)
            return
        await self.app(scope, receive, send)
        if scope["method"] == "DELETE" and session is not None:
            self._on_delete(session.decode("latin-1"))

    def _check(
        self, host: bytes | None, origin: bytes | None, auth: bytes | None
    ) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if self.hosts is not None:
            name = _host_name(host.decode("latin-1")) if host else ""
            if name not in self.hosts:
                return 421, f"Host {name or '(none)'!r} is not accepted here", []
        if origin is not None and origin.decode("latin-1") not in self.origins:
            shown = origin.decode("latin-1")[:100]
            return 403, f"Origin {shown!r} is not allowed (see --allow-origin)", []
        if self._token is not None and (
            auth is None or not hmac.compare_digest(auth, self._token)
        ):
            challenge = [(b"www-authenticate", b'Bearer realm="mcp-manager"')]
            return 401, "missing or wrong bearer token", challenge
        return None


def _host_name(header: str) -> str:
    """The name part of a Host header, lowercased (`[::1]:80` -> `[::1]`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0] if ":" in header else header


async def _reject(
    send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the daemon owns SIGINT/SIGTERM.

    uvicorn's own handlers would re-raise a captured signal after serving,
    which the daemon would see as a second Ctrl-C (a forced stop).
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpEndpoint:
    """Streamable HTTP at `HTTP_PATH`, served by uvicorn in this event loop.

    Args:
        gateway: The MCP server to serve.
        options: Address, token and allowed hosts/origins.
    """

    def __init__(self, gateway: Gateway, options: EndpointOptions) -> None:
        self.gateway = gateway
        self.options = options
        self._sock: socket.socket | None = None
        self._server: _Uvicorn | None = None
        self._done = anyio.Event()
        self.port = options.port

    @property
    def url(self) -> str:
        """`http://HOST:PORT/mcp` as bound."""
        return f"http://{_host_of(self.options.host)}:{self.port}{HTTP_PATH}"

    def bind(self) -> None:
        """Bind and listen now, so a bad or busy address fails before startup.

        Raises:
            EndpointError: The address cannot be bound.
        """
        host, port = self.options.host, self.options.port
        where = f"{_host_of(host)}:{port}"
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise EndpointError(f"cannot listen on {where}: {exc}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(1024)
        except OSError as exc:
            sock.close()
            raise EndpointError(
                f"cannot listen on {where}: {_bind_reason(exc)}"
            ) from None
        self._sock = sock
        self.port = sock.getsockname()[1]

    def _app(self) -> _Guard:
        options = self.options
        app = self.gateway.server.streamable_http_app(
            streamable_http_path=HTTP_PATH,
            # Host/Origin are checked by `_Guard`, with our own rules.
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=False
            ),
            session_idle_timeout=SESSION_IDLE_TIMEOUT,
            # Plain JSON responses, not an SSE stream per POST: the per-request
            # stream machinery was the largest cost of a forwarded call
            # (profiled). Progress still reaches the client, on its standalone
            # stream (see `_progress_forwarder`).
            json_response=True,
        )
        names = {"localhost", "127.0.0.1", "[::1]", *options.allowed_hosts}
        wildcard = options.host in ("0.0.0.0", "::")
        if not wildcard:
            names.add(_host_of(options.host).lower())
        hosts: frozenset[str] | None = frozenset(names)
        if wildcard and not options.allowed_hosts:
            logger.warning(
                "listening on %s: the Host header is not checked (the bearer "
                "token protects the endpoint); pin names with --allow-host",
                options.host,
            )
            hosts = None
        origins = {
            f"http://{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")
        }
        if not options.loopback and not wildcard:
            origins.add(f"http://{_host_of(options.host)}:{self.port}")
        origins.update(options.allowed_origins)
        return _Guard(
            app,
            hosts=hosts,
            origins=frozenset(origins),
            token=options.token,
            on_delete=self.gateway.forget_session,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until `aclose()`; reports started once uvicorn accepts requests."""
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        config = uvicorn.Config(
            self._app(),
            log_config=None,
            log_level=None,
            access_log=False,
            lifespan="on",
            server_header=False,
            timeout_graceful_shutdown=HTTP_SHUTDOWN_GRACE,
            timeout_keep_alive=HTTP_KEEP_ALIVE,
        )
        server = self._server = _Uvicorn(config)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [self._sock])
                while not server.started:  # uvicorn has no started event
                    if server.should_exit:
                        raise EndpointError(
                            f"the MCP endpoint at {self.url} failed to start"
                        )
                    await anyio.sleep(0.005)
                logger.info("MCP endpoint listening at %s", self.url)
                task_status.started()
        finally:
            self._done.set()
            self._sock.close()

    async def aclose(self) -> None:
        """Stop uvicorn gracefully, waiting at most `HTTP_STOP_LIMIT` seconds."""
        if self._server is None:
            return
        self._server.should_exit = True
        with anyio.move_on_after(HTTP_STOP_LIMIT, shield=True):
            await self._done.wait()


def _bind_reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use (another mcp-manager, or another program?)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "that address does not belong to this machine"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return exc.strerror or str(exc)
