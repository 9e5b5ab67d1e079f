"""An initialized upstream session: the `Upstream` over an SDK `ClientSession`.

`McpSession` makes calls, pings and notices the end of a session that
`handshake` (its own module) opened and listed.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.inbound import (
    MCP_NAME_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    METHOD_NOT_FOUND,
)
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
)

from ..core.errors import (
    ConnectFailed,
    Disconnected,
    SessionForgotten,
    TransportError,
)
from .base import (
    CATALOG_KINDS,
    CallResult,
    Catalog,
    Hooks,
    ListHint,
    LossReport,
    ProgressCallback,
    Relay,
    ServerInfo,
    ToolInfo,
)
from .compat_mcp import speak_for_the_caller, stamp_request, typed_result
from .errors import (
    describe_error,
    forgot_session,
    is_session_lost,
    request_error,
)
from .http.liveness import TcpSentinel
from .listening import Listener
from .lists import LIST_METHODS, read_list, read_tools, with_hint
from .relay import plain_tool_result
from .rounds import INPUT_METHODS, InputRounds
from .side import EraSide, ListSources
from .signals import LostSignal
from .tasks import OWN_EXTENSIONS, ROUTED_EXTENSIONS

__all__ = ["McpSession"]

logger = logging.getLogger(__name__)


PING_ERRORS = 3
"""Pings answered with an error in a row that end a session (`McpSession.ping`)."""


class McpSession:
    """The `Upstream` implementation over an SDK `ClientSession`.

    One route per era: every request a client makes (`tools/call`, `send`)
    goes out by the transport's one sender, `wire` (`relay.StdioRelay` on a
    process's pipe, `http.relay.HttpRelay` as one POST, `relay.DispatcherRelay`
    otherwise), stamped as the SDK's session would stamp it; in 2026-07-28 in
    input rounds. A tool result is passed on as the JSON the server sent once
    it plainly has a tool result's shape; anything else is judged and typed as
    the SDK's session would (`compat_mcp.typed_result`). The SDK session keeps
    the handshake, lists, pings, `subscriptions/listen` and what the server
    asks and tells.
    """

    def __init__(
        self,
        session: ClientSession,
        info: ServerInfo,
        lost: LostSignal,
        pid: int | None,
        sentinel: TcpSentinel | None,
        wire: Relay,
        hooks: Hooks | None = None,
    ) -> None:
        self._session = session
        self._wire = wire
        self._hooks = hooks
        self._modern = info.protocol not in HANDSHAKE_PROTOCOL_VERSIONS
        self._listener = Listener(session, lost, info.name)
        self._following = not self._modern
        self.followed = self._listener.followed
        """Set once changes are followed: at once in the handshake era (they
        come on the session), once the first `subscriptions/listen` stream is
        open (or refused, or lost) in 2026-07-28."""
        if self._following:
            self.followed.set()
        if self._modern:
            speak_for_the_caller(session, ROUTED_EXTENSIONS, OWN_EXTENSIONS)
        self._info = info
        self._lost = lost
        self._pid = pid
        self._sentinel = sentinel
        self._tools: tuple[ToolInfo, ...] = ()
        self._catalog = Catalog()
        self._ping_errors = 0
        """Pings answered with an error in a row (`ping`)."""
        self.side: EraSide | None = None
        """Where requests of clients of the other era go, with a server that
        may speak both eras (set by the transport)."""
        self.sources: ListSources | None = None
        """Which session each list comes from while `side` runs a process of
        its own (set by the transport)."""

    @property
    def info(self) -> ServerInfo:
        return self._info

    @property
    def sdk(self) -> ClientSession:
        """The SDK session underneath (what a session beside is listed by)."""
        return self._session

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    @property
    def closed(self) -> bool:
        """The session ended (the server went away, or closed it)."""
        return self._lost.is_set

    async def for_era(self, era: str | None, limit: float) -> McpSession:
        side = self.side
        if side is not None and era == side.era:
            beside = await side.session(limit)
            if beside is not None:
                return beside
        return self

    def beside(self) -> str:
        side = self.side
        if side is None or side.current is None:
            return ""
        return side.era if side.pid is None else f"{side.era}, pid {side.pid}"

    def apart(self, era: str | None) -> bool:
        side = self.side
        return side is not None and era == side.era and not side.refused

    def capabilities_for(self, era: str | None) -> Mapping[str, object] | None:
        side = self.side
        if side is None or era != side.era or side.refused:
            return self._info.capabilities
        return side.capabilities

    def _lister(self, kind: str) -> ClientSession:
        """The session `kind` is listed from: the one that last said it
        changed (`side.ListSources`), this one by default."""
        if self.sources is not None and kind in self.sources.beside:
            beside = self.side.current if self.side is not None else None
            if beside is not None:
                return beside.sdk
        return self._session

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        try:
            tools, hint = await read_tools(self._lister("tools"))
        except MCPError as exc:
            raise self._mapped(exc, "tools/list") from exc
        self._tools = tools
        self._catalog = with_hint(self._catalog, "tools", hint)
        return self._tools

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    async def list_catalog(self, kinds: tuple[str, ...] = CATALOG_KINDS) -> Catalog:
        offered = self._info.capabilities
        found: dict[str, Any] = {}
        hints: dict[str, ListHint | None] = {}
        for kind in kinds:
            hints[kind] = None
            capability = "prompts" if kind == "prompts" else "resources"
            if capability not in offered:
                found[kind] = ()
                continue
            try:
                found[kind], hints[kind] = await self._list_all(kind)
            except MCPError as exc:
                if is_session_lost(exc):
                    raise self._mapped(exc, LIST_METHODS[kind]) from exc
                # A server may advertise a capability and still refuse the
                # list (a half-built server): it offers nothing of that kind.
                logger.debug("%s refused: %s", LIST_METHODS[kind], exc.message)
                found[kind] = ()
        catalog = dataclasses.replace(self._catalog, **found)
        for kind, hint in hints.items():
            catalog = with_hint(catalog, kind, hint)
        self._catalog = catalog
        return self._catalog

    async def _list_all(
        self, kind: str
    ) -> tuple[tuple[Mapping[str, object], ...], ListHint | None]:
        """Every page of one list, and its freshness hint."""
        return await read_list(
            self._lister("resources" if kind == "templates" else kind), kind
        )

    async def send(
        self,
        request: Any,
        result_type: Any,
        limit: float,
        *,
        progress: ProgressCallback | None = None,
    ) -> Any:
        method = str(getattr(request, "method", "request"))
        if self._lost.is_set:
            raise Disconnected(f"session closed: {self._lost.report.reason}")
        if self._modern and method in ("resources/subscribe", "resources/unsubscribe"):
            uri = str(request.params.uri)
            follow = method == "resources/subscribe"
            # Answered once the stream that follows it is open: a change
            # right after the subscribe is heard (bounded as any request).
            with anyio.move_on_after(limit):
                await self._listener.watch(uri, follow).wait()
            return types.EmptyResult()
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            raw = await self._exchange(
                method,
                data.get("params"),
                limit,
                progress,
                named=getattr(type(request), "name_param", None),
            )
            return typed_result(self._session, method, raw, result_type)
        except (TimeoutError, MCPError) as exc:
            raise self._ours(exc, method, limit) from exc

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None,
        limit: float,
        *,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallResult:
        if self._lost.is_set:
            raise Disconnected(f"session closed: {self._lost.report.reason}")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:  # `{}` too: some servers require the object
            params["arguments"] = dict(arguments)
        if meta is not None:
            params["_meta"] = dict(meta)
        what = f"tools/call {name}"
        try:
            raw = await self._exchange("tools/call", params, limit, progress, what)
            if plain_tool_result(raw) or (
                # a task (SEP-2663) is passed on as sent
                self._modern and raw.get("resultType", "complete") != "complete"
            ):
                return CallResult(is_error=raw.get("isError") is True, data=raw)
            # Fails (ValidationError) or normalises as the SDK's own call would.
            typed = typed_result(self._session, "tools/call", raw, types.CallToolResult)
        except (TimeoutError, MCPError) as exc:
            raise self._ours(exc, what, limit) from exc
        # What the server sent: fields it left out stay out, and a null it
        # sent (in `_meta`, say) stays null (`exclude_none` dropped those).
        data = typed.model_dump(by_alias=True, mode="json", exclude_unset=True)
        return CallResult(is_error=bool(typed.is_error), data=data)

    async def _exchange(
        self,
        method: str,
        params: dict[str, Any] | None,
        limit: float,
        progress: ProgressCallback | None,
        what: str | None = None,
        *,
        named: str | None = None,
    ) -> dict[str, Any]:
        """A client's request, sent by the transport's one sender (`_wire`) in
        this session's era, and its result as the server sent it. In the
        handshake era once (without the caller's capabilities: that era
        declared ours at `initialize`); in 2026-07-28 stamped as the SDK's
        session stamps a request, and in input rounds (`rounds.InputRounds`) where
        the server may answer `input_required`."""
        params = dict(params or {})
        if not self._modern:
            meta = _without_caller(params.get("_meta"))
            if meta is None:
                params.pop("_meta", None)
            else:
                params["_meta"] = dict(meta)
            return await self._once(method, params, limit, progress, named)
        if method not in INPUT_METHODS:
            return await self._once(method, params, limit, progress, named)

        # Every round of it within `limit`: the first bounded on the wire,
        # as any request (this is every call's path); the rest under one
        # deadline, questions and answers included.
        deadline = anyio.current_time() + limit
        first = await self._once(method, params, limit, progress, named)
        if first.get("resultType") != "input_required":
            return first
        meta = params.get("_meta")
        rounds = InputRounds(self._session, self._hooks, what or method, meta)

        async def send(sent: dict[str, Any]) -> dict[str, Any]:
            left = deadline - anyio.current_time()
            return await self._once(method, sent, max(left, 0.0), progress, named)

        with anyio.fail_at(deadline):
            return await rounds.run(params, first, send)

    async def _once(
        self,
        method: str,
        params: dict[str, Any],
        limit: float,
        progress: ProgressCallback | None,
        named: str | None = None,
    ) -> dict[str, Any]:
        """One request on the wire, with the headers the SDK's session would
        stamp (`MCP-Protocol-Version`, and in 2026-07-28 `Mcp-Method`, the
        envelope in `_meta`); `Mcp-Name` for the methods that name a target
        (`named`: the request type's `name_param`, as the SDK reads it)."""
        data: dict[str, Any] = {"method": method, "params": params}
        headers = stamp_request(self._session, data)
        params = data["params"]
        key = named or NAME_BEARING_METHODS.get(method)
        if key is not None and MCP_NAME_HEADER not in headers:
            target = params.get(key)
            if isinstance(target, str):
                headers[MCP_NAME_HEADER] = encode_header_value(target)
        return await self._wire.request(
            method,
            params,
            limit,
            progress,
            headers,
            cancel=not self._modern,  # 2026 HTTP: closing the stream says it
        )

    async def notify_roots_changed(self) -> None:
        with warnings.catch_warnings():
            # Roots are deprecated as of 2026-07-28 (SEP-2577); a handshake-era
            # server still asks for them. The SDK warns when the call is made,
            # so only the making is inside (no other task runs under the filter).
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            told = self._session.send_roots_list_changed()
        try:
            await told
        except MCPError as exc:
            raise self._mapped(exc, "notifications/roots/list_changed") from exc

    async def ping(self, limit: float) -> None:
        try:
            with anyio.fail_after(limit):
                if self._info.protocol not in HANDSHAKE_PROTOCOL_VERSIONS:
                    # 2026-07-28 has no ping: server/discover is its probe.
                    await self._session.send_discover(self._info.protocol)
                    return
                try:
                    await self._session.send_ping()
                except MCPError as exc:
                    if exc.code != METHOD_NOT_FOUND:
                        raise
                    await self._session.list_tools()  # 2026 sessions have no ping
        except TimeoutError:
            raise self._given_up(f"no answer to ping within {limit:g} s") from None
        except MCPError as exc:
            # Answered with an error (an HTTP 503 or 429, say): the server is
            # there. Dropping the session for it would cut the calls it is
            # running (their results lost), and a new one would fare no
            # better; only errors in a row, or a session it forgot, end it.
            self._ping_errors += 1
            if is_session_lost(exc) or self._ping_errors >= PING_ERRORS:
                times = (
                    f" ({self._ping_errors} in a row)" if self._ping_errors > 1 else ""
                )
                raise self._given_up(
                    f"ping failed{times}: {describe_error(exc)}"
                ) from exc
            logger.info(
                "%s: a ping was answered with an error (%s); kept the session",
                self._info.name,
                describe_error(exc),
            )
            return
        self._ping_errors = 0

    def _given_up(self, reason: str) -> Disconnected:
        """The session is lost for `reason` (a ping): the calls in flight
        fail saying so, not with the closed connection that follows."""
        if not self._lost.is_set:
            self._lost.set(LossReport(reason))
        return Disconnected(reason)

    async def wait_lost(self) -> LossReport:
        if not self._following:
            # The first waiter (the connection's watch) also follows the
            # changes of a 2026-07-28 session while it waits.
            self._following = True
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listener.follow)
                await self._lost.event.wait()
                tg.cancel_scope.cancel()
        await self._lost.event.wait()
        return self._lost.report

    async def wait_suspect(self) -> str:
        if self._sentinel is None:
            return await self._lost.wait_suspect()
        why: list[str] = []
        async with anyio.create_task_group() as tg:

            async def stream() -> None:
                why.append(await self._lost.wait_suspect())
                tg.cancel_scope.cancel()

            async def sentinel(sentinel: TcpSentinel) -> None:
                await sentinel.wait_closed()
                why.append("the server closed an idle connection")
                tg.cancel_scope.cancel()

            tg.start_soon(stream)
            tg.start_soon(sentinel, self._sentinel)
        return why[0]

    async def aclose(self) -> None:
        if self._sentinel is not None:
            await self._sentinel.aclose()

    def _ours(
        self, exc: BaseException, what: str, limit: float | None = None
    ) -> BaseException:
        """A request's failure as ours (`request_error`), else as it is. A
        session the server forgot (HTTP 404) ends here, at once: the request
        was not processed (`SessionForgotten`), and the connection opens a
        new session, where the caller may send it again."""
        if isinstance(exc, MCPError) and forgot_session(exc):
            reason = f"the server forgot the session ({exc.message})"
            if not self._lost.is_set:
                self._lost.set(LossReport(reason, error_type="SessionForgotten"))
            return SessionForgotten(f"{what}: {reason}: it did not process the request")
        lost = self._lost.report.reason if self._lost.is_set else None
        return request_error(exc, what, limit=limit, lost=lost) or exc

    def _mapped(self, exc: MCPError, what: str) -> TransportError:
        """A failure of our own request (a list, a ping, a notification)."""
        lost = self._lost.report.reason if self._lost.is_set else None
        error = request_error(exc, what, lost=lost, answered=False)
        return error if isinstance(error, TransportError) else ConnectFailed(str(exc))


def _without_caller(
    meta: Mapping[str, object] | None,
) -> Mapping[str, object] | None:
    """`meta` without the caller's capabilities (a handshake-era server got
    ours at `initialize`)."""
    if meta is None or CLIENT_CAPABILITIES_META_KEY not in meta:
        return meta
    rest = {k: v for k, v in meta.items() if k != CLIENT_CAPABILITIES_META_KEY}
    return rest or None
