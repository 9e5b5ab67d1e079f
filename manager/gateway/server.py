"""The aggregated MCP endpoint's server: one MCP server in front of every upstream.

Downstream clients (editors, agents) connect once, over streamable HTTP at `/mcp`
(`mcp-manager run --listen HOST:PORT`) or over this process's own stdin/stdout
(`mcp-manager stdio`), and see the tools of every upstream as `{server}__{tool}`.
The `gateway` package and `mcpserver` (what it shares with the demo server) are
the only ones in the manager that import the server side of the SDK.

* **Tool table.** Rebuilt from the manager's connections whenever an event says
  a tool list may have changed (`connected`, `tools_changed`, `removed`, …),
  debounced by `LIST_CHANGED_DEBOUNCE`. The last known tools of a reconnecting
  upstream stay listed. When the union changes, every downstream session gets
  `notifications/tools/list_changed` (handshake-era sessions on their
  standalone channel, 2026-07-28 clients on their `subscriptions/listen` stream).
  Names that are not valid MCP tool names (`[A-Za-z0-9._-]{1,128}`) or that
  collide are renamed deterministically, never dropped, and each rename is
  logged once and marked in the tool's `_meta` (`mcp-manager/upstream`).
* **Calls** (`tools.ToolCalls`) go through `Manager.call`: forwarded at once
  to a connected upstream, held up to `hold` for a reconnecting one, then
  answered with a tool error naming the server's state. Never retried.
  Cancelling the downstream request cancels the upstream call.
* **Security** (HTTP): `Guard` checks the Host header (DNS rebinding), the
  Origin header (only the endpoint's own loopback origins unless allowed
  explicitly) and the bearer token (required by default, `gateway.options`),
  before the SDK sees the request. `endpoint_options` allows `--no-token` on
  loopback only.
* **Lifecycle.** uvicorn runs inside the daemon's event loop on a socket we
  bind ourselves (so a busy port is a clear `EndpointError`, not uvicorn's
  `sys.exit`), without its signal handlers (the daemon owns signals), and is
  stopped with `should_exit` and a bounded grace.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.server.subscriptions import ResourceUpdated as UpdatedOnBus
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..core.events import (
    CatalogChanged,
    Connected,
    Event,
    ResourceUpdated,
    ToolsChanged,
)
from ..core.replies import TokenReply
from ..core.spec import ConnectionSpec
from ..engine.bus import EventBus
from ..engine.manager import Manager
from ..engine.tracing import NO_TRACING
from ..mcpserver.peers import ListChangedServer
from ..transport.base import (
    HANDSHAKE,
    MODERN,
    TASKS_EXTENSION,
    UI_EXTENSION,
    ToolInfo,
)
from .apps import offers_apps, resource_uri, with_resource_uri
from .attached import Attached
from .catalog import is_rewrite, rewrites_line
from .early import INSTRUCTIONS, SERVER_NAME, EarlyStart
from .names import NameSource, ToolTable, build_name_table
from .options import SESSION_IDLE_TIMEOUT, EndpointError, EndpointOptions
from .replay import replayed
from .rounds import client_era
from .routing import Features
from .sessions import Sessions
from .stdio import stdio_streams
from .stopping import STOP_GRACE
from .tasks import TASK_METHODS, TaskParams, Tasks, offers_tasks
from .tools import ToolCalls
from .views import current_profile

if TYPE_CHECKING:
    from .http import HttpEndpoint

__all__ = [
    "Gateway",
    "LIST_CHANGED_DEBOUNCE",
    "STARTUP_LIST_WAIT",
]

logger = logging.getLogger("manager.gateway")

LIST_CHANGED_DEBOUNCE = 0.05
"""Seconds to gather tool-list changes before rebuilding and notifying once."""

STARTUP_LIST_WAIT = 5.0
"""Seconds after start during which `tools/list` waits for connections still on
their first attempt, so a client that lists once at startup sees their tools."""

NOTICE_QUEUE = 1000
"""Upstream notices (resource updates, log messages) waiting to be passed on;
beyond it they are dropped and counted (`notices_dropped`)."""


_HEADER_KEY = '"x-mcp-header"'
"""How an input schema binds an argument to an `Mcp-Param-*` header."""

_TABLE_EVENTS = frozenset(
    {
        "added",
        "updated",
        "connected",
        "connect_failed",
        "tools_changed",
        "catalog_changed",
        "settings_changed",
        "tool_changed",
        "tools_approved",
        "removed",
        "config_loaded",
        "lagged",
    }
)
"""Event kinds after which the tool table (or first-attempt state) may differ."""


@dataclasses.dataclass(frozen=True, slots=True)
class FreeLog:
    """An upstream log message no request in flight took, as the server sent
    it (logger and data unchanged: the bus's `ServerLog` has them as text)."""

    server: str
    level: str
    logger: str | None
    data: object


class _WhileRecording:
    """A server middleware that runs only while spans are recorded."""

    def __init__(self, inner: Any, recording: Callable[[], bool]) -> None:
        self._inner = inner
        self._recording = recording

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if self._recording():
            return cast(HandlerResult, await self._inner(ctx, call_next))
        return await call_next(ctx)


class UnionServer(ListChangedServer):
    """The endpoint's server: advertises the union of what the upstreams offer.

    A capability (prompts, resources, logging, completions) that `offered()`
    does not name is left out of `initialize`'s (and `server/discover`'s)
    answer; the tasks and MCP Apps extensions are in it when `offered()`
    names them.
    """

    offered: Callable[[str], set[str]] = staticmethod(lambda era: set())
    """What the upstreams offer a client of an era (`rounds.client_era`)."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        caps = super().get_capabilities(*args, **kwargs)
        # `server/discover` names its revision; `initialize` is the handshake.
        version = kwargs.get("protocol_version")
        offered = self.offered(
            MODERN if version in MODERN_PROTOCOL_VERSIONS else HANDSHAKE
        )
        updates: dict[str, Any] = {
            field: None
            for field in ("prompts", "resources", "logging", "completions")
            if field not in offered
        }
        extensions: dict[str, dict[str, Any]] = {
            name: {} for name in (TASKS_EXTENSION, UI_EXTENSION) if name in offered
        }
        if extensions:
            updates["extensions"] = {**(caps.extensions or {}), **extensions}
        return caps.model_copy(update=updates) if updates else caps


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
        self.header_schemas: Mapping[str, Any] = {}
        """The input schemas of the exposed tools that bind arguments to
        `Mcp-Param-*` headers (SEP-2243), by name: the hot path checks those
        calls' headers against them."""
        self._dirty = anyio.Event()
        self._announced: set[str] = set()
        """Lists a server said changed since the last refresh: clients are
        told, as the server told its own, even when what we show is the same."""
        self._refreshed = anyio.Event()
        self._settle_until = 0.0
        self._profiles_seen: Mapping[str, object] = {}
        """The profiles the clients were last told about (`list_changed`)."""
        self._reported: set[str] = set()
        self.downstream = Sessions(
            idle_timeout=SESSION_IDLE_TIMEOUT,
            on_forget=lambda record: self.features.released(record),
            on_join=lambda record: self.features.joined(record),
        )
        """One record per downstream session (`sessions.Downstream`), kept by
        one middleware; the hot path (`exchange`) and `Features` read it."""
        self._subscriptions = InMemorySubscriptionBus()
        self._notices: MemoryObjectSendStream[Event | FreeLog] | None = None
        self.notices_dropped = 0
        self._http: HttpEndpoint | None = None
        self._scope: anyio.CancelScope | None = None
        self.features = Features(manager, self.downstream)
        features = self.features
        self.tools = ToolCalls(manager, features, lambda: self._table, self._settled)
        with warnings.catch_warnings():
            # Logging is deprecated as of 2026-07-28 (SEP-2577); the upstreams and
            # clients we carry still speak the handshake era, where it is not.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[dict[str, Any]] = UnionServer(
                SERVER_NAME,
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self.tools.list_tools,
                on_call_tool=self.tools.call_tool,
                on_list_prompts=features.list_prompts,
                on_get_prompt=features.get_prompt,
                on_list_resources=features.list_resources,
                on_list_resource_templates=features.list_templates,
                on_read_resource=features.read_resource,
                on_subscribe_resource=features.subscribe,
                on_unsubscribe_resource=features.unsubscribe,
                on_completion=features.complete,
                on_set_logging_level=features.set_level,
                on_subscriptions_listen=features.listening(
                    ListenHandler(self._subscriptions)
                ),
            )
        assert isinstance(self.server, UnionServer)
        self.server.offered = self._offered
        # The SDK's own span per message (its OpenTelemetryMiddleware) costs a
        # few percent of each call even when nothing records: off with
        # telemetry, skipped while spans are dropped (no collector).
        tracing = manager.tracing
        self.server.middleware = [
            _WhileRecording(m, tracing.recording)
            if type(m).__name__ == "OpenTelemetryMiddleware"
            else m
            for m in self.server.middleware
            if tracing is not NO_TRACING
            or type(m).__name__ != "OpenTelemetryMiddleware"
        ]
        self.tasks = Tasks(manager)
        self.server.add_request_handler(
            "server/discover", types.RequestParams, self._discover
        )
        for method, handler in zip(
            TASK_METHODS,
            (self.tasks.get, self.tasks.update, self.tasks.cancel),
            strict=True,
        ):
            self.server.add_request_handler(method, TaskParams, handler)
        self.server.middleware.append(self.downstream.track)
        self.server.middleware.append(self.tools.relay)
        self.attached = Attached(
            self._run_session, self.profile_names, self.forget_session
        )

    @property
    def table(self) -> ToolTable:
        """The tool table as last rebuilt."""
        return self._table

    @property
    def url(self) -> str | None:
        """The HTTP endpoint's URL once it listens, else None."""
        return self._http.url if self._http is not None else None

    def token_reply(self, rotate: bool = False) -> TokenReply:
        """Where the HTTP endpoint's token is (`mcp-manager token`); with
        `rotate`, a new one replaces it first.

        Raises:
            EndpointError: No HTTP endpoint, or its token is not the daemon's
                to replace.
        """
        http = self._http
        if http is None:
            raise EndpointError(
                "this daemon serves no HTTP endpoint (run it with --listen)"
            )
        ended = 0
        if rotate:
            ended = http.rotate_token(lambda token: self.manager.secrets.add([token]))
        options = http.options
        return TokenReply(
            source=options.token_from,
            path=str(options.token_path) if options.token_path else None,
            rotated=rotate,
            streams_ended=ended,
        )

    # --- lifecycle ------------------------------------------------------------

    async def serve(
        self,
        endpoint: EndpointOptions | None = None,
        *,
        stdio: bool = False,
        on_stdio_closed: Callable[[], None] = lambda: None,
        early: EarlyStart | None = None,
        attach: tuple[Path, str] | None = None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep the tool table current and serve the requested endpoints.

        Runs until cancelled or `aclose()`. Reports started once the HTTP endpoint
        accepts requests (its address is then `url`).

        Args:
            endpoint: Serve streamable HTTP there.
            stdio: Serve MCP on this process's stdin/stdout.
            on_stdio_closed: Called once the stdio client closed stdin.
            early: The first stdin line, read (and maybe answered) before the
                SDK was loaded (`early.answer_initialize`); replayed first.
            attach: Serve MCP on this Unix socket for `mcp-manager attach`
                (`attached`), to clients that greet with this key (the control
                socket's, `control.keys`); its directory must exist and be
                private.

        Raises:
            EndpointError: The HTTP address cannot be bound (before reporting).
        """
        http = None
        if endpoint is not None:
            from .http import HttpEndpoint  # uvicorn loads only with --listen

            http = HttpEndpoint(self, endpoint)
        if http is not None:
            http.bind()
        self._http = http
        with anyio.CancelScope() as self._scope:
            async with anyio.create_task_group() as tg:
                await tg.start(self.run)
                if http is not None:
                    await tg.start(http.run)
                if attach is not None:
                    path, key = attach
                    await tg.start(partial(self.attached.serve, path, key=key))
                if stdio:
                    tg.start_soon(self._serve_stdio, on_stdio_closed, early)
                task_status.started()

    async def aclose(self) -> None:
        """Stop serving: HTTP first (bounded grace), then everything else,
        once the calls of `attach` clients in flight had the same grace to
        end by themselves."""
        # One grace for both, not one after the other.
        deadline = anyio.current_time() + STOP_GRACE
        if self._http is not None:
            await self._http.aclose(STOP_GRACE)
        await self.attached.wires.settle(max(0.0, deadline - anyio.current_time()))
        if self._scope is not None:
            self._scope.cancel()

    async def _run_session(self, read: Any, write: Any) -> None:
        """One downstream session on a stream pair, until the client leaves."""
        await self.server.run(read, write, self.server.create_initialization_options())

    async def _serve_stdio(
        self, on_closed: Callable[[], None], early: EarlyStart | None = None
    ) -> None:
        try:
            async with stdio_streams() as (read, write):
                if early is not None:
                    read, write = replayed(read, write, early)
                await self.server.run(
                    read, write, self.server.create_initialization_options()
                )
        finally:
            logger.info("stdio client closed the connection")
            on_closed()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Rebuild the tables after relevant events and notify sessions, and pass
        upstream notifications (resource updates, log messages) on (forever)."""
        notices, notices_out = anyio.create_memory_object_stream[Event | FreeLog](
            NOTICE_QUEUE
        )
        self._notices = notices
        self.features.on_free_log = self._free_log
        remove = self._bus.add_listener(self._on_event)
        try:
            self._settle_until = anyio.current_time() + self._list_wait
            self._refresh()
            async with anyio.create_task_group() as tg, notices, notices_out:
                tg.start_soon(self._pass_notifications, notices_out)
                await tg.start(self.features.held.run)  # 2026 clients' input rounds
                self.features.asks.spawn = tg.start_soon  # requests' notes
                tg.start_soon(self.tools.prepare)  # search profiles' indexes
                task_status.started()
                while True:
                    await self._dirty.wait()
                    await anyio.sleep(self._debounce)
                    self._dirty = anyio.Event()
                    tools, prompts, resources = self._refresh_all()
                    said, self._announced = self._announced, set()
                    profiles = dict(self.manager.profiles)
                    if profiles != self._profiles_seen:
                        # A profile edited or removed: what its clients see
                        # changed though the table did not (found by an audit).
                        self._profiles_seen = profiles
                        said |= {"tools", "prompts", "resources"}
                    tools = tools or "tools" in said
                    prompts = prompts or "prompts" in said
                    resources = resources or "resources" in said
                    tg.start_soon(self.tools.prepare)  # cheap when unchanged
                    if tools:
                        await self.notify_tools_changed()
                    if prompts:
                        await self._subscriptions.publish(PromptsListChanged())
                        await self.downstream.notify_prompts_changed()
                    if resources:
                        await self._subscriptions.publish(ResourcesListChanged())
                        await self.downstream.notify_resources_changed()
        finally:
            self.features.asks.spawn = None
            self.features.on_free_log = None
            self._notices = None
            remove()

    def _on_event(self, event: Event) -> None:
        # A bus listener, not a subscription: it runs on every publish (two per
        # tool call), so it only filters and flags; the work runs in `run`.
        if event.kind in _TABLE_EVENTS:
            self._dirty.set()
            if isinstance(event, ToolsChanged):
                self._announced.add("tools")
            elif isinstance(event, CatalogChanged):
                self._announced.add(
                    "prompts" if event.items == "prompts" else "resources"
                )
        if event.kind in ("config_loaded", "config_error"):
            self._config_pending = False
            self._dirty.set()  # profiles may have changed: prepare their indexes
        if isinstance(event, (ResourceUpdated, Connected)):
            self._notice(event)

    def _free_log(
        self, server: str, level: str, logger_name: str | None, data: object
    ) -> None:
        """An upstream log message no request took, as the server sent it."""
        self._notice(FreeLog(server, level, logger_name, data))

    def _notice(self, notice: Event | FreeLog) -> None:
        if self._notices is None:
            return
        try:
            self._notices.send_nowait(notice)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            self.notices_dropped += 1  # counted; a slow client loses notices

    async def _pass_notifications(
        self, notices: MemoryObjectReceiveStream[Event | FreeLog]
    ) -> None:
        features = self.features
        async for event in notices:
            match event:
                case ResourceUpdated():
                    await features.resource_updated(event.name, event.uri)
                    exposed = features.resources.exposed_uri(event.name, event.uri)
                    await self._subscriptions.publish(UpdatedOnBus(uri=exposed))
                case FreeLog():
                    await features.log_message(
                        event.server, event.level, event.logger, event.data
                    )
                case Connected():
                    await features.resubscribe(event.name)
                    await features.relevel(event.name)

    def _refresh_all(self) -> tuple[bool, bool, bool]:
        prompts, resources = self.features.rebuild()
        tools = self._refresh()  # after: a tool names its view's exposed URI
        rewrites: dict[str, tuple[list[str], list[str]]] = {}
        for key, problem in self.features.problems():
            if key in self._reported:
                continue
            self._reported.add(key)
            if is_rewrite(key):
                # Handled, so INFO; one line per server (two instances of one
                # server share every URI).
                keys, lines = rewrites.setdefault(key.split("\0")[1], ([], []))
                keys.append(key)
                lines.append(problem)
            else:
                logger.warning("gateway: %s", problem)
        for keys, lines in rewrites.values():
            logger.info("gateway: %s", rewrites_line(keys, lines))
        return tools, prompts, resources

    def _refresh(self) -> bool:
        """Rebuild the tool table from the manager. Returns whether it changed."""
        table = build_name_table(
            (
                NameSource(
                    c.name,
                    c.spec.prefix,
                    _annotated(c.spec, c.shown("tools", c.tools)),
                    c.spec.exposure.tools,
                )
                for c in self.manager.connections()
            ),
            types.Tool,
            "tool",
        )
        table = self._views_named(table)
        for problem in table.problems:
            if problem not in self._reported:
                self._reported.add(problem)
                logger.warning("gateway: %s", problem)
        changed = not table.same_tools(self._table)
        self._table = table
        self.header_schemas = {
            tool.name: tool.input_schema
            for tool in table.tools
            if _HEADER_KEY in json.dumps(tool.input_schema)
        }
        self._refreshed.set()
        self._refreshed = anyio.Event()
        if changed:
            logger.debug("gateway: %d tools exposed", len(table.tools))
        return changed

    def _views_named(self, table: ToolTable) -> ToolTable:
        """`table` with each tool naming its MCP Apps view by the URI the
        endpoint exposes it under (rewritten where two servers list it)."""
        resources = self.features.resources
        tools: list[types.Tool] = []
        for tool in table.tools:
            uri = resource_uri(tool)
            if uri is not None:
                exposed = resources.exposed_uri(table.routes[tool.name].server, uri)
                if exposed != uri:
                    tool = with_resource_uri(tool, exposed)
            tools.append(tool)
        if all(a is b for a, b in zip(tools, table.tools, strict=True)):
            return table
        return dataclasses.replace(table, tools=tuple(tools))

    async def notify_tools_changed(self) -> None:
        """Send `notifications/tools/list_changed` to every downstream session."""
        await self._subscriptions.publish(ToolsListChanged())
        await self.downstream.notify_tools_changed()

    def forget_session(self, key: str) -> None:
        """A downstream session closed: its record, and all it held, goes."""
        self.downstream.forget(key)

    def profile_names(self) -> Collection[str]:
        """The declared profiles' names (`/mcp/NAME`)."""
        return self.manager.profiles.keys()

    @property
    def sessions(self) -> int:
        """Downstream sessions that get `list_changed` on their standalone channel."""
        return len(self.downstream)

    # --- MCP handlers -----------------------------------------------------------

    async def _settled(self) -> None:
        """Return once startup's lists are complete (at once after startup)."""
        if anyio.current_time() < self._settle_until:
            await self._settle()

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

    async def _discover(
        self, ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
    ) -> types.DiscoverResult:
        """`server/discover` (2026-07-28), as the SDK answers it, once every
        server that serves this era beside its own session (`Upstream.
        for_era`: a dual-era stdio server's second process) has said what it
        offers there: a client straight at it would be answered by that
        process. Opened once (and remembered across daemons, `EraMemory`),
        each within its own bound; one that does not open in time is answered
        for by its own session."""
        era = client_era(ctx)
        profile = current_profile(self.manager.profiles)
        unknown = [
            (conn.spec.connect_timeout, upstream)
            for conn in self.manager.connections()
            if (upstream := conn.upstream) is not None
            and (profile is None or profile.shows_server(conn.name))
            and upstream.capabilities_for(era) is None
        ]
        if unknown:
            async with anyio.create_task_group() as tg:
                for limit, upstream in unknown:
                    tg.start_soon(upstream.for_era, era, limit)
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=self.server.get_capabilities(
                protocol_version=ctx.protocol_version
            ),
            instructions=self.server.instructions,
        )

    def _offered(self, era: str) -> set[str]:
        """Capabilities some upstream offers a client of `era` (all while one
        is on its first try: what it will offer is not known yet); of a
        profile's servers only, for a client of that profile."""
        out: set[str] = set()
        profile = current_profile(self.manager.profiles)
        for conn in self.manager.connections():
            if profile is not None and not profile.shows_server(conn.name):
                continue
            upstream = conn.upstream
            if upstream is None:
                if conn.phase == "connecting":
                    return {"prompts", "resources", "logging", "completions"}
                if conn.catalog.prompts:
                    out.add("prompts")
                if conn.catalog.resources or conn.catalog.templates:
                    out.add("resources")
                continue
            capabilities = upstream.capabilities_for(era)
            if capabilities is None:  # beside, never opened: its own for now
                capabilities = upstream.info.capabilities
            out.update(capabilities)
            if offers_apps(capabilities, (t.raw for t in conn.tools)):
                out.add(UI_EXTENSION)
            if offers_tasks(capabilities):
                out.add(TASKS_EXTENSION)
        return out


def _annotated(spec: ConnectionSpec, tools: Sequence[ToolInfo]) -> Sequence[ToolInfo]:
    """`tools` with the hints the user set (`annotations = {...}` in
    `mcp_add`) over what the server claims, so clients see those."""
    if not spec.annotations:
        return tools
    out: list[ToolInfo] = []
    for tool in tools:
        given = tool.raw.get("annotations")
        hints = spec.annotated(tool.name, given if isinstance(given, Mapping) else {})
        if hints != given and (hints or given is not None):
            tool = ToolInfo(
                tool.name, tool.description, {**tool.raw, "annotations": hints}
            )
        out.append(tool)
    return out
