"""Tools through the endpoint: `tools/list` and `tools/call`.

* `tools/list` shows the gateway's tool table (`names`), after waiting (bounded)
  at startup for connections still on their first attempt.
* `tools/call` goes through `Manager.call`: forwarded at once to a connected
  upstream with the caller's `_meta` (W3C trace context) and progress; held up
  to `hold` for a reconnecting one, then answered with a tool error
  (`isError: true`) naming the server, its state, attempt, next retry and last
  error (`ERROR_META_KEY`). Never retried. The upstream's own protocol error is
  passed on as one; its result is passed on as the JSON it sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_INFO_META_KEY, INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from ..core.errors import CallError, ServerUnavailable, UnknownServer, UpstreamError
from ..core.output import compact, estimate_tokens, fit, results_uri
from ..core.policy import SURFACES
from ..core.profile import Profile
from ..engine.manager import Manager
from ..engine.policy import Caller
from ..transport.base import LINK_META_KEY, CallResult
from .apps import app_only, declares_apps, offers_apps, own_name_owner
from .errors import client_error
from .freshness import list_hint
from .names import SEPARATOR, ToolTable
from .requests import upstream_meta
from .rounds import HeldCall, can_be_asked, client_era, may_need_rounds
from .routing import Features
from .tasks import exposed_task
from .views import current_profile, visible_items

__all__ = ["ERROR_META_KEY", "ToolCalls"]

ERROR_META_KEY = "mcp-manager/error"
"""`_meta` key on a tool error made by the gateway: the server's status."""

_DISCOVERY_TOOLS = frozenset({"search_tools", "describe_tool", "call_tool"})
"""What a profile with `discovery = "search"` lists (`discovery.DISCOVERY_TOOLS`),
named here so `discovery` (bm25s, numpy) loads only when one is used."""

_PLAIN_CALL_KEYS = frozenset({"name", "arguments", "_meta"})
"""The params of a `tools/call` the relay answers itself (anything else, such
as a task or input responses, is the SDK's to judge)."""


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _text_error(
    text: str, meta: Mapping[str, object] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta=dict(meta) if meta else None,
    )


class ToolCalls:
    """The endpoint's `tools/list` and `tools/call` handlers.

    Args:
        manager: The connections.
        features: Routes what upstreams ask mid-call (`waiting`).
        table: The tool table as last rebuilt.
        settled: Returns once the table shows what startup will show.
    """

    def __init__(
        self,
        manager: Manager,
        features: Features,
        table: Callable[[], ToolTable],
        settled: Callable[[], Awaitable[None]],
    ) -> None:
        self.manager = manager
        self._features = features
        self._table = table
        self._settled = settled
        self._indexes: dict[Profile, tuple[ToolTable, Any]] = {}
        self._preparing = anyio.Lock()

    async def list_tools(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListToolsResult:
        """`tools/list`: every exposed tool (one page)."""
        await self._settled()
        hint = list_hint(ctx, "tools", self.manager.connections())
        profile = current_profile(self.manager.profiles)
        if profile is not None and profile.discovery == "search":
            from .discovery import DISCOVERY_TOOLS  # bm25s and numpy: when used

            return types.ListToolsResult(tools=list(DISCOVERY_TOOLS), **hint)
        tools = visible_items(self._table(), profile, "tools")
        if not declares_apps(ctx.session.client_capabilities):
            # A view's own tools are not the model's (MCP Apps).
            tools = tuple(tool for tool in tools if not app_only(tool))
        return types.ListToolsResult(tools=list(tools), **hint)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """`tools/call`: forwarded to the upstream that owns the tool."""
        result = await self._call(ctx, params.name, params.arguments)
        if isinstance(result, types.CallToolResult):
            return result
        if (
            ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            and "resultType" not in result
        ):
            # A handshake-era upstream's result to a 2026-07-28 client: the
            # one field that era requires and the older one never sends.
            result = {**result, "resultType": "complete"}
        # The upstream's JSON, passed on as is: the SDK server takes a dict as
        # well (its type says otherwise) and checks it on the way out.
        return cast(types.CallToolResult, result)

    async def relay(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware (the innermost): `tools/call` of a handshake-era
        session answered here, its result the upstream's JSON as is, without
        the SDK validating the request's params into its model and the
        result against its schema and dumping it again. Anything else, a
        2026 session (whose results the SDK stamps) or params of an unusual
        shape go the SDK's way, to be answered (or refused) as before.
        """
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
            or ctx.session.client_params is None  # not initialized
            or not isinstance(params, dict)
            or set(params) - _PLAIN_CALL_KEYS
            or not isinstance(params.get("name"), str)
            or not isinstance(params.get("arguments", {}), dict)
            or not isinstance(params.get("_meta", {}), dict)
        ):
            return await call_next(ctx)
        result = await self._call(ctx, params["name"], params.get("arguments"))
        if isinstance(result, types.CallToolResult):
            # One of ours (an error the gateway made): in the handshake era's
            # form, which has no `resultType` (the SDK's own serializer sieves
            # it out; a middleware that answers owns its result's shape).
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            dumped.pop("resultType", None)
            return dumped
        return result

    async def _call(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any] | None,
    ) -> types.CallToolResult | dict[str, Any]:
        if name in _DISCOVERY_TOOLS:
            profile = current_profile(self.manager.profiles)
            if profile is not None and profile.discovery == "search":
                return await self._discover(ctx, profile, name, arguments or {})
        route = self._table().routes.get(name)
        if route is not None:
            server, tool = route.server, route.tool
        else:
            # Not (yet) in the table: a declared server that has not listed its
            # tools yet (first attempt, or a change not rebuilt yet) still gets
            # the call, with the usual hold; anything else (a hidden tool too)
            # is unknown.
            found = self._unlisted_route(name)
            if found is None and declares_apps(ctx.session.client_capabilities):
                found = self._view_route(name)  # a view calls by its server's names
            if found is None:
                raise MCPError(INVALID_PARAMS, self._unknown_tool(name))
            server, tool = found
        profile = current_profile(self.manager.profiles)
        if profile is not None and not profile.shows("tools", server, name, tool):
            raise MCPError(INVALID_PARAMS, self._unknown_tool(name, profile))
        meta = upstream_meta(ctx)
        token = None
        caps = ctx.session.client_capabilities
        if can_be_asked(caps):
            # The client can be asked things mid-call: a token lets an
            # upstream's question be told apart from other clients' calls
            # (streamable HTTP, and 2026-07-28 rounds).
            token = uuid.uuid4().hex
            meta = {**(meta or {}), LINK_META_KEY: token}

        era = client_era(ctx)  # a server of both eras meets it in its own
        caller = Caller(client_name(ctx), profile.name if profile is not None else "")
        conn = self.manager.connection(server)
        logs_values = conn is not None and conn.spec.log_arguments

        async def run(held: HeldCall | None = None) -> CallResult:
            notes = self._features.notes(ctx)
            async with self._features.serving(server, ctx, notes, token, held):
                return await self.manager.call(
                    server,
                    tool,
                    arguments,
                    meta=meta,
                    progress=notes.progress,
                    era=era,
                    caller=caller,
                    exposed=name,
                )

        with self.manager.calls.track(
            caller,
            server,
            tool,
            arguments,
            values=logs_values,
            secrets=self.manager.secrets,
        ) as logged:
            try:
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and (
                    may_need_rounds(ctx.params, caps)
                ):
                    # What the upstream asks mid-call comes back as input rounds.
                    limit = self._features.call_timeout(server)
                    outcome = await self._features.held.call(ctx.params, limit, run)
                    if isinstance(outcome, dict):  # input_required
                        logged.unfinished()  # logged once, by its last round
                        return outcome
                    result = outcome
                else:
                    result = await run()
            except (ServerUnavailable, UnknownServer) as exc:
                logged.failed(exc)
                return _text_error(f"{name}: {exc}", self._status_meta(server))
            except UpstreamError as exc:  # the server's own answer, as it sent it
                logged.failed(exc)
                raise client_error(exc) from None
            except CallError as exc:
                logged.failed(exc)
                return _text_error(f"{name}: {exc}", self._status_meta(server))
            logged.ended(result.is_error, result.data)
        data = dict(result.data)  # as the server sent it, not re-dumped
        if data.get("resultType") == "task":  # SEP-2663: named for tasks/get
            data = exposed_task(server, data)
        return self._fitted(server, profile, data)

    def _fitted(
        self, server: str, profile: Profile | None, data: dict[str, Any]
    ) -> dict[str, Any]:
        """`data` cut to the `max_output` of the profile or the connection
        (the smaller), the whole kept behind a link; as is without one."""
        conn = self.manager.connection(server)
        limits = [
            limit
            for limit in (
                profile.max_output if profile is not None else None,
                conn.spec.max_output if conn is not None else None,
            )
            if limit is not None
        ]
        if not limits or "content" not in data:
            return data
        limit = min(limits)
        text = compact(data)  # once: counted, and kept if it is cut
        whole = estimate_tokens(text)
        if whole <= limit:
            return data
        uri = results_uri(self.manager.results.keep(text))
        fitted = fit(data, limit, uri, whole)
        return fitted if fitted is not None else data

    async def _discover(
        self,
        ctx: ServerRequestContext[Any, Any],
        profile: Profile,
        name: str,
        arguments: dict[str, Any],
    ) -> types.CallToolResult | dict[str, Any]:
        """`search_tools`, `describe_tool` or `call_tool` of a profile with
        `discovery = "search"`, over the tools in its view."""
        from . import discovery

        # As `tools/list` does: at startup, the servers on their first
        # connect are waited for (bounded), or the index would be empty.
        await self._settled()
        index = self._index(profile)
        if name == discovery.SEARCH_TOOLS:
            query = arguments.get("query")
            limit = arguments.get("limit", discovery.DEFAULT_LIMIT)
            if not isinstance(query, str) or not isinstance(limit, int):
                return _text_error(
                    "search_tools takes {query: string, limit: integer}, e.g. "
                    '{"query": "open a bug in the backend repo", "limit": 5}'
                )
            try:
                if index.has_meaning:  # a forward pass of the model: off the loop
                    hits = await anyio.to_thread.run_sync(index.search, query, limit)
                else:
                    hits = index.search(query, limit)
            except ValueError as exc:
                return _text_error(str(exc))
            if not hits and len(index):  # never nothing while there are tools
                near = index.nearest(query, limit)
                return _text(discovery.nearest_result(near, index.servers))
            return _text(discovery.search_result(hits, index.servers))
        target = arguments.get("name")
        tool = index.describe(target) if isinstance(target, str) else None
        given = arguments.get("arguments") or {}
        route = self._unlisted_route(target) if isinstance(target, str) else None
        if (
            tool is None
            and name == discovery.CALL_TOOL
            and route is not None
            and isinstance(target, str)
            and isinstance(given, dict)
            and profile.shows("tools", route[0], target, route[1])
            and not self._listed(route[0])
        ):
            # A server in view that has not listed yet (still connecting,
            # restarted): the call waits for it as a direct call does (`hold`).
            return await self._call(ctx, target, given)
        if tool is None:
            shown = target if isinstance(target, str) else ""
            near = index.search(shown, 3) if shown.strip() else []
            return _text_error(
                discovery.unknown_tool_result(shown, near, index.sharing(shown))
            )
        if name == discovery.DESCRIBE_TOOL:
            return _text(discovery.describe_result(tool))
        if not isinstance(given, dict):
            return _text_error("call_tool: arguments must be an object")
        return await self._call(ctx, tool.name, given)  # the same call, in view

    def _index(self, profile: Profile) -> Any:
        """The search index of `profile`'s tools for the current table:
        the one `prepare` built, else one built now (words only)."""
        table = self._table()
        cached = self._indexes.get(profile)
        if cached is not None and cached[0] is table:
            return cached[1]
        index = _build_index(table, profile)
        self._keep(profile, table, index)
        return index

    def _keep(self, profile: Profile, table: ToolTable, index: Any) -> None:
        if len(self._indexes) > 64:  # profiles come and go with reloads
            self._indexes.clear()
        self._indexes[profile] = (table, index)

    async def prepare(self) -> None:
        """Build the search index of every profile with `discovery = "search"`
        for the current tool table, off the event loop, and then its meaning
        (`gateway.semantic`, when the model is installed): searches find them
        ready. Call it whenever the table or the profiles change; a newer
        call waits for an older one."""
        async with self._preparing:
            table = self._table()
            for profile in list(self.manager.profiles.values()):
                if profile.discovery != "search":
                    continue
                cached = self._indexes.get(profile)
                if cached is not None and cached[0] is table:
                    index = cached[1]
                else:
                    index = await anyio.to_thread.run_sync(_build_index, table, profile)
                    if self._table() is not table:
                        return  # a newer table: the next call builds for it
                    self._keep(profile, table, index)
                if not index.has_meaning:
                    from . import semantic

                    model = await anyio.to_thread.run_sync(semantic.encoder)
                    if model is None:
                        return
                    await anyio.to_thread.run_sync(index.attach_meaning, model)

    def _listed(self, server: str) -> bool:
        """Whether `server` has listed its tools (its names are known)."""
        conn = self.manager.connection(server)
        return conn is not None and bool(conn.tools)

    def _unlisted_route(self, name: str) -> tuple[str, str] | None:
        """(server, tool) for a name the table does not show: the server whose
        prefix it carries (or the one bridge, prefix "") gets it and answers
        for itself, unless its filter hides that tool."""
        prefix, sep, rest = name.partition(SEPARATOR)
        conns = self.manager.connections()
        owners = [c for c in conns if sep and c.spec.prefix == prefix]
        tool = rest
        if not owners:
            owners = [c for c in conns if c.spec.prefix == ""]
            tool = name
        if len(owners) != 1 or not owners[0].spec.exposure.tools.allows(tool):
            return None
        return owners[0].name, tool

    def _view_route(self, name: str) -> tuple[str, str] | None:
        """(server, tool) for a tool an MCP Apps view calls by its server's
        own name: the one connection offering the extension that lists it
        (and does not hide it)."""
        views = [
            c
            for c in self.manager.connections()
            if c.upstream is not None
            and offers_apps(c.upstream.info.capabilities, (t.raw for t in c.tools))
        ]
        owner = own_name_owner(
            name, ((c.name, (t.name for t in c.tools)) for c in views)
        )
        if owner is None:
            return None
        conn = self.manager.connection(owner)
        if conn is None or not conn.spec.exposure.tools.allows(name):
            return None
        return owner, name

    def _unknown_tool(self, name: str, profile: Profile | None = None) -> str:
        if profile is not None and profile.name not in self.manager.profiles:
            return (
                f"unknown tool {name!r}: profile {profile.name!r} is no longer "
                "declared (a reload removed it), so it shows nothing; connect "
                "with a declared profile (`mcp-manager check` lists them)"
            )
        if profile is not None:
            return (
                f"unknown tool {name!r}: not in profile {profile.name!r}"
                + (f" (declared at {profile.where})" if profile.where else "")
                + "; list the tools again"
            )
        profile = current_profile(self.manager.profiles)
        names = sorted(self.manager.specs)
        if profile is not None:
            names = [n for n in names if profile.shows_server(n)]
        servers = ", ".join(names) or "none"
        return (
            f"unknown tool {name!r}: mcp-manager exposes tools as "
            f"PREFIX{SEPARATOR}TOOL (servers: {servers}); list the tools again"
        )

    def _status_meta(self, server: str) -> dict[str, object] | None:
        status = self.manager.status(server)
        if status is None:
            return None
        keep = ("state", "attempt", "next_retry_in", "error", "since")
        facts = status.to_dict()
        return {ERROR_META_KEY: {"server": server, **{k: facts[k] for k in keep}}}


def client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The calling client's name: its `clientInfo` (the handshake's, or a
    2026-07-28 request's own), else its protocol version. A name the
    daemon's own surfaces go by (`cli`, `lua`) gets ` (endpoint)`: a client
    cannot pass for them in a policy rule."""
    params = ctx.session.client_params
    name = None
    if params is not None:
        name = str(params.client_info.name)
    else:
        info = (ctx.meta or {}).get(CLIENT_INFO_META_KEY)
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            name = str(info["name"])
    if name is None:
        return f"unnamed ({ctx.protocol_version})"
    return f"{name} (endpoint)" if name.strip().lower() in SURFACES else name


def _build_index(table: ToolTable, profile: Profile) -> Any:
    """The words index of the tools `profile` shows (a worker thread's job
    for hundreds of tools: tens to hundreds of milliseconds)."""
    from .discovery import ToolIndex

    origins = {name: (r.server, r.tool) for name, r in table.routes.items()}
    tools = [
        tool for tool in visible_items(table, profile, "tools") if not app_only(tool)
    ]
    return ToolIndex(tools, origins)
