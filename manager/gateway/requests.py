"""What upstreams ask and tell the client, routed to the right downstream request.

While an upstream serves a downstream request, what it says about that request
(progress, log messages) goes to that request's own stream, in the order the
upstream sent it and all of it before the result (`CallNotes`, `serving`):
straight at the server the client gets the same. A log message that a
streamable HTTP upstream sends on a request's own response stream is read in
that request's task, so it goes to that request exactly (`_SERVED`). Any
other (stdio and SSE have no way to say whose it is) goes to the
requests in flight to that upstream
while they are all one client's. While several clients' requests are in
flight there, it goes to none of them (it may carry one client's data; the
daemon's own log and events still have it, and `logs_withheld` counts it):
isolation between clients comes before the line.

Requests from an upstream (`sampling/createMessage`, `elicitation/create`) go
to the downstream session whose request that upstream is serving, related to
that request. Over streamable HTTP upstreams the match is exact: a call from a
client that can be asked carries a token (`LINK_META_KEY`), and the transport
notes which server requests arrive on that call's response stream; a
2026-07-28 upstream asks in the answer to the call itself. Over stdio or SSE in
the handshake era the protocol carries no link on the client side, so once
such an upstream has asked a question, clients that can be asked take turns
there (`Turns`): while one client's requests are in flight to it, another
client's wait (at most that server's `call_timeout`), and a question it asks
has one client to go to. Straight at the server each client would have had a
process of its own; the cost is that their calls to it no longer overlap. A
server that never asks (most) costs nothing, and a request of a client that
cannot be asked never waits. A question that still finds two clients'
requests in flight (the first one a server asks) is refused with a clear
error rather than guessed (never sent to another client).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import ServerRequestContext
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import CLIENT_CAPABILITIES_META_KEY, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..core.errors import CallTimeout
from ..mcpserver.peers import NOTIFY_TIMEOUT, on_its_own_stream, session_key
from ..transport.base import ProgressCallback
from .rounds import HeldCall, can_be_asked

__all__ = ["NOTES_LIMIT", "CallNotes", "ClientRequests", "Turns", "upstream_meta"]

logger = logging.getLogger("manager.gateway")

_SERVED: ContextVar[tuple[str, Any] | None] = ContextVar(
    "mcp_manager_served", default=None
)
"""(upstream, the request's notes) the current task serves, while it does."""

NOTES_LIMIT = 1000
"""Notifications of one request waiting to reach its client; beyond it they are
dropped and counted (a client that does not read its stream)."""


Starter = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]
"""Starts a task (`TaskGroup.start_soon`)."""

_ENVELOPE_PREFIX = "io.modelcontextprotocol/"
"""Reserved `_meta` keys that describe the downstream request's envelope (its
protocol version, client info, log level), not what it asks."""


def upstream_meta(ctx: ServerRequestContext[Any, Any]) -> dict[str, object] | None:
    """The `_meta` a downstream request is passed on with: its own, as sent,
    minus its progress token (the upstream gets ours) and the keys of its
    envelope, plus the capabilities of the client it comes from (2026-07-28
    servers judge each request by them; the transport keeps them off a
    handshake-era server, which got ours at `initialize`)."""
    params = ctx.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    out: dict[str, object] = {}
    sent = None
    if isinstance(meta, dict):
        out = {
            key: value
            for key, value in meta.items()
            if key != "progressToken" and not key.startswith(_ENVELOPE_PREFIX)
        }
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            sent = meta.get(CLIENT_CAPABILITIES_META_KEY)
    caps = ctx.session.client_capabilities
    if caps is not None:
        # A 2026-07-28 request's own declaration, as the client wrote it (the
        # SDK judged it already); a handshake session's, dumped once.
        out[CLIENT_CAPABILITIES_META_KEY] = (
            sent if isinstance(sent, dict) else _dumped_capabilities(caps)
        )
    return out or None


_last_dumped: tuple[object, dict[str, Any]] = (None, {})


def _dumped_capabilities(caps: types.ClientCapabilities) -> dict[str, Any]:
    """`caps` as JSON, the last one remembered: a handshake-era session's
    object is the same on every call (read, never changed, downstream)."""
    global _last_dumped
    if _last_dumped[0] is not caps:
        dumped = caps.model_dump(by_alias=True, mode="json", exclude_none=True)
        _last_dumped = (caps, dumped)
    return _last_dumped[1]


_ASKED: dict[str, tuple[str, Any, Any]] = {
    "sampling/createMessage": (
        "sampling",
        types.CreateMessageRequest,
        types.CreateMessageResult,
    ),
    "elicitation/create": ("elicitation", types.ElicitRequest, types.ElicitResult),
    "roots/list": ("roots", types.ListRootsRequest, types.ListRootsResult),
}
"""What an upstream may ask a client: capability, request and result types."""


class CallNotes:
    """What an upstream says about one downstream request while serving it:
    progress under the request's own token, log messages at the levels the
    client takes, sent on that request's stream in the order they came.

    Args:
        ctx: The downstream request.
        levels: Log levels the client takes for this request (handshake era:
            `logging/setLevel` or every level; 2026-07-28: the request's own
            opt-in); None takes what the protocol version allows.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        levels: Collection[str] | None = None,
    ) -> None:
        self._ctx = ctx
        if levels is None:
            levels = allowed_log_levels(ctx.protocol_version, ctx.meta)
        self._levels = frozenset(levels)
        # The stream and its end are made with the first note: most requests
        # bring none, and pay for neither.
        self._send: MemoryObjectSendStream[types.ServerNotification] | None = None
        self._receive: MemoryObjectReceiveStream[types.ServerNotification] | None = None
        self._delivered: anyio.Event | None = None
        token = ctx.meta.get("progress_token") if ctx.meta is not None else None
        self._token = token if isinstance(token, str | int) else None
        self.dropped = 0
        self._start: Starter | None = None
        self._started = False
        self._closed = False
        self._abandoned = False

    @property
    def progress(self) -> ProgressCallback | None:
        """The upstream's progress callback, if the request asked for progress."""
        return self._progress if self._token is not None else None

    async def _progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        assert self._token is not None
        self._put(
            types.ProgressNotification(
                params=types.ProgressNotificationParams(
                    progress_token=self._token,
                    progress=progress,
                    total=total,
                    message=message,
                )
            )
        )

    def takes(self, level: str) -> bool:
        """Whether a log message at `level` reaches this request's client."""
        return level in self._levels

    def log(self, level: str, logger_name: str | None, data: object) -> None:
        """An upstream log message sent while serving this request."""
        if level not in self._levels:
            return
        self._put(
            types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level=level,  # type: ignore[arg-type]
                    logger=logger_name,
                    data=data,
                )
            )
        )

    def deliver_with(self, start: Starter) -> None:
        """Have `start(self.deliver)` called when the first note comes: most
        requests bring none, and then no task is started for them."""
        self._start = start

    def _put(self, note: types.ServerNotification) -> None:
        if self._closed:
            return  # after the result: the request's stream is gone
        if self._send is None:
            self._send, self._receive = anyio.create_memory_object_stream[
                types.ServerNotification
            ](NOTES_LIMIT)
        try:
            self._send.send_nowait(note)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        if not self._started and self._start is not None:
            self._started = True
            self._delivered = anyio.Event()
            self._start(self.deliver)

    async def deliver(self) -> None:
        """Send every note on the request's stream until `close()`; a client
        that does not take one within `NOTIFY_TIMEOUT` loses the rest."""
        session, related = self._ctx.session, self._ctx.request_id
        assert self._receive is not None and self._delivered is not None
        gone = False
        try:
            async with self._receive:
                async for note in self._receive:
                    if gone or self._abandoned:
                        continue
                    try:
                        with anyio.fail_after(NOTIFY_TIMEOUT):
                            await session.send_notification(note, related)
                    except Exception as exc:  # boundary: a gone client loses notes
                        logger.debug("gateway: request notes not delivered: %r", exc)
                        gone = True
        except Exception:  # boundary: never the end of the task group it runs in
            logger.exception("gateway: request notes failed")
        finally:
            self._delivered.set()

    def abandon(self) -> None:
        """The request was cancelled: what is still queued is not sent."""
        self._abandoned = True
        self.close()

    async def delivered(self) -> None:
        """Return once every note is sent (or dropped): at once if none came."""
        if self._delivered is not None:
            await self._delivered.wait()

    def close(self) -> None:
        """No more notes: `deliver` ends once it has sent what is queued."""
        self._closed = True
        if self._send is not None:
            self._send.close()
        if not self._started and self._receive is not None:
            self._receive.close()  # nobody will read it


class Turns:
    """The clients that can be asked, taking turns on one upstream whose
    questions name no request (`ClientRequests`).

    One client (a downstream session; in 2026-07-28, one HTTP request, or
    its attach or stdio stream) holds the
    turn at a time, for as many requests as it makes meanwhile (a client that
    calls again while it answers a question is never made to wait for
    itself); the others queue, first come first served, and when the holder's
    last request ends the first in the queue gets the turn, with every other
    request of that same client that queued.
    """

    __slots__ = ("_count", "_holder", "_queue")

    def __init__(self) -> None:
        self._holder: str | None = None
        self._count = 0
        self._queue: list[tuple[str, anyio.Event]] = []

    @property
    def waiting(self) -> int:
        """Requests queued for a turn."""
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nobody holds the turn or waits for it."""
        return self._holder is None and not self._queue

    async def take(self, key: str) -> None:
        """Wait for `key`'s turn (joined at once if it holds it already)."""
        if self._holder is None or self._holder == key:
            self._holder = key
            self._count += 1
            return
        entry = (key, anyio.Event())
        self._queue.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry[1].is_set():
                self.give_back()  # granted as it was cancelled
            else:
                self._queue.remove(entry)
            raise

    def give_back(self) -> None:
        """One request of the holder ended; the last one passes the turn on."""
        self._count -= 1
        if self._count > 0:
            return
        self._holder = None
        if not self._queue:
            return
        key = self._queue[0][0]
        granted = [entry for entry in self._queue if entry[0] == key]
        self._queue = [entry for entry in self._queue if entry[0] != key]
        self._holder, self._count = key, len(granted)
        for _, event in granted:
            event.set()


@dataclass(slots=True)
class _Waiting:
    """A downstream request an upstream is serving now; `token` is the link
    sent upstream with it (`LINK_META_KEY`), if any; `notes` its stream."""

    key: str
    ctx: ServerRequestContext[Any, Any]
    token: str | None = None
    notes: CallNotes | None = field(default=None)
    held: HeldCall | None = None


def _times_asked(waiting: _Waiting) -> int:
    return waiting.held.asked if waiting.held is not None else 0


class ClientRequests:
    """Which downstream requests each upstream is serving, and the routing of
    that upstream's own requests to them.

    Args:
        deadline: Seconds the client may take to answer a request of that
            upstream (its `call_timeout`: the question cannot outlive the
            call it serves); a client that never answers gets the upstream an
            error then, not a request that waits forever. A request waits
            as long for its turn (`Turns`).
        unlinked: Whether an upstream's questions name no request (a
            handshake-era stdio or SSE server): clients that can be asked
            take turns there, once it has asked a question.
        apart: Whether a request (its context) to an upstream is served by
            the session of its client's era beside the connection's own
            (`Upstream.apart`): it takes no turn at the other one, and only
            that session's questions can be for it.
    """

    def __init__(
        self,
        deadline: Callable[[str], float],
        unlinked: Callable[[str], bool] = lambda server: False,
        apart: Callable[[str, Any], bool] = lambda server, ctx: False,
    ) -> None:
        self._waiting: dict[str, list[_Waiting]] = {}
        self._deadline = deadline
        self._unlinked = unlinked
        self._apart = apart
        self._turns: dict[str, Turns] = {}
        self._askers: set[str] = set()
        # Servers that asked a question naming no request over a transport
        # that could have named one (streamable HTTP, on the session's
        # standalone stream): their askable clients take turns too.
        self._unnamed: set[str] = set()
        """Upstreams that asked a question since the daemon started: only
        there do clients take turns."""
        self.logs_withheld: dict[str, int] = {}
        """Log messages sent during several clients' requests, by upstream:
        passed to none of them."""
        self.spawn: Starter | None = None
        """Starts a task in the serving gateway's own task group (set while it
        runs): a request's notes are delivered there, so a request that brings
        none costs no task group of its own."""

    @contextlib.asynccontextmanager
    async def serving(
        self,
        server: str,
        ctx: ServerRequestContext[Any, Any],
        notes: CallNotes,
        token: str | None = None,
        held: HeldCall | None = None,
    ) -> AsyncIterator[None]:
        """Record `ctx` as waiting on `server` while the body runs, its `notes`
        delivered meanwhile; leaves once every note is sent (or dropped), so
        they all reach the client before the result. With `held` (a
        2026-07-28 client), what the upstream asks goes to its input rounds.

        An error of the body leaves as itself, not in an exception group.

        Raises:
            CallTimeout: Its turn (`Turns`) did not come within the server's
                `call_timeout`.
        """
        key = session_key(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not (
            on_its_own_stream(ctx)
        ):
            # No session in 2026-07-28: over HTTP each request is a client of
            # its own (two of them in flight to one stdio server are told
            # apart or refused, never confused). On an attach connection or
            # the stdio front the stream is the client: its calls overlap.
            key = f"{key}#{id(notes)}"
        # A log message the upstream's transport reads in this very task (on
        # this request's own response stream: streamable HTTP) is this
        # request's, whoever else waits there (`log`).
        mark = _SERVED.set((server, notes))
        turns: Turns | None = None
        try:
            if (  # cheapest first: most servers never ask
                server in self._askers
                and can_be_asked(ctx.session.client_capabilities)
                and (
                    # stdio, SSE: questions never name a request; a 2026-07-28
                    # client served beside is asked in its call's rounds
                    (self._unlinked(server) and not self._apart(server, ctx))
                    # streamable HTTP that asked unnamed (its standalone
                    # stream): its handshake clients, served beside or not; a
                    # 2026-07-28 client is asked in its call's rounds, and a
                    # turn held across them would block its own retry
                    or (
                        server in self._unnamed
                        and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
                    )
                )
            ):
                turns = await self._take_turn(server, key)
            # One generator on every call's path (not one per concern).
            item = _Waiting(key, ctx, token, notes, held)
            waiting = self._waiting.setdefault(server, [])
            if self.spawn is not None:
                notes.deliver_with(self.spawn)
                waiting.append(item)
                try:
                    yield
                except Exception:
                    waiting.remove(item)
                    notes.close()
                    await notes.delivered()  # what came before the error, first
                    raise
                except BaseException:  # cancelled: the rest is not sent
                    waiting.remove(item)
                    notes.abandon()
                    raise
                waiting.remove(item)
                notes.close()
                await notes.delivered()
                return
            try:
                async with anyio.create_task_group() as tg:
                    notes.deliver_with(tg.start_soon)
                    waiting.append(item)
                    try:
                        yield
                    finally:
                        waiting.remove(item)
                        notes.close()
            except BaseExceptionGroup as group:
                if len(group.exceptions) == 1 and isinstance(
                    group.exceptions[0], Exception
                ):
                    raise group.exceptions[0]  # noqa: B904 - the body's own error
                raise
        finally:
            if turns is not None:
                turns.give_back()
                if turns.idle:
                    self._turns.pop(server, None)
            _SERVED.reset(mark)

    async def _take_turn(self, server: str, key: str) -> Turns:
        """`key`'s turn at `server` (give it back with `Turns.give_back`)."""
        turns = self._turns.setdefault(server, Turns())
        limit = self._deadline(server)
        try:
            with anyio.fail_after(limit):
                await turns.take(key)
        except TimeoutError:
            if turns.idle:
                self._turns.pop(server, None)
            raise CallTimeout(
                f"{server}: waited {limit:g} s for its turn: clients that can be "
                f"asked questions take turns at {server} (its questions name no "
                "request), and other clients' requests held it all that time"
            ) from None
        return turns

    def in_flight(self, server: str) -> int:
        """Downstream requests `server` is serving now."""
        return len(self._waiting.get(server, ()))

    def log(
        self, server: str, level: str, logger_name: str | None, data: object
    ) -> bool:
        """An upstream's log message: to the requests it is serving now, while
        they are all one client's (the message names no request; see the
        module docstring). Returns whether it belonged to a call (then it is
        not said to sessions outside calls)."""
        waiting = self._waiting.get(server)
        if not waiting:
            return False
        served = _SERVED.get()
        if served is not None and served[0] == server:
            mine = [item for item in waiting if item.notes is served[1]]
            if mine:  # read on that request's own stream
                served[1].log(level, logger_name, data)
                return True
        if len({item.key for item in waiting}) > 1:
            self.logs_withheld[server] = self.logs_withheld.get(server, 0) + 1
            if self.logs_withheld[server] == 1:
                logger.info(
                    "%s: a log message sent while several clients' requests were "
                    "in flight there went to none of them (it does not say whose "
                    "it is); such messages are counted, not passed on",
                    server,
                )
            return True
        # One client's: said once, on one of its requests (on each, the
        # client got it once per request in flight).
        for item in waiting:
            if item.notes is not None and item.notes.takes(level):
                item.notes.log(level, logger_name, data)
                break
        return True

    # --- requests from upstreams ---------------------------------------------------

    async def upstream_request(
        self,
        server: str,
        method: str,
        params: Any,
        link: str | None = None,
        key: str | None = None,
        beside: bool = False,
    ) -> Any:
        """Route `sampling/createMessage`, `elicitation/create` or `roots/list`
        (of a connection that declares no roots) from `server` to the
        downstream session whose request it is serving: the one its
        link names (streamable HTTP upstreams), else the only session waiting
        on the session that asks (`beside`: the one of the other era)."""
        self._askers.add(server)  # from now on its askable clients take turns
        if link is None:
            self._unnamed.add(server)
        waiting = self._waiting.get(server, [])
        linked = [w for w in waiting if link is not None and w.token == link]
        if linked:
            waiting = linked
        else:
            # Asked by the session that serves it: told apart now, not when
            # the request began (the session beside may have been refused).
            waiting = [w for w in waiting if self._apart(server, w.ctx) == beside]
            # A 2026-07-28 call parked on a question of its own is not the
            # one asking now (its upstream handler awaits that answer).
            free = [w for w in waiting if w.held is None or not w.held.blocked]
            if free:
                waiting = free
        keys = {w.key for w in waiting}
        if not keys:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: no client request to {server} is in "
                "progress through mcp-manager, so there is nobody to ask",
            )
        if len(keys) > 1:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: requests of {len(keys)} clients are "
                "in progress and the question names none of them (a stdio or SSE "
                "server's never do; a streamable HTTP server's do when sent on the "
                "request's own stream); refused rather than sent to the wrong "
                "client (from now on such clients take turns at this server)",
            )
        ctx = waiting[0].ctx
        caps = ctx.session.client_capabilities
        wanted, request_type, result_type = _ASKED[method]
        if caps is None or getattr(caps, wanted) is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} from {server}: the client connected through "
                f"mcp-manager did not declare the {wanted} capability",
            )
        held = waiting[0].held
        if held is not None and len(waiting) > 1:
            # Which of one client's calls it is, nobody can tell: it goes to
            # the call asked least so far. A call whose own question went to
            # another would otherwise collect everyone's rounds and pass its
            # client's limit (the SDK's Client gives up after 10).
            held = min(waiting, key=_times_asked).held
        if held is not None:  # a 2026-07-28 client: asked in its next round
            return await held.ask(method, params, result_type, key)
        # On the request's own channel where it has one (stdio, SSE, HTTP with
        # streamed responses); else (our HTTP endpoint answers with plain JSON)
        # on the session's standalone stream, where the client takes it too.
        related = (
            ServerMessageMetadata(related_request_id=ctx.request_id)
            if ctx.session.can_send_request
            else None
        )
        request: Any = request_type(params=params)
        try:
            return await ctx.session.send_request(
                request,
                result_type,
                request_read_timeout_seconds=self._deadline(server),
                metadata=related,
            )
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message)
