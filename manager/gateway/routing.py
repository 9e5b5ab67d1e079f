"""Routing everything MCP besides tools through the endpoint: prompts,
resources, completion, logging and subscriptions.

`Features` holds the prompt and resource tables (rebuilt with the tool table),
the downstream subscriptions and log levels, and (`asks`, `requests.py`) which
downstream request is waiting on which upstream; `Gateway` registers its
handlers on the SDK server.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from ..core.errors import CallError
from ..core.output import RESULTS_PREFIX
from ..engine.manager import Manager
from ..mcpserver.peers import NOTIFY_TIMEOUT, session_key
from ..transport.base import ProgressCallback, Upstream
from .catalog import CatalogSource, ResourceTable, build_resource_table
from .errors import client_error
from .freshness import list_hint
from .names import NameSource, ToolRoute, ToolTable, build_name_table
from .requests import CallNotes, ClientRequests, upstream_meta
from .rounds import HeldCall, HeldCalls, client_era, may_need_rounds
from .sessions import Downstream, Sessions
from .views import PROFILE, current_profile, visible_items, visible_resources

__all__ = ["LOG_LEVELS", "RESOURCE_NOT_FOUND", "Features"]

logger = logging.getLogger("manager.gateway")

RESOURCE_NOT_FOUND = -32002
"""JSON-RPC error code for an unknown resource URI (MCP spec)."""

LOG_LEVELS = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""MCP log levels, least severe first."""

RELEVEL_WAIT = 1.0
"""Seconds a new session's first request waits for servers to be set to the
levels it takes (`Features.joined`)."""


def _rank(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


INPUT_METHODS = frozenset({"prompts/get", "resources/read"})
"""Requests besides `tools/call` a 2026-07-28 server may answer `input_required`."""

DEFAULT_CALL_TIMEOUT = 60.0
"""`call_timeout` of a connection removed while one of its requests waited."""


class Listen(Protocol):
    """Serves one `subscriptions/listen` stream (the SDK's `ListenHandler`)."""

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult: ...


class Send(Protocol):
    """Sends one request on a live upstream within the seconds given."""

    def __call__(
        self, upstream: Upstream, limit: float, progress: ProgressCallback | None = None
    ) -> Awaitable[Any]: ...


def sending(request: Any, result_type: Any) -> Send:
    """`request` sent as it is, its result read as `result_type`, progress
    passed on."""

    async def send(
        upstream: Upstream, limit: float, progress: ProgressCallback | None = None
    ) -> Any:
        return await upstream.send(request, result_type, limit, progress=progress)

    return send


class Features:
    """Prompts, resources, completion, logging and upstream requests.

    Args:
        manager: The connections.
        sessions: The downstream sessions' records (`sessions.Sessions`): a
            session's log level and subscriptions are kept in its own.
    """

    def __init__(self, manager: Manager, sessions: Sessions | None = None) -> None:
        self.manager = manager
        self._sessions = sessions if sessions is not None else Sessions()
        self.prompts = ToolTable()
        self.resources = ResourceTable()
        self._seen: dict[str, str] = {}  # URIs seen in results -> server
        self.asks = ClientRequests(self.call_timeout, self._unlinked, self._apart)
        self.held = HeldCalls()
        # Who follows what upstream: (server, URI, era) -> followers. The era
        # is None for a handshake client's `resources/subscribe` (the
        # connection's own session), the client's for a 2026-07-28 listen
        # stream (`listening`: a dual-era stdio server runs a process per era).
        self._upstream_subs: dict[tuple[str, str, str | None], int] = {}
        self._level_sent: str | None = None
        """The level servers were last set to (`logging/setLevel`), if any."""
        manager.requests.handler = self.asks.upstream_request
        manager.requests.on_log = self._call_log
        self.on_free_log: Callable[[str, str, str | None, object], None] | None = None
        """Takes an upstream log message no request in flight took, as sent
        (the server's `run` queues it for `log_message`)."""

    def _unlinked(self, server: str) -> bool:
        """Whether `server`'s questions name no request: a handshake-era stdio
        or SSE server (one not connected yet counts as the era it is
        declared in; `auto` as the handshake era, as stdio starts it)."""
        conn = self.manager.connection(server)
        if conn is None or conn.spec.transport == "http":
            return False
        if conn.upstream is not None:
            return conn.upstream.info.protocol in HANDSHAKE_PROTOCOL_VERSIONS
        return conn.spec.protocol not in MODERN_PROTOCOL_VERSIONS

    def _apart(self, server: str, ctx: Any) -> bool:
        """Whether the request `ctx` to `server` is served by the session of
        its client's era beside the connection's own (`Upstream.apart`)."""
        conn = self.manager.connection(server)
        upstream = conn.upstream if conn is not None else None
        return upstream is not None and upstream.apart(client_era(ctx))

    def call_timeout(self, server: str) -> float:
        """`server`'s `call_timeout` (a default once it was removed)."""
        conn = self.manager.connection(server)
        return conn.spec.call_timeout if conn is not None else DEFAULT_CALL_TIMEOUT

    # --- tables -----------------------------------------------------------------

    def rebuild(self) -> tuple[bool, bool]:
        """Rebuild the prompt and resource tables; which of them changed."""
        conns = self.manager.connections()
        prompts = build_name_table(
            (
                NameSource(
                    c.name,
                    c.spec.prefix,
                    c.shown("prompts", c.catalog.prompts),
                    c.spec.exposure.prompts,
                )
                for c in conns
            ),
            types.Prompt,
            "prompt",
        )
        resources = build_resource_table(
            CatalogSource(
                c.name,
                c.catalog.resources,
                c.shown("templates", c.catalog.templates),
                c.spec.exposure.resources,
            )
            for c in conns
        )
        prompts_changed = prompts.tools != self.prompts.tools
        resources_changed = (resources.resources, resources.templates) != (
            self.resources.resources,
            self.resources.templates,
        )
        self.prompts, self.resources = prompts, resources
        return prompts_changed, resources_changed

    def problems(self) -> tuple[tuple[str, str], ...]:
        """Renames and left-out items of the last rebuild: (key, line), the
        key saying what the line is about (`ResourceTable.problem_keys`)."""
        prompts = ((line, line) for line in self.prompts.problems)
        resources = zip(
            self.resources.problem_keys, self.resources.problems, strict=True
        )
        return (*prompts, *resources)

    # --- forwarding -------------------------------------------------------------

    async def forward(
        self,
        ctx: ServerRequestContext[Any, Any],
        server: str,
        method: str,
        target: str,
        send: Send,
    ) -> Any:
        """Send a request upstream on the call path (held, bounded), with the
        downstream request served meanwhile (`serving`); an upstream error
        reaches the client with the upstream's own code."""

        # What may ask the client meets a server of both eras in the client's
        # own era (`Upstream.for_era`), its questions on the back-channel.
        era = client_era(ctx) if method in INPUT_METHODS else None

        async def run(held: HeldCall | None = None) -> Any:
            notes = self.notes(ctx)

            async def sent(upstream: Upstream, limit: float) -> Any:
                if era is not None:
                    upstream = await upstream.for_era(era, limit)
                return await send(upstream, limit, notes.progress)

            async with self.serving(server, ctx, notes, None, held):
                return await self.manager.request(server, method, target, sent)

        try:
            if (
                method in INPUT_METHODS
                and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
                and may_need_rounds(ctx.params, ctx.session.client_capabilities)
            ):
                # What the upstream asks meanwhile comes back as input rounds.
                return await self.held.call(ctx.params, self.call_timeout(server), run)
            return await run()
        except CallError as exc:
            raise client_error(exc) from None

    def notes(self, ctx: ServerRequestContext[Any, Any]) -> CallNotes:
        """The notes of a downstream request: its log messages at the level its
        session set (handshake era; every level if none) or its request asked
        for (2026-07-28)."""
        record = self._sessions.get(session_key(ctx))
        level = record.log_level if record is not None else None
        levels = LOG_LEVELS[LOG_LEVELS.index(level) :] if level in LOG_LEVELS else None
        return CallNotes(ctx, levels)

    def serving(
        self,
        server: str,
        ctx: ServerRequestContext[Any, Any],
        notes: CallNotes,
        token: str | None = None,
        held: HeldCall | None = None,
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """`ctx` served by `server` while the body runs (`ClientRequests.serving`)."""
        return self.asks.serving(server, ctx, notes, token, held)

    # --- prompts ----------------------------------------------------------------

    async def list_prompts(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListPromptsResult:
        hint = list_hint(ctx, "prompts", self.manager.connections())
        profile = current_profile(self.manager.profiles)
        prompts = visible_items(self.prompts, profile, "prompts")
        return types.ListPromptsResult(prompts=list(prompts), **hint)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        route = self._prompt_route(params.name)
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(
                name=route.tool,
                arguments=params.arguments,
                _meta=cast(Any, upstream_meta(ctx)),
            )
        )

        send = sending(request, types.GetPromptResult)
        result: types.GetPromptResult = await self.forward(
            ctx, route.server, "prompts/get", route.tool, send
        )
        return result  # or, to a 2026-07-28 client, input_required (a dict)

    def _prompt_route(self, name: str) -> ToolRoute:
        """Where the exposed prompt `name` goes, if the request's view shows it.
        A name nobody lists goes to the one bridge (prefix "") if there is
        one, to be answered by the server itself, as straight."""
        route = self.prompts.routes.get(name)
        profile = current_profile(self.manager.profiles)
        if route is None:
            bridges = [
                c
                for c in self.manager.connections()
                if c.spec.prefix == "" and c.spec.exposure.prompts.allows(name)
            ]
            if len(bridges) == 1:
                route = ToolRoute(name, bridges[0].name, name)
        if route is not None and profile is not None:
            if not profile.shows("prompts", route.server, name, route.tool):
                route = None
        if route is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}")
        return route

    # --- resources --------------------------------------------------------------

    async def list_resources(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListResourcesResult:
        hint = list_hint(ctx, "resources", self.manager.connections())
        profile = current_profile(self.manager.profiles)
        resources, _ = visible_resources(self.resources, profile)
        return types.ListResourcesResult(resources=list(resources), **hint)

    async def list_templates(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListResourceTemplatesResult:
        hint = list_hint(ctx, "templates", self.manager.connections())
        profile = current_profile(self.manager.profiles)
        _, templates = visible_resources(self.resources, profile)
        return types.ListResourceTemplatesResult(
            resource_templates=list(templates), **hint
        )

    def _owner(self, uri: str, ctx: ServerRequestContext[Any, Any]) -> tuple[str, str]:
        """(server, upstream URI) of an exposed URI: its owner (`ResourceTable.
        route`), else the one bridge (prefix ""), which answers for itself as
        it would straight (a server may serve URIs it does not list)."""
        route = self.resources.route(uri, self._seen)
        if route is None:
            bridges = [c for c in self.manager.connections() if c.spec.prefix == ""]
            if len(bridges) == 1:
                route = (bridges[0].name, uri)
        if route is not None:
            conn = self.manager.connection(route[0])
            profile = current_profile(self.manager.profiles)
            if (
                conn is not None
                and conn.spec.exposure.resources.allows(route[1])
                and (profile is None or profile.shows("resources", *route, uri))
            ):
                return route
        # 2026-07-28 says -32602 for an unknown resource (SEP-2164); the
        # handshake era's -32002 stays for its clients. Both name the URI.
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        code = INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
        raise MCPError(code, f"no connected server offers {uri!r}", {"uri": uri})

    async def read_resource(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.ReadResourceRequestParams,
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(RESULTS_PREFIX):
            return self._whole_result(uri, ctx)
        server, upstream_uri = self._owner(uri, ctx)
        request = types.ReadResourceRequest(
            params=types.ReadResourceRequestParams(
                uri=upstream_uri, _meta=cast(Any, upstream_meta(ctx))
            )
        )

        send = sending(request, types.ReadResourceResult)
        result: types.ReadResourceResult = await self.forward(
            ctx, server, "resources/read", upstream_uri, send
        )
        if isinstance(result, dict):  # input_required, to a 2026-07-28 client
            return result
        for contents in result.contents:
            self._seen.setdefault(str(contents.uri), server)
            if str(contents.uri) == upstream_uri and uri != upstream_uri:
                contents.uri = uri
        return result

    def _whole_result(
        self, uri: str, ctx: ServerRequestContext[Any, Any]
    ) -> types.ReadResourceResult:
        """A tool result `max_output` cut, whole, while it is kept."""
        text = self.manager.results.get(uri.removeprefix(RESULTS_PREFIX))
        if text is None:
            modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            code = INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
            raise MCPError(
                code,
                f"{uri!r}: no such result, or it is no longer kept (whole results "
                "stay an hour); call the tool again",
                {"uri": uri},
            )
        contents = types.TextResourceContents(
            uri=uri, mime_type="application/json", text=text
        )
        return types.ReadResourceResult(contents=[contents])

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        server, upstream_uri = self._owner(uri, ctx)
        record = self._sessions.get(session_key(ctx))
        if record is None or uri in record.uris:
            return types.EmptyResult()  # no session to tell, or told already
        key = (server, upstream_uri, None)
        count = self._upstream_subs.get(key, 0)
        if count == 0:
            await self._upstream_subscribe(ctx, server, upstream_uri, subscribe=True)
        self._upstream_subs[key] = count + 1
        record.uris.add(uri)
        return types.EmptyResult()

    async def unsubscribe(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.UnsubscribeRequestParams,
    ) -> types.EmptyResult:
        uri = str(params.uri)
        record = self._sessions.get(session_key(ctx))
        if record is None or uri not in record.uris:
            return types.EmptyResult()
        record.uris.discard(uri)
        route = self.resources.route(uri, self._seen)
        if route is not None and self._let_go((*route, None)):
            await self._upstream_subscribe(ctx, *route, subscribe=False)
        return types.EmptyResult()

    def listening(self, inner: Listen) -> Listen:
        """`inner` (the SDK's `ListenHandler`) for a 2026-07-28 client's
        `subscriptions/listen`, with the resources it names followed upstream
        while its stream lasts, in the client's era (a stdio server of both
        eras runs a process per era: the one its calls go to): a server only
        tells of a resource it was asked to follow (as `subscribe` asks it for
        a handshake client), so no update came at all. URIs no server offers
        are left to `inner`."""

        async def listen(
            ctx: ServerRequestContext[Any, Any],
            params: types.SubscriptionsListenRequestParams,
        ) -> types.SubscriptionsListenResult:
            era = client_era(ctx)
            followed: list[tuple[str, str]] = []
            try:
                for uri in params.notifications.resource_subscriptions or ():
                    try:
                        route = self._owner(uri, ctx)
                    except MCPError:
                        continue  # no server offers it: nothing to ask
                    count = self._upstream_subs.get((*route, era), 0)
                    self._upstream_subs[(*route, era)] = count + 1
                    followed.append(route)
                    if count == 0:
                        await self._follow(*route, era, follow=True)
                return await inner(ctx, params)
            finally:
                with anyio.CancelScope(shield=True):
                    for route in followed:
                        if self._let_go((*route, era)):
                            with anyio.move_on_after(NOTIFY_TIMEOUT):
                                await self._follow(*route, era, follow=False)

        return listen

    def _let_go(self, key: tuple[str, str, str | None]) -> bool:
        """One follower of `key` fewer; True when it was the last (tell the
        server)."""
        count = self._upstream_subs.get(key, 0) - 1
        if count > 0:
            self._upstream_subs[key] = count
            return False
        self._upstream_subs.pop(key, None)
        return True

    async def _follow(
        self, server: str, uri: str, era: str | None, *, follow: bool
    ) -> None:
        """Ask `server` (its session of `era`, if given) to follow `uri` (or
        stop), outside any client's request; a server down, or one that
        refuses, is said in the log (`resubscribe` asks again once it is
        back)."""
        try:
            await self._upstream_subscribe(None, server, uri, subscribe=follow, era=era)
        except CallError as exc:
            logger.warning(
                "gateway: %s: %s %s failed: %s",
                server,
                "following" if follow else "letting go of",
                uri,
                exc,
            )

    async def _upstream_subscribe(
        self,
        ctx: ServerRequestContext[Any, Any] | None,
        server: str,
        uri: str,
        *,
        subscribe: bool,
        era: str | None = None,
    ) -> None:
        request: Any = (
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            if subscribe
            else types.UnsubscribeRequest(
                params=types.UnsubscribeRequestParams(uri=uri)
            )
        )
        method = request.method
        send = sending(request, types.EmptyResult)
        if ctx is not None:
            await self.forward(ctx, server, method, uri, send)
        elif era is None:
            await self.manager.request(server, method, uri, send)
        else:
            chosen = era

            async def in_era(upstream: Upstream, limit: float) -> Any:
                return await send(await upstream.for_era(chosen, limit), limit)

            await self.manager.request(server, method, uri, in_era)

    async def resubscribe(self, server: str) -> None:
        """After `server` reconnected: subscribe again to what clients follow."""
        for owner, uri, era in list(self._upstream_subs):
            if owner == server:
                await self._follow(server, uri, era, follow=True)

    async def resource_updated(self, server: str, uri: str) -> None:
        """Pass `notifications/resources/updated` to the sessions subscribed."""
        exposed = self.resources.exposed_uri(server, uri)
        for record in self._sessions.records():
            if exposed not in record.uris:
                continue
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await record.session.send_resource_updated(exposed)
            except Exception:  # boundary: a gone client must not stop the others
                self._sessions.forget(record.key)

    def released(self, record: Downstream) -> None:
        """A downstream session's record was dropped: what it subscribed to
        upstream is let go (an unsubscribe only once nobody follows it), and
        the level it set no longer holds the servers."""
        level = self._upstream_level()
        if level is not None and level != self._level_sent:
            spawn = self.asks.spawn
            if spawn is not None:
                spawn(lambda: self._set_level_everywhere(level))
        for uri in record.uris:
            route = self.resources.route(uri, self._seen)
            if route is not None and (*route, None) in self._upstream_subs:
                self._let_go((*route, None))

    # --- completion -------------------------------------------------------------

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            route = self._prompt_route(ref.name)
            server, target = route.server, route.tool
            upstream_ref: Any = types.PromptReference(type="ref/prompt", name=target)
        else:
            owner = self.resources.template_owners.get(ref.uri)
            profile = current_profile(self.manager.profiles)
            if owner is not None and profile is not None:
                if not profile.shows("resources", owner[0], ref.uri, owner[1]):
                    owner = None
            if owner is None:
                raise MCPError(INVALID_PARAMS, f"unknown resource template {ref.uri!r}")
            server, target = owner
            upstream_ref = types.ResourceTemplateReference(
                type="ref/resource", uri=target
            )
        request = types.CompleteRequest(
            params=types.CompleteRequestParams(
                ref=upstream_ref, argument=params.argument, context=params.context
            )
        )

        send = sending(request, types.CompleteResult)
        result: types.CompleteResult = await self.forward(
            ctx, server, "completion/complete", target, send
        )
        return result

    # --- logging ----------------------------------------------------------------

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        record = self._sessions.get(session_key(ctx))
        if record is not None:
            record.log_level = str(params.level)
            record.log_view = PROFILE.get()  # its profile: whose logs it sees
        level = self._upstream_level()
        if record is None:  # a session without a record: its own level counts
            level = min(level or str(params.level), str(params.level), key=_rank)
        if level is not None and level != self._level_sent:
            await self._set_level_everywhere(level)
        return types.EmptyResult()

    def _upstream_level(self) -> str | None:
        """The level servers are set to: the most verbose any session takes,
        where one that set none takes every level (straight, the log messages
        of its calls come at the server's own default); None while no session
        has set one (servers keep their own default)."""
        records = self._sessions.records()
        if self._level_sent is None and not any(r.log_level for r in records):
            return None
        return min(
            (r.log_level or LOG_LEVELS[0] for r in records),
            key=_rank,
            default=LOG_LEVELS[0],
        )

    async def joined(self, record: Downstream) -> None:
        """A new session, before its first request goes on: one that set no
        level takes every level in its calls, so servers a client set to a
        less verbose level are set back first (at most `RELEVEL_WAIT`)."""
        level = self._upstream_level()
        if level is not None and level != self._level_sent:
            with anyio.move_on_after(RELEVEL_WAIT):
                await self._set_level_everywhere(level)

    async def relevel(self, server: str) -> None:
        """After `server` (re)connected: the level clients asked for, again."""
        if self._level_sent is not None:
            await self._set_level_everywhere(self._level_sent, only=server)

    async def _set_level_everywhere(self, level: str, only: str | None = None) -> None:
        """`logging/setLevel` to every connected server that logs (or `only`
        that one), at once."""
        self._level_sent = level
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]

        async def send(upstream: Upstream, limit: float) -> Any:
            return await upstream.send(request, types.EmptyResult, limit)

        async def set_one(name: str) -> None:
            try:
                await self.manager.request(name, "logging/setLevel", level, send)
            except CallError as exc:
                logger.debug("gateway: %s: logging/setLevel failed: %s", name, exc)

        async with anyio.create_task_group() as tg:
            for conn in self.manager.connections():
                upstream = conn.upstream
                if upstream is None or "logging" not in upstream.info.capabilities:
                    continue
                if only is None or conn.name == only:
                    tg.start_soon(set_one, conn.name)

    def _call_log(
        self, server: str, level: str, logger_name: str | None, data: object
    ) -> bool:
        """An upstream's log message, in order, to the requests it serves now;
        its logger named as the server's tools are (`_logger_name`). One no
        request took goes, as sent, to `on_free_log` (every session that asked
        for its level: `log_message`)."""
        named = self._logger_name(server, logger_name)
        taken = self.asks.log(server, level, named, data)
        if not taken and self.on_free_log is not None:
            self.on_free_log(server, level, logger_name, data)
        return taken

    def _logger_name(self, server: str, logger_name: str | None) -> str | None:
        """An upstream log message's logger as clients see it: named as the
        server's tools are (`PREFIX/logger`, or `PREFIX`), as sent where the
        prefix is "" (a bridge)."""
        conn = self.manager.connection(server)
        prefix = conn.spec.prefix if conn is not None else server
        if prefix:
            return f"{prefix}/{logger_name}" if logger_name else prefix
        return logger_name or None

    async def log_message(
        self, server: str, level: str, logger_name: str | None, data: object
    ) -> None:
        """Pass an upstream's log message to the sessions that asked for its level."""
        rank = LOG_LEVELS.index(level) if level in LOG_LEVELS else 0
        for record in self._sessions.records():
            wanted, session = record.log_level, record.session
            if wanted is None or rank < LOG_LEVELS.index(wanted):
                continue  # asked for no log messages, or not at this level
            view = record.log_view
            if view is not None:
                profile = self.manager.profiles.get(view)
                if profile is None or not profile.shows_server(server):
                    continue  # a server outside the session's profile
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    # The notification itself: `send_log_message` warns that
                    # logging is deprecated as of 2026-07-28 on every call.
                    await session.send_notification(
                        types.LoggingMessageNotification(
                            params=types.LoggingMessageNotificationParams(
                                level=level,  # type: ignore[arg-type]
                                data=data,
                                logger=self._logger_name(server, logger_name),
                            )
                        )
                    )
            except Exception as exc:  # boundary: a gone client must not stop the others
                logger.debug("gateway: dropping session %s: %r", record.key[:8], exc)
                self._sessions.forget(record.key)
