"""`Manager`: the desired set of connections, their tasks, status and tool calls.

The manager owns one task group. Each declared connection runs in its own task
(`Supervisor.run`) under its own cancel scope, so removing or
restarting one never touches another. `add`, `remove` and `reconcile` are
synchronous and return at once (they only record intent and start or cancel
tasks), which is what lets Lua call them from the event-loop thread.

Tool calls go through `call()`: a connected server is called at once; a
reconnecting one is waited for up to its `hold` (unless its outage is already old,
then the call fails at once); a call is never retried by the manager.
"""

from __future__ import annotations

import itertools
import random
import secrets
import time
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.abc

from ..core.errors import (
    ServerUnavailable,
    SessionForgotten,
    ToolHeld,
    UnknownServer,
)
from ..core.events import (
    Added,
    CallFailed,
    CallFinished,
    CallStarted,
    LaunchLock,
    SettingsChanged,
    ToolChanged,
    ToolsApproved,
    Updated,
)
from ..core.profile import Profile
from ..core.redact import SecretRegistry
from ..core.replies import UpdateReply
from ..core.spec import ConnectionSpec, applies_live, changed_fields, display_endpoint
from ..core.state import Phase
from ..core.status import ConnectionStatus
from ..core.text import meant
from ..files import default_state_dir
from ..transport import mcp_transport
from ..transport.base import (
    LINK_META_KEY,
    CallResult,
    Launching,
    OAuthLogins,
    ProgressCallback,
    StartCounts,
    ToolInfo,
    Transport,
    Upstream,
)
from ..transport.oauth import uses_oauth
from . import launches
from .bus import EventBus
from .calllog import CallLog
from .calls import CALL_DEADLINE_SLACK, call_error, describe_session, ready
from .connection import Connection, ServerRequests
from .launches import LaunchUpdate, launch_text
from .lists import ListMemory
from .live import tell_roots_changed
from .pins import PinBook
from .policy import Caller, Policy
from .results import ResultStore
from .status import connection_status
from .tracing import (
    ERROR_TYPE,
    GEN_AI_PROMPT_NAME,
    MCP_METHOD_NAME,
    MCP_RESOURCE_URI,
    NO_TRACING,
    SERVER,
    TRANSPORT,
    Span,
    Tracing,
    call_attributes,
)
from .vault import Vault

__all__ = ["Manager", "ReconcileResult"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    """What `reconcile` changed, by connection name."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


class Manager:
    """Keeps the declared connections running. Use as `async with Manager(bus):`.

    Args:
        bus: Where every state change is published.
        transport: Opens upstream sessions (the real MCP transport by default).
        clock: Wall clock (injectable).
        rand: Random source for backoff jitter (injectable).
        tracing: Spans for connect attempts, tool calls and removals (no-op by
            default; `telemetry.Telemetry.tracing` in the daemon).
        start_slots: How many stdio servers may start at once with the default
            transport (the CPU count when None).
        secrets: The daemon's secret registry: the default transport registers
            resolved secrets in it, and every error text leaving the manager
            (events, status, call errors) is masked with it. One of its own if
            None (`manager.secrets`).
        lists: Where on-demand connections' listings are kept between their
            sessions (default: `lists/` in the state directory).
        state_dir: Where tokens, eras, locks, pins, listings, approvals and
            the call log are kept (`files.default_state_dir()` when None).
        pins_read_only: Compare listings with the pins, never write them
            (`mcp-manager pins check`).
    """

    def __init__(
        self,
        bus: EventBus,
        transport: Transport | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracing: Tracing = NO_TRACING,
        start_slots: int | None = None,
        secrets: SecretRegistry | None = None,
        lists: ListMemory | None = None,
        pins_read_only: bool = False,
        state_dir: Path | None = None,
    ) -> None:
        self.bus = bus
        self.tracing = tracing
        self.secrets = secrets if secrets is not None else SecretRegistry()
        self.requests = ServerRequests()
        self.vault = Vault()
        """Where `${keyring:...}`, `${cmd:...}` and `${op://...}` are read."""
        state_dir = state_dir if state_dir is not None else default_state_dir()
        self._transport = transport or mcp_transport(
            state_dir=state_dir,
            secrets=self.secrets,
            send_span=tracing.send_span,
            read_secrets=self.vault.read,
            start_slots=start_slots,
            locks_read_only=pins_read_only,
        )
        self._clock = clock
        self._rand = rand
        self.lists = lists or ListMemory(state_dir / "lists")
        self.pins = PinBook(
            state_dir / "pins",
            self.bus.publish,
            self.secrets,
            read_only=pins_read_only,
        )
        """Pinned tool, prompt and template definitions (`engine.pins`)."""
        self.results = ResultStore()
        """Whole tool results that `max_output` cut (`engine.results`)."""
        self.calls = CallLog(state_dir)
        """Every tool call, one row each (`engine.calllog`)."""
        self.policy = Policy(self.bus.publish, state_dir, self.secrets, clock)
        """The call policy (`mcp_policy`) and the calls waiting for the user."""
        self._calls_scope = anyio.CancelScope()
        self._launches_scope = anyio.CancelScope()
        """What on-demand connections listed, kept between their sessions."""
        self._conns: dict[str, Connection] = {}
        self._closing: set[Connection] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._call_ids = itertools.count(1)
        self.profiles: dict[str, Profile] = {}
        """Declared views of the endpoint (`mcp_profile`), by name; set by
        each load of the script, read by the gateway."""

    @property
    def starts(self) -> StartCounts | None:
        """The transport's start slots of stdio servers (None without any)."""
        transport = self._transport
        return transport.starts if isinstance(transport, Launching) else None

    async def __aenter__(self) -> Manager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._write_calls)
        if isinstance(self._transport, Launching):
            self._tg.start_soon(self._watch_launches, self._transport)
        return self

    async def _watch_launches(self, transport: Launching) -> None:
        with self._launches_scope:
            await transport.launches.run()

    async def _write_calls(self) -> None:
        with self._calls_scope:
            await self.calls.run()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop every connection in parallel; each teardown is bounded."""
        assert self._tg is not None
        self.policy.stop()  # before the removals: said as a stop, not a removal
        for name in list(self._conns):
            self.remove(name)
        self._calls_scope.cancel()  # the last rows are written on the way out
        self._launches_scope.cancel()
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self._tg = None

    # --- declarations (synchronous, non-blocking) -----------------------------

    def add(self, spec: ConnectionSpec, *, why: str | None = None) -> bool:
        """Declare a connection. Same spec: no-op. Changed spec: restart that one.

        Args:
            spec: The connection.
            why: Restart it even with the same spec (`Updated.changed`, e.g.
                `login` after a logout).

        Returns:
            True if something started or restarted.
        """
        old = self._conns.get(spec.name)
        if old is not None and old.spec == spec and why is None:
            return False
        if old is not None and why is None and applies_live(old.spec, spec):
            self._respec(old, spec)
            return True
        conn = Connection(
            spec,
            self.bus,
            clock=self._clock,
            rand=self._rand,
            tracing=self.tracing,
            secrets=self.secrets,
            requests=self.requests,
            lists=self.lists,
            pins=self.pins,
        )
        if not spec.enabled:
            conn.disable()
        # In place before `added`/`updated` goes out: a listener that counts
        # connections by phase (the metrics gauge) sees the new one.
        self._conns[spec.name] = conn
        if old is not None:
            self._retire(old, publish_removed=False)
            self.bus.publish(
                Updated(
                    name=spec.name,
                    changed=changed_fields(old.spec, spec) or (why or "spec",),
                    endpoint=display_endpoint(spec),
                )
            )
        else:
            self.bus.publish(
                Added(
                    name=spec.name,
                    transport=spec.transport,
                    endpoint=display_endpoint(spec),
                )
            )
        if spec.enabled:
            self._start(conn)
        return True

    def _respec(self, conn: Connection, spec: ConnectionSpec) -> None:
        """Take a spec that differs only in what applies without a reconnect."""
        old, conn.spec = conn.spec, spec
        self.bus.publish(
            SettingsChanged(name=spec.name, changed=changed_fields(old, spec))
        )
        upstream = conn.upstream
        if old.roots != spec.roots and upstream is not None and self._tg is not None:
            self._tg.start_soon(tell_roots_changed, conn.name, upstream)

    def remove(self, name: str) -> bool:
        """Stop retrying, close gracefully, emit `removed`. Returns if it existed."""
        conn = self._conns.pop(name, None)
        if conn is None:
            return False
        self.pins.forget(name)
        self.policy.forget(name)
        self._retire(conn, publish_removed=True)
        if self._tg is not None and self.tracing is not NO_TRACING:
            # Started here, so a reload that removes it is the span's parent.
            self._tg.start_soon(self._removal_span, conn, name=f"remove {name}")
        return True

    async def _removal_span(self, conn: Connection) -> None:
        """`mcp.remove`: from the request until the connection has closed."""
        attributes = {SERVER: conn.name, TRANSPORT: conn.spec.transport}
        with self.tracing.span("mcp.remove", attributes):
            await conn.done.wait()

    def reconcile(self, specs: Iterable[ConnectionSpec]) -> ReconcileResult:
        """Make the running set equal to `specs`, touching only the difference."""
        desired = {s.name: s for s in specs}
        self.vault.forget()  # command outputs are read again after a reload
        added, changed, unchanged = [], [], []
        removed = sorted(set(self._conns) - set(desired))
        for name in removed:
            self.remove(name)
        for name, spec in desired.items():
            old = self._conns.get(name)
            if old is None:
                added.append(name)
            elif old.spec == spec:
                unchanged.append(name)
                continue
            else:
                changed.append(name)
            self.add(spec)
        return ReconcileResult(
            tuple(added), tuple(removed), tuple(changed), tuple(unchanged)
        )

    def _start(self, conn: Connection) -> None:
        if self._tg is None:
            raise RuntimeError("Manager used outside `async with`")
        self._tg.start_soon(self._supervise, conn, name=f"connection {conn.name}")

    def _retire(self, conn: Connection, *, publish_removed: bool) -> None:
        if not conn.spec.enabled:
            conn.mark_removed(publish=publish_removed)
            return
        conn.publish_removed = publish_removed
        self._closing.add(conn)
        conn.stop()

    async def _supervise(self, conn: Connection) -> None:
        try:
            with conn.scope:
                await conn.supervisor.run(self._transport)
        finally:
            self._closing.discard(conn)
            conn.mark_removed(publish=conn.publish_removed)

    def reconnect(self, name: str) -> bool:
        """Try `name` now instead of after its backoff wait.

        Returns:
            True if a wait was cut short; False if it was not waiting (connected,
            or a try already in flight).

        Raises:
            UnknownServer: No such connection.
            ServerUnavailable: It is disabled: nothing would try.
        """
        conn = self._conns.get(name)
        if conn is None:
            raise self.unknown(name)
        if conn.phase is Phase.DISABLED:
            raise ServerUnavailable(
                f"{name} is disabled (enabled = false in the config): set "
                "enabled = true (or remove it) in the config and reload to connect"
            )
        conn.forgive_refusals()  # the user asks: the login limit starts again
        return conn.retry_now()

    async def launch_offer(self, name: str) -> UpdateReply:
        """What `mcp-manager update NAME` would take (`engine.launches`)."""
        conn = self._conns.get(name)
        if conn is None:
            raise self.unknown(name)
        return await launches.offer(conn, self._transport)

    async def launch_take(self, name: str, version: str) -> LaunchUpdate:
        """Lock `name`'s package to the newer `version` `launch_offer`
        showed, and restart the server on it (a `launch_lock` event,
        `updated`)."""
        conn = self._conns.get(name)
        if conn is None:
            raise self.unknown(name)
        done = await launches.take(conn, self._transport, version)
        self.bus.publish(
            LaunchLock(
                name=name,
                change="updated",
                package=done.package,
                version=done.after,
                reason=f"was {done.before}" if done.before else "",
            )
        )
        conn.launch = None
        self.add(conn.spec, why="launch")
        return done

    # --- reading ----------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, ConnectionSpec]:
        """The desired set: name -> spec."""
        return {name: conn.spec for name, conn in self._conns.items()}

    def connection(self, name: str) -> Connection | None:
        """The live connection record, if declared."""
        return self._conns.get(name)

    def connections(self) -> list[Connection]:
        """All declared connections, sorted by name."""
        return [self._conns[n] for n in sorted(self._conns)]

    def connections_and_closing(self) -> list[Connection]:
        """Declared connections plus those removed but still closing."""
        return [*self.connections(), *self._closing]

    @property
    def transport(self) -> Transport:
        """What opens upstream sessions (the real `McpTransport` by default)."""
        return self._transport

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: object) -> None:
        """Run `fn(*args)` in the manager's task group (ends with the manager)."""
        if self._tg is None:
            raise RuntimeError("Manager used outside `async with`")
        self._tg.start_soon(fn, *args)

    def _auth(self, conn: Connection, now: float) -> tuple[str, float | None]:
        if conn.phase in (Phase.NEEDS_LOGIN, Phase.REFUSED):
            return conn.phase.value, None
        if not uses_oauth(conn.spec):
            return "none", None
        transport = self._transport
        expires_at = (
            transport.token_expiry(conn.name)
            if isinstance(transport, OAuthLogins)
            else None
        )
        if not isinstance(expires_at, int | float):
            return ("oauth" if conn.spec.oauth is not None else "none"), None
        return "oauth", round(max(0.0, expires_at - now), 1)

    def status(self, name: str) -> ConnectionStatus | None:
        """The status of one connection, or None if not declared."""
        conn = self._conns.get(name)
        if conn is None:
            return None
        now = self._clock()
        return self._status(conn, now)

    def statuses(self) -> list[ConnectionStatus]:
        """The status of every declared connection, sorted by name."""
        now = self._clock()
        return [self._status(c, now) for c in self.connections()]

    def _status(self, conn: Connection, now: float) -> ConnectionStatus:
        transport = self._transport
        return connection_status(
            conn,
            now,
            self._auth(conn, now),
            launch_text(conn, transport),
            (
                transport.confinement(conn.spec)
                if isinstance(transport, Launching)
                else ""
            ),
            self.pins.pending(conn.name),
        )

    def tools(self, name: str) -> tuple[ToolInfo, ...]:
        """The last known tools of a connection (kept while it reconnects)."""
        conn = self._conns.get(name)
        return conn.tools if conn is not None else ()

    # --- calls ------------------------------------------------------------------

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, object] | None = None,
        *,
        call_timeout: float | None = None,
        meta: Mapping[str, object] | None = None,
        progress: ProgressCallback | None = None,
        answer: Mapping[str, object] | None = None,
        era: str | None = None,
        caller: Caller | None = None,
        exposed: str | None = None,
    ) -> CallResult:
        """Call `tool` on `server` through its live session. Never retried.

        Args:
            server: Connection name.
            tool: Tool name on that server.
            arguments: Tool arguments.
            call_timeout: Seconds for the call (default: the spec's call_timeout).
            meta: `_meta` for the request (e.g. the caller's W3C trace context).
            progress: Receives the server's progress notifications for the call.
            answer: What the server is answered if it asks for input during
                the call (an elicitation result), for a caller no client stands
                behind (`mcp-manager call --answer`). The call carries a link
                token (`LINK_META_KEY`) to tell its questions apart, so servers
                that say which request a question serves (2026-07-28, streamable
                HTTP) get it; a question that names no request is refused.
            era: The era of the client the call is made for
                (`transport.base.HANDSHAKE`, or None): a server that speaks
                both meets the client in its own era.
            caller: Who calls, for the call policy (`engine.policy`).
            exposed: The tool's name as the caller saw it (the endpoint's),
                for the policy; default: the connection's prefix and `tool`.

        Returns:
            The result; `is_error` tells whether the tool reported an error.

        Raises:
            UnknownServer: No such connection.
            ServerUnavailable: Not connected within `hold`, or lost during the call.
            CallTimeout: No result within the timeout.
            CallError: The server rejected the request (`UpstreamError`).
            PolicyDenied: The call policy denied it, or its user did not
                allow it in time.
        """
        # A client chose the name: what it shows (events, spans) is masked.
        shown = self.secrets.redact(tool)
        attributes = None
        if self.tracing is not NO_TRACING:  # skip the work when nobody records
            spec = self._conns[server].spec if server in self._conns else None
            attributes = call_attributes(spec, shown) if spec else {SERVER: server}
        # CLIENT span, current while the SDK sends: its own span and the
        # `traceparent` it puts into `params._meta` become our children.
        with self.tracing.span(
            f"tools/call {shown}", attributes, kind="client"
        ) as span:
            conn = self._connection(server)
            if tool in conn.held.get("tools", ()):
                raise ToolHeld(self._held_message(server, tool))
            if self.policy.rules:
                spec = conn.spec
                await self.policy.admit(
                    server,
                    tool,
                    exposed if exposed is not None else _exposed(spec.prefix, tool),
                    caller,
                    lambda: spec.annotated(tool, _listed_annotations(conn, tool)),
                    arguments,
                    call_timeout if call_timeout is not None else spec.call_timeout,
                    lambda: not conn.tools or any(t.name == tool for t in conn.tools),
                )
            call_id = next(self._call_ids)
            self.bus.publish(CallStarted(name=server, tool=shown, call_id=call_id))
            started = time.monotonic()

            def failed(error: str) -> None:
                duration = time.monotonic() - started
                self.bus.publish(
                    CallFailed(
                        name=server,
                        tool=shown,
                        duration=duration,
                        error=error,
                        call_id=call_id,
                    )
                )

            sent_meta = meta
            token = None
            if answer is not None:
                token = secrets.token_hex(8)
                sent_meta = {**(meta or {}), LINK_META_KEY: token}
                self.requests.answers[token] = answer

            async def send(upstream: Upstream, limit: float) -> CallResult:
                if era is not None:  # a client met in its own era (`for_era`)
                    upstream = await upstream.for_era(era, limit)
                return await upstream.call_tool(
                    tool, arguments, limit, meta=sent_meta, progress=progress
                )

            try:
                result = await self._request(
                    span, conn, tool, send, call_timeout, on_error=failed
                )
            finally:
                if token is not None:
                    del self.requests.answers[token]
            if result.is_error:
                span.set_attribute(ERROR_TYPE, "tool_error")  # MCP semconv
            self.bus.publish(
                CallFinished(
                    name=server,
                    tool=shown,
                    duration=time.monotonic() - started,
                    is_error=result.is_error,
                    call_id=call_id,
                )
            )
            return result

    async def request(
        self,
        server: str,
        method: str,
        target: str,
        send: Callable[[Upstream, float], Awaitable[T]],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the MCP request timeout
    ) -> T:
        """Any other request to `server`, on the call path: held like a call
        while it reconnects, bounded, mapped to the same errors. Never retried.

        Args:
            server: Connection name.
            method: The MCP method, for the span (`resources/read`).
            target: What is asked, for the span and messages (a URI, a name).
            send: Sends it on the live upstream within the given seconds.
            timeout: Seconds (default: the spec's call_timeout).

        Raises:
            As `call`.
        """
        attributes = {SERVER: server, MCP_METHOD_NAME: method}
        name = method
        if method.startswith("resources/"):
            # a URI is no span name (one name per resource): an attribute
            attributes[MCP_RESOURCE_URI] = target
        elif target:
            name = f"{method} {target}"
            if method == "prompts/get":
                attributes[GEN_AI_PROMPT_NAME] = target
        with self.tracing.span(name, attributes, kind="client") as span:
            conn = self._connection(server)
            what = f"{method} {target}".strip()
            return await self._request(span, conn, what, send, timeout)

    # --- pins -------------------------------------------------------------------

    def changes(self, server: str | None = None) -> list[ToolChanged]:
        """Definitions that differ from their pins, not approved yet."""
        if server is not None:
            self._connection(server)
        return self.pins.pending(server)

    def approve(self, server: str, items: Sequence[str] = ()) -> list[str]:
        """Pin what `server` lists now (every item, or `items`); what was
        held is listed and callable again. Returns the names approved.

        Raises:
            UnknownServer: No such connection, or it lists no such item (the
                message names what it lists).
        """
        conn = self._connection(server)
        try:
            approved = self.pins.approve(server, items)
        except KeyError as exc:
            raise UnknownServer(str(exc.args[0])) from None
        conn.review_pins()
        self.bus.publish(ToolsApproved(name=server, items=tuple(approved)))
        return approved

    def _held_message(self, server: str, tool: str) -> str:
        change = next(
            (c.change for c in self.pins.pending(server) if c.item == tool), "changed"
        )
        why = {
            "new": "is new since the server was pinned",
            "suspicious": "reads as instructions to the model",
            "unverified": "cannot be checked against its pin",
        }.get(change, "changed since it was approved")
        return (
            f'{server}: tool {tool!r} {why}; it is held back (pin = "strict"): '
            f"see `mcp-manager tools --changed`, then `mcp-manager approve {server} "
            f"{tool}`"
        )

    def unknown(self, name: str) -> UnknownServer:
        """The error for a connection `name` that is not declared: the
        declared ones, and the one it is likely to be."""
        known = ", ".join(sorted(self._conns)) or "none"
        likely = meant(name, self._conns)
        return UnknownServer(
            f"no connection named {name!r}{likely} (declared: {known})"
        )

    def _connection(self, server: str) -> Connection:
        conn = self._conns.get(server)
        if conn is None:
            raise self.unknown(server)
        return conn

    async def _request(
        self,
        span: Span,
        conn: Connection,
        target: str,
        send: Callable[[Upstream, float], Awaitable[T]],
        timeout: float | None,  # noqa: ASYNC109 - the MCP request timeout
        on_error: Callable[[str], None] | None = None,
    ) -> T:
        try:
            with conn.in_use():
                upstream = await ready(conn, self._clock, span)
                describe_session(span, upstream)
                limit = timeout if timeout is not None else conn.spec.call_timeout
                # A backstop past the request's own limit (`fail_after` without
                # its two generator context managers: this is every call's path).
                deadline = anyio.current_time() + limit + CALL_DEADLINE_SLACK
                with anyio.CancelScope(deadline=deadline):
                    try:
                        return await send(upstream, limit)
                    except SessionForgotten:
                        # Not processed (the server's 404 to a session it
                        # forgot): sent again once, in the new session the
                        # connection opens at once, within `hold`.
                        if conn.upstream is upstream:  # not a new one already
                            conn.set_disconnected()
                        upstream = await ready(conn, self._clock, span)
                        return await send(upstream, limit)
                raise TimeoutError  # only the backstop's deadline gets here
        except BaseException as exc:
            error = call_error(exc, conn, target, timeout, self.secrets)
            if on_error is not None:
                on_error("cancelled" if error is None else str(error))
            if error is None or error is exc:
                raise
            raise error from exc


def _listed_annotations(conn: Connection, tool: str) -> Mapping[str, object]:
    """`tool`'s annotations as its server listed them ({} if unlisted); an
    on-demand server's remembered list counts while it is stopped."""
    for info in conn.tools:
        if info.name == tool:
            given = info.raw.get("annotations")
            return given if isinstance(given, Mapping) else {}
    return {}


def _exposed(prefix: str, tool: str) -> str:
    """The name the endpoint exposes `tool` under (`gateway.names`, short of
    its rare clash suffix): a rule written with it (`tool = "demo__pid"`)
    applies to `mcp-manager call` and Lua too."""
    return f"{prefix}__{tool}" if prefix else tool
